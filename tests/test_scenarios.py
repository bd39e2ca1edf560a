"""Five adversarial scenarios for the tree, written as our own conversations.

They run with the real default embedder (WordLlama), no LLM.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem import Memory

T0 = datetime(2026, 2, 1, 8, 0, tzinfo=timezone.utc)

FILLER = [
    ("How do I reverse a list in Python?", "Use reversed(items) or items[::-1]."),
    ("What's a good stretch for lower back pain?", "Try the cat-cow stretch, slowly, ten times."),
    ("Recommend a sci-fi novel.", "The Left Hand of Darkness by Ursula K. Le Guin."),
    ("How long should I boil an egg?", "About nine minutes for a firm yolk."),
    ("What is the capital of Australia?", "Canberra."),
    ("Tips for a job interview?", "Research the company and prepare two stories about impact."),
    ("How do I clean a cast iron pan?", "Hot water, a brush, then dry it and oil it lightly."),
    ("Best way to learn chords on guitar?", "Start with G, C, D and E minor, switching slowly."),
    ("How often should I water succulents?", "Every two weeks, when the soil is fully dry."),
    ("Explain compound interest simply.", "You earn interest on your interest as well."),
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "scenario.db", llm=None) as m:
        yield m


def say(mem: Memory, user: str, reply: str, when: datetime, session: str) -> None:
    mem.add_many(
        [
            {"role": "user", "content": user, "timestamp": when, "session": session},
            {
                "role": "assistant",
                "content": reply,
                "timestamp": when + timedelta(seconds=20),
                "session": session,
            },
        ]
    )


def test_needle_in_a_haystack(mem: Memory) -> None:
    """A constraint stated in message 3 of a 200-message thread is recalled at the end."""
    say(mem, "Hi! I'm planning meals for the family this month.", "Happy to help plan.", T0, "s1")
    needle = mem.add(
        "Important: my son Theo has a severe shellfish allergy, so never suggest "
        "shrimp, crab or lobster.",
        timestamp=T0 + timedelta(minutes=1),
        session="s1",
    )
    assert needle.index == 2
    mem.add(
        "Understood, no shellfish for Theo.",
        role="assistant",
        timestamp=T0 + timedelta(minutes=1, seconds=20),
        session="s1",
    )
    when = T0 + timedelta(hours=1)
    i = 0
    while len(mem.messages()) < 198:
        q, a = FILLER[i % len(FILLER)]
        say(mem, f"{q} (#{i})", a, when, f"s{2 + i // 12}")
        when += timedelta(minutes=40)
        i += 1
    question = "Any seafood dinner ideas for Theo's birthday?"
    mem.add(question, timestamp=when, session="last")
    assert len(mem.messages()) == 199
    hits = mem.search(question, k=5)
    assert needle.id in [h.message.id for h in hits[:3]]


def test_an_overridden_constraint_returns_the_newer_first(mem: Memory) -> None:
    say(
        mem,
        "Heads up: Nina is allergic to nuts, keep every recipe nut-free.",
        "Got it, nut-free recipes for Nina.",
        T0,
        "s1",
    )
    for day, (q, a) in enumerate(FILLER[:4], start=1):
        say(mem, q, a, T0 + timedelta(days=day), f"s{day + 1}")
    say(
        mem,
        "Good news: Nina's allergist cleared her, she can eat nuts now.",
        "Great news, nuts are back on the menu for Nina.",
        T0 + timedelta(days=6),
        "s9",
    )
    hits = mem.search("Can Nina eat nuts?", k=5)
    contents = [h.message.content for h in hits]
    newer = next(i for i, c in enumerate(contents) if "cleared her" in c)
    older = next(i for i, c in enumerate(contents) if "allergic to nuts" in c)
    assert newer < older
    assert hits[older].superseded_by == hits[newer].message.id
    assert hits[newer].superseded_by is None


def test_python_the_snake_is_not_merged_with_python_the_language(mem: Memory) -> None:
    snake = [
        ("My ball python Monty refused his mouse again.", "Ball pythons often fast in winter."),
        ("Should I raise the heat lamp in Monty's terrarium?", "Keep the warm side near 32 C."),
        ("Monty is shedding, his eyes look blue.", "Blue eyes mean the python will shed soon."),
        ("Can I handle my python while he sheds?", "Better leave the snake alone until done."),
    ]
    code = [
        ("My Python script crashes with a KeyError.", "Use dict.get() or check the key first."),
        ("How do I write a list comprehension in Python?", "[x * 2 for x in items]."),
        ("Should I use a virtualenv for each Python project?", "Yes, one per project."),
        ("What does the Python GIL do?", "It lets one thread run Python bytecode at a time."),
    ]
    for i, (q, a) in enumerate(snake):
        say(mem, q, a, T0 + timedelta(minutes=2 * i), "reptiles")
    for i, (q, a) in enumerate(code):
        say(mem, q, a, T0 + timedelta(days=1, minutes=2 * i), "coding")
    say(mem, "Thanks for everything today.", "Any time.", T0 + timedelta(days=2), "bye")
    before = {n.id: n.path[:1] for n in mem.tree().walk() if n.kind == "leaf"}
    mem.reorganize()  # the default threshold, 0.55
    root = mem.tree()
    for leaf in (n for n in root.walk() if n.kind == "leaf"):
        assert leaf.path[:1] == before[leaf.id], "a snake and a code branch were merged"


def test_one_entity_across_ten_branches_ends_up_under_one_parent(mem: Memory) -> None:
    halcyon = [
        "The Halcyon drone prototype flew for six minutes on the new battery pack.",
        "Halcyon drone battery swelled after the test flight, we need a safer battery pack.",
        "Flashed Halcyon drone firmware 2.3; the battery monitor reads the pack correctly now.",
        "Halcyon drone test flight in wind: the battery pack drained in five minutes.",
        "Ordered carbon propellers for the Halcyon drone prototype test flight.",
        "Halcyon drone firmware crashed mid test flight when the battery pack dipped.",
        "The Halcyon drone prototype passed the battery pack stress test this morning.",
        "Halcyon drone test flight footage looks great, battery pack temperature stayed low.",
        "Calibrated the Halcyon drone compass before the next prototype test flight.",
        "Halcyon drone prototype review: battery pack, firmware and test flight results.",
    ]
    fillers = iter(FILLER * 2)
    when = T0
    for i, text in enumerate(halcyon):
        say(mem, text, "Noted for the Halcyon drone prototype log.", when, f"h{i}")
        q, a = next(fillers)
        say(mem, q, a, when + timedelta(days=1), f"n{i}")
        when += timedelta(days=2)
    say(mem, "Let's take a break from work talk.", "Sure.", when, "end")
    result = mem.reorganize()
    assert result.merged >= 9

    root = mem.tree()
    leaves = [n for n in root.walk() if n.kind == "leaf"]
    drone = [leaf for leaf in leaves if "Halcyon" in leaf.messages[0].content]
    assert len(drone) == 10

    def ancestors(path: list[int]) -> list[tuple[int, ...]]:
        return [tuple(path[:i]) for i in range(len(path))]

    common = set(ancestors(drone[0].path))
    for leaf in drone[1:]:
        common &= set(ancestors(leaf.path))
    deepest = max(common, key=len)
    assert len(deepest) >= 1, "the drone branches only meet at the root"
    from arbormem.tree.view import find

    parent = find(root, list(deepest))
    inside = [n for n in parent.walk() if n.kind == "leaf"]
    assert all("Halcyon" in leaf.messages[0].content for leaf in inside), "noise was merged in"


def test_multi_hop_recall_reaches_three_separate_branches(mem: Memory) -> None:
    branches = [
        (
            "allergy",
            "Sarah is allergic to peanuts, even a trace sends her to hospital.",
            "That's serious, I'll remember Sarah's peanut allergy.",
        ),
        (
            "noise-weather",
            "What's the weather like in Tokyo this week?",
            "Rain on Tuesday, sunny and warm by the weekend in Tokyo.",
        ),
        (
            "party",
            "I'm planning Sarah's surprise birthday party and baking the cake myself.",
            "Fun! A surprise party for Sarah with a homemade cake.",
        ),
        (
            "noise-bike",
            "How do I fix a flat bike tire on the road?",
            "Carry a spare tube, tyre levers and a mini pump.",
        ),
        (
            "recipe",
            "I found a Thai peanut butter cake recipe that looks amazing.",
            "That recipe uses a lot of peanut butter and crushed peanuts.",
        ),
    ]
    for day, (session, user, reply) in enumerate(branches):
        say(mem, user, reply, T0 + timedelta(days=day), session)
    question = "I'm making the peanut butter cake for Sarah's party. Good idea?"
    paths = mem.topic_paths(question, k=3)
    sessions = set()
    for path in paths:
        msgs = mem.messages(start=path.topic.first_index, end=path.topic.last_index + 1)
        sessions |= {m.session for m in msgs}
    assert sessions == {"allergy", "party", "recipe"}
    rendered = "\n".join(p.render() for p in paths)
    assert "Tokyo" not in rendered and "bike" not in rendered
    hits = mem.search(question, k=5)
    assert {"allergy", "party", "recipe"} <= {h.message.session for h in hits}
    assert not {"noise-weather", "noise-bike"} & {h.message.session for h in hits[:3]}
