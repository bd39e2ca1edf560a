"""The warm-up servers run as they start (arbormem.warmup)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from arbormem import AsyncMemory, Memory, Scope
from arbormem.embed import HashingEmbedder
from arbormem.warmup import warm, warm_in_background


def _memory(path: Path) -> Memory:
    mem = Memory(path / "m.db", embedder=HashingEmbedder())
    mem.add("we planned the trip to Lisbon", user="ann")
    mem.add("the cat is called Miso", user="bo")
    return mem


def test_warm_asks_each_scope_and_stores_nothing(tmp_path: Path) -> None:
    with _memory(tmp_path) as mem:
        before = [mem.stats(user=u).messages for u in ("ann", "bo")]
        seconds = warm(mem)
        assert seconds >= 0
        assert [mem.stats(user=u).messages for u in ("ann", "bo")] == before


def test_a_warm_up_that_fails_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        path = "broken.db"
        closed = False
        scope = Scope(user="ann", agent="default")

        def scopes(self) -> list[object]:
            raise RuntimeError("the disk went away")

    with caplog.at_level(logging.DEBUG, logger="arbormem.warmup"):
        warm(Broken())
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "broken.db failed" in caplog.text and "the disk went away" in caplog.text


def test_a_warm_up_cut_short_by_closing_is_not_a_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mem = _memory(tmp_path)
    mem.close()
    assert mem.closed
    with caplog.at_level(logging.DEBUG, logger="arbormem.warmup"):
        warm(mem)
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "stopped: the memory was closed" in caplog.text


def test_closed_is_true_once_closed_and_for_views_of_a_closed_memory(tmp_path: Path) -> None:
    mem = _memory(tmp_path)
    view = mem.for_tenant("acme")
    assert not mem.closed and not view.closed
    view.close()
    assert view.closed and not mem.closed  # a view leaves the store open
    other = mem.for_tenant("beta")
    mem.close()
    assert mem.closed and other.closed


def test_async_memory_says_when_it_is_closed(tmp_path: Path) -> None:
    import asyncio

    amem = AsyncMemory(memory=_memory(tmp_path))
    assert not amem.closed
    asyncio.run(amem.close())
    assert amem.closed


def test_warm_in_background_reports_its_seconds(tmp_path: Path) -> None:
    seen: list[float] = []
    with _memory(tmp_path) as mem:
        warm_in_background(mem, done=seen.append).join(timeout=60)
    assert len(seen) == 1 and seen[0] >= 0
