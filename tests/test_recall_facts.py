"""The facts a question is read against (speakers, time span, names), read ahead
of the first search once the background embedder has caught up."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.recall.facts import ThreadFacts
from arbormem.store.types import Thread

from .test_aliases import KATE_LINES as LINES
from .test_aliases import KATE_START as START
from .test_aliases import add_lines


def thread_of(memory: Memory) -> Thread:
    thread = memory.engine.backend.thread(memory.scope.user, memory.scope.agent)
    assert thread is not None
    return thread


def test_the_facts_are_read_once_indexing_has_caught_up(tmp_path: Path) -> None:
    with Memory(
        tmp_path / "m.db", embedder=HashingEmbedder(32), deep_embedder=HashingEmbedder(48)
    ) as memory:
        add_lines(memory, LINES)
        assert memory.wait(indexed=True)
        facts = memory.engine.retriever.facts.known(thread_of(memory))
        # Before any search: read by the background embedder's thread.
        assert facts is not None
        assert facts.upto == memory.engine.backend.state(thread_of(memory)).max_rowid
        assert facts.names == ["Emi", "elise"]
        assert facts.aliases.names() == facts.alias_names == {"kate": "Emi"}
        assert facts.latest == START + timedelta(minutes=len(LINES) - 1)
        (hit,) = memory.search("Does Kate ski?", k=1)
        assert hit.message.content == "I love skiing, I go every winter."


def test_messages_added_later_are_read_by_the_next_search(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(32), deep_embedder=None) as memory:
        add_lines(memory, LINES[:2])
        memory.search("skiing", k=1)
        facts = memory.engine.retriever.facts.known(thread_of(memory))
        assert facts is not None and facts.aliases.names() == facts.alias_names == {}
        add_lines(memory, LINES[2:], start=2)
        memory.search("skiing", k=1)
        facts = memory.engine.retriever.facts.known(thread_of(memory))
        # The names kept for searches follow the messages read.
        assert facts is not None and facts.alias_names == {"kate": "Emi"}
        assert facts.read_to == len(LINES)


def test_a_failing_read_ahead_is_logged_and_searches_read_the_facts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Memory(
        tmp_path / "m.db", embedder=HashingEmbedder(32), deep_embedder=HashingEmbedder(48)
    ) as memory:
        deep = memory.engine.deep
        assert deep is not None

        def broken(thread: Thread) -> None:
            raise RuntimeError("read-ahead broke")

        deep.after_indexing(broken)
        with caplog.at_level(logging.DEBUG, logger="arbormem.deep"):
            add_lines(memory, LINES)
            assert memory.wait(indexed=True)
        assert "read-ahead broke" in caplog.text
        (hit,) = memory.search("Does Kate ski?", k=1)
        assert hit.message.content == "I love skiing, I go every winter."


def test_a_read_that_fails_half_way_is_done_again_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(32), deep_embedder=None) as memory:
        add_lines(memory, LINES)
        backend = memory.engine.backend
        thread = thread_of(memory)
        state = backend.state(thread)
        facts = ThreadFacts(backend)
        real = backend.rowids_between
        calls = {"n": 0}

        def in_two_chunks(thread: Thread, start: int, end: int, limit: int) -> list[int]:
            # The first chunk is read and counted; reading the second fails.
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError("disk went away")
            return real(thread, start, end, limit)[:4]

        monkeypatch.setattr(backend, "rowids_between", in_two_chunks)
        with pytest.raises(OSError):
            facts.of(thread, state)
        assert facts.known(thread) is None
        again = facts.of(thread, state)
        monkeypatch.undo()
        fresh = ThreadFacts(backend).of(thread, state)
        # Counted once, not twice.
        assert again.aliases.addressed == fresh.aliases.addressed
        assert again.aliases.addressed[("Emi", "Kate")] == 3
        assert again.read_to == fresh.read_to == len(LINES)
