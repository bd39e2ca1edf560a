"""Pruning trivial exchanges: short small talk goes, short facts stay."""

from __future__ import annotations

import json
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
        for t in mem.export().document["threads"]
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
    assert mem.reorganize(prune_trivial_leaves=True).pruned == 1
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


def small_talk_then_facts(mem: Memory) -> None:
    exchange(mem, "ok, anything else", "great, anything else?", "s1", T0)
    exchange(mem, LONG_Q, LONG_A, "s1", T0 + timedelta(minutes=1))
    exchange(mem, "thanks, anything else", "any time!", "s2", T0 + timedelta(days=1))
    exchange(mem, LONG_Q.replace("tomato", "cucumber"), LONG_A, "s2", T0 + timedelta(days=1))
    mem.add("anything else about the peppers?", session="s3", timestamp=T0 + timedelta(days=2))


def test_search_names_the_archived_messages_that_match(mem: Memory) -> None:
    small_talk_then_facts(mem)
    before = mem.search("anything else", k=10)
    assert (before.archived, before.archived_count) == ([], 0)
    assert mem.reorganize(prune_trivial_leaves=True).pruned == 2
    small_talk = {m.id: m.content for m in mem.messages() if m.content in archived(mem)}
    hits = mem.search("anything else", k=10)
    # Left out of the hits, as before, but no longer without a word.
    assert not {h.id for h in hits} & set(small_talk)
    matching = sorted(c for c in small_talk.values() if "anything" in c)
    assert len(matching) == 3 and sorted(small_talk[i] for i in hits.archived) == matching
    assert hits.archived_count == 3 and isinstance(hits, list)
    assert mem.search("anything else", k=1).archived_count == 3
    assert len(mem.search("anything else", k=1).archived) == 1
    # The search's filters apply to them too.
    users = mem.search("anything else", role="user")
    assert sorted(small_talk[i] for i in users.archived) == [
        "ok, anything else",
        "thanks, anything else",
    ]
    assert [small_talk[i] for i in mem.search("anything else", session="s2").archived] == [
        "thanks, anything else"
    ]
    assert mem.search("tomato blight").archived == []
    # Every back-end answers the same: the default reads the archived messages one by one.
    from arbormem.store.base import Backend
    from arbormem.text import query_terms

    thread = mem.backend.thread("default", "default")
    assert thread is not None
    terms = query_terms("anything else")
    answers = [
        mem.backend.archived_matches([thread], terms),
        Backend.archived_matches(mem.backend, [thread], terms),
    ]
    mem.backend.ARCHIVED_LOOKUPS = 0  # type: ignore[attr-defined]  (from the postings)
    answers.append(mem.backend.archived_matches([thread], terms))
    assert answers == [(hits.archived, 3)] * 3
    assert mem.restore_archived() == 4
    assert mem.search("anything else").archived == []


def test_the_cli_says_when_archived_messages_match(tmp_path: Path) -> None:
    from .conftest import run_cli

    db = tmp_path / "cli.db"
    with Memory(db, embedder="hash", llm=None) as mem:
        small_talk_then_facts(mem)
        mem.reorganize(prune_trivial_leaves=True)
    env = {"ARBORMEM_DB": str(db), "ARBORMEM_EMBEDDER": "hash"}
    out = run_cli("search", "anything else", "--json", "-k", "1", env=env)
    assert out.returncode == 0, out.stderr
    assert isinstance(json.loads(out.stdout), list)
    assert "note: 3 archived message(s) also hold these words" in out.stderr
    assert "and 2 more" in out.stderr
