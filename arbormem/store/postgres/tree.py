"""Topic trees in PostgreSQL: nodes, the cursor, checks, archiving and the log."""

from __future__ import annotations

import json
import logging
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from arbormem.store.postgres.adapt import bool_array, int_array, text_array, time_array
from arbormem.store.postgres.common import ROW_SELECT, row_of, scope_of, utc
from arbormem.store.postgres.kept import STORE
from arbormem.store.postgres.lexical import PostgresLexical
from arbormem.store.sqlite.windows import WINDOW_RADIUS
from arbormem.store.types import (
    NodeBrief,
    NodeRow,
    NodeShapes,
    Row,
    Thread,
    TreeLogEntry,
    TreeState,
)
from arbormem.timeutil import utcnow

log = logging.getLogger("arbormem.store.postgres")

_NODE_COLUMNS = (
    "id, parent_id, kind, seq, level, name, summary, keyphrases, first_index, last_index,"
    " first_at, last_at, message_count, child_count, frozen, archived, origin, chash"
)
#: Threads of at most this many positions answer spans of row ids from their whole
#: live order, read once while they are unchanged (see PostgresTree.rowids_between).
WHOLE_ORDER = 4096

_PUT_COLUMNS = (
    "id, scope_id, thread_id, parent_id, kind, seq, level, name, summary, keyphrases,"
    " first_index, last_index, first_at, last_at, message_count, child_count, frozen,"
    " archived, origin, chash"
)
_NODE_ARRAYS = (
    "%s::int8[], %s::int8[], %s::int8[], %s::int8[], %s::text[], %s::int8[], %s::int4[],"
    " %s::text[], %s::text[], %s::text[], %s::int8[], %s::int8[], %s::timestamptz[],"
    " %s::timestamptz[], %s::int8[], %s::int8[], %s::bool[], %s::bool[], %s::text[], %s::text[]"
)
#: The nodes a transaction made, in one statement (see PostgresTree._send_held).
_INSERT_NODES = f"INSERT INTO tree_nodes ({_PUT_COLUMNS}) SELECT * FROM unnest({_NODE_ARRAYS})"
#: A tree's version counts its writes in its low 32 bits; its high bits are the
#: structure epoch, as on SQLite (see arbormem/store/sqlite/tree.py): moved (the
#: count restarted) by every write that changes what a node already had beside its
#: growth (its parent, kind or archived flag, anything of a frozen node, a node's
#: deletion) or a placed message's leaf; growing the tree keeps it, and searches keep
#: what they read of its settled parts across the adds of a live thread (see
#: arbormem/tree/recall.py). Here the statement that writes such a change moves the
#: epoch of its trees itself, in the same round trip.
EPOCH_BITS = 32
#: The version of a tree in its next structure epoch, the count restarted.
_NEXT_EPOCH = f"((version >> {EPOCH_BITS}) + 1) << {EPOCH_BITS}"
#: The nodes it changed, in one statement, moving the structure epoch of the trees
#: where one changed beyond its growth (compared with the rows as they were before
#: the statement: every part of it reads the same snapshot). Each row is found by
#: its primary key; its thread is checked with IS NOT DISTINCT FROM, which no index
#: can serve: with ``thread_id =`` a plan made from statistics older than the
#: import's growth (or a generic one) looked every row up by (scope, thread) in
#: ``tree_by_kind``, reading all of the thread's nodes for each (0.8 s for 661 rows
#: at 6,000 turns, and growing with the thread).
_UPDATE_NODES = (
    f"WITH u AS (SELECT * FROM unnest({_NODE_ARRAYS}) AS u(id, s, t, p, k, q, l, n, m, kp,"
    " fi, li, fa, la, mc, cc, fr, ar, o, h)),"
    " reshaped AS (SELECT DISTINCT n.scope_id, n.thread_id FROM tree_nodes n JOIN u"
    " ON n.id = u.id AND n.scope_id = u.s WHERE n.thread_id IS NOT DISTINCT FROM u.t"
    " AND n.id = ANY(%s::int8[])"
    " AND (n.frozen OR n.parent_id IS DISTINCT FROM u.p OR n.kind <> u.k"
    " OR n.archived <> u.ar)),"
    " epoch AS (UPDATE tree_state x SET version = "
    + _NEXT_EPOCH.replace("version", "x.version")
    + " FROM reshaped r WHERE x.scope_id = r.scope_id AND x.thread_id = r.thread_id)"
    " UPDATE tree_nodes n SET parent_id = u.p, kind = u.k, seq = u.q, level = u.l,"
    " name = u.n, summary = u.m, keyphrases = u.kp, first_index = u.fi, last_index = u.li,"
    " first_at = u.fa, last_at = u.la, message_count = u.mc, child_count = u.cc,"
    " frozen = u.fr, archived = u.ar, origin = u.o, chash = u.h"
    " FROM u WHERE n.id = ANY(%s::int8[]) AND n.id = u.id AND n.scope_id = u.s"
    " AND n.thread_id IS NOT DISTINCT FROM u.t"
)
#: The leaves of the messages it placed, moving their trees' versions (see
#: _leaves_moved), in one statement; it returns the threads it changed. Placing a
#: message counts a write; moving a placed one to another leaf moves the epoch.
#: A placement is a row of ``message_leaves`` (the message row is not rewritten):
#: written once, and changed only when the message moves to another leaf.
_PLACE_MESSAGES = (
    "WITH u AS (SELECT * FROM unnest(%s::int8[], %s::int8[]) AS u(id, leaf)),"
    " was AS (SELECT m.scope_id, m.thread_id, u.id, u.leaf, l.leaf_id IS NOT NULL"
    " AND l.leaf_id IS DISTINCT FROM u.leaf AS moved FROM messages m JOIN u ON m.id = u.id"
    " LEFT JOIN message_leaves l ON l.message_id = m.id AND l.scope_id = m.scope_id"
    " WHERE m.id = ANY(%s::int8[])),"
    " placed AS (INSERT INTO message_leaves (scope_id, thread_id, message_id, leaf_id)"
    " SELECT scope_id, thread_id, id, leaf FROM was ORDER BY id"
    " ON CONFLICT (message_id, scope_id) DO UPDATE SET leaf_id = excluded.leaf_id"
    " WHERE message_leaves.leaf_id IS DISTINCT FROM excluded.leaf_id),"
    " trees AS (SELECT scope_id, thread_id, bool_or(moved) AS moved FROM was"
    " GROUP BY scope_id, thread_id),"
    " bumped AS (UPDATE tree_state x SET version = CASE WHEN t.moved THEN "
    + _NEXT_EPOCH.replace("version", "x.version")
    + " ELSE x.version + 1 END FROM trees t WHERE x.scope_id = t.scope_id"
    " AND x.thread_id = t.thread_id)"
    " SELECT thread_id FROM trees"
)

#: The messages of a thread's leaves ``%(l)s`` (``m`` joined with its placement ``l``).
_IN_LEAVES = (
    "l.scope_id = %(s)s AND l.thread_id = %(t)s AND l.leaf_id = ANY(%(l)s) AND m.thread_id = %(t)s"
)

#: Node ids a process takes from the sequence at a time (see PostgresTree._node_ids).
NODE_ID_BLOCK = 128
_BRIEF_COLUMNS = "id, parent_id, kind, first_index, last_index, frozen, archived, chash"


#: How each column of a node row (see _PUT_COLUMNS) is written as an array literal.
_NODE_ARRAY_OF: tuple[Callable[[Any], str], ...] = (
    *(int_array,) * 4,
    text_array,
    int_array,
    int_array,
    *(text_array,) * 3,
    int_array,
    int_array,
    time_array,
    time_array,
    int_array,
    int_array,
    bool_array,
    bool_array,
    text_array,
    text_array,
)


def _columns(rows: Iterable[tuple[Any, ...]]) -> list[str]:
    """Node rows as one array literal per column, for ``unnest``."""
    return [write(c) for write, c in zip(_NODE_ARRAY_OF, zip(*rows), strict=True)]


def _node(r: Sequence[Any]) -> NodeRow:
    return NodeRow(
        id=int(r[0]),
        parent_id=None if r[1] is None else int(r[1]),
        kind=r[2],
        seq=int(r[3]),
        level=int(r[4]),
        name=r[5],
        summary=r[6],
        keyphrases=json.loads(r[7]),
        first_index=int(r[8]),
        last_index=int(r[9]),
        first_at=utc(r[10]),
        last_at=utc(r[11]),
        message_count=int(r[12]),
        child_count=int(r[13]),
        frozen=bool(r[14]),
        archived=bool(r[15]),
        origin=r[16],
        chash=r[17],
    )


def _brief(r: Sequence[Any]) -> NodeBrief:
    return NodeBrief(
        int(r[0]),
        None if r[1] is None else int(r[1]),
        r[2],
        int(r[3]),
        int(r[4]),
        bool(r[5]),
        bool(r[6]),
        r[7],
    )


class PostgresTree(PostgresLexical):
    """Tree nodes with their postings, the cursor, the checks and the log."""

    #: Tree versions carry a structure epoch (see EPOCH_BITS).
    structure_epochs = True

    def tree_state(self, thread: Thread) -> TreeState:
        def read() -> tuple[int, int | None, int | None, int] | None:
            with self._reading(thread) as conn:
                r = conn.execute(
                    "SELECT version, active_id, leaf_id, next_seq FROM tree_state"
                    " WHERE scope_id = %(s)s AND thread_id = %(t)s",
                    self._keys(thread),
                ).fetchone()
            return (int(r[0]), r[1], r[2], int(r[3])) if r else None

        # A fresh object each time: callers change the cursor they are given.
        found = self._cached(("tree_state", thread.id), read)
        return TreeState(*found) if found else TreeState()

    def tree_checked(self, thread: Thread) -> tuple[int, int | None]:
        with self._reading(thread) as conn:
            r = conn.execute(
                "SELECT version, checked_version FROM tree_state"
                " WHERE scope_id = %(s)s AND thread_id = %(t)s",
                self._keys(thread),
            ).fetchone()
        return (int(r[0]), None if r[1] is None else int(r[1])) if r else (0, None)

    def mark_tree_checked(self, thread: Thread, version: int) -> bool:
        with self._writing(thread) as conn:
            done = conn.execute(
                "UPDATE tree_state SET checked_version = %(v)s WHERE scope_id = %(s)s"
                " AND thread_id = %(t)s AND version = %(v)s",
                {**self._keys(thread), "v": version},
            ).rowcount
        return bool(done)

    def set_tree_state(self, thread: Thread, state: TreeState) -> TreeState:
        # One statement (with the writes held back before it, in one round trip): a
        # new tree's versions start from its thread's generation, so caches keyed by
        # thread and tree version never take it for an older tree.
        with self.transaction():
            rows = self._read_rows(
                thread,
                "INSERT INTO tree_state (scope_id, thread_id, version, active_id, leaf_id,"
                " next_seq, updated_at) VALUES (%(s)s, %(t)s, coalesce((SELECT generation"
                " FROM threads WHERE scope_id = %(s)s AND id = %(t)s), 0) + 1, %(a)s, %(l)s,"
                " %(n)s, %(u)s) ON CONFLICT (scope_id, thread_id) DO UPDATE SET"
                " version = coalesce(tree_state.version, 0) + 1,"
                " active_id = excluded.active_id, leaf_id = excluded.leaf_id,"
                " next_seq = excluded.next_seq, updated_at = excluded.updated_at,"
                " checked_version = NULL RETURNING version",
                {
                    **self._keys(thread),
                    "a": state.active_id,
                    "l": state.leaf_id,
                    "n": state.next_seq,
                    "u": utcnow(),
                },
                write=True,
            )
        return TreeState(int(rows[0][0]), state.active_id, state.leaf_id, state.next_seq)

    def tree_nodes(
        self,
        thread: Thread,
        *,
        ids: Sequence[int] | None = None,
        parent: int | object | None = ...,
        kinds: Sequence[str] | None = None,
        frozen: bool | None = None,
    ) -> list[NodeRow]:
        sql = f"SELECT {_NODE_COLUMNS} FROM tree_nodes WHERE scope_id = %(s)s AND thread_id = %(t)s"
        args: dict[str, Any] = self._keys(thread)
        if parent is not ...:
            if parent is None:
                sql += " AND parent_id IS NULL"
            else:
                sql += " AND parent_id = %(p)s"
                args["p"] = parent
        if kinds:
            sql += " AND kind = ANY(%(k)s)"
            args["k"] = list(kinds)
        if frozen is not None:
            sql += " AND frozen = %(f)s"
            args["f"] = bool(frozen)
        if ids is not None:
            sql += " AND id = ANY(%(ids)s)"
            args["ids"] = list(dict.fromkeys(int(i) for i in ids))
        return [_node(r) for r in self._read_rows(thread, sql + " ORDER BY seq, id", args)]

    def node_briefs(
        self,
        thread: Thread,
        kinds: Sequence[str] | None = None,
        ids: Sequence[int] | None = None,
    ) -> list[NodeBrief]:
        if kinds is None and ids is not None:
            # Kept between searches while the thread is unchanged (see .kept).
            wanted = list(dict.fromkeys(int(i) for i in ids))
            got = self._kept.get_many(
                thread.id,
                self._thread_stamp(thread),
                "brief",
                wanted,
                lambda missing: {b.id: b for b in self._node_briefs(thread, None, missing)},
            )
            return [got[i] for i in wanted if i in got]
        return self._node_briefs(thread, kinds, ids)

    def _node_briefs(
        self,
        thread: Thread,
        kinds: Sequence[str] | None = None,
        ids: Sequence[int] | None = None,
    ) -> list[NodeBrief]:
        sql = (
            f"SELECT {_BRIEF_COLUMNS} FROM tree_nodes WHERE scope_id = %(s)s AND thread_id = %(t)s"
        )
        args: dict[str, Any] = self._keys(thread)
        if kinds is not None:
            sql += " AND kind = ANY(%(k)s)"
            args["k"] = list(kinds)
        if ids is not None:
            sql += " AND id = ANY(%(ids)s)"
            args["ids"] = list(dict.fromkeys(int(i) for i in ids))
        with self._reading(thread) as conn:
            return [_brief(r) for r in conn.execute(sql, args).fetchall()]

    def node_shapes(self, thread: Thread, stop: threading.Event | None = None) -> NodeShapes | None:
        cols = [array("q") for _ in range(7)]
        kinds: dict[str, int] = {}
        with self._reading(thread) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT id, coalesce(parent_id, -1), kind, first_index, last_index,"
                " frozen::int, archived::int FROM tree_nodes"
                " WHERE scope_id = %(s)s AND thread_id = %(t)s",
                self._keys(thread),
            )
            while rows := cur.fetchmany(4096):
                if stop is not None and stop.is_set():
                    return None
                columns = list(zip(*rows))
                columns[2] = tuple(kinds.setdefault(k, len(kinds)) for k in columns[2])
                for col, values in zip(cols, columns):
                    col.extend(values)
        ids, parent, kind, first, last, frozen, archived = (
            np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64) for c in cols
        )
        return NodeShapes(ids, parent, kind, list(kinds), first, last, frozen, archived)

    def put_nodes(self, thread: Thread, nodes: Sequence[NodeRow]) -> None:
        # Tree upkeep writes a node or two at a time, dozens of times per import
        # batch, and each write was a round trip (and the same new leaf was often
        # inserted, then updated a moment later). The rows are held in the
        # transaction instead, the last version of each node winning, and sent
        # before the transaction's next statement, which may read them (see
        # _Transaction.conn): all of them in one pipeline, one statement per kind.
        if not nodes:
            return
        with self.transaction():
            tx = self._tx()
            assert tx is not None
            self._lock_threads(tx, [thread])
            k = self._keys(thread)
            new = [n for n in nodes if n.id is None]
            for n, i in zip(new, self._node_ids(tx.raw, len(new)) if new else []):
                n.id = i
            made = {n.id for n in new}
            for n in nodes:
                assert n.id is not None
                row = (n.id, k["s"], thread.id, *self._values(n))
                if n.id in made or n.id in tx.new_nodes:
                    tx.new_nodes[n.id] = row
                else:
                    tx.changed_nodes[n.id] = row

    def _send_held(self, tx: Any) -> None:
        with tx.raw.pipeline():
            done = self._queue_held(tx)
        done()

    def _queue_held(self, tx: Any) -> Callable[[], None]:
        new, changed, placed = tx.new_nodes, tx.changed_nodes, tx.placed
        tx.new_nodes, tx.changed_nodes, tx.placed = {}, {}, {}
        conn = tx.raw
        if new:
            conn.execute(_INSERT_NODES, _columns(new.values()))
        if changed:
            columns = _columns(changed.values())
            # The ids that ``= ANY`` looks up in sorted order: the lookup is made
            # again for every row joined, and sorts its array each time (already
            # sorted, a single pass).
            ids = int_array(sorted(changed))
            conn.execute(_UPDATE_NODES, [*columns, ids, ids])
        if not placed:
            return lambda: None
        moved = conn.execute(
            _PLACE_MESSAGES,
            (int_array(placed), int_array(placed.values()), int_array(sorted(placed))),
        )

        def done() -> None:
            # The threads whose messages moved: their change counters move at the commit.
            self._wrote(int(r[0]) for r in moved.fetchall())
            tx.leaves_seen.update(placed)

        return done

    def _node_ids(self, conn: Any, n: int) -> list[int]:
        """``n`` new node ids, from a block this process took from the sequence: a
        tree's upkeep makes a node or two at a time, and each ``nextval`` was a round
        trip. Ids stay unique across processes and grow within one; a block taken by
        a write that rolls back is used by the next (the sequence has gaps anyway)."""
        with self._lock:
            pool: list[int] = getattr(self, "_spare_node_ids", [])
            if len(pool) < n:
                pool = pool + [
                    int(r[0])
                    for r in conn.execute(
                        "SELECT nextval('node_ids') FROM generate_series(1, %s)",
                        (max(n - len(pool), NODE_ID_BLOCK),),
                    ).fetchall()
                ]
            self._spare_node_ids = pool[n:]
            return pool[:n]

    @staticmethod
    def _values(n: NodeRow) -> tuple[Any, ...]:
        return (
            n.parent_id,
            n.kind,
            n.seq,
            n.level,
            n.name,
            n.summary,
            json.dumps(n.keyphrases, ensure_ascii=False),
            n.first_index,
            n.last_index,
            n.first_at,
            n.last_at,
            n.message_count,
            n.child_count,
            bool(n.frozen),
            bool(n.archived),
            n.origin,
            n.chash,
        )

    def delete_nodes(self, thread: Thread, ids: Sequence[int] | None = None) -> int:
        with self._writing(thread) as conn:
            k = self._keys(thread)
            if ids is None:
                rows = conn.execute(
                    "SELECT id FROM tree_nodes WHERE scope_id = %(s)s AND thread_id = %(t)s", k
                ).fetchall()
                ids = [int(r[0]) for r in rows]
            wanted = sorted({int(i) for i in ids})
            if not wanted:
                return 0
            # Their documents leave the topic and segment keys (statistics included).
            self.index_nodes("topic", {i: "" for i in wanted})
            self.index_nodes("segment", {i: "" for i in wanted})
            # Written before the rows go: the postings to delete are read from them.
            self._settle_node_docs()
            conn.execute(
                "DELETE FROM message_leaves WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND leaf_id = ANY(%(i)s)",
                {**k, "i": wanted},
            )
            self._new_epoch(conn, thread)
            return int(
                conn.execute(
                    "DELETE FROM tree_nodes WHERE scope_id = %(s)s AND thread_id = %(t)s"
                    " AND id = ANY(%(i)s)",
                    {**k, "i": wanted},
                ).rowcount
            )

    def set_message_leaf(self, rowids: Sequence[int], leaf_id: int | None) -> None:
        if not rowids:
            return
        with self._writing() as conn:
            # With whether each was placed elsewhere before (read from the statement's
            # snapshot, before its write).
            args = {"l": leaf_id, "i": [int(r) for r in rowids]}
            rows = conn.execute(
                "SELECT m.thread_id, m.scope_id, l.leaf_id IS NOT NULL"
                " AND l.leaf_id IS DISTINCT FROM %(l)s FROM messages m LEFT JOIN message_leaves l"
                " ON l.message_id = m.id AND l.scope_id = m.scope_id WHERE m.id = ANY(%(i)s)",
                args,
            ).fetchall()
            if leaf_id is None:
                conn.execute("DELETE FROM message_leaves WHERE message_id = ANY(%(i)s)", args)
            else:
                conn.execute(
                    "INSERT INTO message_leaves (scope_id, thread_id, message_id, leaf_id)"
                    " SELECT scope_id, thread_id, id, %(l)s FROM messages WHERE id = ANY(%(i)s)"
                    " ORDER BY id ON CONFLICT (message_id, scope_id) DO UPDATE"
                    " SET leaf_id = excluded.leaf_id",
                    args,
                )
            self._leaves_moved(conn, rows)

    def set_message_leaves(self, leaves: Mapping[int, Sequence[int]]) -> None:
        # Every leaf's messages in one statement: tree upkeep places the messages of
        # several exchanges at once, and a statement per leaf was a round trip each.
        # Held back with the nodes (see put_nodes), which the leaves may be: sent
        # with them before the transaction's next statement.
        placed = {int(r): int(leaf) for leaf, rowids in leaves.items() for r in rowids}
        if not placed:
            return
        with self.transaction():
            tx = self._tx()
            assert tx is not None
            tx.placed.update(placed)

    def _leaves_moved(self, conn: Any, rows: Sequence[Any]) -> None:
        """After messages (``rows`` of thread id, scope id, whether it had another
        leaf) changed leaves: move their trees' versions, under which searches keep
        which leaf holds each message (see TreeRecall.turn_signals), to the next
        structure epoch where a placed message moved, and their threads' change
        counters, which move at the commit (see connection._commit_sql)."""
        moved: dict[tuple[int, int], bool] = {}
        for t, s, elsewhere in rows:
            key = (int(s), int(t))
            moved[key] = moved.get(key, False) or bool(elsewhere)
        trees = sorted(moved)
        conn.execute(
            f"UPDATE tree_state x SET version = CASE WHEN u.m THEN"
            f" {_NEXT_EPOCH.replace('version', 'x.version')} ELSE x.version + 1 END"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::bool[]) AS u(s, t, m)"
            " WHERE x.scope_id = u.s AND x.thread_id = u.t",
            ([s for s, _ in trees], [t for _, t in trees], [moved[k] for k in trees]),
        )
        self._wrote(r[0] for r in rows)

    @staticmethod
    def _new_epoch(conn: Any, thread: Thread) -> None:
        """Move the structure epoch of the thread's tree (see EPOCH_BITS)."""
        conn.execute(
            f"UPDATE tree_state SET version = {_NEXT_EPOCH} WHERE scope_id = %s AND thread_id = %s",
            (scope_of(thread), thread.id),
        )

    def set_archived(self, thread: Thread, leaf_ids: Sequence[int], archived: bool) -> int:
        with self._writing(thread) as conn:
            k = {**self._keys(thread), "l": [int(i) for i in leaf_ids], "a": bool(archived)}
            sessions = sorted(
                int(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT m.session_id FROM messages m JOIN message_leaves l"
                    " ON l.message_id = m.id AND l.scope_id = m.scope_id"
                    f" WHERE {_IN_LEAVES}",
                    k,
                ).fetchall()
            )
            before = {sid: self._live_order(conn, thread, sid) for sid in sessions}
            changing = [
                int(r[0])
                for r in conn.execute(
                    "SELECT m.id FROM messages m JOIN message_leaves l"
                    " ON l.message_id = m.id AND l.scope_id = m.scope_id"
                    f" WHERE {_IN_LEAVES} AND m.archived <> %(a)s",
                    k,
                ).fetchall()
            ]
            if archived and changing:
                # Each archived message keeps its window as it was: it stays in the
                # window key's statistics, as SQLite's full-text table keeps it.
                self._keep_stale_windows(conn, thread, before, set(changing))
            conn.execute(
                "DELETE FROM session_vectors WHERE scope_id = %(s)s AND session_id = ANY(%(x)s)",
                {**k, "x": sessions},
            )
            conn.execute(
                "UPDATE tree_nodes SET archived = %(a)s WHERE scope_id = %(s)s"
                " AND thread_id = %(t)s AND id = ANY(%(l)s)",
                k,
            )
            changed = conn.execute(
                "UPDATE messages m SET archived = %(a)s FROM message_leaves l"
                f" WHERE l.message_id = m.id AND l.scope_id = m.scope_id AND {_IN_LEAVES}",
                k,
            ).rowcount
            self._rebuild_windows(conn, thread, before)
            if changing:
                self._vectors_follow_archive(conn, thread, changing, archived)
            if not archived and changing:
                conn.execute(
                    "UPDATE messages SET stale_window = NULL WHERE scope_id = %(s)s"
                    " AND id = ANY(%(c)s)",
                    {**k, "c": changing},
                )
            conn.execute(
                "UPDATE threads SET generation = generation + 1, changes = changes + 1"
                " WHERE scope_id = %(s)s AND id = %(t)s",
                k,
            )
            self._new_epoch(conn, thread)
            self._on_commit(lambda: self._rows_changed([thread], forgotten=False))
            return int(changed)

    @staticmethod
    def _keep_stale_windows(
        conn: Any, thread: Thread, before: Mapping[int, list[tuple[Any, ...]]], ids: set[int]
    ) -> None:
        stale: dict[int, str] = {}
        for rows in before.values():
            live = [r for r in rows if not r[3]]
            for i, r in enumerate(live):
                if r[0] in ids and r[2] is not None:
                    parts = live[max(0, i - WINDOW_RADIUS) : i + WINDOW_RADIUS + 1]
                    stale[r[0]] = " ".join(x[1] for x in parts if x[1])
        if stale:
            conn.execute(
                "UPDATE messages m SET stale_window = u.w FROM unnest(%s::int8[], %s::text[])"
                " AS u(id, w) WHERE m.id = u.id AND m.scope_id = %s",
                (list(stale), list(stale.values()), scope_of(thread)),
            )

    def _vectors_follow_archive(
        self, conn: Any, thread: Thread, ids: Sequence[int], archived: bool
    ) -> None:
        """Archived messages leave ``message_vectors``; restored ones come back from
        the cache (or, missing there, are embedded by the next search)."""
        k = {**self._keys(thread), "i": list(ids)}
        if archived:
            conn.execute(
                "DELETE FROM message_vectors WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND message_id = ANY(%(i)s)",
                k,
            )
            return
        conn.execute(
            "INSERT INTO message_vectors (scope_id, thread_id, model, message_id, session_id, vec)"
            " SELECT m.scope_id, m.thread_id, p.model, m.id, m.session_id, v.vec FROM messages m"
            " JOIN vector_progress p ON p.scope_id = m.scope_id AND p.thread_id = m.thread_id"
            " JOIN vectors v ON v.chash = m.chash AND v.model = p.model"
            " WHERE m.scope_id = %(s)s AND m.id = ANY(%(i)s) ON CONFLICT DO NOTHING",
            k,
        )
        conn.execute(
            "UPDATE vector_progress p SET upto = least(p.upto, (SELECT min(m.id) - 1"
            " FROM messages m WHERE m.scope_id = p.scope_id AND m.id = ANY(%(i)s)"
            " AND NOT EXISTS (SELECT 1 FROM message_vectors v WHERE v.scope_id = m.scope_id"
            " AND v.thread_id = m.thread_id AND v.model = p.model AND v.message_id = m.id)))"
            " WHERE p.scope_id = %(s)s AND p.thread_id = %(t)s AND EXISTS (SELECT 1 FROM"
            " messages m WHERE m.scope_id = p.scope_id AND m.id = ANY(%(i)s) AND NOT EXISTS"
            " (SELECT 1 FROM message_vectors v WHERE v.scope_id = m.scope_id AND"
            " v.thread_id = m.thread_id AND v.model = p.model AND v.message_id = m.id))",
            k,
        )

    def leaf_messages(self, thread: Thread, leaf_ids: Sequence[int]) -> list[Row]:
        ids = list(dict.fromkeys(int(i) for i in leaf_ids))
        if not ids:
            return []
        with self._reading(thread) as conn:
            rows = conn.execute(
                ROW_SELECT + " JOIN message_leaves l ON l.message_id = m.id"
                f" AND l.scope_id = m.scope_id WHERE {_IN_LEAVES} ORDER BY m.idx",
                {**self._keys(thread), "l": ids},
            ).fetchall()
        return [row_of(r) for r in rows]

    def archived_rowids(self, thread: Thread) -> set[int]:
        with self._reading(thread) as conn:
            return {
                int(r[0])
                for r in conn.execute(
                    "SELECT id FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s"
                    " AND archived",
                    self._keys(thread),
                ).fetchall()
            }

    def archived_leaves(self, thread: Thread, *, which: str = "whole") -> list[int]:
        having = {
            "whole": "bool_and(archived)",
            "partly": "bool_or(archived) AND NOT bool_and(archived)",
            "any": "bool_or(archived)",
        }[which]
        with self._reading(thread) as conn:
            return [
                int(r[0])
                for r in conn.execute(
                    "SELECT l.leaf_id FROM message_leaves l JOIN messages m"
                    " ON m.id = l.message_id AND m.scope_id = l.scope_id"
                    " WHERE l.scope_id = %(s)s AND l.thread_id = %(t)s"
                    f" GROUP BY l.leaf_id HAVING {having} ORDER BY l.leaf_id",
                    self._keys(thread),
                ).fetchall()
            ]

    def message_leaves(self, rowids: Sequence[int]) -> dict[int, int]:
        ids = list(dict.fromkeys(int(r) for r in rowids))
        if not ids:
            return {}
        tx = self._tx()
        if tx is not None:
            # Messages this transaction read or placed a moment ago (see leaves_seen).
            known = {**tx.leaves_seen, **tx.placed}
            if all(i in known for i in ids):
                return {i: leaf for i in ids if (leaf := known[i]) is not None}

        def read(missing: list[int]) -> dict[int, int]:
            with self._reading() as conn:
                return {
                    int(r[0]): int(r[1])
                    for r in conn.execute(
                        "SELECT message_id, leaf_id FROM message_leaves WHERE message_id = ANY(%s)",
                        (missing,),
                    ).fetchall()
                }

        # Kept between searches while the store is unchanged (no thread is named:
        # under the store's change mark, see .kept).
        return dict(self._kept.get_many(STORE, self._store_stamp(), "leaf", ids, read))

    def parents(self, thread: Thread, ids: Sequence[int]) -> dict[int, int | None]:
        wanted = list(dict.fromkeys(int(i) for i in ids))
        if not wanted:
            return {}

        def read(missing: list[int]) -> dict[int, int]:
            with self._reading(thread) as conn:
                return {
                    int(r[0]): -1 if r[1] is None else int(r[1])  # -1: a root
                    for r in conn.execute(
                        "SELECT id, parent_id FROM tree_nodes WHERE id = ANY(%(i)s)"
                        " AND scope_id = %(s)s AND thread_id = %(t)s",
                        {**self._keys(thread), "i": missing},
                    ).fetchall()
                }

        # Kept between searches while the thread is unchanged (see .kept).
        got = self._kept.get_many(thread.id, self._thread_stamp(thread), "parent", wanted, read)
        return {i: None if p == -1 else p for i, p in got.items()}

    def rowids_between(self, thread: Thread, start: int, end: int, limit: int) -> list[int]:
        def read() -> list[int]:
            with self._reading(thread) as conn:
                return [
                    int(r[0])
                    for r in conn.execute(
                        "SELECT id FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s"
                        " AND idx >= %(a)s AND idx < %(b)s AND NOT archived ORDER BY idx"
                        " LIMIT %(n)s",
                        {**self._keys(thread), "a": start, "b": end, "n": limit},
                    ).fetchall()
                ]

        stamp = self._thread_stamp(thread)
        state = self._peek(("state", thread.id))
        if stamp is not None and state is not None and state.next_index <= WHOLE_ORDER:
            # A short thread's live order is read whole once, and every span of it
            # answered from there while the thread is unchanged.
            idx, ids = self._kept.get(thread.id, stamp, "order", lambda: self._live_ids(thread))
            lo, hi = np.searchsorted(idx, [start, end])
            return [int(i) for i in ids[lo:hi][: max(0, limit)]]
        # Kept between searches while the thread is unchanged (see .kept); a copy,
        # for callers that change the list they are given.
        key = ("between", start, end, limit)
        return list(self._kept.get(thread.id, stamp, key, read))

    def _live_ids(self, thread: Thread) -> tuple[np.ndarray, np.ndarray]:
        """The positions and row ids of a thread's live messages, in order."""
        with self._reading(thread) as conn:
            rows = conn.execute(
                "SELECT idx, id FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND NOT archived ORDER BY idx",
                self._keys(thread),
            ).fetchall()
        idx = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        return idx, ids

    def check_tree(self, thread: Thread, max_children: int) -> list[tuple[int | None, str]]:
        k = {**self._keys(thread), "m": max_children}
        mine = "n.scope_id = %(s)s AND n.thread_id = %(t)s"
        checks = [
            (
                "SELECT n.id FROM tree_nodes n LEFT JOIN tree_nodes p ON p.id = n.parent_id"
                f" AND p.scope_id = n.scope_id WHERE {mine} AND n.parent_id IS NOT NULL"
                " AND (p.id IS NULL OR p.thread_id <> n.thread_id OR p.kind = 'leaf') LIMIT 5",
                "its parent does not exist in this thread or is a leaf",
            ),
            (
                "SELECT coalesce(n.parent_id, 0) FROM tree_nodes n"
                f" WHERE {mine} GROUP BY n.parent_id HAVING count(*) > %(m)s LIMIT 5",
                f"has more than {max_children} children (width rule)",
            ),
            (
                "SELECT p.id FROM tree_nodes n JOIN tree_nodes p ON p.id = n.parent_id"
                f" AND p.scope_id = n.scope_id WHERE {mine} AND (n.first_index < p.first_index"
                " OR n.last_index > p.last_index) LIMIT 5",
                "its index range does not cover its children's",
            ),
            (
                f"SELECT n.id FROM tree_nodes n WHERE {mine} AND n.first_index > n.last_index"
                " LIMIT 5",
                "its index range is reversed",
            ),
            (
                "SELECT n.id FROM tree_nodes n LEFT JOIN (SELECT parent_id, count(*) AS c"
                " FROM tree_nodes WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " GROUP BY parent_id) c ON c.parent_id = n.id"
                f" WHERE {mine} AND n.kind <> 'leaf' AND coalesce(c.c, 0) <> n.child_count"
                " LIMIT 5",
                "its child count disagrees with its children",
            ),
            (
                "SELECT p.leaf_id FROM message_leaves p JOIN messages m ON m.id = p.message_id"
                " AND m.scope_id = p.scope_id LEFT JOIN tree_nodes l ON l.id = p.leaf_id"
                " AND l.scope_id = p.scope_id WHERE p.scope_id = %(s)s AND p.thread_id = %(t)s"
                " AND (l.id IS NULL OR l.kind <> 'leaf'"
                " OR l.thread_id <> m.thread_id OR m.idx < l.first_index"
                " OR m.idx > l.last_index) LIMIT 5",
                "a message points at it as its leaf but it is no leaf holding that message",
            ),
        ]
        problems: list[tuple[int | None, str]] = []
        with self._reading(thread) as conn:
            has_tree = conn.execute(
                "SELECT 1 FROM tree_nodes WHERE scope_id = %(s)s AND thread_id = %(t)s LIMIT 1", k
            ).fetchone()
            if not has_tree:
                first = conn.execute(
                    "SELECT 1 FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s LIMIT 1",
                    k,
                ).fetchone()
                return [] if first is None else [(None, "the thread has messages but no tree")]
            for sql, reason in checks:
                for (node_id,) in conn.execute(sql, k).fetchall():
                    problems.append((int(node_id) or None if node_id is not None else None, reason))
            orphan = conn.execute(
                "SELECT m.idx FROM messages m WHERE m.scope_id = %(s)s AND m.thread_id = %(t)s"
                " AND NOT EXISTS (SELECT 1 FROM message_leaves l WHERE l.message_id = m.id"
                " AND l.scope_id = m.scope_id) ORDER BY m.idx LIMIT 1",
                k,
            ).fetchone()
            if orphan:
                problems.append((None, f"message {orphan[0]} is not in the tree"))
        return problems

    def log_tree(self, thread: Thread, kind: str, stats: Mapping[str, Any], undo: list[Any]) -> int:
        with self._writing(thread) as conn:
            row = conn.execute(
                "INSERT INTO tree_log (id, scope_id, thread_id, kind, at, stats, undo)"
                " VALUES (nextval('tree_log_ids'), %(s)s, %(t)s, %(k)s, %(at)s, %(st)s, %(u)s)"
                " RETURNING id",
                {
                    **self._keys(thread),
                    "k": kind,
                    "at": utcnow(),
                    "st": json.dumps(dict(stats)),
                    "u": json.dumps(undo),
                },
            ).fetchone()
        return int(row[0])

    def tree_log(self, thread: Thread, entry_id: int | None = None) -> list[TreeLogEntry]:
        sql = (
            "SELECT id, kind, at, stats, undo, undone_at FROM tree_log"
            " WHERE scope_id = %(s)s AND thread_id = %(t)s"
        )
        args: dict[str, Any] = self._keys(thread)
        if entry_id is not None:
            sql += " AND id = %(e)s"
            args["e"] = entry_id
        with self._reading(thread) as conn:
            rows = conn.execute(sql + " ORDER BY id DESC", args).fetchall()
        return [
            TreeLogEntry(
                int(r[0]),
                r[1],
                utc(r[2]),
                json.loads(r[3]),
                json.loads(r[4]),
                utc(r[5]) if r[5] else None,
            )
            for r in rows
        ]

    def mark_undone(self, entry_id: int) -> None:
        with self._writing() as conn:
            conn.execute("UPDATE tree_log SET undone_at = %s WHERE id = %s", (utcnow(), entry_id))
