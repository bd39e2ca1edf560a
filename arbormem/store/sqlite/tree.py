"""Topic trees in SQLite: nodes, the cursor, checks and the operation log."""

from __future__ import annotations

import json
import logging
import threading
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import numpy as np

from arbormem.store.sqlite.common import (
    ROW_SELECT,
    batches,
    row_of,
    to_json,
)
from arbormem.store.sqlite.lexical import SQLiteLexical
from arbormem.store.types import (
    NodeBrief,
    NodeRow,
    NodeShapes,
    Row,
    Thread,
    TreeLogEntry,
    TreeState,
)
from arbormem.timeutil import format_timestamp, parse_stored, utcnow

log = logging.getLogger("arbormem.store.sqlite")


@lru_cache(maxsize=4096)
def _utc_stamp(value: datetime) -> str:
    return format_timestamp(value)


def _stamp(value: datetime) -> str:
    """``format_timestamp(value)``, remembered for UTC times: a node is written again
    at every exchange it grows by, its first time unchanged. (Only for UTC: two equal
    times of another zone can be different instants, on either side of a clock change.)"""
    return _utc_stamp(value) if value.tzinfo is timezone.utc else format_timestamp(value)


#: A tree's version counts its writes in its low 32 bits; its high bits are the
#: structure epoch, moved (and the count restarted) by every write that changes what
#: a node already had beside its growth: its parent, kind or archived flag, anything
#: of a frozen node, a node's deletion, or a placed message's leaf. Growing the tree
#: (new nodes, growing nodes' ranges and texts, new messages placed, topics frozen)
#: keeps the epoch, so searches keep what they read of the tree's settled parts
#: across the adds of a live thread (see arbormem/tree/recall.py). Node writes move
#: it where they move the version, with the tree's state written after them (in the
#: same transaction, as every tree change writes it); archiving and moving a placed
#: message move it at once, as they move the version.
EPOCH_BITS = 32


class SQLiteTree(SQLiteLexical):
    """Tree nodes with their FTS documents, the cursor and the log."""

    #: Tree versions carry a structure epoch (see EPOCH_BITS).
    structure_epochs = True

    _NODE_COLUMNS = (
        "id, parent_id, kind, seq, level, name, summary, keyphrases, first_index, last_index,"
        " first_at, last_at, message_count, child_count, frozen, archived, origin, chash"
    )

    @staticmethod
    def _node(r: Sequence[Any]) -> NodeRow:
        return NodeRow(
            id=r[0],
            parent_id=r[1],
            kind=r[2],
            seq=r[3],
            level=r[4],
            name=r[5],
            summary=r[6],
            keyphrases=json.loads(r[7]) if r[7] != "[]" else [],  # a leaf's: most rows
            first_index=r[8],
            last_index=r[9],
            first_at=parse_stored(r[10]),
            last_at=parse_stored(r[11]),
            message_count=r[12],
            child_count=r[13],
            frozen=bool(r[14]),
            archived=bool(r[15]),
            origin=r[16],
            chash=r[17],
        )

    def tree_state(self, thread: Thread) -> TreeState:
        with self._reading() as conn:
            r = conn.execute(
                "SELECT version, active_id, leaf_id, next_seq FROM tree_state WHERE thread_id = ?",
                (thread.id,),
            ).fetchone()
        return TreeState(*r) if r else TreeState()

    def tree_checked(self, thread: Thread) -> tuple[int, int | None]:
        with self._reading() as conn:
            r = conn.execute(
                "SELECT version, checked_version FROM tree_state WHERE thread_id = ?",
                (thread.id,),
            ).fetchone()
        return (int(r[0]), r[1]) if r else (0, None)

    def mark_tree_checked(self, thread: Thread, version: int) -> bool:
        with self.transaction():
            done = self._writer.execute(
                "UPDATE tree_state SET checked_version = ? WHERE thread_id = ? AND version = ?",
                (version, thread.id, version),
            ).rowcount
        return bool(done)

    def _reshaped(self) -> dict[int, int]:
        """Threads whose nodes changed beyond growth since their tree's state was last
        written by this store (see EPOCH_BITS), each with a count of such writes."""
        found: dict[int, int] | None = self.__dict__.get("_reshaped_threads")
        if found is None:
            found = self.__dict__["_reshaped_threads"] = {}
        return found

    def _reshape(self, thread_id: int) -> None:
        reshaped = self._reshaped()
        reshaped[thread_id] = reshaped.get(thread_id, 0) + 1

    def set_tree_state(self, thread: Thread, state: TreeState) -> TreeState:
        with self.transaction():
            c = self._writer
            r = c.execute(
                "SELECT version FROM tree_state WHERE thread_id = ?", (thread.id,)
            ).fetchone()
            if r is None:
                # A new tree's versions start from its thread's generation: a forgotten
                # thread's id comes back with the next new thread, and caches keyed by
                # thread id and tree version (here and in other processes) must not
                # take the new tree for the old one.
                r = c.execute(
                    "SELECT generation FROM threads WHERE id = ?", (thread.id,)
                ).fetchone()
            version = (int(r[0]) if r and r[0] else 0) + 1
            reshaped = self._reshaped()
            seen = reshaped.get(thread.id)
            if seen is not None:
                version = ((version >> EPOCH_BITS) + 1) << EPOCH_BITS

                def settled() -> None:
                    # Once this lands (if it rolls back, nodes written in an earlier
                    # transaction still want a new epoch), and unless nodes changed
                    # again since.
                    if reshaped.get(thread.id) == seen:
                        del reshaped[thread.id]

                self._on_commit(settled)
            c.execute(
                "INSERT OR REPLACE INTO tree_state"
                " (thread_id, version, active_id, leaf_id, next_seq, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    thread.id,
                    version,
                    state.active_id,
                    state.leaf_id,
                    state.next_seq,
                    format_timestamp(utcnow()),
                ),
            )
        return TreeState(version, state.active_id, state.leaf_id, state.next_seq)

    def tree_nodes(
        self,
        thread: Thread,
        *,
        ids: Sequence[int] | None = None,
        parent: int | object | None = ...,
        kinds: Sequence[str] | None = None,
        frozen: bool | None = None,
    ) -> list[NodeRow]:
        # By id, the "+" keeps the planner from walking a thread_id index (every node of
        # the thread) instead of looking each id up.
        column = "thread_id" if ids is None else "+thread_id"
        sql = f"SELECT {self._NODE_COLUMNS} FROM tree_nodes WHERE {column} = ?"
        args: list[Any] = [thread.id]
        if parent is not ...:
            if parent is None:
                sql += " AND parent_id IS NULL"
            else:
                sql += " AND parent_id = ?"
                args.append(parent)
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        if frozen is not None:
            sql += " AND frozen = ?"
            args.append(int(frozen))
        out: list[NodeRow] = []
        with self._reading() as conn:
            if ids is None:
                out = [self._node(r) for r in conn.execute(sql + " ORDER BY seq", args)]
            else:
                wanted = list(dict.fromkeys(int(i) for i in ids))
                for chunk, marks in batches(wanted):
                    q = sql + f" AND id IN ({marks})"
                    out.extend(self._node(r) for r in conn.execute(q, [*args, *chunk]))
                out.sort(key=lambda n: n.seq)
        return out

    def node_briefs(
        self,
        thread: Thread,
        kinds: Sequence[str] | None = None,
        ids: Sequence[int] | None = None,
    ) -> list[NodeBrief]:
        # By id, the "+" keeps the planner from walking a thread_id index instead of
        # looking each id up, and the lookup reads the covering index of the tree's
        # shape, not the table's pages of text (a third of a cold million-turn search's
        # slowest tenth went to these pages).
        sql = (
            "SELECT id, parent_id, kind, first_index, last_index, frozen, archived, chash"
            " FROM tree_nodes"
            + (
                " WHERE thread_id = ?"
                if ids is None
                else " INDEXED BY tree_briefs WHERE +thread_id = ?"
            )
        )
        args: list[Any] = [thread.id]
        if kinds is not None:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        make = NodeBrief._make
        with self._reading() as conn:
            if ids is None:
                return [make(r) for r in conn.execute(sql, args)]
            out: list[NodeBrief] = []
            for chunk, marks in batches(list(dict.fromkeys(ids))):
                rows = conn.execute(sql + f" AND id IN ({marks})", [*args, *chunk])
                out.extend(make(r) for r in rows)
            return out

    def node_shapes(self, thread: Thread, stop: threading.Event | None = None) -> NodeShapes | None:
        # Column by column into typed arrays (8 bytes a number): a list of 800,000
        # NodeBriefs would first cost a quarter of a gigabyte. Read from the covering
        # index of the tree's shape: the table's rows, in kind order, are 14 times the
        # bytes, scattered.
        cols = [array("q") for _ in range(7)]
        kinds: dict[str, int] = {}
        with self._reading() as conn:
            cursor = conn.execute(
                "SELECT id, coalesce(parent_id, -1), kind, first_index, last_index, frozen,"
                " archived FROM tree_nodes INDEXED BY tree_briefs WHERE +thread_id = ?",
                (thread.id,),
            )
            while rows := cursor.fetchmany(4096):
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

    def _new_epoch(self, c: Any, thread_ids: Sequence[int]) -> None:
        """Move the structure epoch of these threads' trees (see EPOCH_BITS)."""
        c.executemany(
            f"UPDATE tree_state SET version = ((version >> {EPOCH_BITS}) + 1) << {EPOCH_BITS}"
            " WHERE thread_id = ?",
            [(t,) for t in dict.fromkeys(thread_ids)],
        )

    def _reshapes(self, c: Any, thread: Thread, nodes: Sequence[NodeRow]) -> bool:
        """Whether writing these nodes changes more than the tree's growth (see
        EPOCH_BITS): compared with what is stored before they are written."""
        ids = [n.id for n in nodes if n.id is not None]
        if not ids:
            return False  # new nodes: nothing kept of them yet
        new = {n.id: n for n in nodes if n.id is not None}
        for chunk, marks in batches(list(dict.fromkeys(ids))):
            for node_id, parent, kind, frozen, archived in c.execute(
                "SELECT id, parent_id, kind, frozen, archived FROM tree_nodes"
                f" WHERE id IN ({marks}) AND +thread_id = ?",
                [*chunk, thread.id],
            ):
                n = new[node_id]
                if frozen or n.parent_id != parent or n.kind != kind:
                    return True
                if bool(n.archived) != bool(archived):
                    return True
        return False

    def put_nodes(self, thread: Thread, nodes: Sequence[NodeRow]) -> None:
        with self.transaction():
            c = self._writer
            if self._reshapes(c, thread, nodes):
                self._reshape(thread.id)
            for n in nodes:
                values = (
                    n.parent_id,
                    n.kind,
                    n.seq,
                    n.level,
                    n.name,
                    n.summary,
                    to_json(n.keyphrases) if n.keyphrases else "[]",
                    n.first_index,
                    n.last_index,
                    _stamp(n.first_at),
                    _stamp(n.last_at),
                    n.message_count,
                    n.child_count,
                    int(n.frozen),
                    int(n.archived),
                    n.origin,
                    n.chash,
                )
                if n.id is None:
                    n.id = c.execute(
                        "INSERT INTO tree_nodes (thread_id, parent_id, kind, seq, level, name,"
                        " summary, keyphrases, first_index, last_index, first_at, last_at,"
                        " message_count, child_count, frozen, archived, origin, chash)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (thread.id, *values),
                    ).lastrowid
                else:
                    c.execute(
                        "UPDATE tree_nodes SET parent_id = ?, kind = ?, seq = ?, level = ?,"
                        " name = ?, summary = ?, keyphrases = ?, first_index = ?, last_index = ?,"
                        " first_at = ?, last_at = ?, message_count = ?, child_count = ?,"
                        " frozen = ?, archived = ?, origin = ?, chash = ?"
                        " WHERE id = ? AND thread_id = ?",
                        (*values, n.id, thread.id),
                    )

    def delete_nodes(self, thread: Thread, ids: Sequence[int] | None = None) -> int:
        with self.transaction():
            c = self._writer
            if ids is None:
                ids = [
                    r[0]
                    for r in c.execute(
                        "SELECT id FROM tree_nodes WHERE thread_id = ?", (thread.id,)
                    )
                ]
            removed = 0
            if ids:
                self._reshape(thread.id)
            for chunk, marks in batches(ids):
                for table in ("topic_fts", "segment_fts"):
                    c.execute(f"DELETE FROM {table} WHERE rowid IN ({marks})", chunk)
                c.execute(f"UPDATE messages SET leaf_id = NULL WHERE leaf_id IN ({marks})", chunk)
                removed += c.execute(
                    f"DELETE FROM tree_nodes WHERE +thread_id = ? AND id IN ({marks})",
                    [thread.id, *chunk],
                ).rowcount
            return removed

    def set_message_leaf(self, rowids: Sequence[int], leaf_id: int | None) -> None:
        if not rowids:
            return
        with self.transaction():
            c = self._writer
            # Searches keep which leaf holds each message under the tree's structure
            # epoch (see TreeRecall.turn_signals): a placed message that changes
            # leaves moves it; placing a new one only counts a write.
            for chunk, marks in batches(list(dict.fromkeys(rowids)), 400):
                c.execute(
                    f"UPDATE tree_state SET version = CASE WHEN thread_id IN (SELECT thread_id"
                    f" FROM messages WHERE id IN ({marks}) AND leaf_id IS NOT NULL"
                    f" AND leaf_id IS NOT ?) THEN ((version >> {EPOCH_BITS}) + 1) << {EPOCH_BITS}"
                    " ELSE version + 1 END WHERE thread_id IN"
                    f" (SELECT DISTINCT thread_id FROM messages WHERE id IN ({marks}))",
                    [*chunk, leaf_id, *chunk],
                )
            c.executemany(
                "UPDATE messages SET leaf_id = ? WHERE id = ?", [(leaf_id, r) for r in rowids]
            )

    def set_message_leaves(self, leaves: Mapping[int, Sequence[int]]) -> None:
        # What set_message_leaf does leaf by leaf, in four statements: a grow places
        # each exchange's messages, and two statements per leaf (the version's with its
        # subqueries) were a twentieth of a bulk add. The versions move as the calls in
        # turn would move them: one write per leaf and chunk of 400 messages, or a new
        # structure epoch where a chunk moves a placed message to another leaf.
        if len(leaves) < 2:
            for leaf_id, rowids in leaves.items():
                self.set_message_leaf(rowids, leaf_id)
            return
        with self.transaction():
            c = self._writer
            every = list(dict.fromkeys(r for rowids in leaves.values() for r in rowids))
            if not every:
                return
            placed: dict[int, tuple[int, int | None]] = {}
            for chunk, marks in batches(every):
                for rowid, thread_id, leaf in c.execute(
                    f"SELECT id, thread_id, leaf_id FROM messages WHERE id IN ({marks})", chunk
                ):
                    placed[rowid] = (thread_id, leaf)
            threads = list(dict.fromkeys(t for t, _ in placed.values()))
            versions: dict[int, int] = {}
            for chunk, marks in batches(threads):
                versions.update(
                    c.execute(
                        f"SELECT thread_id, version FROM tree_state WHERE thread_id IN ({marks})",
                        chunk,
                    ).fetchall()
                )
            start = dict(versions)
            for leaf_id, rowids in leaves.items():
                mine = list(dict.fromkeys(rowids))
                for at in range(0, len(mine), 400):
                    chunk = [r for r in mine[at : at + 400] if r in placed]
                    moved = {
                        placed[r][0]
                        for r in chunk
                        if placed[r][1] is not None and placed[r][1] != leaf_id
                    }
                    for t in dict.fromkeys(placed[r][0] for r in chunk):
                        if t in versions:
                            v = versions[t]
                            versions[t] = (
                                ((v >> EPOCH_BITS) + 1) << EPOCH_BITS if t in moved else v + 1
                            )
                for r in mine:
                    if r in placed:
                        placed[r] = (placed[r][0], leaf_id)
            c.executemany(
                "UPDATE tree_state SET version = ? WHERE thread_id = ?",
                [(v, t) for t, v in versions.items() if v != start[t]],
            )
            c.executemany(
                "UPDATE messages SET leaf_id = ? WHERE id = ?",
                [(leaf_id, r) for leaf_id, rowids in leaves.items() for r in rowids],
            )

    def set_archived(self, thread: Thread, leaf_ids: Sequence[int], archived: bool) -> int:
        with self.transaction():
            c = self._writer
            changed = 0
            for chunk, marks in batches(leaf_ids):
                # Their sessions' vector sums change members: searches sum those
                # sessions from the vector index until their next append.
                c.execute(
                    "DELETE FROM session_vectors WHERE session_id IN (SELECT session_id"
                    f" FROM messages WHERE +thread_id = ? AND leaf_id IN ({marks}))",
                    [thread.id, *chunk],
                )
                c.execute(
                    f"UPDATE tree_nodes SET archived = ? WHERE +thread_id = ? AND id IN ({marks})",
                    [int(archived), thread.id, *chunk],
                )
                changed += c.execute(
                    f"UPDATE messages SET archived = ? WHERE +thread_id = ? AND leaf_id IN ({marks})",
                    [int(archived), thread.id, *chunk],
                ).rowcount
            # Their neighbours' window keys drop or regain their words.
            sessions = {
                int(r[0])
                for chunk, marks in batches(leaf_ids)
                for r in c.execute(
                    "SELECT DISTINCT session_id FROM messages"
                    f" WHERE +thread_id = ? AND leaf_id IN ({marks})",
                    [thread.id, *chunk],
                )
            }
            self._rebuild_windows(sorted(sessions))
            # Cached vector indexes must drop or regain these rows.
            c.execute("UPDATE threads SET generation = generation + 1 WHERE id = ?", (thread.id,))
            self._new_epoch(c, [thread.id])
            return changed

    def leaf_messages(self, thread: Thread, leaf_ids: Sequence[int]) -> list[Row]:
        ids = list(dict.fromkeys(int(i) for i in leaf_ids))
        out: list[Row] = []
        with self._reading() as conn:
            for chunk, marks in batches(ids):
                out += [
                    row_of(r)
                    for r in conn.execute(
                        ROW_SELECT + f" WHERE m.thread_id = ? AND m.leaf_id IN ({marks})",
                        [thread.id, *chunk],
                    ).fetchall()
                ]
        out.sort(key=lambda r: r.message.index)
        return out

    def archived_rowids(self, thread: Thread) -> set[int]:
        with self._reading() as conn:
            return {
                int(r[0])
                for r in conn.execute(
                    "SELECT rowid FROM messages WHERE thread_id = ? AND archived = 1", (thread.id,)
                )
            }

    def archived_leaves(self, thread: Thread, *, which: str = "whole") -> list[int]:
        having = {
            "whole": "MIN(archived) = 1",
            "partly": "MIN(archived) = 0 AND MAX(archived) = 1",
            "any": "MAX(archived) = 1",
        }[which]
        with self._reading() as conn:
            return [
                int(r[0])
                for r in conn.execute(
                    "SELECT leaf_id FROM messages WHERE thread_id = ? AND leaf_id IS NOT NULL"
                    f" GROUP BY leaf_id HAVING {having}",
                    (thread.id,),
                )
            ]

    def message_leaves(self, rowids: Sequence[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        ids = list(dict.fromkeys(int(r) for r in rowids))
        with self._reading() as conn:
            for chunk, marks in batches(ids):
                for rowid, leaf in conn.execute(
                    f"SELECT id, leaf_id FROM messages WHERE id IN ({marks})"
                    " AND leaf_id IS NOT NULL",
                    chunk,
                ):
                    out[rowid] = leaf
        return out

    def parents(self, thread: Thread, ids: Sequence[int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        wanted = list(dict.fromkeys(int(i) for i in ids))
        with self._reading() as conn:
            for chunk, marks in batches(wanted):
                # By primary key only: a thread filter in the WHERE clause makes SQLite
                # walk the thread's whole tree through the (thread, parent) index.
                for node, parent, owner in conn.execute(
                    "SELECT id, parent_id, thread_id FROM tree_nodes INDEXED BY tree_briefs"
                    f" WHERE id IN ({marks})",
                    chunk,
                ):
                    if owner == thread.id:
                        out[int(node)] = parent
        return out

    def rowids_between(self, thread: Thread, start: int, end: int, limit: int) -> list[int]:
        with self._reading() as conn:
            return [
                int(r[0])
                for r in conn.execute(
                    "SELECT id FROM messages WHERE thread_id = ? AND idx >= ? AND idx < ?"
                    " AND archived = 0 ORDER BY idx LIMIT ?",
                    (thread.id, start, end, limit),
                )
            ]

    def check_tree(self, thread: Thread, max_children: int) -> list[tuple[int | None, str]]:
        t = thread.id
        checks = [
            (
                "SELECT n.id FROM tree_nodes n LEFT JOIN tree_nodes p ON p.id = n.parent_id"
                " WHERE n.thread_id = ? AND n.parent_id IS NOT NULL"
                " AND (p.id IS NULL OR p.thread_id != n.thread_id OR p.kind = 'leaf') LIMIT 5",
                (t,),
                "its parent does not exist in this thread or is a leaf",
            ),
            (
                "SELECT COALESCE(parent_id, 0) FROM tree_nodes WHERE thread_id = ?"
                " GROUP BY parent_id HAVING COUNT(*) > ? LIMIT 5",
                (t, max_children),
                f"has more than {max_children} children (width rule)",
            ),
            (
                "SELECT p.id FROM tree_nodes n JOIN tree_nodes p ON p.id = n.parent_id"
                " WHERE n.thread_id = ? AND (n.first_index < p.first_index"
                " OR n.last_index > p.last_index) LIMIT 5",
                (t,),
                "its index range does not cover its children's",
            ),
            (
                "SELECT id FROM tree_nodes WHERE thread_id = ? AND first_index > last_index LIMIT 5",
                (t,),
                "its index range is reversed",
            ),
            (
                "SELECT p.id FROM tree_nodes p LEFT JOIN (SELECT parent_id, COUNT(*) AS c"
                " FROM tree_nodes WHERE thread_id = ? GROUP BY parent_id) k ON k.parent_id = p.id"
                " WHERE p.thread_id = ? AND p.kind != 'leaf' AND COALESCE(k.c, 0) != p.child_count"
                " LIMIT 5",
                (t, t),
                "its child count disagrees with its children",
            ),
            (
                "SELECT m.leaf_id FROM messages m LEFT JOIN tree_nodes l ON l.id = m.leaf_id"
                " WHERE m.thread_id = ? AND m.leaf_id IS NOT NULL"
                " AND (l.id IS NULL OR l.kind != 'leaf' OR l.thread_id != m.thread_id"
                " OR m.idx < l.first_index OR m.idx > l.last_index) LIMIT 5",
                (t,),
                "a message points at it as its leaf but it is no leaf holding that message",
            ),
        ]
        problems: list[tuple[int | None, str]] = []
        with self._reading() as conn:
            has_tree = conn.execute(
                "SELECT 1 FROM tree_nodes WHERE thread_id = ? LIMIT 1", (t,)
            ).fetchone()
            if not has_tree:
                first = conn.execute(
                    "SELECT idx FROM messages WHERE thread_id = ? ORDER BY idx LIMIT 1", (t,)
                ).fetchone()
                return [] if first is None else [(None, "the thread has messages but no tree")]
            for sql, args, reason in checks:
                for (node_id,) in conn.execute(sql, args).fetchall():
                    problems.append((node_id or None, reason))
            orphan = conn.execute(
                "SELECT idx FROM messages WHERE thread_id = ? AND leaf_id IS NULL LIMIT 1", (t,)
            ).fetchone()
            if orphan:
                problems.append((None, f"message {orphan[0]} is not in the tree"))
        return problems

    def log_tree(self, thread: Thread, kind: str, stats: Mapping[str, Any], undo: list[Any]) -> int:
        with self.transaction():
            entry = self._writer.execute(
                "INSERT INTO tree_log (thread_id, kind, at, stats, undo) VALUES (?, ?, ?, ?, ?)",
                (
                    thread.id,
                    kind,
                    format_timestamp(utcnow()),
                    json.dumps(dict(stats)),
                    json.dumps(undo),
                ),
            ).lastrowid
        assert entry is not None
        return entry

    def tree_log(self, thread: Thread, entry_id: int | None = None) -> list[TreeLogEntry]:
        sql = "SELECT id, kind, at, stats, undo, undone_at FROM tree_log WHERE thread_id = ?"
        args: list[Any] = [thread.id]
        if entry_id is not None:
            sql += " AND id = ?"
            args.append(entry_id)
        with self._reading() as conn:
            rows = conn.execute(sql + " ORDER BY id DESC", args).fetchall()
        return [
            TreeLogEntry(
                r[0],
                r[1],
                parse_stored(r[2]),
                json.loads(r[3]),
                json.loads(r[4]),
                parse_stored(r[5]) if r[5] else None,
            )
            for r in rows
        ]

    def mark_undone(self, entry_id: int) -> None:
        with self.transaction():
            self._writer.execute(
                "UPDATE tree_log SET undone_at = ? WHERE id = ?",
                (format_timestamp(utcnow()), entry_id),
            )
