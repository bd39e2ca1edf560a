"""Pruning trivial exchanges: short small talk goes, short facts stay."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.tree.trivial import fact_in

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
LONG_Q = (
    "Please explain in detail how the tomato blight spreads between plants in a humid "
    "greenhouse and what should be done about it over the coming weeks"
)
LONG_A = (
    "Blight spreads by spores carried in humid air and on wet leaves, so open the vents, "
    "water the soil rather than the leaves and remove every infected leaf straight away."
)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "t.db", embedder=HashingEmbedder(64), llm=None) as m:
        yield m


def exchange(mem: Memory, user: str, reply: str, session: str, at: datetime) -> None:
    mem.add_many(
        [
            {"content": user, "session": session, "timestamp": at},
            {"role": "assistant", "content": reply, "session": session, "timestamp": at},
        ]
    )


def archived(mem: Memory) -> list[str]:
    return [
        m["content"]
        for t in mem.export()["threads"]
        for s in t["sessions"]
        for m in s["messages"]
        if m.get("archived")
    ]


@pytest.mark.parametrize(
    ("said", "reply"),
    [
        ("my postcode is BS1 4QA", "noted!"),
        ("she's a three-year-old beagle", "how lovely!"),
        ("Her name is Bella", "what a lovely name!"),
        ("Sarah is allergic to peanuts", "ok, noted"),
        ("she is allergic to nuts", "got it"),
        ("we moved house yesterday", "congratulations!"),
        ("lunch on Friday then", "sure, see you then"),
        ("the party is on 3 June", "great, thanks"),
        ("nice to meet you", "Nice to meet you too, Dana!"),
    ],
)
def test_a_short_exchange_that_states_a_fact_is_never_archived(
    mem: Memory, said: str, reply: str
) -> None:
    exchange(mem, "thanks!", "any time!", "s1", T0)
    exchange(mem, LONG_Q, LONG_A, "s1", T0 + timedelta(minutes=1))
    exchange(mem, said, reply, "s2", T0 + timedelta(days=1))
    exchange(mem, LONG_Q.replace("tomato", "cucumber"), LONG_A, "s2", T0 + timedelta(days=1))
    mem.add("and the peppers?", session="s3", timestamp=T0 + timedelta(days=2))
    # Every message under 20 words was enough: the fact went with the small talk.
    assert mem.reorganize(prune_trivial_leaves=True)["pruned"] == 1
    assert archived(mem) == ["thanks!", "any time!"]


@pytest.mark.parametrize(
    ("text", "role", "found"),
    [
        ("my postcode is BS1 4QA", "user", "number"),
        ("she's a three-year-old beagle", "user", "number"),
        ("see you next week", "user", "date"),
        ("lunch on Friday?", "user", "date"),
        ("Her name is Bella", "user", "name"),
        ("Sarah is allergic to peanuts", "user", "name"),
        ("we adopted a dog", "user", "personal"),
        ("she is allergic to nuts", "user", "personal"),
        ("I'm glad I could help.", "assistant", None),
        ("Can I ask you something?", "user", None),
        ("thanks!", "user", None),
        ("Great, anything else?", "assistant", None),
        ("Ha, the kumquat party was wild!", "user", None),
        ("Kumquat party indeed, glad you enjoyed it.", "assistant", None),
        ("You're welcome, happy to help!", "assistant", None),
        ("OK thanks, let's do it", "user", None),
    ],
)
def test_what_states_a_fact(text: str, role: str, found: str | None) -> None:
    assert fact_in(text, role, T0, frozenset({"kumquat"})) == found
