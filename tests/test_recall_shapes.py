"""What searches keep of each candidate's neighbourhood (``DocStats.shape``) holds
only for the neighbourhood it was made from: after a write by another process, a
search ranks exactly as a Memory opened afresh does."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from arbormem import Memory
from arbormem.recall.features import DocStats
from tests.test_search_reads import _chat, _open

QUERY = "kayak trip swordfish locker paddles"


def test_a_shape_is_kept_for_its_neighbourhood_object_only() -> None:
    docs = DocStats()
    near = [(10, 4, "a"), (11, 5, "b"), (12, 6, "c"), (14, 7, "d")]
    first = docs.shape(12, 6, near)
    assert first.rids == (10, 11, 12, 14)
    assert first.pos == 2
    assert first.near == (11, 12, 14)
    assert not first.opens
    # Kept: its fields are the ones made first (the shape itself is made again from
    # them, a named tuple being one more object for the collector to walk).
    again = docs.shape(12, 6, near)
    assert again == first and again.rids is first.rids and again.near is first.near
    # The same row after a change: its neighbour 11 forgotten (a new list, as the
    # reads give after any change), and an equal list that is another object.
    changed = [(10, 4, "a"), (12, 6, "c"), (14, 7, "d")]
    second = docs.shape(12, 6, changed)
    assert second.rids == (10, 12, 14)
    assert second.near == (12, 14)
    assert docs.shape(12, 6, list(changed)) == second
    # Another position for the row (rewritten) is read again too.
    assert docs.shape(12, 4, changed).opens
    assert docs.shape(12, 4, changed).near == (10,)


def test_an_empty_neighbourhood_has_no_neighbours() -> None:
    shape = DocStats().shape(3, 0, [])
    assert shape.rids == () and shape.pos == -1 and shape.near == () and not shape.opens


def _ranking(m: Memory) -> list[tuple[str, float, dict[str, float]]]:
    return [(h.message.id, h.score, h.signals) for h in m.search(QUERY, k=10)]


def test_a_write_by_another_process_is_seen_by_the_next_search(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    m = _open(path)
    msgs: list[Any] = _chat(m)
    m.wait()
    before = _ranking(m)
    assert any(mid == msgs[3].id for mid, _, _ in before)
    # Another process forgets a turn in the middle (its neighbours' neighbourhoods
    # change) and adds one to the session.
    script = textwrap.dedent(
        f"""
        from arbormem import Memory
        from arbormem.embed import HashingEmbedder
        m = Memory({str(path)!r}, embedder=HashingEmbedder(64), llm=None,
                   user="alice", agent="bot")
        m.forget({msgs[3].id!r})
        m.add("The swordfish locker is by the kayak paddles", session="s1")
        m.wait()
        m.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    after = _ranking(m)
    assert all(mid != msgs[3].id for mid, _, _ in after)
    fresh = _open(path)
    try:
        assert after == _ranking(fresh)
    finally:
        fresh.close()
    m.close()
