"""Rows and neighbourhoods kept between searches (arbormem.recall.reads) never outlive
a change to the store: after an add or a forget, in this Memory or another one on
the same file, a search ranks exactly as a Memory opened afresh does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arbormem import Memory
from arbormem.embed import HashingEmbedder

QUERY = "kayak trip swordfish locker"


def _open(path: Path) -> Memory:
    return Memory(path, embedder=HashingEmbedder(64), llm=None, user="alice", agent="bot")


def _chat(m: Memory) -> list[Any]:
    return m.add_many(
        [
            {"role": "user", "content": "We are planning a kayak trip for the spring"},
            {"role": "assistant", "content": "A spring kayak trip sounds lovely."},
            {"role": "user", "content": "My locker code for the trip is swordfish"},
            {"role": "assistant", "content": "Noted: the locker code is swordfish."},
            {"role": "user", "content": "I still need paddles for the kayak"},
            {"role": "assistant", "content": "Light paddles pack well for a trip."},
        ],
        session="s1",
    )


def _ranking(m: Memory) -> list[tuple[str, float, dict[str, float]]]:
    return [(h.message.id, h.score, h.signals) for h in m.search(QUERY, k=10)]


def _fresh(path: Path) -> list[tuple[str, float, dict[str, float]]]:
    m = _open(path)
    try:
        return _ranking(m)
    finally:
        m.close()


def test_a_forget_changes_the_next_search_as_in_a_fresh_memory(tmp_path: Path) -> None:
    m = _open(tmp_path / "m.db")
    msgs = _chat(m)
    before = _ranking(m)
    assert any(mid == msgs[2].id for mid, _, _ in before)
    m.forget(msgs[2].id)
    after = _ranking(m)
    assert all(mid != msgs[2].id for mid, _, _ in after)
    # The neighbours of the forgotten turn lost its words from their windows.
    assert after == _fresh(tmp_path / "m.db")
    assert after != [r for r in before if r[0] != msgs[2].id]
    m.close()


def test_an_add_changes_the_next_search_as_in_a_fresh_memory(tmp_path: Path) -> None:
    m = _open(tmp_path / "m.db")
    _chat(m)
    before = _ranking(m)
    new = m.add("The swordfish locker is by the kayak trip dock", session="s1")
    after = _ranking(m)
    assert any(mid == new.id for mid, _, _ in after)
    assert after != before
    assert after == _fresh(tmp_path / "m.db")
    m.close()


def test_a_write_through_another_memory_is_seen_by_the_next_search(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    m = _open(path)
    msgs = _chat(m)
    _ranking(m)
    other = _open(path)
    other.forget(msgs[2].id)
    other.add("Paddles and the kayak trip locker are sorted", session="s1")
    other.close()
    after = _ranking(m)
    assert all(mid != msgs[2].id for mid, _, _ in after)
    assert after == _fresh(path)
    m.close()


def test_editing_a_hits_metadata_changes_no_later_search(tmp_path: Path) -> None:
    m = _open(tmp_path / "m.db")
    m.add("Our kayak trip locker code is swordfish", session="s1", metadata={"tags": ["trip"]})
    first = m.search(QUERY, k=1)[0]
    first.message.metadata["tags"].append("edited")  # type: ignore[index]
    again = m.search(QUERY, k=1)[0]
    assert again.message.metadata == {"tags": ["trip"]}
    m.close()


def test_a_write_to_another_users_thread_keeps_this_threads_reads(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A server's tenants add all the time: one user's add must not make every other
    # user's next search read its rows again (it did under one store-wide mark).
    path = tmp_path / "m.db"
    m = _open(path)
    _chat(m)
    _ranking(m)
    reads = m.engine.retriever.reads
    real = reads.backend.rows
    asked: list[list[int]] = []

    def counting(rowids: Any) -> Any:
        asked.append(list(rowids))
        return real(rowids)

    m.add("Bob's kayak trip locker code is marlin", user="bob", session="b1")
    m.wait()
    # Counted from here: the add's own background work (record extraction reads the
    # rows its records cite) is not the search's.
    monkeypatch.setattr(reads.backend, "rows", counting)
    after = _ranking(m)
    assert asked == []
    monkeypatch.undo()
    assert after == _fresh(path)
    # Alice's own add is seen at once.
    monkeypatch.setattr(reads.backend, "rows", counting)
    new = m.add("The swordfish locker is by the kayak trip dock", session="s1")
    mine = _ranking(m)
    assert asked and any(mid == new.id for mid, _, _ in mine)
    monkeypatch.undo()
    assert mine == _fresh(path)
    m.close()


def test_an_add_keeps_the_rows_read_before_it_and_ranks_as_a_fresh_memory(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # An append changes no stored row and no neighbourhood that ends before it: the
    # next search reads only what is new (it read every row again under a new mark).
    path = tmp_path / "m.db"
    m = _open(path)
    _chat(m)
    before = _ranking(m)
    reads = m.engine.retriever.reads
    real = reads.backend.rows
    asked: list[int] = []

    def counting(rowids: Any) -> Any:
        asked.extend(rowids)
        return real(rowids)

    monkeypatch.setattr(reads.backend, "rows", counting)
    new = m.add("The swordfish locker is by the kayak trip dock", session="s1")
    m.wait()
    after = _ranking(m)
    monkeypatch.undo()
    thread = m.backend.thread("alice", "bot")
    assert thread is not None
    (new_row,) = [r for r in m.backend.messages(thread) if r.message.id == new.id]
    assert new_row.rowid in asked
    assert len(asked) < len(before), asked
    assert any(mid == new.id for mid, _, _ in after)
    # The turn before it, whose neighbourhood now holds the new one, ranks as afresh.
    assert after == _fresh(path)
    m.close()


def _tracked_growth(make: Any) -> int:
    """How many more objects the collector tracks after ``make()`` (kept alive)."""
    import gc

    for _ in range(3):
        gc.collect()
    before = len(gc.get_objects())
    kept = make()
    for _ in range(3):  # a tuple leaves the collector's view at a collection after its items
        gc.collect()
    grown = len(gc.get_objects()) - before
    assert kept is not None
    return grown


def test_kept_rows_and_neighbourhoods_stay_out_of_the_collectors_view(tmp_path: Path) -> None:
    # At a million turns the kept rows and neighbourhoods were most of what a full
    # collection walked: kept as plain tuples they add nothing per row for it, and
    # hand back rows equal to the store's, metadata included.
    from arbormem.recall.reads import SearchReads

    m = _open(tmp_path / "m.db")
    m.add_many(
        [
            {
                "role": "user",
                "content": f"turn {i} about kayaks",
                "metadata": {"n": i} if i % 7 == 0 else {},
            }
            for i in range(400)
        ],
        session="s1",
    )
    m.wait()  # nothing in the background allocates while the collector is counted
    backend = m.backend
    thread = backend.thread("alice", "bot")
    assert thread is not None
    rowids = [r.rowid for r in backend.messages(thread)]
    reads = SearchReads(backend)
    token = reads.begin([thread])

    def fill() -> Any:
        reads.rows(token, rowids)
        reads.around(token, rowids, 2)
        return reads

    assert _tracked_growth(fill) < 100  # a Row, a Message and a list each were 1,200
    expected = backend.rows(rowids)
    again = reads.rows(token, rowids)
    assert again == expected
    with_meta = [r for r in rowids if expected[r].message.metadata]
    assert with_meta and all(
        again[r].message.metadata == expected[r].message.metadata for r in with_meta
    )
    near = reads.around(token, rowids, 2)
    assert {r: list(v) for r, v in near.items()} == backend.around(rowids, 2)
    m.close()


def test_kept_shapes_stay_out_of_the_collectors_view() -> None:
    from arbormem.recall.features import DocStats

    docs = DocStats()
    hoods = {r: tuple((q, q, f"t{q}") for q in range(r - 2, r + 3)) for r in range(1000)}

    made: list[Any] = []

    def fill() -> Any:
        made.extend(docs.shape(r, r, hoods[r]) for r in range(1000))
        return made

    assert _tracked_growth(fill) < 1100  # the 1000 shapes returned, and little else
    assert [docs.shape(r, r, hoods[r]) for r in range(1000)] == made  # kept: the same shapes
    assert docs.shape(5, 6, hoods[5]) != made[5]  # another position: made again
