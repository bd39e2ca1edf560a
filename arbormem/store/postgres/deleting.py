"""Deleting from a PostgreSQL store: messages, sessions and threads with everything
derived from them (postings, statistics, windows, vectors, tree rows) in one
transaction under the threads' locks, and the purge that follows a forget."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from functools import partial
from typing import Any

from arbormem.store.postgres.common import term_key
from arbormem.store.postgres.images import PostgresImages
from arbormem.store.postgres.messages import PostgresMessages, make_thread
from arbormem.store.postgres.records import PostgresRecords
from arbormem.store.sqlite.common import REWRITE_LIMIT_BYTES
from arbormem.store.sqlite.windows import WINDOW_RADIUS
from arbormem.store.types import PURGE_WAIT, Deleted, Purge, Thread

log = logging.getLogger("arbormem.store.postgres")

#: The tables that hold a message's text or terms (or its vector), vacuumed by a purge.
_TEXT_TABLES = ("messages", "turn_postings", "node_postings", "tree_nodes", "lex_df", "vectors",
                "message_vectors", "session_state", "tree_log", "images", "image_blobs",
                "image_captions")  # fmt: skip


class PostgresDeletes(PostgresImages, PostgresRecords, PostgresMessages):
    """Forgetting: deletes that leave no derived trace, and purges."""

    def _delete_rowids(self, conn: Any, thread: Thread, rowids: Sequence[int]) -> Deleted:
        """Delete a thread's messages by row number with everything derived; the
        neighbours' windows are rewritten. The thread's lock is held."""
        result = Deleted()
        if not rowids:
            return result
        k = self._keys(thread)
        s = k["s"]
        # Records lose these messages as sources (one left with none goes), in this
        # transaction: a forgotten message is never cited again.
        uids = [
            r[0]
            for r in conn.execute(
                "SELECT uid FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND id = ANY(%(ids)s)",
                {**k, "ids": list(rowids)},
            ).fetchall()
        ]
        if uids:
            self.forget_record_sources(thread, uids)
        doomed = conn.execute(
            "SELECT id, session_id, chash, terms, wlen, archived, stale_window FROM messages"
            " WHERE scope_id = %(s)s AND thread_id = %(t)s AND id = ANY(%(ids)s)",
            {**k, "ids": list(rowids)},
        ).fetchall()
        if not doomed:
            return result
        gone = {int(r[0]) for r in doomed}
        touched = sorted({int(r[1]) for r in doomed})
        before = {sid: self._live_order(conn, thread, sid) for sid in touched}
        # The statistics of the deleted turns and of their own windows.
        turn_df: Counter[str] = Counter()
        window_df: Counter[str] = Counter()
        turn_tokens = window_docs = window_tokens = 0
        for rows in before.values():
            live = [r for r in rows if not r[3]]
            pos = {r[0]: i for i, r in enumerate(live)}
            for r in rows:
                if r[0] not in gone:
                    continue
                terms = (r[1] or "").split()
                turn_df.update(set(terms))
                turn_tokens += len(terms)
                if r[2] is None:
                    continue
                if r[3]:
                    window = (r[4] or "").split()
                else:
                    i = pos[r[0]]
                    window = [
                        t
                        for x in live[max(0, i - WINDOW_RADIUS) : i + WINDOW_RADIUS + 1]
                        for t in (x[1] or "").split()
                    ]
                window_docs += 1
                window_tokens += len(window)
                window_df.update(set(window))
        self._bump(
            conn,
            thread,
            {"turn": (-len(gone), -turn_tokens), "window": (-window_docs, -window_tokens)},
            {
                "turn": Counter({t: -n for t, n in turn_df.items()}),
                "window": Counter({t: -n for t, n in window_df.items()}),
            },
        )
        with conn.cursor() as cur:
            cur.executemany(
                "DELETE FROM turn_postings WHERE scope_id = %s AND thread_id = %s"
                " AND term = ANY(%s) AND doc = %s",
                [
                    (s, thread.id, sorted({term_key(t) for t in (r[3] or "").split()}), r[0])
                    for r in doomed
                    if r[3]
                ],
            )
        conn.execute(
            "DELETE FROM turn_windows WHERE scope_id = %(s)s AND doc = ANY(%(ids)s)",
            {**k, "ids": sorted(gone)},
        )
        conn.execute(
            "DELETE FROM message_leaves WHERE scope_id = %(s)s AND message_id = ANY(%(ids)s)",
            {**k, "ids": sorted(gone)},
        )
        conn.execute(
            "DELETE FROM message_vectors WHERE scope_id = %(s)s AND thread_id = %(t)s"
            " AND message_id = ANY(%(ids)s)",
            {**k, "ids": sorted(gone)},
        )
        # An image goes with the message that indexes its caption.
        conn.execute(
            "DELETE FROM images WHERE scope_id = %(s)s AND caption_rowid = ANY(%(ids)s)",
            {**k, "ids": sorted(gone)},
        )
        result.messages = conn.execute(
            "DELETE FROM messages WHERE scope_id = %(s)s AND id = ANY(%(ids)s)",
            {**k, "ids": sorted(gone)},
        ).rowcount
        conn.execute(
            "DELETE FROM session_vectors WHERE scope_id = %(s)s AND session_id = ANY(%(sids)s)",
            {**k, "sids": touched},
        )
        emptied = [
            int(r[0])
            for r in conn.execute(
                "DELETE FROM sessions x WHERE scope_id = %(s)s AND id = ANY(%(sids)s)"
                " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.scope_id = x.scope_id"
                " AND m.session_id = x.id) RETURNING id",
                {**k, "sids": touched},
            ).fetchall()
        ]
        result.sessions += len(emptied)
        conn.execute(
            "UPDATE sessions x SET message_count = a.n, started_at = a.lo, last_at = a.hi,"
            " first_index = a.first FROM (SELECT session_id, count(*) AS n, min(ts) AS lo,"
            " max(ts) AS hi, min(idx) AS first FROM messages WHERE scope_id = %(s)s"
            " AND session_id = ANY(%(sids)s) GROUP BY session_id) a"
            " WHERE x.scope_id = %(s)s AND x.id = a.session_id",
            {**k, "sids": touched},
        )
        self._rebuild_windows(
            conn, thread, {sid: rows for sid, rows in before.items() if sid not in emptied}, gone
        )
        chashes = sorted({r[2] for r in doomed})
        result.chashes = [
            r[0]
            for r in conn.execute(
                "WITH d AS (DELETE FROM vectors v WHERE v.chash = ANY(%s) AND NOT EXISTS"
                " (SELECT 1 FROM messages m WHERE m.chash = v.chash) RETURNING chash)"
                " SELECT DISTINCT chash FROM d ORDER BY chash",
                (chashes,),
            ).fetchall()
        ]
        conn.execute(
            "UPDATE threads SET generation = generation + 1, changes = changes + 1,"
            " latest = (SELECT max(ts) FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s)"
            " WHERE scope_id = %(s)s AND id = %(t)s",
            k,
        )
        self._on_commit(partial(self._rows_changed, [thread], forgotten=True))
        return result

    def purge(self, *, wait: float = PURGE_WAIT, rewrite: bool | None = None) -> Purge:
        """Drop vectors no message or topic uses, and vacuum the tables that held
        deleted text. A plain ``VACUUM`` frees the dead rows' space for reuse but may
        leave their bytes in it; rewriting the tables (``VACUUM FULL``) leaves none.
        ``rewrite`` None rewrites when the tables are at most
        :data:`REWRITE_LIMIT_BYTES`; a rewrite locks each table against every other
        session, so it waits ``wait`` seconds at most for them, then reports the
        purge as pending (``"readers"``). What this cannot reach (the server's
        write-ahead log, replicas, backups) is in docs/postgres.md."""
        if not self.read_only:
            self.sweep_blobs()  # the bytes of forgotten images leave first
        with self._writing() as conn:
            unused = [
                r[0]
                for r in conn.execute(
                    "WITH d AS (DELETE FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM messages m"
                    " WHERE m.chash = v.chash) AND NOT EXISTS (SELECT 1 FROM tree_nodes n"
                    " WHERE n.chash = v.chash) AND NOT EXISTS (SELECT 1 FROM images i"
                    # A picture's CLIP vector is keyed by its digest (arbormem.images.clip).
                    " WHERE i.digest = v.chash) RETURNING chash) SELECT DISTINCT chash FROM d"
                ).fetchall()
            ]
        result = Purge(chashes=unused)
        with self._reading() as conn:
            if rewrite is None:
                size = conn.execute(
                    "SELECT coalesce(sum(pg_total_relation_size(c)), 0) FROM unnest(%s::regclass[]) c",
                    (list(_TEXT_TABLES),),
                ).fetchone()[0]
                rewrite = int(size) <= REWRITE_LIMIT_BYTES
            if not rewrite:
                for table in _TEXT_TABLES:
                    conn.execute(f"VACUUM {table}")
                result.purged, result.pending = False, "rewrite"
                return result
            # A session's SET outlasts the statement: put the timeout back after.
            conn.execute(
                "SELECT set_config('lock_timeout', %s, false)", (f"{max(1, int(wait * 1000))}ms",)
            )
            try:
                for table in _TEXT_TABLES:
                    try:
                        conn.execute(f"VACUUM FULL {table}")
                    except self._psycopg.errors.LockNotAvailable:
                        log.info(
                            "purge: %s is in use by other sessions; its rewrite is pending", table
                        )
                        result.purged, result.pending = False, "readers"
            finally:
                conn.execute("RESET lock_timeout")
        return result

    def delete_messages(self, message_ids: Sequence[str], thread: Thread | None = None) -> Deleted:
        if not message_ids:
            return Deleted()
        with self.transaction():
            self._settle_node_docs()  # the documents of nodes it deletes go first
            tx = self._tx()
            assert tx is not None
            conn = tx.conn
            if thread is not None:
                self._lock_threads(tx, [thread])
                found = conn.execute(
                    "SELECT id, thread_id FROM messages WHERE uid = ANY(%(u)s)"
                    " AND scope_id = %(s)s AND thread_id = %(t)s",
                    {**self._keys(thread), "u": list(message_ids)},
                ).fetchall()
                owners = {thread.id: thread}
            else:
                found = conn.execute(
                    "SELECT m.id, m.thread_id, t.user_id, t.agent_id, t.tenant FROM messages m"
                    " JOIN threads t ON t.scope_id = m.scope_id AND t.id = m.thread_id"
                    " WHERE m.uid = ANY(%s)",
                    (list(message_ids),),
                ).fetchall()
                owners = {int(r[1]): make_thread(r[1], r[2], r[3], r[4]) for r in found}
            self._lock_threads(tx, owners.values())
            result = Deleted()
            for tid, owner in sorted(owners.items()):
                part = self._delete_rowids(
                    conn, owner, [int(r[0]) for r in found if int(r[1]) == tid]
                )
                result.messages += part.messages
                result.sessions += part.sessions
                result.chashes += part.chashes
            return result

    def delete_session(self, thread: Thread, session: str) -> Deleted:
        with self._writing(thread) as conn:
            self._settle_node_docs()  # the documents of nodes it deletes go first
            k = {**self._keys(thread), "key": session}
            sid = conn.execute(
                "SELECT id FROM sessions WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND key = %(key)s",
                k,
            ).fetchone()
            rowids = []
            if sid is not None:
                rowids = [
                    int(r[0])
                    for r in conn.execute(
                        "SELECT id FROM messages WHERE scope_id = %(s)s AND session_id = %(sid)s",
                        {**k, "sid": sid[0]},
                    ).fetchall()
                ]
            result = self._delete_rowids(conn, thread, rowids)
            if sid is not None:
                conn.execute(
                    "DELETE FROM session_vectors WHERE scope_id = %(s)s AND session_id = %(sid)s",
                    {**k, "sid": sid[0]},
                )
            conn.execute(
                "DELETE FROM session_state WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND session_key = %(key)s",
                k,
            )
            # Soft-expired images of the session have no caption message to take them.
            conn.execute(
                "DELETE FROM images WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND session_key = %(key)s",
                k,
            )
            result.sessions += conn.execute(
                "DELETE FROM sessions WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND key = %(key)s",
                k,
            ).rowcount
            return result

    def delete_thread(self, thread: Thread) -> Deleted:
        with self._writing(thread) as conn:
            self._settle_node_docs()  # the documents of nodes it deletes go first
            tx = self._tx()
            if tx is not None:
                tx.records.pop(thread.id, None)  # its records go too
            k = self._keys(thread)
            result = Deleted()
            chashes = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT chash FROM messages WHERE scope_id = %(s)s"
                    " AND thread_id = %(t)s",
                    k,
                ).fetchall()
            ]
            result.messages = conn.execute(
                "DELETE FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s", k
            ).rowcount
            result.sessions = conn.execute(
                "DELETE FROM sessions WHERE scope_id = %(s)s AND thread_id = %(t)s", k
            ).rowcount
            conn.execute(
                "DELETE FROM session_vectors v WHERE scope_id = %(s)s AND NOT EXISTS"
                " (SELECT 1 FROM sessions x WHERE x.scope_id = v.scope_id AND x.id = v.session_id)",
                k,
            )
            for table in ("turn_postings", "turn_windows", "message_leaves", "node_postings",
                          "lex_stats", "lex_df",
                          "message_vectors", "vector_progress", "tree_nodes", "tree_state",
                          "tree_log", "session_state", "record_rows", "record_composites",
                          "record_cursors", "images"):  # fmt: skip
                column = "id" if table in ("threads",) else "thread_id"
                conn.execute(f"DELETE FROM {table} WHERE scope_id = %(s)s AND {column} = %(t)s", k)
            self._drop_ann_indexes(conn, thread)
            result.chashes = [
                r[0]
                for r in conn.execute(
                    "WITH d AS (DELETE FROM vectors v WHERE v.chash = ANY(%s) AND NOT EXISTS"
                    " (SELECT 1 FROM messages m WHERE m.chash = v.chash) RETURNING chash)"
                    " SELECT DISTINCT chash FROM d ORDER BY chash",
                    (chashes,),
                ).fetchall()
            ]
            result.threads = conn.execute(
                "DELETE FROM threads WHERE scope_id = %(s)s AND id = %(t)s", k
            ).rowcount
            conn.execute("UPDATE scopes SET ticks = ticks + 1 WHERE scope_id = %(s)s", k)
            self._on_commit(partial(self._rows_changed, [thread], forgotten=True))
            return result
