"""Tree upkeep's writes, on every back-end.

* Indexing nodes inside a write transaction: what a transaction indexed is what
  its own reads, the store's statistics after it and its deletes see, and a
  rolled-back one leaves nothing for the next to write, though both back-ends
  keep the last document of each node until the commit (PostgreSQL: tree upkeep
  indexes a growing topic again at every message; SQLite: FTS5 made a segment of
  each document written out of order).
* Placing the messages of several leaves at once (``set_message_leaves``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem.ids import content_hash
from arbormem.store import Backend, NewMessage, NodeRow, Thread, TreeState
from arbormem.store.sqlite.tree import EPOCH_BITS

from .backends import BACKENDS, backend

__all__ = ["backend"]  # the fixture: every back-end

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _topics(store: Backend, n: int) -> tuple[Thread, list[int]]:
    thread = store.thread("ann", "bot", create=True)
    nodes = [NodeRow(None, None, "topic", i, i, i, T0, T0) for i in range(n)]
    store.put_nodes(thread, nodes)
    ids = [node.id for node in nodes]
    assert all(i is not None for i in ids)
    return thread, [int(i) for i in ids if i is not None]


def test_the_last_document_of_a_node_counts_and_its_reads_see_it(backend: Backend) -> None:
    thread, (a, b) = _topics(backend, 2)
    with backend.transaction():
        backend.index_nodes("segment", {a: "kite river", b: "kite"})
        backend.index_nodes("segment", {a: "kite lake lake"})
        # Read inside the transaction that wrote them.
        assert [n for n, _ in backend.node_search([thread], "segment", ["lake"], 5)] == [a]
        assert backend.node_search([thread], "segment", ["river"], 5) == []
        assert backend.node_docs("segment", [a, b]) == {a: "kite lake lake", b: "kite"}
    assert backend.node_docs("segment", [a]) == {a: "kite lake lake"}
    assert backend.node_search([thread], "segment", ["river"], 5) == []
    assert {n for n, _ in backend.node_search([thread], "segment", ["kite"], 5)} == {a, b}


def test_nodes_deleted_after_being_indexed_leave_no_postings(backend: Backend) -> None:
    thread, (a, b, c) = _topics(backend, 3)
    backend.index_nodes("topic", {a: "kite garden", b: "kite harbour", c: "kite shop"})
    backend.index_nodes("segment", {a: "garden", b: "harbour"})
    with backend.transaction():
        backend.index_nodes("topic", {a: "kite garden lake", b: "harbour lake"})
        backend.index_nodes("segment", {a: "garden lake"})
        assert backend.delete_nodes(thread, [a, b]) == 2
    for key in ("topic", "segment"):
        assert backend.node_search([thread], key, ["garden", "harbour", "lake"], 5) == []
    assert [n for n, _ in backend.node_search([thread], "topic", ["kite"], 5)] == [c]


def test_a_rolled_back_transaction_indexes_nothing(backend: Backend) -> None:
    thread, (a,) = _topics(backend, 1)
    backend.index_nodes("topic", {a: "kite"})
    try:
        with backend.transaction():
            backend.index_nodes("topic", {a: "lake"})
            raise RuntimeError("stop")
    except RuntimeError:
        pass
    assert backend.node_docs("topic", [a]) == {a: "kite"}
    assert [n for n, _ in backend.node_search([thread], "topic", ["kite"], 5)] == [a]
    assert backend.node_search([thread], "topic", ["lake"], 5) == []


def test_a_transaction_reads_the_documents_it_indexed_before_any_search(
    backend: Backend,
) -> None:
    thread, (a, b) = _topics(backend, 2)
    backend.index_nodes("topic", {a: "kite", b: "lake"})
    with backend.transaction():
        backend.index_nodes("topic", {a: "river", b: ""})  # b's document taken out
        assert backend.node_docs("topic", [a, b]) == {a: "river"}
    assert backend.node_docs("topic", [a, b]) == {a: "river"}
    assert [n for n, _ in backend.node_search([thread], "topic", ["river"], 5)] == [a]
    assert backend.node_search([thread], "topic", ["kite", "lake"], 5) == []


def test_what_a_rolled_back_transaction_indexed_is_not_written_by_the_next(
    backend: Backend,
) -> None:
    thread, (a, b) = _topics(backend, 2)
    try:
        with backend.transaction():
            backend.index_nodes("topic", {a: "lake"})
            raise RuntimeError("stop")
    except RuntimeError:
        pass
    backend.index_nodes("topic", {b: "kite"})
    assert backend.node_docs("topic", [a, b]) == {b: "kite"}
    assert backend.node_search([thread], "topic", ["lake"], 5) == []


def test_the_messages_of_several_leaves_are_placed_at_once(backend: Backend) -> None:
    thread, (a, b, c) = _topics(backend, 3)
    texts = [f"kite {i}" for i in range(5)]
    rows = backend.append(
        thread,
        [
            NewMessage(
                id=f"m{i}",
                role="user",
                content=t,
                timestamp=T0 + timedelta(minutes=i),
                session="s",
                terms=t,
                chash=content_hash(t),
            )
            for i, t in enumerate(texts)
        ],
    )
    ids = [r.rowid for r in rows]
    backend.set_message_leaves({a: ids[:2], b: ids[2:3]})
    assert backend.message_leaves(ids) == {ids[0]: a, ids[1]: a, ids[2]: b}
    with backend.transaction():
        backend.set_message_leaves({c: [ids[1], ids[4]], b: []})
        assert backend.message_leaves(ids) == {ids[0]: a, ids[1]: c, ids[2]: b, ids[4]: c}
    backend.set_message_leaves({})
    assert backend.message_leaves(ids) == {ids[0]: a, ids[1]: c, ids[2]: b, ids[4]: c}


def _shape(version: int) -> tuple[int, int]:
    """A tree version as (structure epoch, writes since it moved)."""
    return version >> EPOCH_BITS, version & ((1 << EPOCH_BITS) - 1)


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_placing_leaves_at_once_moves_the_version_as_placing_them_in_turn(
    kind: str, tmp_path: Path
) -> None:
    # SQLite's tree versions carry a structure epoch (see EPOCH_BITS), which the
    # searches' caches of message leaves are kept under.
    backend = BACKENDS[kind](tmp_path)
    steps: dict[str, list[tuple[int, int]]] = {}
    for user in ("in-turn", "at-once"):
        thread = backend.thread(user, "bot", create=True)
        leaves = [NodeRow(None, None, "leaf", i, i, i, T0, T0) for i in range(3)]
        backend.put_nodes(thread, leaves)
        a, b, c = (int(n.id) for n in leaves if n.id is not None)
        backend.set_tree_state(thread, TreeState(0, a, a, 3))
        rows = backend.append(
            thread,
            [
                NewMessage(
                    id=f"{user}-{i}",
                    role="user",
                    content=f"kite {i}",
                    timestamp=T0 + timedelta(minutes=i),
                    session="s",
                    terms=f"kite {i}",
                    chash=content_hash(f"kite {i}"),
                )
                for i in range(5)
            ],
        )
        r = [row.rowid for row in rows]
        before = _shape(backend.tree_state(thread).version)
        seen = []
        for placing in (
            {a: r[:2], b: r[2:3], c: r[3:5]},  # new messages placed: growth
            {a: [r[2]], b: [r[0]], c: []},  # two moved: a new epoch twice
            {c: [r[2], r[4]], a: [r[1]]},  # one moved, one where it was, one staying
        ):
            with backend.transaction():
                if user == "in-turn":
                    for leaf, rowids in placing.items():
                        backend.set_message_leaf(rowids, leaf)
                else:
                    backend.set_message_leaves(placing)
            epoch, count = _shape(backend.tree_state(thread).version)
            # (new epochs, writes counted since the last one or since the step began)
            seen.append((epoch - before[0], count - before[1] if epoch == before[0] else count))
            before = (epoch, count)
        assert backend.message_leaves(r) == {r[0]: b, r[1]: a, r[2]: c, r[3]: c, r[4]: c}
        steps[user] = seen
    assert steps["at-once"] == steps["in-turn"]
    # A write per leaf placing new messages; a new epoch per leaf that moves one (the
    # leaf placed after it counts a write in that epoch).
    assert steps["at-once"] == [(0, 3), (2, 0), (1, 1)]
    backend.close()
