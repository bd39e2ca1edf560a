"""What a PostgreSQL store keeps of a thread between searches follows other
processes' writes: each search reads the thread's stamp when it looks the thread
up, and a read kept under another stamp is read again.

Two handles on one database stand for two processes (each has its own pool and
its own kept reads). A search is what ``Memory.search`` does first: look the
thread up, then begin the search (``map_for_search``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from arbormem.ids import content_hash
from arbormem.store import Backend, NewMessage, NodeRow, Thread
from arbormem.text import analyze

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _messages(start: int, n: int, session: str, text: str = "kite river") -> list[NewMessage]:
    return [
        NewMessage(
            id=f"m{i}",
            role="user",
            content=f"{text} {i}",
            timestamp=T0 + timedelta(minutes=i),
            session=session,
            terms=" ".join(analyze(f"{text} {i}")),
            chash=content_hash(f"{text} {i}"),
        )
        for i in range(start, start + n)
    ]


def _search(store: Backend) -> Thread:
    """Begin a search as Memory.search does: the thread's lookup, then the search."""
    thread = store.thread("ann", "bot")
    assert thread is not None
    store.map_for_search()
    return thread


def _reads(store: Backend, leaves: list[int]) -> dict[str, object]:
    """Everything a search reads that the store keeps between searches."""
    thread = _search(store)
    rowids = store.rowids_between(thread, 0, 1_000, 1_000)
    return {
        "between": rowids,
        "members": store.session_members(thread, ["s1", "s2"]),
        "leaves": store.message_leaves(rowids),
        "parents": store.parents(thread, leaves),
        "briefs": [(b.id, b.parent_id, b.archived) for b in store.node_briefs(thread, ids=leaves)],
        "docs": store.node_docs("topic", leaves),
        "df": store.statistics([thread]).doc_frequencies("turn", ["kite", "lake"]),
        "sums": {
            k: np.round(v, 4).tolist()
            for k, v in store.session_vector_sums(thread, ["s1", "s2"], "m").items()
        },
        "archived": store.archived_matches([thread], ["kite"]),
    }


def _leaf(first: int, last: int, parent: int | None = None) -> NodeRow:
    return NodeRow(None, parent, "leaf", first, first, last, T0, T0)


def test_a_write_of_another_process_is_seen_by_the_next_search(
    two: tuple[Backend, Backend],
) -> None:
    reader, writer = two
    thread = writer.thread("ann", "bot", create=True)
    assert thread is not None
    vec = {f"h{i}": np.full(4, float(i), dtype=np.float32) for i in range(8)}
    first = writer.append(
        thread,
        _messages(0, 3, "s1"),
        {r.chash: vec["h1"] for r in _messages(0, 3, "s1")},
        "m",
    )
    with writer.transaction():
        topic = NodeRow(None, None, "topic", 0, 0, 2, T0, T0)
        writer.put_nodes(thread, [topic])
        assert topic.id is not None
        leaf = _leaf(0, 2, topic.id)
        writer.put_nodes(thread, [leaf])
        assert leaf.id is not None
        writer.set_message_leaf([r.rowid for r in first], leaf.id)
    leaves = [topic.id, leaf.id]

    before = _reads(reader, leaves)
    assert _reads(reader, leaves) == before  # read again from what was kept
    assert len(before["between"]) == 3  # type: ignore[arg-type]

    # Messages added by the other process: a new session, more of the words.
    writer.append(thread, _messages(3, 2, "s2", "kite lake"))
    after = _reads(reader, leaves)
    assert len(after["between"]) == 5  # type: ignore[arg-type]
    assert len(after["members"]["s2"]) == 2  # type: ignore[index]
    assert after["df"] == {"kite": 5, "lake": 2}
    assert "s1" in after["sums"] and "s2" not in after["sums"]  # type: ignore[operator]

    # The tree changed by the other process: a new leaf for the new messages ...
    with writer.transaction():
        other = _leaf(3, 4)
        writer.put_nodes(thread, [other])
        assert other.id is not None
        writer.set_message_leaf(after["between"][3:], other.id)  # type: ignore[index]
    tree = _reads(reader, leaves)
    assert set(tree["leaves"].values()) == {leaf.id, other.id}  # type: ignore[attr-defined]
    # ... then a node's new parent and a topic's document, with no message changed.
    with writer.transaction():
        leaf.parent_id = None
        writer.put_nodes(thread, [leaf])
        writer.index_nodes("topic", {topic.id: "kite garden"})
    tree = _reads(reader, leaves)
    assert tree["parents"] == {topic.id: None, leaf.id: None}
    assert (leaf.id, None, False) in tree["briefs"]  # type: ignore[operator]
    assert tree["docs"] == {topic.id: "kite garden"}

    # Messages archived by the other process are found among the archived.
    writer.set_archived(thread, [leaf.id], True)
    gone = _reads(reader, leaves)
    assert gone["archived"] == ([f"m{i}" for i in (2, 1, 0)], 3)
    assert len(gone["between"]) == 2  # type: ignore[arg-type]
    assert len(gone["members"]["s1"]) == 0  # type: ignore[index]


def test_a_search_begun_after_a_write_of_this_process_reads_it(
    two: tuple[Backend, Backend],
) -> None:
    store, _ = two
    thread = store.thread("ann", "bot", create=True)
    assert thread is not None
    store.append(thread, _messages(0, 2, "s1"))
    seen = store.thread("ann", "bot")  # the stamp is read here ...
    assert seen is not None
    store.append(thread, _messages(2, 1, "s1"))  # ... and a commit comes between
    store.map_for_search()
    assert len(store.rowids_between(seen, 0, 100, 100)) == 3
    assert store.state(seen).next_index == 3


def test_kept_reads_start_again_under_another_stamp_and_stay_within_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from arbormem.store.postgres import kept as kept_module

    kept = kept_module.KeptReads()
    calls: list[int] = []

    def read() -> int:
        calls.append(1)
        return len(calls)

    assert kept.get(1, "a", "k", read) == 1
    assert kept.get(1, "a", "k", read) == 1  # kept
    assert kept.get(1, "b", "k", read) == 2  # another stamp: read again
    assert kept.get(1, None, "k", read) == 3  # no stamp: never kept
    assert kept.get(1, "b", "k", read) == 2
    got = kept.get_many(1, "b", "v", [1, 2], lambda missing: {1: "one"})
    assert got == {1: "one"}
    assert kept.found(1, "b", "v", [1, 2]) == {1: "one", 2: None}  # 2 kept as having none
    monkeypatch.setattr(kept_module, "MAX_TOTAL", 4)
    kept.keep(2, "x", "w", {1: 1, 2: 2})
    assert kept.found(1, "b", "v", [1, 2]) == {}  # past the bound: every thread's went
    assert kept.found(2, "x", "w", [1, 2]) == {1: 1, 2: 2}


def test_records_and_reads_leave_what_searches_keep(two: tuple[Backend, Backend]) -> None:
    # A transaction that reads a thread (its lock held) and writes only its typed
    # records (a stamp of their own) leaves the thread's stamp, so other processes'
    # searches keep what they read; a write of anything else moves it.
    reader, writer = two
    thread = writer.thread("ann", "bot", create=True)
    assert thread is not None
    writer.append(thread, _messages(0, 3, "s1"))
    mark = reader.change_mark()
    with writer.transaction():
        assert len(writer.messages(thread)) == 3
        writer.set_records_cursor(thread, 2)
    assert writer.records_cursor(thread) == 2
    assert reader.change_mark() == mark
    with writer.transaction():
        assert len(writer.messages(thread)) == 3
        writer.put_nodes(thread, [_leaf(0, 2)])
    assert reader.change_mark()[0] > mark[0]


def test_a_records_commit_of_this_process_keeps_what_its_search_read(
    two: tuple[Backend, Backend], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Record extraction commits in the background of the process that searches;
    # only a commit that changed what searches read makes them read it again.
    from arbormem.store.postgres import connection

    monkeypatch.setattr(connection, "SEARCH_READS_SECONDS", 3600.0)  # no clock here
    store, _ = two
    thread = store.thread("ann", "bot", create=True)
    assert thread is not None
    store.append(thread, _messages(0, 3, "s1"))
    seen = _lookup_then(store, lambda t: store.set_records_cursor(t, 2))
    assert store._thread_stamp(seen) is not None  # type: ignore[attr-defined]
    seen = _lookup_then(store, lambda t: store.put_nodes(t, [_leaf(0, 2)]))
    assert store._thread_stamp(seen) is None  # type: ignore[attr-defined]


def _lookup_then(store: Backend, write: Callable[[Thread], None]) -> Thread:
    """Look the thread up (which reads its stamp), commit ``write``, begin a search."""
    thread = store.thread("ann", "bot")
    assert thread is not None
    write(thread)
    store.map_for_search()
    return thread
