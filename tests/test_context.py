"""Memory.context: sections, sliding window, rolling summary, modes, persistence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import ClassVar

import pytest

from arbormem import Memory
from arbormem.context.summary import SummaryPolicy, SummaryState, gate, update
from arbormem.embed import HashingEmbedder

from .conftest import run_cli
from .fake_openai import FakeOpenAI, Reply

T0 = datetime(2026, 2, 14, 15, 23, 5, tzinfo=timezone.utc)


def chat(
    mem: Memory, n: int, session: str = "s1", start: int = 0, words: int = 12, wait: bool = True
) -> None:
    """n exchanges, one add_many per exchange, as a live chat does."""
    for i in range(start, start + n):
        when = T0 + timedelta(minutes=2 * i)
        mem.add_many(
            [
                {
                    "role": "user",
                    "content": f"Question {i} about the garden plan " + "detail " * words,
                    "timestamp": when,
                },
                {
                    "role": "assistant",
                    "content": f"Answer {i}: water the tomatoes and check the "
                    "compost " + "more " * words,
                    "timestamp": when + timedelta(seconds=30),
                },
            ],
            session=session,
        )
    if wait:
        mem.engine.working.wait()


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "c.db", embedder=HashingEmbedder(64), llm=None) as m:
        yield m


def test_sections_in_order_with_counts_and_chat_messages(mem: Memory) -> None:
    mem.add("Leo is allergic to peanuts.", session="old", timestamp=T0 - timedelta(days=30))
    chat(mem, 3)
    ctx = mem.context(
        "Can Leo have peanut butter?", budget_tokens=2000, session="s1", context_window=8192
    )
    assert [s.name for s in ctx.sections] == [
        "system",
        "summary",
        "recall",
        "state",
        "window",
        "input",
    ]
    assert "peanuts" in ctx.section("recall").text
    assert ctx.section("window").items == 6
    assert ctx.messages[0]["role"] == "system"
    assert ctx.messages[1]["content"].startswith("[2026-02-14 15:23:05 UTC] ")
    assert ctx.messages[-1] == {"role": "user", "content": "Can Leo have peanut butter?"}
    assert ctx.prompt_tokens <= ctx.budget == 2000
    assert ctx.counter == "tiktoken:cl100k_base"
    data = ctx.to_dict()
    assert data["token_counter"] and data["sections"][0]["name"] == "system"
    # The window is not repeated in the recalled block.
    assert "Question 2 about" not in ctx.section("recall").text


def test_window_size_follows_the_mode_and_modes_switch_without_losing_the_session(
    mem: Memory,
) -> None:
    chat(mem, 20)
    conversation = mem.context("garden?", budget_tokens=20000, session="s1")
    assert conversation.mode == "conversation" and conversation.section("window").items == 25
    mem.set_mode("code", session="s1")
    code = mem.context("garden?", budget_tokens=20000, session="s1")
    assert code.mode == "code" and code.section("window").items == 30
    assert len(mem.messages(session="s1")) == 40
    reasoning = mem.context("garden?", budget_tokens=20000, session="s1", mode="reasoning")
    assert reasoning.mode == "reasoning"
    assert mem.context("garden?", budget_tokens=20000, session="s1").mode == "reasoning"


def test_mode_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings are read once, when the memory opens.
    monkeypatch.setenv("ARBORMEM_MEMORY_MODE", "code")
    with Memory(tmp_path / "env.db", embedder=HashingEmbedder(64), llm=None) as mem:
        chat(mem, 1, session="fresh")
        assert mem.context("x?", session="fresh").mode == "code"


def test_the_code_tracker_reaches_the_prompt(mem: Memory) -> None:
    mem.set_mode("code", session="dev")
    mem.add_many(
        [
            {"role": "user", "content": "Please fix the bug in src/auth.py, login fails."},
            {
                "role": "assistant",
                "content": 'Traceback:\n  File "src/auth.py", line 45, in login\n'
                "TypeError: 'NoneType' object is not subscriptable",
            },
        ],
        session="dev",
    )
    mem.engine.working.wait()
    state = mem.context("what now?", session="dev").section("state").text
    assert "src/auth.py" in state and "TypeError" in state


def test_rolling_summary_gates() -> None:
    from arbormem.models import Message

    def msgs(texts: list[str], start: int = 0) -> list[Message]:
        return [
            Message(
                id=str(i),
                role="user" if i % 2 == 0 else "assistant",
                content=t,
                timestamp=T0,
                session="s",
                index=start + i,
            )
            for i, t in enumerate(texts)
        ]

    policy = SummaryPolicy()
    nine = msgs(["We chose the blue paint for the hallway walls."] * 9)
    assert update(SummaryState(), nine, policy=policy) == SummaryState()  # fewer than 10 left
    ten_trivial = msgs(["ok", "thanks", "sure", "ok!", "yes", "no", "k", "cool", "hm", "yep"])
    assert not gate(ten_trivial, policy)
    assert update(SummaryState(), ten_trivial, policy=policy) == SummaryState()
    one_long = msgs(["a " * 3000] + ["ok"] * 9)
    assert gate(one_long, policy)  # 5,000 characters are enough on their own
    ten_good = msgs(["We decided to paint the hallway blue and the kitchen sage green."] * 10)
    state = update(SummaryState(), ten_good, policy=policy)
    assert state.upto == 10 and "hallway" in state.text.lower()
    merged = update(
        state,
        msgs(["The plumber comes on Friday at nine to fix the sink."] * 10, start=10),
        policy=policy,
    )
    assert (
        merged.upto == 20 and "hallway" in merged.text.lower() and "plumber" in merged.text.lower()
    )
    # Small talk is not summarised, but a stretch four batches long is passed over
    # (with what little it says), so the next batch does not start from its beginning.
    chatter = ["ok", "thanks", "sure", "ok!", "yes", "no", "k", "cool", "hm", "yep"] * 3
    assert update(merged, msgs(chatter, start=20), policy=policy) == merged
    folded = update(merged, msgs([*chatter, *chatter[:10]], start=20), policy=policy)
    assert folded == SummaryState(merged.text, 60)


def test_summary_builds_after_replies_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "resume.db"
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        chat(mem, 30)
        ctx = mem.context("what about compost?", session="s1")
        assert ctx.section("summary").text
        mem.set_mode("reasoning", session="s1")
        before = mem.engine.working.load(
            mem.backend.thread("default", "default"), "s1", "conversation"
        )
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        thread = mem.backend.thread("default", "default")
        after = mem.engine.working.load(thread, "s1", "conversation")
        assert after.summary == before.summary and after.mode == "reasoning"
        # A history that shrank clamps the covered index.
        for m in mem.messages(session="s1")[30:]:
            mem.forget(m.id)
        clamped = mem.engine.working.load(thread, "s1", "conversation")
        assert clamped.summary.upto <= mem.backend.state(thread).next_index


def test_forgetting_a_message_drops_summaries_that_may_quote_it(mem: Memory) -> None:
    chat(mem, 20)
    secret = mem.add("my locker code is 5521", session="s1")
    chat(mem, 20, start=20)
    assert mem.context("locker?", session="s1").section("summary").text
    mem.forget(secret.id)
    ctx = mem.context("locker?", session="s1")
    assert "5521" not in json.dumps(ctx.to_dict())


def test_pressure_on_the_model_window_compresses_the_oldest_turns(mem: Memory) -> None:
    chat(mem, 12, words=60)
    thread = mem.backend.thread("default", "default")
    assert mem.engine.working.load(thread, "s1", "conversation").floor == 0
    # Past 90% of a small model window the turn waits for compression first.
    ctx = mem.context("and the compost?", session="s1", context_window=1200, budget_tokens=1100)
    state = mem.engine.working.load(thread, "s1", "conversation")
    assert state.floor > 0 and state.summary.text
    assert ctx.prompt_tokens <= 1100


def test_llm_summary_failures_fall_back_to_the_extractive_summary(tmp_path: Path) -> None:
    from arbormem.llm import LLMConfig, get_llm

    with FakeOpenAI() as server:
        llm = get_llm(
            LLMConfig(model="fake", base_url=server.base_url, api_key="k", timeout=1, max_retries=0)
        )
        with Memory(tmp_path / "llm.db", embedder=HashingEmbedder(64), llm=llm, tree=False) as mem:
            server.default = Reply('{"summary": "- The user plans a vegetable garden."}')
            chat(mem, 20)
            thread = mem.backend.thread("default", "default")
            state = mem.engine.working.load(thread, "s1", "conversation")
            assert state.summary.text == "- The user plans a vegetable garden."
            covered = state.summary.upto
            for bad in (
                Reply("no json here"),
                Reply(None),
                Reply(status=500),
                Reply('{"summary": "late"}', delay=3),
            ):
                server.default = bad
                chat(mem, 6, start=100 + len(server.requests))
                after = mem.engine.working.load(thread, "s1", "conversation")
                # The model's summary stays, and the messages that left the window are
                # folded in without it: a model that is down used to freeze the summary.
                assert after.summary.text.startswith("- The user plans a vegetable garden.")
                assert after.summary.upto > covered and "\n- [" in after.summary.text
                covered = after.summary.upto
            assert len(mem.messages(session="s1")) == 40 + 4 * 12


def test_context_on_an_empty_store(mem: Memory) -> None:
    ctx = mem.context("hello?")
    assert ctx.section("recall").text == "" and ctx.section("window").items == 0
    assert ctx.messages[-1]["content"] == "hello?"


def test_context_cli_json(tmp_path: Path) -> None:
    env = {"ARBORMEM_DB": str(tmp_path / "cli.db"), "ARBORMEM_EMBEDDER": "hash"}
    chat_file = tmp_path / "c.json"
    chat_file.write_text(
        json.dumps(
            [
                {"role": "user", "content": "My bike has a flat rear tyre."},
                {"role": "assistant", "content": "Check the tyre for glass."},
            ]
        )
    )
    assert run_cli("ingest", str(chat_file), env=env).returncode == 0
    out = run_cli(
        "context",
        "what was wrong with my bike?",
        "--budget",
        "500",
        "--json",
        "--session",
        "new-one",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["prompt_tokens"] <= 500 and data["token_counter"]
    assert "flat rear tyre" in data["messages"][0]["content"]
    text = run_cli("context", "bike?", "--mode", "code", "--session", "new-one", env=env)
    assert "system" in text.stdout and "tokens" in text.stdout


def test_upkeep_of_a_session_waits_and_is_coalesced(tmp_path: Path) -> None:
    import time

    from arbormem.context.working import WorkingMemory
    from arbormem.store import SQLiteBackend

    working = WorkingMemory(SQLiteBackend(tmp_path / "w.db"))
    working.interval = 0.5
    runs: list[tuple[str, float]] = []

    def job(name: str) -> None:
        runs.append((name, time.monotonic()))

    asked = time.monotonic()
    working.submit(lambda: job("s1"), key="s1")
    working.submit(lambda: job("s1 again"), key="s1")  # joins the waiting one
    working.submit(lambda: job("s2"), key="s2")  # another session: its own run
    while working.busy and time.monotonic() - asked < 30:
        time.sleep(0.01)
    assert sorted(n for n, _ in runs) == ["s1", "s2"]
    assert all(at - asked >= 0.5 for _, at in runs)
    # Once it ran, the next reply of the session gets a run of its own; waiting for
    # upkeep starts it at once, and so does closing.
    working.interval = 60.0
    working.submit(lambda: job("s1 later"), key="s1")
    working.wait()
    assert [n for n, _ in runs][2:] == ["s1 later"]
    working.submit(lambda: job("at close"), key="s1")
    working.close()
    assert runs[-1][0] == "at close" and runs[-1][1] - runs[-2][1] < 30.0


def test_upkeep_of_a_long_session_reads_only_what_changed(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder=HashingEmbedder())
    chat(mem, 60)
    mem.engine.working.wait()
    mem.engine.working.interval = 60.0  # the next upkeep waits: what it will read can be seen
    chat(mem, 2, start=60, wait=False)
    thread = mem._thread(mem._scope(None, None))
    assert thread is not None
    state = mem.engine.working.load(thread, "s1", "conversation")
    pending = mem.engine.working.pending(thread, "s1", state)
    # Of 124 messages: the four new ones, the window before them (20 in conversation
    # mode), and those that left it since the summary last took a batch (fewer than 10).
    assert len(pending) < 34 and [m.index for m in pending] == sorted(m.index for m in pending)
    assert pending[-1].index == 123 and state.seen == 120
    everything = [r.message for r in mem.backend.messages(thread, session="s1")]
    expected = mem.engine.working.upkeep(thread, "s1", everything, "conversation")
    mem.engine.working.save(thread, "s1", state)  # back to before, for the upkeep close() starts
    mem.close()
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder()) as again:
        got = again.working.load(thread, "s1", "conversation")
    # The same state as an upkeep that reads the whole session.
    assert got.to_dict() == expected.to_dict() and got.seen == 124 and got.summary.text


def test_a_live_exchanges_newest_windows_are_written_by_the_upkeep(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder=HashingEmbedder())
    mem.engine.working.interval = 60.0  # nothing runs until it is waited for
    chat(mem, 5, wait=False)
    assert mem.backend.lexical_stats("window")[0] == 8  # the newest two wait
    found = mem.search("Answer 4 water the tomatoes", k=3)
    assert found and found[0].message.content.startswith("Answer 4")  # by its own words
    mem.engine.working.wait()
    assert mem.backend.lexical_stats("window")[0] == 10
    mem.close()


def test_a_burst_of_replies_is_caught_up_by_upkeep(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder=HashingEmbedder())
    for i in range(20):
        mem.add_many(
            [
                {"role": "user", "content": f"question number {i} about the garden"},
                {"role": "assistant", "content": f"answer number {i} about the roses"},
            ],
            session="s",
        )
    mem.engine.working.wait()
    thread = mem._thread(mem._scope(None, None))
    assert thread is not None
    assert mem.engine.working.load(thread, "s", "conversation").seen == 40
    mem.close()


def test_context_for_a_scope_with_nothing_stored_creates_nothing(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), user="maya") as mem:
        mem.add("hello peanuts")
        ctx = mem.context("peanuts?", user="ghost")
        assert ctx.section("recall").text == "" and ctx.mode == "conversation"
        assert [s.user for s in mem.scopes()] == ["maya"]
        assert mem.export(user="ghost").document["threads"] == []


def test_recalled_turns_say_who_said_them(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64)) as mem:
        mem.add("Leo is allergic to peanuts.", speaker="Maya", session="s1")
        mem.add("Noted: a nut-free menu for Leo.", role="assistant", session="s1")
        ctx = mem.context("nut-free menu for Leo", session="s2", paths=0)
        lines = ctx.section("recall").text.splitlines()
        assert "Maya: Leo is allergic to peanuts." in lines
        assert "assistant: Noted: a nut-free menu for Leo." in lines


def test_an_llm_summary_call_gets_the_newest_messages_of_a_long_backlog() -> None:
    from arbormem.context.summary import LLM_INPUT_CHARS, llm_merge
    from arbormem.models import Message

    # 200 messages of about 300 characters left the window at once (a bulk import
    # followed by live chat): sent whole, the prompt was 60,000 characters.
    batch = [
        Message(
            id=str(i),
            role="user",
            content=f"Note {i}: we compared {i} quotes for the kitchen " + "tiles " * 40,
            timestamp=T0,
            session="s",
            index=i,
        )
        for i in range(200)
    ]

    class Recorder:
        prompt: ClassVar[list[dict[str, str]]] = []

        def complete_json(
            self, prompt: list[dict[str, str]], validate: object, **kw: object
        ) -> str:
            Recorder.prompt = prompt
            return "- Kitchen quotes compared."

    merged = llm_merge(Recorder(), "", batch, SummaryPolicy())
    sent = Recorder.prompt[-1]["content"]
    new = sent.split("New messages:\n", 1)[1]
    assert len(new) <= LLM_INPUT_CHARS
    assert "Note 199:" in new and "Note 0:" not in new  # the newest, in order
    # The older ones reached the model as the extractive summary it merges into.
    existing = sent.split("New messages:", 1)[0]
    assert existing.startswith("Existing summary:\n- [") and merged == "- Kitchen quotes compared."


def test_a_summary_stays_within_its_words_and_characters() -> None:
    from arbormem.context.summary import CHARS_PER_WORD, llm_merge
    from arbormem.models import Message

    batch = [
        Message(
            id=str(i),
            role="user",
            content="We chose the blue paint today.",
            timestamp=T0,
            session="s",
            index=i,
        )
        for i in range(10)
    ]

    class Answers:
        def __init__(self, text: str) -> None:
            self.text = text

        def complete_json(self, prompt: object, validate: object, **kw: object) -> str:
            return self.text

    policy = SummaryPolicy(max_words=400)
    # One paragraph over the limit used to leave nothing at all.
    long = llm_merge(Answers(" ".join(["paint"] * 420)), "- earlier", batch, policy)
    assert 0 < len(long.split()) <= 400 and long.endswith("…")
    # Long "words" (keys, base64) are bounded by characters too.
    blobs = "\n".join(f"- key {'x' * 2000}" for _ in range(30))
    capped = llm_merge(Answers(blobs), "", batch, policy)
    assert 0 < len(capped) <= 400 * CHARS_PER_WORD
    state = SummaryState()
    for start in range(0, 200, 10):
        fold = [
            Message(
                id=f"{start}-{i}",
                role="user",
                content=f"token {'y' * 3000} {start} {i}",
                timestamp=T0,
                session="s",
                index=start + i,
            )
            for i in range(10)
        ]
        state = update(state, fold, policy=policy)
        assert len(state.text) <= 400 * CHARS_PER_WORD
