"""Memory modes and their state trackers: specs, mode resolution, pattern extraction,
bounds, staleness, saved state, and the LLM path with its fallback."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem.context.modes import MODES, ModeSpec, get_mode, resolve_mode
from arbormem.context.trackers import (
    CodeTracker,
    ConversationTracker,
    ReasoningTracker,
    Tracker,
    new_tracker,
    tracker_from_dict,
)
from arbormem.errors import ConfigError, InputError, LLMError
from arbormem.models import Message

from .fake_openai import ScriptedLLM


def say(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def user(content: str) -> dict[str, str]:
    return say("user", content)


def assistant(content: str) -> dict[str, str]:
    return say("assistant", content)


def tracked(mode: str, *turns: list[dict[str, str]]) -> Any:
    tracker: Any = new_tracker(mode)
    for messages in turns:
        tracker.update(messages)
    return tracker


# --------------------------------------------------------------------------- modes


def test_the_three_modes_and_their_windows() -> None:
    assert MODES == ("conversation", "code", "reasoning")
    assert [get_mode(m).window for m in MODES] == [25, 30, 30]
    code = get_mode("code")
    assert (code.max_files, code.max_errors) == (20, 5)
    reasoning = get_mode("reasoning")
    assert (reasoning.max_decisions, reasoning.max_alternatives, reasoning.stale_turns) == (
        20,
        10,
        3,
    )
    for mode in MODES:
        addition = get_mode(mode).system_addition
        assert addition and len(addition.split()) <= 60


def test_mode_names_ignore_case_and_space() -> None:
    assert get_mode("  Code ").name == "code"


@pytest.mark.parametrize("name", ["coding", "", None, 3])
def test_an_unknown_mode_is_a_config_error_listing_the_modes(name: Any) -> None:
    with pytest.raises(ConfigError) as info:
        get_mode(name)
    for mode in MODES:
        assert mode in str(info.value)


def test_a_mode_spec_refuses_unusable_bounds() -> None:
    with pytest.raises(ConfigError, match="max_files"):
        ModeSpec("code", window=30, system_addition="x", max_files=0)


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("ARBORMEM_CONFIG", str(path))
    return path


def test_resolve_mode_order_argument_env_config_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve_mode() == "conversation"
    _config(tmp_path, monkeypatch, 'memory_mode = "reasoning"\n')
    assert resolve_mode() == "reasoning"
    monkeypatch.setenv("ARBORMEM_MEMORY_MODE", "Code")
    assert resolve_mode() == "code"
    assert resolve_mode("conversation") == "conversation"
    assert resolve_mode(None) == "code"  # None is "not given"


def test_resolve_mode_names_where_a_bad_value_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _config(tmp_path, monkeypatch, "memory_mode = 7\n")
    with pytest.raises(ConfigError, match="memory_mode") as info:
        resolve_mode()
    assert str(path) in str(info.value)
    monkeypatch.setenv("ARBORMEM_MEMORY_MODE", "planning")
    with pytest.raises(ConfigError, match="ARBORMEM_MEMORY_MODE"):
        resolve_mode()
    with pytest.raises(ConfigError, match="conversation, code, reasoning"):
        resolve_mode("chat")


def test_new_tracker_makes_the_right_kind() -> None:
    assert isinstance(new_tracker("conversation"), ConversationTracker)
    assert isinstance(new_tracker("CODE"), CodeTracker)
    assert isinstance(new_tracker("reasoning"), ReasoningTracker)
    with pytest.raises(ConfigError):
        new_tracker("poetry")
    with pytest.raises(ConfigError):
        new_tracker("code", spec=get_mode("reasoning"))


def test_a_turn_is_an_update_with_messages() -> None:
    tracker: Any = new_tracker("conversation")
    tracker.update([])
    assert tracker.turn == 0
    tracker.update([user("hello")])
    tracker.update([user("again"), assistant("hi")])
    assert tracker.turn == 2
    assert tracker.render() == ""


def test_update_takes_message_objects_and_odd_input_without_raising() -> None:
    now = datetime(2025, 3, 1, tzinfo=timezone.utc)
    message = Message("m1", "human", "Fix the bug in src/auth.py please", now, "s1", 0)
    tracker: Any = new_tracker("code")
    tracker.update([message])
    assert tracker.task == "Fix the bug in src/auth.py"
    tracker.update([{"role": "robot", "content": None}, {"content": 42}, {}])
    assert tracker.turn == 2
    assert tracker.files == ["src/auth.py"]


# --------------------------------------------------------------------------- conversation

TRIP = [
    user(
        "Hi! I'm planning a trip to Lisbon with my sister Maya in May. "
        "We have a budget of about $3,000."
    ),
    assistant(
        "Lisbon in May is lovely. With $3,000 you could stay in Alfama and take a day trip "
        "to Sintra, where the Pena Palace is worth a visit."
    ),
]
RESTAURANTS = [
    user("Maya loves seafood restaurants. Can you suggest seafood restaurants near the river?"),
    user("We land on 12 May 2025."),
    assistant("Cervejaria Ramiro is a classic. Also try Time Out Market near Cais do Sodré."),
]


def test_conversation_tracks_topics_and_entities() -> None:
    tracker = tracked("conversation", TRIP)
    assert {"Lisbon", "Maya", "$3,000", "Alfama", "Sintra", "Pena Palace"} <= set(tracker.entities)
    assert "Lisbon" in tracker.topics
    tracker.update(RESTAURANTS)
    assert tracker.topics[0] == "seafood restaurants"
    # most recent first: the last thing mentioned leads
    assert tracker.entities[:4] == [
        "Cais do Sodré",
        "Time Out Market",
        "Cervejaria Ramiro",
        "12 May 2025",
    ]
    text = tracker.render()
    assert text.startswith("Topics:\n- seafood restaurants\n")
    assert "\nEntities:\n- Cais do Sodré\n" in text


def test_conversation_ignores_chat_filler_and_capitals_that_start_sentences() -> None:
    tracker = tracked(
        "conversation",
        [user("Yes. Sure thing! Okay. Thanks so much, that is really helpful.")],
        [user("Honestly I think so too. What do you think? LOL, OK. BTW it was fun.")],
        [assistant("Great question. Happy to help. Let me know.")],
    )
    assert tracker.topics == []
    assert tracker.entities == []
    assert tracker.render() == ""


def test_conversation_keeps_ten_of_each_most_recent_first() -> None:
    names = [
        "Ana",
        "Ben",
        "Carla",
        "Dmitri",
        "Eve",
        "Farah",
        "Goran",
        "Hana",
        "Ivo",
        "Jun",
        "Kemal",
    ]
    tracker: Any = new_tracker("conversation")
    for name in names:
        tracker.update([user(f"Yesterday I met {name} at the station.")])
    assert tracker.entities == list(reversed(names))[:10]
    tracker.update([user("I called Ana again today.")])
    assert tracker.entities[0] == "Ana" and len(tracker.entities) == 10


# --------------------------------------------------------------------------- code

PY_TRACEBACK = """Login crashes with this:

```
Traceback (most recent call last):
  File "/home/ana/proj/.venv/lib/python3.11/site-packages/flask/app.py", line 1498, in wsgi_app
    response = self.full_dispatch_request()
  File "/home/ana/proj/src/auth.py", line 45, in login
    token = make_token(user.id + salt)
            ~~~~~~~~^~~~~~
  File "/home/ana/proj/.venv/lib/python3.11/site-packages/itsdangerous/signer.py", line 10, in sign
    raise exc
TypeError: unsupported operand type(s) for +: 'int' and 'str'
```
"""


def test_code_tracks_task_progress_files_and_errors() -> None:
    tracker = tracked(
        "code",
        [
            user("Can you fix the bug in src/auth.py? " + PY_TRACEBACK),
            assistant(
                "The problem is on line 45 of `src/auth.py`: `user.id` is an int. I've updated "
                "src/auth.py to convert it with str(). I also added tests for the login flow in "
                "tests/test_auth.py. Run `pytest tests/` to confirm."
            ),
        ],
    )
    assert tracker.task == "fix the bug in src/auth.py"
    assert tracker.progress == [
        "Added tests for the login flow in tests/test_auth.py",
        "Updated src/auth.py to convert it with str()",
    ]
    # the absolute path of the traceback is the same file as src/auth.py; no library paths
    assert tracker.files == ["tests/test_auth.py", "src/auth.py"]
    (error,) = tracker.errors
    assert (error.type, error.file, error.line) == ("TypeError", "src/auth.py", 45)
    assert error.message == "unsupported operand type(s) for +: 'int' and 'str'"
    assert tracker.render() == (
        "Current task: fix the bug in src/auth.py\n"
        "Progress:\n"
        "- Added tests for the login flow in tests/test_auth.py\n"
        "- Updated src/auth.py to convert it with str()\n"
        "Files:\n"
        "- tests/test_auth.py\n"
        "- src/auth.py\n"
        "Recent errors:\n"
        "- TypeError at src/auth.py:45: unsupported operand type(s) for +: 'int' and 'str'"
    )


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("main.c:12:5: error: expected ';' before '}' token", ("error", "main.c", 12)),
        ("src/app.py:3: error: Incompatible types in assignment", ("error", "src/app.py", 3)),
        ("./cmd/main.go:7:2: undefined: fooBar", ("error", "cmd/main.go", 7)),
        (
            "src/app.ts(10,5): error TS2322: Type 'string' is not assignable to type 'number'.",
            ("TS2322", "src/app.ts", 10),
        ),
        (
            "error[E0308]: mismatched types\n  --> src/main.rs:4:5\n",
            ("error[E0308]", "src/main.rs", 4),
        ),
        (
            "TypeError: Cannot read properties of undefined (reading 'map')\n"
            "    at renderList (src/components/List.jsx:27:18)\n"
            "    at Object.<anonymous> (/app/node_modules/react-dom/cjs/dom.js:100:1)\n",
            ("TypeError", "src/components/List.jsx", 27),
        ),
        (
            'Exception in thread "main" java.lang.NullPointerException: name is null\n'
            "\tat com.acme.Foo.bar(Foo.java:42)\n\tat com.acme.Main.main(Main.java:7)\n",
            ("NullPointerException", "Foo.java", 42),
        ),
        (
            "E       KeyError: 'user'\n\ntests/test_views.py:31: KeyError\n",
            ("KeyError", "tests/test_views.py", 31),
        ),
    ],
)
def test_code_reads_errors_from_compilers_and_stack_traces(
    output: str, expected: tuple[str, str, int]
) -> None:
    tracker = tracked("code", [say("tool", output)])
    assert [(e.type, e.file, e.line) for e in tracker.errors] == [expected]
    assert tracker.files == [expected[1]]


def test_code_skips_warnings_hypothetical_errors_and_tool_file_listings() -> None:
    tracker = tracked(
        "code",
        [say("tool", "main.c:3:1: warning: unused variable 'x'\nsrc/a.py\nsrc/b.py\nREADME.md")],
        [assistant("A KeyError: 'x' could happen if the salt is missing, so I'll add a check.")],
        [user("I'm not getting the TypeError anymore.")],
    )
    assert tracker.errors == []
    assert tracker.files == []


def test_code_takes_an_error_the_user_reports_in_words() -> None:
    tracker = tracked(
        "code", [user("I'm still getting an ImportError in tests/test_auth.py on CI.")]
    )
    (error,) = tracker.errors
    assert (error.type, error.file, error.line) == ("ImportError", "tests/test_auth.py", None)


@pytest.mark.parametrize(
    ("said", "task"),
    [
        ("Fix the bug in auth.py", "Fix the bug in auth.py"),
        ("Okay, now add tests for the parser.", "add tests for the parser"),
        ("can you add pagination to the /users endpoint?", "add pagination to the /users endpoint"),
        ("I need you to implement the CSV export", "implement the CSV export"),
        ("I'd like to migrate the settings to pydantic v2.", "migrate the settings to pydantic v2"),
        ("Please update the README with the new flags.", "update the README with the new flags"),
        ("The task is to make the importer idempotent.", "make the importer idempotent"),
        ("Can you explain what this function does?", None),
        ("How do I add a column in pandas?", None),
        ("Should I add a test for this?", None),
        ("Don't change the public API.", None),
        ("Build failed on CI again.", None),
        ("Update: the deploy went fine.", None),
        ("If you add a cache, it might help.", None),
        ("Maybe refactor it later.", None),
    ],
)
def test_code_task_comes_from_requests_only(said: str, task: str | None) -> None:
    assert tracked("code", [user(said)]).task == task


def test_code_task_is_the_latest_request_and_assistant_plans_are_not_tasks() -> None:
    tracker = tracked(
        "code",
        [user("Fix the login crash. Also add a test.")],
        [assistant("Let's fix the import first.")],
    )
    assert tracker.task == "Fix the login crash"
    tracker.update([user("Thanks. Now add rate limiting to the login endpoint please.")])
    assert tracker.task == "add rate limiting to the login endpoint"


@pytest.mark.parametrize(
    ("said", "progress"),
    [
        ("I've fixed the off-by-one in pager.py.", "Fixed the off-by-one in pager.py"),
        ("Modified config.toml to use the new key.", "Modified config.toml to use the new key"),
        ("The flaky test is fixed now.", "The flaky test is fixed now"),
        ("All tests pass now.", "All tests pass now"),
        ("Done.", "Done"),
        ("I haven't fixed the parser yet.", None),
        ("I'll add tests for it next.", None),
        ("Have you updated the docs?", None),
        ("If we fixed the cache, it would be faster.", None),
    ],
)
def test_code_progress_is_what_was_reported_done(said: str, progress: str | None) -> None:
    assert tracked("code", [assistant(said)]).progress == ([progress] if progress else [])


@pytest.mark.parametrize(
    ("text", "files"),
    [
        ("Look at src/auth.py and ./tests/test_x.py", ["tests/test_x.py", "src/auth.py"]),
        ("It's in C:\\proj\\main.c, line 3", ["C:\\proj\\main.c"]),
        ("Bump the version in package.json and the Dockerfile", ["Dockerfile", "package.json"]),
        ("Add FOO to .env", [".env"]),
        ("I'm using Node.js and Vue.js.", []),
        ("What does response.json() return?", []),
        ("See https://example.com/docs/setup.py for details.", []),
        ("It's 3 p.m. here, e.g. late. Version 1.2.3 and python3.11.", []),
        ("Check /usr/lib/python3.11/site-packages/requests/api.py", []),
    ],
)
def test_code_recognises_file_paths(text: str, files: list[str]) -> None:
    assert tracked("code", [user(text)]).files == files


def test_code_keeps_the_20_most_recent_files() -> None:
    tracker: Any = new_tracker("code")
    for i in range(21):
        tracker.update([assistant(f"I've updated src/module_{i}.py.")])
    assert len(tracker.files) == 20
    assert tracker.files[0] == "src/module_20.py"
    assert "src/module_0.py" not in tracker.files
    tracker.update([user("Back to src/module_5.py: does it still work?")])
    assert tracker.files[0] == "src/module_5.py" and len(tracker.files) == 20
    rendered = tracker.render().split("Files:\n", 1)[1].splitlines()
    assert rendered[:2] == ["- src/module_5.py", "- src/module_20.py"]
    assert "- (+10 more)" in rendered  # the prompt shows 10, the state keeps 20


def test_code_keeps_the_5_most_recent_errors() -> None:
    tracker: Any = new_tracker("code")
    for i in range(6):
        tracker.update([say("tool", f"src/m{i}.c:{i + 1}:1: error: problem number {i}")])
    assert len(tracker.errors) == 5
    assert [e.line for e in tracker.errors] == [6, 5, 4, 3, 2]
    tracker.update([say("tool", "src/m3.c:4:1: error: problem number 3")])  # seen again
    assert [e.line for e in tracker.errors] == [4, 6, 5, 3, 2]


def test_code_bounds_follow_the_spec() -> None:
    from dataclasses import replace

    tracker: Any = new_tracker("code", spec=replace(get_mode("code"), max_files=2))
    tracker.update([user("Compare a.py, b.py and c.py")])
    assert tracker.files == ["c.py", "b.py"]


# --------------------------------------------------------------------------- reasoning

PLANNING = [
    user(
        "Our goal is to design a scalable architecture for the booking platform. The budget is "
        "$50k and we must ship by March. We have 4 developers, and we can't use AWS because of "
        "the hosting contract. Should we use microservices?"
    ),
    assistant(
        "We need to evaluate the team's experience with Kubernetes. Assuming traffic doubles "
        "next year, a single database might struggle. If we go with microservices, we need more "
        "ops work. Let's start with the requirements."
    ),
]
DECIDING = [
    user(
        "OK. Let's go with a modular monolith because the team is small, rather than "
        "microservices. We ruled out Kubernetes since nobody has run it in production. "
        "I'm not sure we should use Kafka yet."
    ),
    assistant(
        "Agreed. We decided to use PostgreSQL since we need strong consistency for bookings. "
        "Kafka is off the table for now — too much operational overhead. Latency must stay "
        "under 200ms for searches."
    ),
]


def test_reasoning_tracks_goals_constraints_decisions_and_assumptions() -> None:
    tracker = tracked("reasoning", PLANNING, DECIDING)
    assert tracker.objective == "design a scalable architecture for the booking platform"
    assert tracker.subgoals == ["evaluate the team's experience with Kubernetes"]
    assert [c.describe() for c in tracker.constraints] == [
        "Latency must stay under 200ms for searches",
        "We can't use AWS",
        "Team: 4 developers",
        "Deadline: must ship by March",
        "Budget: $50k",
    ]
    assert [d.describe() for d in tracker.decisions] == [
        "#2 use PostgreSQL, because we need strong consistency for bookings",
        "#1 go with a modular monolith, because the team is small (instead of microservices)",
    ]
    assert [r.describe() for r in tracker.rejected] == [
        "Kafka: too much operational overhead",
        "Kubernetes: nobody has run it in production",
        "microservices",
    ]
    assert tracker.assumptions == ["traffic doubles next year"]
    text = tracker.render()
    assert text.startswith("Objective: design a scalable architecture")
    # an alternative shown with its decision is not listed twice
    assert "Ruled out:\n- Kafka: too much operational overhead\n- Kubernetes: nobody" in text
    assert "- microservices" not in text


@pytest.mark.parametrize(
    "said",
    [
        "Should we go with Postgres?",
        "If we decided to use Redis, we'd need more memory.",
        "We could go with MongoDB, but I'm not convinced.",
        "Maybe we should use GraphQL.",
        "We haven't decided to use Rust yet.",
        "Why don't we use Kafka?",
        "Let's think about the trade-offs.",
        "Let's use this as an example.",
        "Let's start with the budget discussion.",
        "I can't remember the vendor's name.",
        "What if we assume no growth?",
        "Don't assume the API is stable.",
        "We don't need to rewrite everything.",
        "We need to be careful here.",
        "We need to talk about it tomorrow.",
        "Is the deadline in March?",
        "It took at least 3 days last time.",
        "Redis is faster than Memcached for this.",
        "I picked up coffee on the way.",
    ],
)
def test_reasoning_leaves_out_questions_conditions_and_hypotheticals(said: str) -> None:
    tracker = tracked("reasoning", [user(said)])
    assert tracker.render() == "", tracker.to_dict()


@pytest.mark.parametrize(
    ("said", "line"),
    [
        ("We chose FastAPI over Flask.", "#1 go with FastAPI (instead of Flask)"),
        (
            "Instead of Kubernetes, let's use plain VMs since the team is small.",
            "#1 use plain VMs, because the team is small (instead of Kubernetes)",
        ),
        ("The final decision is to keep the monolith.", "#1 keep the monolith"),
        (
            "We decided to postpone the launch since QA found issues.",
            "#1 postpone the launch, because QA found issues",
        ),
    ],
)
def test_reasoning_decision_forms(said: str, line: str) -> None:
    assert [d.describe() for d in tracked("reasoning", [user(said)]).decisions] == [line]


@pytest.mark.parametrize(
    ("said", "constraint"),
    [
        ("The budget is capped at €20,000.", "Budget: €20,000"),
        (
            "We need to launch before the end of Q3.",
            "Deadline: need to launch before the end of Q3",
        ),
        ("The timeline is 3 months.", "Timeline: 3 months"),
        ("We only have two weeks left.", "Timeline: two weeks"),
        ("No more than 2 contractors.", "No more than 2 contractors"),
        ("We're not allowed to store card numbers.", "We're not allowed to store card numbers"),
    ],
)
def test_reasoning_constraint_forms(said: str, constraint: str) -> None:
    assert [c.describe() for c in tracked("reasoning", [user(said)]).constraints] == [constraint]


def test_reasoning_updates_a_budget_instead_of_adding_one() -> None:
    tracker = tracked(
        "reasoning", [user("The budget is $50k.")], [user("Update: the budget is now $60k.")]
    )
    assert [c.describe() for c in tracker.constraints] == ["Budget: $60k"]


def test_reasoning_same_decision_keeps_its_number_and_a_choice_leaves_the_rejected() -> None:
    tracker = tracked(
        "reasoning",
        [user("We ruled out Redis because of the cost.")],
        [user("Let's use Postgres for storage.")],
        [user("We decided to use Redis since the cache hit rate matters more.")],
        [user("Let's go with Postgres for storage because the team knows it.")],
    )
    assert [d.describe() for d in tracker.decisions] == [
        "#1 go with Postgres for storage, because the team knows it",
        "#2 use Redis, because the cache hit rate matters more",
    ]
    assert tracker.rejected == []


@pytest.mark.parametrize(
    "chosen",
    [
        "We decided to migrate to Kubernetes since the new hire knows it.",
        "We'll go with Kubernetes after all since the new hire knows it.",
    ],
)
def test_reasoning_an_option_chosen_in_other_words_leaves_the_rejected(chosen: str) -> None:
    tracker = tracked(
        "reasoning", [user("We ruled out Kubernetes because nobody ran it.")], [user(chosen)]
    )
    assert tracker.rejected == [] and len(tracker.decisions) == 1


@pytest.mark.parametrize(
    ("later", "rejected", "decided"),
    [
        ("We dropped Postgres because the licence costs went up.", ["Postgres"], []),
        (
            "Let's go with MySQL instead of Postgres because of the hosting deal.",
            ["Postgres"],
            ["#2 go with MySQL, because the hosting deal (instead of Postgres)"],
        ),
    ],
)
def test_reasoning_a_decision_ruled_out_later_is_no_longer_a_decision(
    later: str, rejected: list[str], decided: list[str]
) -> None:
    tracker = tracked(
        "reasoning", [user("Let's go with Postgres because the team knows it.")], [user(later)]
    )
    assert [r.option for r in tracker.rejected] == rejected
    assert [d.describe() for d in tracker.decisions] == decided


def test_reasoning_bounds_decisions_and_alternatives() -> None:
    tracker: Any = new_tracker("reasoning")
    for i in range(21):
        tracker.update([user(f"Let's use Tool{i} for step {i} rather than Other{i}.")])
    assert len(tracker.decisions) == 20
    assert tracker.decisions[0].number == 21 and tracker.decisions[-1].number == 2
    assert len(tracker.rejected) == 10
    assert tracker.rejected[0].option == "Other20"
    assert tracker.render().count("\n- #") == 8  # the prompt shows the 8 latest


def test_reasoning_hides_a_section_unchanged_for_three_turns() -> None:
    tracker = tracked("reasoning", [user("The budget is $50k.")])
    chat = [user("Let's talk about the UI next."), assistant("Sure, what do you have in mind?")]
    tracker.update(chat)
    tracker.update(chat)
    assert "Budget: $50k" in tracker.render()  # unchanged for 2 turns: still shown
    tracker.update([user("Our goal is to launch the app in Spain."), *chat])
    assert tracker.is_stale("constraints")
    assert tracker.render() == "Objective: launch the app in Spain"
    saved = tracker.to_dict()
    assert saved["constraints"] == [{"text": "$50k", "kind": "budget"}]  # kept, just not shown
    assert saved["changed"] == {"constraints": 1, "goals": 4}
    restored = tracker_from_dict(json.loads(json.dumps(saved)))
    assert restored.render() == tracker.render()
    restored.update([user("The budget is $50k, as I said.")])  # said again: fresh again
    assert "Budget: $50k" in restored.render()


def test_only_reasoning_hides_stale_sections() -> None:
    tracker = tracked("code", [user("Fix the bug in auth.py")])
    for _ in range(5):
        tracker.update([assistant("Looking into it.")])
    assert tracker.render() == "Current task: Fix the bug in auth.py\nFiles:\n- auth.py"


# --------------------------------------------------------------------------- saved state


@pytest.mark.parametrize(
    ("mode", "turns"),
    [
        ("conversation", [TRIP, RESTAURANTS]),
        ("code", [[user("Can you fix the bug in src/auth.py? " + PY_TRACEBACK)]]),
        ("reasoning", [PLANNING, DECIDING]),
    ],
)
def test_state_round_trips_through_json(mode: str, turns: list[list[dict[str, str]]]) -> None:
    tracker = tracked(mode, *turns)
    saved = json.loads(json.dumps(tracker.to_dict()))
    assert saved["mode"] == mode and saved["turn"] == len(turns)
    restored = tracker_from_dict(saved)
    assert type(restored) is type(tracker)
    assert restored.to_dict() == tracker.to_dict()
    assert restored.render() == tracker.render() != ""
    assert type(tracker).from_dict(saved).to_dict() == saved


@pytest.mark.parametrize("mode", MODES)
def test_a_state_with_only_its_mode_loads_empty(mode: str) -> None:
    tracker = tracker_from_dict({"mode": mode})
    assert tracker.turn == 0 and tracker.render() == ""


def test_older_and_damaged_states_load_what_they_can() -> None:
    tracker = tracker_from_dict(
        {
            "mode": "reasoning",
            "turn": 7,
            "decisions": [{"text": "use Postgres"}, {"no": "text"}, "junk", {"text": "use Redis"}],
            "constraints": [{"text": "$50k", "kind": "budget"}, {"kind": "team"}],
            "subgoals": ["measure latency", 3, None],
        }
    )
    assert isinstance(tracker, ReasoningTracker)
    assert [d.describe() for d in tracker.decisions] == ["#2 use Postgres", "#1 use Redis"]
    assert tracker.subgoals == ["measure latency"]
    # no record of when sections changed: they count as fresh
    assert "Budget: $50k" in tracker.render()
    tracker.update([user("Let's use Kafka for events.")])
    assert tracker.decisions[0].describe() == "#3 use Kafka for events"
    code = tracker_from_dict(
        {
            "mode": "code",
            "files": ["a.py", 5],
            "errors": [{"type": "KeyError", "line": "x"}, {"message": "no type"}],
        }
    )
    assert isinstance(code, CodeTracker)
    assert code.files == ["a.py"]
    assert [e.describe() for e in code.errors] == ["KeyError"]


def test_loading_a_state_needs_a_known_mode() -> None:
    with pytest.raises(InputError, match="mode"):
        tracker_from_dict({"topics": []})
    with pytest.raises(ConfigError, match="conversation, code, reasoning"):
        tracker_from_dict({"mode": "poetry"})
    with pytest.raises(InputError, match="JSON object"):
        tracker_from_dict(["code"])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="'code' mode"):
        ConversationTracker.from_dict({"mode": "code"})


# --------------------------------------------------------------------------- with an LLM

LLM_ANSWERS = {
    "conversation": (
        {"topics": ["trip planning"], "entities": ["Lisbon", "Maya"]},
        lambda t: (t.topics, t.entities) == (["trip planning"], ["Lisbon", "Maya"]),
    ),
    "code": (
        {
            "task": "Fix the login crash",
            "progress": ["Converted user.id to str"],
            "files": ["src/auth.py"],
            "errors": [
                {"type": "TypeError", "message": "bad operand", "file": "src/auth.py", "line": 45}
            ],
        },
        lambda t: (
            t.task == "Fix the login crash"
            and t.files == ["src/auth.py"]
            and [e.describe() for e in t.errors] == ["TypeError at src/auth.py:45: bad operand"]
        ),
    ),
    "reasoning": (
        {
            "objective": "Design the booking architecture",
            "subgoals": ["Evaluate team skills"],
            "decisions": [
                {
                    "decision": "Use PostgreSQL",
                    "rationale": "consistency",
                    "alternatives": ["MongoDB"],
                }
            ],
            "rejected": [{"option": "Kafka", "reason": "too much ops"}],
            "constraints": ["Budget: $50k", "No AWS"],
            "assumptions": [],
        },
        lambda t: (
            t.objective == "Design the booking architecture"
            and [d.describe() for d in t.decisions]
            == ["#1 Use PostgreSQL, because consistency (instead of MongoDB)"]
            and [c.describe() for c in t.constraints] == ["Budget: $50k", "No AWS"]
            and [r.option for r in t.rejected] == ["Kafka", "MongoDB"]
        ),
    ),
}


@pytest.mark.parametrize("mode", MODES)
def test_an_llm_answer_is_validated_and_merged(mode: str) -> None:
    answer, check = LLM_ANSWERS[mode]
    llm = ScriptedLLM(json.dumps(answer))
    tracker: Any = new_tracker(mode)
    tracker.update([user("Let's get going."), assistant("Sure.")], llm=llm)
    assert check(tracker), tracker.to_dict()
    (request,) = llm.calls
    assert "user: Let's get going." in request[-1]["content"]
    snapshot = llm.usage.snapshot()["features"]["trackers"]
    assert (snapshot["calls"], snapshot["failures"]) == (1, 0)


def test_the_llm_sees_the_notes_so_far() -> None:
    llm = ScriptedLLM(json.dumps({"topics": [], "entities": []}))
    tracker = tracked("conversation", TRIP)
    tracker.update([user("And then?")], llm=llm)
    assert "- Lisbon" in llm.calls[0][-1]["content"]


BAD_ANSWERS = [
    "I could not find anything useful.",
    "",
    '["src/auth.py"]',
    '{"answer": "nothing"}',
    '{"task": 5}',
    '{"files": "src/auth.py"}',
    '{"files": ["a file with spaces and no drive"]}',
    '{"errors": [{"type": "TypeError", "line": "45"}]}',
    '{"errors": [{"type": "Type Error", "message": "x"}]}',
    '{"errors": [{"message": "missing type"}]}',
    json.dumps({"progress": ["x" * 500]}),
    json.dumps({"files": [f"f{i}.py" for i in range(40)]}),
    RuntimeError("the client broke"),
    LLMError("endpoint down"),
]


@pytest.mark.parametrize("answer", BAD_ANSWERS, ids=range(len(BAD_ANSWERS)))
def test_a_failed_llm_call_falls_back_to_the_patterns(answer: Any) -> None:
    llm = ScriptedLLM(answer)
    tracker: Any = new_tracker("code")
    tracker.update([user("Please fix the bug in app/views.py")], llm=llm)
    assert tracker.task == "fix the bug in app/views.py"
    assert tracker.files == ["app/views.py"]
    assert llm.usage.snapshot()["features"]["trackers"]["failures"] == 1


@pytest.mark.parametrize(
    "answer",
    [
        '{"decisions": [{"rationale": "no decision"}]}',
        '{"decisions": ["Use Postgres"]}',
        '{"rejected": [{"reason": "no option"}]}',
        '{"subgoals": "one"}',
        '{"objective": ["a", "b"]}',
    ],
)
def test_reasoning_refuses_malformed_llm_answers(answer: str) -> None:
    llm = ScriptedLLM(answer)
    tracker: Any = new_tracker("reasoning")
    tracker.update([user("Let's go with Postgres because the team knows it.")], llm=llm)
    assert [d.describe() for d in tracker.decisions] == [
        "#1 go with Postgres, because the team knows it"
    ]


def test_a_tracker_is_a_tracker() -> None:
    for mode in MODES:
        tracker: Any = new_tracker(mode)
        assert isinstance(tracker, Tracker) and tracker.mode == mode
        assert tracker.spec is get_mode(mode)


# --------------------------------------------------------------------------- docs

DOC_EXAMPLES = {
    "conversation": [
        [
            user("I'm planning a trip to Lisbon with my sister Maya in May; we have about $3,000."),
            assistant(
                "Lisbon in May is lovely. With $3,000 you could stay in Alfama and take a day "
                "trip to Sintra."
            ),
        ]
    ],
    "code": [
        [
            user(
                "Can you fix the login crash in src/auth.py?\n\n```\n"
                "Traceback (most recent call last):\n"
                '  File "/home/ana/proj/src/auth.py", line 45, in login\n'
                "    token = make_token(user.id + salt)\n"
                "TypeError: unsupported operand type(s) for +: 'int' and 'str'\n```"
            ),
            assistant(
                "I've updated src/auth.py to convert the id with str() and added a test in "
                "tests/test_auth.py."
            ),
        ]
    ],
    "reasoning": [
        [
            user(
                "Our goal is to move the booking service off the old VMs. The budget is $50k "
                "and we must ship by March. We can't use AWS because of the hosting contract."
            ),
            assistant(
                "We need to measure the current peak load. Assuming traffic doubles next year, "
                "one database will not be enough."
            ),
        ],
        [
            user(
                "Let's go with a modular monolith because the team is small, rather than "
                "microservices. We ruled out Kubernetes since nobody has run it in production."
            )
        ],
    ],
}


@pytest.mark.parametrize("mode", MODES)
def test_the_docs_show_what_the_trackers_render(mode: str) -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "modes.md").read_text("utf-8")
    rendered = tracked(mode, *DOC_EXAMPLES[mode]).render()
    assert f"```text\n{rendered}\n```" in docs


def test_a_mode_named_in_another_case_is_the_same_mode(memory: Any) -> None:
    memory.set_mode("code", session="s")
    memory.add("Fix the login crash in src/auth.py", session="s")
    memory.add("I fixed src/auth.py and added tests/test_auth.py", role="assistant", session="s")
    memory.engine.working.wait()
    before = memory.context("next?", session="s", mode="code").section("state").text
    assert "src/auth.py" in before
    again = memory.context("next?", session="s", mode=" CODE ")
    assert again.mode == "code" and again.section("state").text == before
    memory.set_mode("Reasoning", session="s")
    assert memory.context("x", session="s").mode == "reasoning"
