"""Message placements of schema 6 (``message_leaves``, one narrow row per placed
message) and the migration that moves a store of schema 5 (``messages.leaf_id``)
to it.

A store of schema 5 is made from one of schema 6 by writing the placements back
into the message rows; reopened, it is migrated, and every reader of a message's
leaf answers as before.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg

from arbormem.store import Backend, NodeRow, Thread, open_store
from arbormem.store.postgres import schema as pg_schema

from .pg_downgrades import TO_SCHEMA_6, downgrade
from .test_postgres_ranking import T0, _message

#: Schema 6's placements written back into the message rows, as schema 5 kept them
#: (after schema 7's flag is taken out).
TO_SCHEMA_5 = (
    TO_SCHEMA_6
    + """;
ALTER TABLE messages ADD COLUMN leaf_id bigint;
UPDATE messages m SET leaf_id = l.leaf_id FROM message_leaves l
    WHERE l.message_id = m.id AND l.scope_id = m.scope_id;
CREATE INDEX messages_by_leaf ON messages (scope_id, leaf_id) WHERE leaf_id IS NOT NULL;
DROP TABLE message_leaves;
DELETE FROM schema_migrations WHERE version >= 6
"""
)


def _leaf(i: int, first: int, last: int) -> NodeRow:
    return NodeRow(None, None, "leaf", i, first, last, T0, T0)


def _tree(store: Backend) -> tuple[Thread, list[int], list[int]]:
    """A thread of 40 messages in leaves of four, some moved, unplaced, archived,
    restored and forgotten; its leaf ids and message row ids."""
    rng = random.Random(3)
    thread = store.thread("u", "a", create=True)
    assert thread is not None
    rows = store.append(thread, [_message(rng, i, f"s{i // 10}") for i in range(40)])
    rowids = [r.rowid for r in rows]
    leaves = [_leaf(i, 4 * i, 4 * i + 3) for i in range(10)]
    store.put_nodes(thread, leaves)
    ids = [n.id for n in leaves if n.id is not None]
    store.set_message_leaves({ids[i]: rowids[4 * i : 4 * i + 4] for i in range(10)})
    store.set_message_leaves({ids[1]: rowids[8:9]})  # moved to the next leaf
    store.set_message_leaf(rowids[38:40], None)  # no longer placed
    store.set_message_leaf(rowids[36:38], ids[8])  # one leaf for two more
    store.set_archived(thread, ids[2:4], True)
    store.set_archived(thread, ids[3:4], False)
    store.set_archived(thread, ids[5:6], True)
    store.set_message_leaf(rowids[39:40], ids[5])  # a live message in an archived leaf
    store.delete_messages([rows[21].message.id], thread)  # part of an archived leaf
    store.delete_nodes(thread, ids[6:7])
    return thread, ids, rowids


def _answers(store: Backend, thread: Thread, ids: list[int], rowids: list[int]) -> dict[str, Any]:
    """Every reader of a message's leaf."""
    return {
        "leaves": store.message_leaves(rowids),
        "leaf messages": [store.leaf_messages(thread, [i]) for i in ids],
        "all": store.leaf_messages(thread, ids),
        "archived": {w: store.archived_leaves(thread, which=w) for w in ("whole", "partly", "any")},
        "archived rows": store.archived_rowids(thread),
        "check": sorted(store.check_tree(thread, 8), key=str),  # in no set order
    }


def _placements(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT scope_id, thread_id, message_id, leaf_id FROM arbormem.message_leaves"
            " ORDER BY message_id"
        ).fetchall()


def test_a_store_of_schema_5_is_migrated_and_answers_the_same(pg_url: str) -> None:
    store = open_store(pg_url)
    thread, ids, rowids = _tree(store)
    before = _answers(store, thread, ids, rowids)
    placements = _placements(pg_url)
    store.close()
    # What the history above leaves: moved, unplaced, archived and deleted messages.
    assert len(before["leaves"]) == 34 and before["leaves"][rowids[8]] == ids[1]
    assert before["archived"]["whole"] and before["archived"]["partly"]
    assert before["check"]  # the message placed out of its leaf's range, the unplaced one
    assert len(placements) == 34

    assert downgrade(pg_url, TO_SCHEMA_5) == 5

    store = open_store(pg_url)  # migrated on opening
    try:
        with psycopg.connect(pg_url) as conn:
            conn.execute("SET search_path TO arbormem")
            assert pg_schema.current_version(conn) == pg_schema.LATEST
            gone = conn.execute(
                "SELECT count(*) FROM information_schema.columns WHERE table_schema"
                " = 'arbormem' AND table_name = 'messages' AND column_name = 'leaf_id'"
            ).fetchone()
            assert gone == (0,)
        assert _placements(pg_url) == placements
        again = store.thread("u", "a")
        assert again is not None
        assert _answers(store, again, ids, rowids) == before
        # And it goes on: a move after the migration is read back.
        store.set_message_leaves({ids[0]: rowids[8:9]})
        assert store.message_leaves([rowids[8]]) == {rowids[8]: ids[0]}
    finally:
        store.close()


def test_placing_messages_leaves_their_rows_where_they_are(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        thread = store.thread("u", "a", create=True)
        assert thread is not None
        rng = random.Random(4)
        rows = store.append(thread, [_message(rng, i, "s") for i in range(8)])
        rowids = [r.rowid for r in rows]
        with psycopg.connect(pg_url) as conn:
            before = conn.execute("SELECT ctid, id FROM arbormem.messages ORDER BY id").fetchall()
        leaves = [_leaf(0, 0, 3), _leaf(1, 4, 7)]
        store.put_nodes(thread, leaves)
        a, b = (n.id for n in leaves)
        assert a is not None and b is not None
        store.set_message_leaves({a: rowids[:4], b: rowids[4:]})
        store.set_message_leaves({a: rowids[4:5]})
        store.set_message_leaf(rowids[7:], None)
        with psycopg.connect(pg_url) as conn:
            # No message row was rewritten: each is where it was.
            assert (
                conn.execute("SELECT ctid, id FROM arbormem.messages ORDER BY id").fetchall()
                == before
            )
        assert store.message_leaves(rowids) == {
            **{r: a for r in rowids[:5]},
            **{r: b for r in rowids[5:7]},
        }
        assert [r.rowid for r in store.leaf_messages(thread, [b])] == rowids[5:7]
        # Message 4 is outside its new leaf's range; message 7 in none.
        assert store.check_tree(thread, 8) == [
            (a, "a message points at it as its leaf but it is no leaf holding that message"),
            (None, "message 7 is not in the tree"),
        ]
        # Deleting a thread takes its placements with it.
        store.delete_thread(thread)
        assert _placements(pg_url) == []
    finally:
        store.close()
