"""Threads, sessions and messages in SQLite; appending indexes and embeds in the
same transaction, and deleting removes everything derived.

* ``secure_delete`` is on and forgetting merges the full-text index and
  checkpoints the WAL, so deleted text does not linger in free pages.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np

from arbormem.errors import StoreError
from arbormem.models import Message, Session
from arbormem.store.sqlite import purge as purging
from arbormem.store.sqlite.common import (
    FTS_LEVEL_LIMIT,
    REWRITE_LIMIT_BYTES,
    ROW_SELECT,
    Stats,
    batches,
    filter_sql,
    fts_levels,
    read_rows,
    row_of,
    session_of,
    to_sorted_json,
)
from arbormem.store.sqlite.driver import sqlite3
from arbormem.store.sqlite.records import SQLiteRecords
from arbormem.store.sqlite.state import SQLiteState
from arbormem.store.sqlite.tree import SQLiteTree
from arbormem.store.sqlite.vectors import SQLiteVectors
from arbormem.store.sqlite.windows import WINDOW_RADIUS
from arbormem.store.types import (
    LEXICAL_KEYS,
    PURGE_WAIT,
    Deleted,
    Filters,
    NewMessage,
    Purge,
    Row,
    Thread,
    ThreadState,
)
from arbormem.timeutil import format_timestamp, parse_stored, utcnow

log = logging.getLogger("arbormem.store.sqlite")


class SQLiteMessages(SQLiteTree, SQLiteVectors, SQLiteState, SQLiteRecords):
    """Threads, sessions and messages, written with their index rows and vectors."""

    def thread(
        self, user: str, agent: str, *, create: bool = False, tenant: str = ""
    ) -> Thread | None:
        find = "SELECT id FROM threads WHERE tenant = ? AND user_id = ? AND agent_id = ?"
        with self._reading() as conn:
            row = conn.execute(find, (tenant, user, agent)).fetchone()
        if row:
            return Thread(row[0], user, agent, tenant)
        if not create:
            return None
        with self.transaction():
            # A new thread's id is past every id the store has given out: the clock in
            # microseconds, or the newest id + 1 if that is larger. (A forgotten thread's
            # id used to go to the next new thread, whose rows a search resolved for the
            # forgotten one could then read.) Caches, here and in other processes, are
            # keyed by id and generation, and a new thread's generation is new as well.
            now = time.time_ns() // 1000
            self._writer.execute(
                "INSERT OR IGNORE INTO threads"
                " (id, tenant, user_id, agent_id, created_at, generation)"
                " VALUES (MAX((SELECT COALESCE(MAX(id), 0) FROM threads) + 1, ?), ?, ?, ?, ?, ?)",
                (now, tenant, user, agent, format_timestamp(utcnow()), now),
            )
            row = self._writer.execute(find, (tenant, user, agent)).fetchone()
        return Thread(row[0], user, agent, tenant)

    def threads(self, user: str | None = None, *, tenant: str | None = "") -> list[Thread]:
        sql = "SELECT id, user_id, agent_id, tenant FROM threads"
        where: list[str] = []
        args: list[str] = []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if user is not None:
            where.append("user_id = ?")
            args.append(user)
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._reading() as conn:
            return [Thread(*r) for r in conn.execute(sql + " ORDER BY id", args).fetchall()]

    def sessions(self, thread: Thread) -> list[Session]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT key, started_at, last_at, message_count, metadata FROM sessions"
                " WHERE thread_id = ? ORDER BY first_index",
                (thread.id,),
            ).fetchall()
        return [session_of(r, thread) for r in rows]

    def last_session(self, thread: Thread) -> Session | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT s.key, s.started_at, s.last_at, s.message_count, s.metadata"
                " FROM messages m JOIN sessions s ON s.id = m.session_id"
                " WHERE m.thread_id = ? ORDER BY m.idx DESC LIMIT 1",
                (thread.id,),
            ).fetchone()
        return session_of(row, thread) if row else None

    def time_span(self, thread: Thread) -> tuple[datetime, datetime] | None:
        with self._reading() as conn:
            row = conn.execute(
                # Two seeks at the ends of the (thread, time) index.
                "SELECT (SELECT MIN(ts) FROM messages WHERE thread_id = ?1),"
                " (SELECT MAX(ts) FROM messages WHERE thread_id = ?1)",
                (thread.id,),
            ).fetchone()
        if not row or row[0] is None:
            return None
        return parse_stored(row[0]), parse_stored(row[1])

    def append(
        self,
        thread: Thread,
        messages: Sequence[NewMessage],
        vectors: Mapping[str, np.ndarray] | None = None,
        model_id: str | None = None,
        defer_tail: bool = False,
    ) -> list[Row]:
        if not messages:
            return []
        out: list[Row] = []
        with self.transaction():
            c = self._writer
            next_index = c.execute(
                "SELECT next_index FROM threads WHERE id = ?", (thread.id,)
            ).fetchone()[0]
            sessions: dict[str, int] = {}
            # Per session: (rowid, terms) of the messages whose windows this batch changes:
            # the last few already stored, then the new ones.
            tails: dict[int, list[tuple[int, str]]] = {}
            fresh: dict[int, int] = {}
            members: dict[int, list[str]] = {}
            span: dict[int, list[str]] = {}
            counts: dict[int, int] = {}
            turn_docs = turn_tokens = 0
            terms_held = self._turn_counts()
            # Whether the thread stays in time order (see _rowid_range).
            latest = c.execute(
                "SELECT MAX(ts) FROM messages WHERE thread_id = ?", (thread.id,)
            ).fetchone()[0]
            in_order = True
            for m in messages:
                if m.index is not None:
                    if m.index < next_index:
                        raise StoreError(
                            f"message {m.id!r}: index {m.index} is taken in thread "
                            f"{thread.user}/{thread.agent} (next free index is {next_index})"
                        )
                    next_index = m.index
                ts = format_timestamp(m.timestamp)
                if latest is not None and ts < latest:
                    in_order = False
                else:
                    latest = ts
                sid = sessions.get(m.session)
                if sid is None:
                    sid = self._session_id(thread, m.session, ts, next_index)
                    sessions[m.session] = sid
                    tails[sid] = self._session_tail(sid, next_index)
                    fresh[sid] = len(tails[sid])
                    span[sid] = [ts, ts]
                span[sid] = [min(span[sid][0], ts), max(span[sid][1], ts)]
                counts[sid] = counts.get(sid, 0) + 1
                meta = to_sorted_json(dict(m.metadata)) if m.metadata else "{}"
                try:
                    rowid = c.execute(
                        "INSERT INTO messages (uid, thread_id, session_id, idx, role, speaker,"
                        " content, ts, metadata, chash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            m.id,
                            thread.id,
                            sid,
                            next_index,
                            m.role,
                            m.speaker,
                            m.content,
                            ts,
                            meta,
                            m.chash,
                        ),
                    ).lastrowid
                except sqlite3.IntegrityError as exc:
                    raise StoreError(f"message id {m.id!r} already exists in {self.path}") from exc
                assert rowid is not None
                c.execute("INSERT INTO turn_fts (rowid, terms) VALUES (?, ?)", (rowid, m.terms))
                terms_held.indexed(m.terms)
                turn_docs += 1
                turn_tokens += len(m.terms.split())
                tails[sid].append((rowid, m.terms))
                members.setdefault(sid, []).append(m.chash)
                message = Message(
                    id=m.id,
                    role=m.role,
                    content=m.content,
                    timestamp=m.timestamp,
                    session=m.session,
                    index=next_index,
                    speaker=m.speaker,
                    user=thread.user,
                    agent=thread.agent,
                    metadata=dict(m.metadata),
                )
                out.append(Row(rowid, message, m.chash))
                next_index += 1
            self._bump_stats("turn", turn_docs, turn_tokens)
            if not in_order:
                c.execute("UPDATE threads SET time_ordered = 0 WHERE id = ?", (thread.id,))
            stats: Stats = {}
            for sid, rows in tails.items():
                # Each changed window is written once per batch: the stored messages near
                # the new ones gain neighbours; the new ones get their first window.
                first_new = fresh[sid]
                for j in range(max(0, first_new - WINDOW_RADIUS), len(rows)):
                    if defer_tail and j + WINDOW_RADIUS >= len(rows):
                        # Short of neighbours after it: the next message would change it
                        # again. An older one written meanwhile is kept current.
                        if j < first_new:
                            self._write_window(rows, j, stats=stats, present_only=True)
                        continue
                    self._write_window(rows, j, new=j >= first_new, stats=stats)
                c.execute(
                    "UPDATE sessions SET message_count = message_count + ?,"
                    " started_at = MIN(started_at, ?), last_at = MAX(last_at, ?) WHERE id = ?",
                    (counts[sid], span[sid][0], span[sid][1], sid),
                )
            for key, (docs, tokens) in stats.items():
                self._bump_stats(key, docs, tokens)
            c.execute("UPDATE threads SET next_index = ? WHERE id = ?", (next_index, thread.id))
            if vectors and model_id:
                self.put_vectors(model_id, vectors)
            for sid, chashes in members.items():
                self._add_to_session_sum(sid, chashes, vectors, model_id, fresh[sid] == 0)
            if vectors and model_id and all(r.chash in vectors for r in out):
                self._on_commit(
                    partial(
                        self._dense_appended,
                        thread,
                        [r.rowid for r in out],
                        vectors,
                        [r.chash for r in out],
                        model_id,
                    )
                )
        return out

    def sessions_written_from(self, thread: Thread, index: int) -> list[str]:
        with self._reading() as conn:
            return [
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT s.key FROM messages m JOIN sessions s ON s.id = m.session_id"
                    " WHERE m.thread_id = ? AND m.idx >= ?",
                    (thread.id, index),
                )
            ]

    def _session_id(self, thread: Thread, key: str, ts: str, first_index: int) -> int:
        c = self._writer
        row = c.execute(
            "SELECT id FROM sessions WHERE thread_id = ? AND key = ?", (thread.id, key)
        ).fetchone()
        if row:
            return int(row[0])
        sid = c.execute(
            "INSERT INTO sessions (thread_id, key, started_at, last_at, first_index)"
            " VALUES (?, ?, ?, ?, ?)",
            (thread.id, key, ts, ts, first_index),
        ).lastrowid
        assert sid is not None
        return sid

    def get(self, message_id: str) -> Row | None:
        with self._reading() as conn:
            r = conn.execute(ROW_SELECT + " WHERE m.uid = ?", (message_id,)).fetchone()
        return row_of(r) if r else None

    def rows(self, rowids: Sequence[int]) -> dict[int, Row]:
        with self._reading() as conn:
            return read_rows(conn, rowids)

    def with_hashes(self, thread: Thread, chashes: Sequence[str]) -> list[Row]:
        out: list[Row] = []
        with self._reading() as conn:
            for chunk, marks in batches(list(dict.fromkeys(chashes))):
                out.extend(
                    row_of(r)
                    for r in conn.execute(
                        ROW_SELECT + f" WHERE m.chash IN ({marks}) AND m.thread_id = ?",
                        [*chunk, thread.id],
                    )
                )
        out.sort(key=lambda row: row.message.index)
        return out

    def messages(
        self,
        thread: Thread,
        *,
        session: str | None = None,
        start: int | None = None,
        end: int | None = None,
        limit: int | None = None,
        last: int | None = None,
        archived: bool = True,
    ) -> list[Row]:
        sql = ROW_SELECT + " WHERE m.thread_id = ?"
        args: list[Any] = [thread.id]
        if not archived:
            sql += " AND m.archived = 0"
        if session is not None:
            sql += " AND s.key = ?"
            args.append(session)
        if start is not None:
            sql += " AND m.idx >= ?"
            args.append(start)
        if end is not None:
            sql += " AND m.idx < ?"
            args.append(end)
        if last is not None:
            sql += " ORDER BY m.idx DESC LIMIT ?"
            args.append(last)
            with self._reading() as conn:
                return [row_of(r) for r in reversed(conn.execute(sql, args).fetchall())]
        sql += " ORDER BY m.idx"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._reading() as conn:
            return [row_of(r) for r in conn.execute(sql, args).fetchall()]

    def neighbors(self, rowid: int, before: int, after: int) -> list[Row]:
        with self._reading() as conn:
            anchor = conn.execute(
                "SELECT session_id, idx FROM messages WHERE id = ?", (rowid,)
            ).fetchone()
            if not anchor:
                return []
            sid, idx = anchor
            prev = conn.execute(
                ROW_SELECT + " WHERE m.session_id = ? AND m.idx < ? AND +m.archived = 0"
                " ORDER BY m.idx DESC LIMIT ?",
                (sid, idx, before),
            ).fetchall()
            nxt = conn.execute(
                ROW_SELECT + " WHERE m.session_id = ? AND m.idx > ? AND +m.archived = 0"
                " ORDER BY m.idx LIMIT ?",
                (sid, idx, after),
            ).fetchall()
        return [row_of(r) for r in reversed(prev)] + [row_of(r) for r in nxt]

    def state(self, thread: Thread) -> ThreadState:
        with self._reading() as conn:
            row = conn.execute(
                # Positions grow with row numbers, so the last position's row is the
                # largest, found through the (thread, position) index without a scan.
                "SELECT t.generation, (SELECT id FROM messages WHERE thread_id = t.id"
                " ORDER BY idx DESC LIMIT 1), t.next_index FROM threads t WHERE t.id = ?",
                (thread.id,),
            ).fetchone()
        if not row:
            return ThreadState(-1, 0, 0)
        return ThreadState(int(row[0]), int(row[1] or 0), int(row[2]))

    def count(self, thread: Thread, *, upto: int | None = None) -> int:
        with self._reading() as conn:
            if upto is not None:
                return int(
                    conn.execute(
                        "SELECT COUNT(*) FROM messages WHERE thread_id = ? AND id <= ?",
                        (thread.id, upto),
                    ).fetchone()[0]
                )
            row = conn.execute(
                "SELECT COALESCE(SUM(message_count), 0) FROM sessions WHERE thread_id = ?",
                (thread.id,),
            ).fetchone()
        return int(row[0])

    def iter_rows(self, thread: Thread, batch: int = 5000) -> Iterator[Row]:
        last = -1
        while True:
            with self._reading() as conn:
                chunk = conn.execute(
                    ROW_SELECT + " WHERE m.thread_id = ? AND m.idx > ? ORDER BY m.idx LIMIT ?",
                    (thread.id, last, batch),
                ).fetchall()
            if not chunk:
                return
            for r in chunk:
                yield row_of(r)
            last = chunk[-1][2]

    def speakers(self, thread: Thread, after_rowid: int = 0) -> list[str]:
        with self._reading() as conn:
            if after_rowid > 0:  # the messages since: a range of the primary key
                rows = conn.execute(
                    "SELECT DISTINCT speaker FROM messages WHERE +thread_id = ? AND id > ?"
                    " AND +speaker IS NOT NULL",
                    (thread.id, after_rowid),
                )
            else:  # every speaker: hop through the index, one seek per speaker
                rows = conn.execute(
                    "WITH RECURSIVE s(name) AS ("
                    " SELECT MIN(speaker) FROM messages WHERE thread_id = ?1 AND speaker IS NOT NULL"
                    " UNION ALL SELECT (SELECT MIN(speaker) FROM messages"
                    "  WHERE thread_id = ?1 AND speaker > s.name)"
                    " FROM s WHERE s.name IS NOT NULL)"
                    " SELECT name FROM s WHERE name IS NOT NULL",
                    (thread.id,),
                )
            return [r[0] for r in rows]

    def allowed_rowids(self, threads: Sequence[Thread], filters: Filters) -> np.ndarray:
        where, args = filter_sql(threads, filters)
        with self._reading() as conn:
            rows = conn.execute(f"SELECT m.id FROM messages m WHERE {where} ORDER BY m.id", args)
            return np.fromiter((r[0] for r in rows), dtype=np.int64)

    def session_members(self, thread: Thread, sessions: Sequence[str]) -> dict[str, list[int]]:
        keys = list(dict.fromkeys(sessions))
        out: dict[str, list[int]] = {k: [] for k in keys}
        with self._reading() as conn:
            for chunk, marks in batches(keys, 300):
                for key, rowid in conn.execute(
                    "SELECT s.key, m.id FROM sessions s JOIN messages m ON m.session_id = s.id"
                    f" WHERE s.thread_id = ? AND s.key IN ({marks}) AND m.archived = 0"
                    " ORDER BY m.idx",
                    [thread.id, *chunk],
                ):
                    out[key].append(int(rowid))
        return out

    def _delete_rowids(self, rowids: Sequence[int], thread_ids: set[int]) -> Deleted:
        """Delete messages by row number with their index rows; fix up what they touched."""
        c = self._writer
        result = Deleted()
        if not rowids:
            return result
        touched_sessions: set[int] = set()
        chashes: set[str] = set()
        uids: dict[int, list[str]] = {}
        for chunk, marks in batches(rowids):
            for sid, chash, tid, uid in c.execute(
                f"SELECT session_id, chash, thread_id, uid FROM messages WHERE id IN ({marks})",
                chunk,
            ):
                touched_sessions.add(sid)
                chashes.add(chash)
                uids.setdefault(tid, []).append(uid)
            for key in LEXICAL_KEYS:
                sizes = [
                    len(t.split())
                    for (t,) in c.execute(
                        f"SELECT c0 FROM {key}_fts_content WHERE id IN ({marks})", chunk
                    )
                ]
                self._bump_stats(key, -len(sizes), -sum(sizes))
                c.execute(f"DELETE FROM {key}_fts WHERE rowid IN ({marks})", chunk)
            self._term_counts = None  # read again from the index, which lost these turns
            result.messages += c.execute(
                f"DELETE FROM messages WHERE id IN ({marks})", chunk
            ).rowcount
        for sid in touched_sessions:
            c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
            agg = c.execute(
                "SELECT COUNT(*), MIN(ts), MAX(ts), MIN(idx) FROM messages WHERE session_id = ?",
                (sid,),
            ).fetchone()
            if agg[0] == 0:
                c.execute("DELETE FROM sessions WHERE id = ?", (sid,))
                result.sessions += 1
            else:
                c.execute(
                    "UPDATE sessions SET message_count = ?, started_at = ?, last_at = ?,"
                    " first_index = ? WHERE id = ?",
                    (agg[0], agg[1], agg[2], agg[3], sid),
                )
        for tid, forgotten in uids.items():
            # Records derived from them lose them as sources, in this transaction.
            self._forget_sources_in(tid, forgotten)
        remaining = [
            sid
            for sid in touched_sessions
            if c.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone()
        ]
        self._rebuild_windows(remaining)
        for chash in chashes:
            if not c.execute("SELECT 1 FROM messages WHERE chash = ? LIMIT 1", (chash,)).fetchone():
                c.execute("DELETE FROM vectors WHERE chash = ?", (chash,))
                result.chashes.append(chash)
        for tid in thread_ids:
            c.execute("UPDATE threads SET generation = generation + 1 WHERE id = ?", (tid,))
        purging.record(c, sorted(thread_ids))
        self._on_commit(partial(self._rows_changed, sorted(thread_ids), forgotten=True))
        return result

    def _merge_deleted(self, c: sqlite3.Connection) -> list[str]:
        """Merge the full-text indexes, so deleted terms leave their segments, and drop
        unused vectors (old topic summaries included); returns the vectors' hashes."""
        self._settle_node_docs()  # a document taken out must be out before the merge
        for table in ("turn_fts", "window_fts", "topic_fts", "segment_fts", "record_fts"):
            # Checked before the merge too: a store deep already (written by an
            # earlier version) must not take the merge that reaches the end.
            if fts_levels(c, table) <= FTS_LEVEL_LIMIT:
                c.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
            levels = fts_levels(c, table)
            if levels > FTS_LEVEL_LIMIT:
                log.info("%s: %s has %d levels: rebuilding it", self.path, table, levels)
                c.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")
        unused = [
            r[0]
            for r in c.execute(
                "SELECT DISTINCT v.chash FROM vectors v WHERE NOT EXISTS"
                " (SELECT 1 FROM messages m WHERE m.chash = v.chash) AND NOT EXISTS"
                " (SELECT 1 FROM tree_nodes n WHERE n.chash = v.chash) AND NOT EXISTS"
                # A picture's CLIP vector is keyed by its digest (arbormem.images.clip).
                " (SELECT 1 FROM images i WHERE i.digest = v.chash)"
            )
        ]
        for chunk, marks in batches(unused):
            c.execute(f"DELETE FROM vectors WHERE chash IN ({marks})", chunk)
        return unused

    def purge(self, *, wait: float = PURGE_WAIT, rewrite: bool | None = None) -> Purge:
        """Finish every purge the store owes (see :mod:`arbormem.store.sqlite.purge`):
        merge the indexes of deletions not merged yet, rewrite the file if deleted rows
        may have left fragments in it (``rewrite`` None: when it is at most
        :data:`REWRITE_LIMIT_BYTES`), and empty the log, waiting up to ``wait``
        seconds for readers of an older snapshot."""
        result = Purge()
        with self.transaction():
            c = self._writer
            owed = purging.merges_owed(c)
            if owed:
                result.chashes = self._merge_deleted(c)
                result.threads = sorted({t for _, t in owed if t is not None})
                purging.merged(c, [i for i, _ in owed])
            due = purging.rewrite_owed(c)
        if result.threads:
            # A forget killed before its purge left the threads' saved indexes too.
            self._rows_changed(result.threads, forgotten=True)
        if self._memory:
            if due is not None:  # no file: nothing can linger
                with self.transaction():
                    purging.rewritten(self._writer, due)
            return result
        if due is not None and (
            rewrite or (rewrite is None and os.path.getsize(self.path) <= REWRITE_LIMIT_BYTES)
        ):
            # On the write connection, so under its lock: other threads' writes used it
            # meanwhile and failed to commit ("SQL statements in progress").
            try:
                with self._lock:
                    if self._closed:
                        raise StoreError(f"{self.path} is closed")
                    purging.rewrite(self._writer)
            except sqlite3.Error as exc:
                # The deletion stands; only the rewrite is still owed (a full disk: it
                # needs room for a second copy of the store).
                log.warning("%s: could not rewrite the file after a forget: %s", self.path, exc)
            else:
                with self.transaction():
                    purging.rewritten(self._writer, due)
                    due = purging.rewrite_owed(self._writer)
        emptied = purging.empty_log(self._truncate_log, wait)
        if not emptied and self._checkpointer is not None:
            self._checkpointer.truncate_when_possible()
        result.pending = "rewrite" if due is not None else None if emptied else "readers"
        result.purged = result.pending is None
        return result

    def _truncate_log(self, seconds: float) -> bool:
        """One try at copying the whole log into the file and cutting it to nothing.
        It holds the write lock while it waits for readers, ``seconds`` at most: a
        longer wait would queue every write of this process behind it."""
        with self._lock:
            if self._closed:
                return False
            return purging.truncate_once(self._writer, seconds, int(self._timeout * 1000))

    def _finish_interrupted_purges(self) -> Purge | None:
        """Purge what a forget that was killed before its purge deleted (on open)."""
        try:
            with self._reading() as conn:
                if not purging.merges_owed(conn):
                    return None
            log.info("%s: finishing the purge of a forget that was cut short", self.path)
            return self.purge(wait=0.0)
        except (StoreError, sqlite3.Error) as exc:  # still owed: the next forget finishes it
            log.warning("%s: could not finish an interrupted purge: %s", self.path, exc)
            return None

    def delete_messages(self, message_ids: Sequence[str], thread: Thread | None = None) -> Deleted:
        with self.transaction():
            found: list[int] = []
            threads: set[int] = set()
            for uid in message_ids:
                if thread is None:
                    r = self._writer.execute(
                        "SELECT id, thread_id FROM messages WHERE uid = ?", (uid,)
                    ).fetchone()
                else:
                    r = self._writer.execute(
                        "SELECT id, thread_id FROM messages WHERE uid = ? AND thread_id = ?",
                        (uid, thread.id),
                    ).fetchone()
                if r:
                    found.append(r[0])
                    threads.add(r[1])
            return self._delete_rowids(found, threads)

    def delete_session(self, thread: Thread, session: str) -> Deleted:
        with self.transaction():
            rowids = [
                r[0]
                for r in self._writer.execute(
                    "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id"
                    " WHERE s.thread_id = ? AND s.key = ?",
                    (thread.id, session),
                )
            ]
            result = self._delete_rowids(rowids, {thread.id})
            self._writer.execute(
                "DELETE FROM session_vectors WHERE session_id IN"
                " (SELECT id FROM sessions WHERE thread_id = ? AND key = ?)",
                (thread.id, session),
            )
            self._writer.execute(
                "DELETE FROM session_state WHERE thread_id = ? AND session_key = ?",
                (thread.id, session),
            )
            left = self._writer.execute(
                "DELETE FROM sessions WHERE thread_id = ? AND key = ?", (thread.id, session)
            ).rowcount
            result.sessions += left
            return result

    def delete_nodes(self, thread: Thread, ids: Sequence[int] | None = None) -> int:
        with self.transaction():
            # Documents kept back for the commit go in first, so that deleting the
            # nodes takes theirs out (written after it, they would outlive them).
            self._settle_node_docs()
            return super().delete_nodes(thread, ids)

    def delete_thread(self, thread: Thread) -> Deleted:
        with self.transaction():
            c = self._writer
            # Its records go first, whole: forgetting their sources one by one is moot.
            self._drop_thread_records(thread.id)
            rowids = [
                r[0] for r in c.execute("SELECT id FROM messages WHERE thread_id = ?", (thread.id,))
            ]
            result = self._delete_rowids(rowids, {thread.id})
            c.execute(
                "DELETE FROM session_vectors WHERE session_id IN"
                " (SELECT id FROM sessions WHERE thread_id = ?)",
                (thread.id,),
            )
            result.sessions += c.execute(
                "DELETE FROM sessions WHERE thread_id = ?", (thread.id,)
            ).rowcount
            self.delete_nodes(thread)
            c.execute("DELETE FROM tree_state WHERE thread_id = ?", (thread.id,))
            c.execute("DELETE FROM session_state WHERE thread_id = ?", (thread.id,))
            c.execute("DELETE FROM tree_log WHERE thread_id = ?", (thread.id,))
            result.threads = c.execute("DELETE FROM threads WHERE id = ?", (thread.id,)).rowcount
            if result.threads and not rowids:
                purging.record(c, [thread.id])  # its topics' index rows went
            return result
