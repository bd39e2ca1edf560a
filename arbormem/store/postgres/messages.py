"""Threads, sessions and messages in PostgreSQL; appending writes the postings,
statistics and vectors in the same transaction, and deleting removes everything
derived.

An append holds the thread's advisory lock (see :mod:`.connection`) before it
reads the thread's next position and takes ids from the sequence, so positions
are gap-free and ids grow with them, whatever other processes write. Batches go
in with ``COPY`` (binary): messages, postings and vectors.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from arbormem.errors import StoreError
from arbormem.models import Message, Session
from arbormem.store.postgres.common import (
    KEY_CODES,
    ROW_SELECT,
    dump_json,
    row_of,
    scope_id,
    scope_of,
    session_of,
    tenant_of,
    utc,
)
from arbormem.store.postgres.lexical import _bump_in, _filter_sql, _scopes
from arbormem.store.postgres.state import PostgresState
from arbormem.store.postgres.tree import PostgresTree
from arbormem.store.postgres.vectors import PostgresVectors
from arbormem.store.postgres.windows import Member, plan
from arbormem.store.sqlite.windows import WINDOW_RADIUS
from arbormem.store.types import (
    Filters,
    NewMessage,
    Row,
    Thread,
    ThreadState,
)
from arbormem.timeutil import utcnow

log = logging.getLogger("arbormem.store.postgres")


#: A thread looked up with its state (see PostgresMessages._thread_and_state).
_THREAD_AND_STATE = (
    "SELECT t.id, t.generation, t.next_index, (SELECT id FROM messages WHERE"
    " scope_id = t.scope_id AND thread_id = t.id ORDER BY idx DESC LIMIT 1), t.changes,"
    " EXISTS (SELECT 1 FROM messages WHERE scope_id = t.scope_id AND thread_id = t.id"
    " AND archived), t.window_reach, ts.version, ts.active_id, ts.leaf_id, ts.next_seq,"
    " (SELECT coalesce(sum(changes), 0) FROM threads),"
    " (SELECT coalesce(sum(ticks), 0) FROM scopes),"
    " (SELECT coalesce(sum(changes), 0) FROM threads WHERE scope_id = %s),"
    " (SELECT coalesce(sum(ticks), 0) FROM scopes WHERE scope_id = %s),"
    " (SELECT array_agg(ARRAY[key, docs, tokens]) FROM (SELECT key::int8, sum(docs)::int8"
    " AS docs, sum(tokens)::int8 AS tokens FROM lex_stats WHERE scope_id = t.scope_id"
    " GROUP BY key) x)"
    " FROM threads t LEFT JOIN tree_state ts ON ts.scope_id = t.scope_id AND ts.thread_id = t.id"
    " WHERE t.scope_id = %s AND t.agent_id = %s AND t.tenant = %s AND t.user_id = %s"
)


def make_thread(thread_id: int, user: str, agent: str, tenant: str = "") -> Thread:
    """A Thread from a row of ``threads``."""
    return Thread(int(thread_id), user, agent, tenant)


class PostgresMessages(PostgresTree, PostgresVectors, PostgresState):
    """Threads, sessions and messages, written with their postings and vectors."""

    # -- threads and sessions ----------------------------------------------------------

    def thread(
        self, user: str, agent: str, *, create: bool = False, tenant: str = ""
    ) -> Thread | None:
        s = scope_id(tenant, user)
        query = (
            "SELECT id FROM threads WHERE scope_id = %s AND agent_id = %s AND tenant = %s"
            " AND user_id = %s"
        )
        if self._owns_transaction():
            with self._reading() as conn:
                row = conn.execute(query, (s, agent, tenant, user)).fetchone()
        else:
            row = self._thread_and_state(s, user, agent, tenant)
        if row:
            return make_thread(row[0], user, agent, tenant)
        if not create:
            return None
        with self._writing() as conn:
            conn.execute(
                "INSERT INTO scopes (scope_id, tenant, user_id) VALUES (%s, %s, %s)"
                " ON CONFLICT (scope_id) DO NOTHING",
                (s, tenant, user),
            )
            owner = conn.execute(
                "SELECT tenant, user_id FROM scopes WHERE scope_id = %s", (s,)
            ).fetchone()
            if tuple(owner) != (tenant, user):
                raise StoreError(
                    f"user {user!r} of tenant {tenant!r} has the scope key of another user"
                    f" ({owner[1]!r} of {owner[0]!r}); rename one of them"
                )
            now = time.time_ns() // 1000
            conn.execute(
                "INSERT INTO threads (scope_id, id, tenant, user_id, agent_id, created_at,"
                " generation) VALUES (%s, nextval('thread_ids'), %s, %s, %s, %s, %s)"
                " ON CONFLICT (scope_id, agent_id) DO NOTHING",
                (s, tenant, user, agent, utcnow(), now),
            )
            row = conn.execute(query, (s, agent, tenant, user)).fetchone()
        return make_thread(row[0], user, agent, tenant)

    def _thread_and_state(self, s: int, user: str, agent: str, tenant: str) -> Any:
        """A thread's id (a row, or None), read with what a search of it reads next
        (its state, its tree's cursor, the change marks, its scope's statistics) in
        the same statement: kept for the search this Python thread begins next."""
        commits, start = self._commits, time.monotonic()
        with self._reading() as conn:
            row = conn.execute(_THREAD_AND_STATE, (s, s, s, agent, tenant, user)).fetchone()
        if row is None:
            return None
        (tid, generation, next_index, last_id, changes, archived, reach,
         version, active, leaf, next_seq, mark, ticks, smark, sticks, stats) = row  # fmt: skip
        scopes = (s,)
        values: dict[Any, Any] = {
            ("state", tid): ThreadState(int(generation), int(last_id or 0), int(next_index)),
            ("tree_state", tid): None
            if version is None
            else (int(version), active, leaf, int(next_seq)),
            ("mark", None): (int(mark), int(ticks)),
            ("mark", scopes): (int(smark), int(sticks)),
            ("stamp", tid): (int(changes), int(generation), int(sticks)),
            ("archived", tid): bool(archived),
            ("reach", tid): int(reach),
        }
        sums = {int(k): (int(d), int(n)) for k, d, n in (stats or [])}
        for name, code in KEY_CODES.items():
            docs, tokens = sums.get(code, (0, 0))
            values[("stats", name, scopes)] = (docs, tokens / docs) if docs else (0, 0.0)
        self._stash(commits, start, values)
        return row

    def threads(self, user: str | None = None, *, tenant: str | None = "") -> list[Thread]:
        sql = "SELECT id, user_id, agent_id, tenant FROM threads WHERE true"
        args: list[Any] = []
        if tenant is not None:
            sql += " AND tenant = %s"
            args.append(tenant)
        if user is not None:
            if tenant is not None:
                sql += " AND scope_id = %s"
                args.append(scope_id(tenant, user))
            sql += " AND user_id = %s"
            args.append(user)
        with self._reading() as conn:
            rows = conn.execute(sql + " ORDER BY id", args).fetchall()
        return [make_thread(r[0], r[1], r[2], r[3]) for r in rows]

    def sessions(self, thread: Thread) -> list[Session]:
        with self._reading(thread) as conn:
            rows = conn.execute(
                "SELECT key, started_at, last_at, message_count, metadata FROM sessions"
                " WHERE scope_id = %(s)s AND thread_id = %(t)s ORDER BY first_index",
                self._keys(thread),
            ).fetchall()
        return [session_of(r, thread) for r in rows]

    def last_session(self, thread: Thread) -> Session | None:
        with self._reading(thread) as conn:
            row = conn.execute(
                "SELECT s.key, s.started_at, s.last_at, s.message_count, s.metadata"
                " FROM messages m JOIN sessions s ON s.scope_id = m.scope_id"
                " AND s.id = m.session_id WHERE m.scope_id = %(s)s AND m.thread_id = %(t)s"
                " ORDER BY m.idx DESC LIMIT 1",
                self._keys(thread),
            ).fetchone()
        return session_of(row, thread) if row else None

    def time_span(self, thread: Thread) -> tuple[datetime, datetime] | None:
        with self._reading(thread) as conn:
            row = conn.execute(
                "SELECT min(ts), max(ts) FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s",
                self._keys(thread),
            ).fetchone()
        if not row or row[0] is None:
            return None
        return utc(row[0]), utc(row[1])

    # -- appending -----------------------------------------------------------------------

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
        with self._writing(thread) as conn:
            return self._append(conn, thread, messages, vectors, model_id, defer_tail)

    def _append(
        self,
        conn: Any,
        thread: Thread,
        messages: Sequence[NewMessage],
        vectors: Mapping[str, np.ndarray] | None,
        model_id: str | None,
        defer_tail: bool,
    ) -> list[Row]:
        k = self._keys(thread)
        s = k["s"]
        head = conn.execute(
            "SELECT next_index, latest, (SELECT id FROM messages WHERE scope_id = %(s)s"
            " AND thread_id = %(t)s ORDER BY idx DESC LIMIT 1) FROM threads"
            " WHERE scope_id = %(s)s AND id = %(t)s",
            k,
        ).fetchone()
        if head is None:
            raise StoreError(f"thread {thread.user}/{thread.agent} does not exist (forgotten?)")
        next_index, latest, last_id = int(head[0]), head[1], int(head[2] or 0)
        # Positions, times and sessions, checked before anything is written.
        positions: list[int] = []
        in_order = True
        keys: dict[str, tuple[datetime, int]] = {}
        for m in messages:
            if m.index is not None:
                if m.index < next_index:
                    raise StoreError(
                        f"message {m.id!r}: index {m.index} is taken in thread "
                        f"{thread.user}/{thread.agent} (next free index is {next_index})"
                    )
                next_index = m.index
            positions.append(next_index)
            if latest is not None and m.timestamp < latest:
                in_order = False
            else:
                latest = m.timestamp
            keys.setdefault(m.session, (m.timestamp, next_index))
            next_index += 1
        sessions = self._session_ids(conn, thread, keys)
        fresh = [sid for key, (sid, new) in sessions.items() if not new]
        tails = self._tail(conn, thread, fresh)
        ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT nextval('message_ids') FROM generate_series(1, %s)", (len(messages),)
            ).fetchall()
        ]
        # Windows, per session: the stored tail and the new messages, in order.
        orders: dict[int, list[Member]] = {}
        first_new: dict[int, int] = {}
        for m, mid in zip(messages, ids):
            sid = sessions[m.session][0]
            if sid not in orders:
                orders[sid] = list(tails.get(sid, []))
                first_new[sid] = len(orders[sid])
            orders[sid].append(Member(mid, m.terms.split() if m.terms else [], None))
        wlen: dict[int, int] = {}
        lists: dict[int, tuple[list[int], list[int]]] = {}
        stored_changes: dict[int, Any] = {}
        window_docs = window_tokens = 0
        window_df: Counter[str] = Counter()
        reach = ahead = 0
        for sid, order in orders.items():
            start = first_new[sid]
            write: list[int] = []
            old: dict[int, list[str] | None] = {}
            for j in range(max(0, start - WINDOW_RADIUS), len(order)):
                present = j < start and order[j].wlen is not None
                # Short of neighbours after it, a window would change again with the
                # next message: deferred. An older one written meanwhile is kept current.
                if defer_tail and j + WINDOW_RADIUS >= len(order) and not present:
                    continue
                write.append(j)
                old[j] = _old_window(order[:start], j) if present else None
            result = plan(order, write, old, lists_for=range(start, len(order)))
            wlen.update(result.wlen)
            lists.update(result.lists)
            window_docs += result.docs
            window_tokens += result.tokens
            window_df.update(result.df)
            reach = max(reach, result.reach)
            ahead = max(ahead, result.ahead)
            stored_changes[sid] = (order[:start], result)
        rows = self._copy_messages(conn, thread, messages, ids, positions, sessions, wlen)
        new_ids = set(ids)
        terms_of = {mid: m.terms.split() if m.terms else [] for m, mid in zip(messages, ids)}
        self._copy_postings(conn, thread, terms_of)
        # The window lists of the new messages and of the stored ones whose windows
        # changed, in one statement.
        window_lists = {mid: lists.get(mid, ([], [])) for mid in ids}
        window_terms: dict[int, Sequence[str]] = dict(terms_of)
        for tail, result in stored_changes.values():
            if not tail:
                continue
            tail_terms = {m.id: m.terms for m in tail}
            self._set_wlens(conn, thread, {i: w for i, w in result.wlen.items() if i in tail_terms})
            for i, v in result.lists.items():
                if i in tail_terms and i not in new_ids:
                    window_lists[i] = v
                    window_terms[i] = tail_terms[i]
        self._set_lists(conn, thread, window_lists, window_terms)
        turn_df: Counter[str] = Counter()
        for terms in terms_of.values():
            turn_df.update(set(terms))
        spans: dict[int, list[Any]] = {}
        for m in messages:
            sid = sessions[m.session][0]
            span = spans.setdefault(sid, [m.timestamp, m.timestamp, 0])
            span[0], span[1], span[2] = (
                min(span[0], m.timestamp),
                max(span[1], m.timestamp),
                span[2] + 1,
            )
        # The statistics, the sessions' counts and times and the thread's head in one
        # statement (each part writes rows of its own table).
        _bump_in(
            conn,
            s,
            thread.id,
            {
                "turn": (len(messages), sum(len(t) for t in terms_of.values())),
                "window": (window_docs, window_tokens),
            },
            {"turn": turn_df, "window": window_df},
            ctes=(
                "spans AS (UPDATE sessions x SET message_count = x.message_count + u.n,"
                " started_at = least(x.started_at, u.a), last_at = greatest(x.last_at, u.b)"
                " FROM unnest(%(span_id)s::int8[], %(span_n)s::int8[], %(span_a)s::timestamptz[],"
                " %(span_b)s::timestamptz[]) AS u(id, n, a, b) WHERE x.scope_id = %(s)s"
                " AND x.id = ANY(%(span_id)s::int8[]) AND x.id = u.id),"
                " head AS (UPDATE threads SET next_index = %(next)s, latest = %(latest)s,"
                " time_ordered = time_ordered AND %(ordered)s, changes = changes + 1,"
                " window_reach = greatest(window_reach, %(reach)s),"
                " window_ahead = greatest(window_ahead, %(ahead)s)"
                " WHERE scope_id = %(s)s AND id = %(t)s),"
            ),
            args={
                "span_id": list(spans),
                "span_n": [v[2] for v in spans.values()],
                "span_a": [v[0] for v in spans.values()],
                "span_b": [v[1] for v in spans.values()],
                "next": next_index,
                "latest": latest,
                "ordered": in_order,
                "reach": reach,
                "ahead": ahead,
            },
        )
        if vectors and model_id:
            self._store_vectors(conn, thread, rows, vectors, model_id, last_id, sessions)
        self._session_sums(
            conn,
            thread,
            {sid: [m.chash for m in messages if sessions[m.session][0] == sid] for sid in orders},
            vectors,
            model_id,
            {sid: not tails.get(sid) for sid in orders},
        )
        return rows

    def _session_ids(
        self, conn: Any, thread: Thread, keys: Mapping[str, tuple[datetime, int]]
    ) -> dict[str, tuple[int, bool]]:
        """Each session key's id, creating the new ones: key -> (id, created)."""
        k = self._keys(thread)
        names = list(keys)
        found = {
            r[0]: (int(r[1]), False)
            for r in conn.execute(
                "SELECT key, id FROM sessions WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND key = ANY(%(keys)s)",
                {**k, "keys": names},
            ).fetchall()
        }
        missing = [n for n in names if n not in found]
        if missing:
            rows = conn.execute(
                "INSERT INTO sessions (scope_id, id, thread_id, key, started_at, last_at,"
                " first_index) SELECT %(s)s, nextval('session_ids'), %(t)s, u.key, u.ts, u.ts,"
                " u.first FROM unnest(%(keys)s::text[], %(ts)s::timestamptz[], %(first)s::int8[])"
                " WITH ORDINALITY AS u(key, ts, first, n) ORDER BY u.n RETURNING key, id",
                {
                    **k,
                    "keys": missing,
                    "ts": [keys[n][0] for n in missing],
                    "first": [keys[n][1] for n in missing],
                },
            ).fetchall()
            found.update({r[0]: (int(r[1]), True) for r in rows})
        return found

    def _copy_messages(
        self,
        conn: Any,
        thread: Thread,
        messages: Sequence[NewMessage],
        ids: Sequence[int],
        positions: Sequence[int],
        sessions: Mapping[str, tuple[int, bool]],
        wlen: Mapping[int, int],
    ) -> list[Row]:
        s = scope_of(thread)
        out: list[Row] = []
        try:
            with (
                conn.cursor() as cur,
                cur.copy(
                    "COPY messages (id, scope_id, thread_id, session_id, idx, uid, role, speaker,"
                    " content, ts, metadata, chash, terms, tlen, wlen) FROM STDIN (FORMAT BINARY)"
                ) as cp,
            ):
                cp.set_types(
                    ["int8", "int8", "int8", "int8", "int8", "text", "text", "text", "text",
                     "timestamptz", "text", "text", "text", "int4", "int4"]
                )  # fmt: skip
                for m, mid, idx in zip(messages, ids, positions):
                    terms = m.terms.split() if m.terms else []
                    cp.write_row(
                        (
                            mid, s, thread.id, sessions[m.session][0], idx, m.id, m.role,
                            m.speaker, m.content, m.timestamp, dump_json(m.metadata),
                            m.chash, m.terms, len(terms), wlen.get(mid),
                        )
                    )  # fmt: skip
                    message = Message(
                        id=m.id,
                        role=m.role,
                        content=m.content,
                        timestamp=m.timestamp,
                        session=m.session,
                        index=idx,
                        speaker=m.speaker,
                        user=thread.user,
                        agent=thread.agent,
                        metadata=dict(m.metadata),
                    )
                    out.append(Row(mid, message, m.chash))
        except self._psycopg.errors.UniqueViolation as exc:
            detail = getattr(exc.diag, "message_detail", "") or ""
            taken = (
                detail.split("=(", 1)[-1].rsplit(") already exists", 1)[0] if "=(" in detail else ""
            )
            if "uid" in detail or "messages_uid" in str(getattr(exc.diag, "constraint_name", "")):
                raise StoreError(f"message id {taken!r} already exists in {self.path}") from exc
            raise StoreError(f"{self.path}: {exc}") from exc
        return out

    # -- reading -------------------------------------------------------------------------

    def sessions_written_from(self, thread: Thread, index: int) -> list[str]:
        with self._reading(thread) as conn:
            return [
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT s.key FROM messages m JOIN sessions s ON s.scope_id ="
                    " m.scope_id AND s.id = m.session_id WHERE m.scope_id = %(s)s"
                    " AND m.thread_id = %(t)s AND m.idx >= %(i)s",
                    {**self._keys(thread), "i": index},
                ).fetchall()
            ]

    def get(self, message_id: str) -> Row | None:
        with self._reading() as conn:
            r = conn.execute(ROW_SELECT + " WHERE m.uid = %s", (message_id,)).fetchone()
        return row_of(r) if r else None

    def rows(self, rowids: Sequence[int]) -> dict[int, Row]:
        ids = list(dict.fromkeys(int(r) for r in rowids))
        if not ids:
            return {}
        with self._reading() as conn:
            found = conn.execute(ROW_SELECT + " WHERE m.id = ANY(%s)", (ids,)).fetchall()
        return {int(r[0]): row_of(r) for r in found}

    def with_hashes(self, thread: Thread, chashes: Sequence[str]) -> list[Row]:
        wanted = list(dict.fromkeys(chashes))
        if not wanted:
            return []
        with self._reading(thread) as conn:
            found = conn.execute(
                ROW_SELECT + " WHERE m.chash = ANY(%(h)s) AND m.scope_id = %(s)s"
                " AND m.thread_id = %(t)s ORDER BY m.idx",
                {**self._keys(thread), "h": wanted},
            ).fetchall()
        return [row_of(r) for r in found]

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
        sql = ROW_SELECT + " WHERE m.scope_id = %(s)s AND m.thread_id = %(t)s"
        args: dict[str, Any] = self._keys(thread)
        if not archived:
            sql += " AND NOT m.archived"
        if session is not None:
            sql += " AND s.key = %(session)s"
            args["session"] = session
        if start is not None:
            sql += " AND m.idx >= %(start)s"
            args["start"] = start
        if end is not None:
            sql += " AND m.idx < %(end)s"
            args["end"] = end
        if last is not None:
            sql += " ORDER BY m.idx DESC LIMIT %(n)s"
            args["n"] = last
            with self._reading(thread) as conn:
                return [row_of(r) for r in reversed(conn.execute(sql, args).fetchall())]
        sql += " ORDER BY m.idx"
        if limit is not None:
            sql += " LIMIT %(n)s"
            args["n"] = limit
        tx = self._tx()
        if tx is None:
            with self._reading(thread) as conn:
                return [row_of(r) for r in conn.execute(sql, args).fetchall()]
        # In a write transaction (tree upkeep), each message's leaf comes along: it
        # is asked for next (see PostgresTree.message_leaves).
        rows = self._read_rows(
            thread,
            sql.replace(
                " FROM messages m",
                ", p.leaf_id FROM messages m LEFT JOIN message_leaves p"
                " ON p.message_id = m.id AND p.scope_id = m.scope_id",
                1,
            ),
            args,
        )
        tx.leaves_seen.update((int(r[0]), r[-1]) for r in rows)
        return [row_of(r) for r in rows]

    def neighbors(self, rowid: int, before: int, after: int) -> list[Row]:
        with self._reading() as conn:
            anchor = conn.execute(
                "SELECT scope_id, session_id, idx FROM messages WHERE id = %s", (rowid,)
            ).fetchone()
            if not anchor:
                return []
            args = {"s": anchor[0], "sid": anchor[1], "i": anchor[2], "b": before, "a": after}
            prev = conn.execute(
                ROW_SELECT + " WHERE m.scope_id = %(s)s AND m.session_id = %(sid)s"
                " AND m.idx < %(i)s AND NOT m.archived ORDER BY m.idx DESC LIMIT %(b)s",
                args,
            ).fetchall()
            nxt = conn.execute(
                ROW_SELECT + " WHERE m.scope_id = %(s)s AND m.session_id = %(sid)s"
                " AND m.idx > %(i)s AND NOT m.archived ORDER BY m.idx LIMIT %(a)s",
                args,
            ).fetchall()
        return [row_of(r) for r in reversed(prev)] + [row_of(r) for r in nxt]

    def state(self, thread: Thread) -> ThreadState:
        def read() -> ThreadState:
            with self._reading(thread) as conn:
                row = conn.execute(
                    "SELECT generation, (SELECT id FROM messages WHERE scope_id = %(s)s"
                    " AND thread_id = %(t)s ORDER BY idx DESC LIMIT 1), next_index FROM threads"
                    " WHERE scope_id = %(s)s AND id = %(t)s",
                    self._keys(thread),
                ).fetchone()
            if not row:
                return ThreadState(-1, 0, 0)
            return ThreadState(int(row[0]), int(row[1] or 0), int(row[2]))

        found: ThreadState = self._cached(("state", thread.id), read)
        return found

    def count(self, thread: Thread, *, upto: int | None = None) -> int:
        with self._reading(thread) as conn:
            if upto is not None:
                row = conn.execute(
                    "SELECT count(*) FROM messages WHERE scope_id = %(s)s AND thread_id = %(t)s"
                    " AND id <= %(u)s",
                    {**self._keys(thread), "u": upto},
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT coalesce(sum(message_count), 0) FROM sessions"
                    " WHERE scope_id = %(s)s AND thread_id = %(t)s",
                    self._keys(thread),
                ).fetchone()
        return int(row[0])

    def iter_rows(self, thread: Thread, batch: int = 5000) -> Iterator[Row]:
        last = -1
        while True:
            with self._reading(thread) as conn:
                chunk = conn.execute(
                    ROW_SELECT + " WHERE m.scope_id = %(s)s AND m.thread_id = %(t)s"
                    " AND m.idx > %(i)s ORDER BY m.idx LIMIT %(n)s",
                    {**self._keys(thread), "i": last, "n": batch},
                ).fetchall()
            if not chunk:
                return
            for r in chunk:
                yield row_of(r)
            last = chunk[-1][2]

    def speakers(self, thread: Thread, after_rowid: int = 0) -> list[str]:
        with self._reading(thread) as conn:
            if after_rowid > 0:
                rows = conn.execute(
                    "SELECT DISTINCT speaker FROM messages WHERE scope_id = %(s)s"
                    " AND thread_id = %(t)s AND id > %(a)s AND speaker IS NOT NULL",
                    {**self._keys(thread), "a": after_rowid},
                ).fetchall()
            else:  # one seek per speaker through the (thread, speaker) index
                rows = conn.execute(
                    "WITH RECURSIVE x(name) AS ("
                    " SELECT min(speaker) FROM messages WHERE scope_id = %(s)s"
                    " AND thread_id = %(t)s AND speaker IS NOT NULL"
                    " UNION ALL SELECT (SELECT min(speaker) FROM messages WHERE scope_id = %(s)s"
                    " AND thread_id = %(t)s AND speaker > x.name) FROM x WHERE x.name IS NOT NULL)"
                    " SELECT name FROM x WHERE name IS NOT NULL",
                    self._keys(thread),
                ).fetchall()
        return [r[0] for r in rows]

    def allowed_rowids(self, threads: Sequence[Thread], filters: Filters) -> np.ndarray:
        if not threads:
            return np.zeros(0, dtype=np.int64)
        where, args = _filter_sql(filters)
        args.update({"s": _scopes(threads), "threads": sorted({t.id for t in threads})})
        with self._reading(*threads) as conn:
            rows = conn.execute(
                "SELECT m.id FROM messages m WHERE m.scope_id = ANY(%(s)s)"
                f" AND m.thread_id = ANY(%(threads)s) AND NOT m.archived{where} ORDER BY m.id",
                args,
            ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def session_members(self, thread: Thread, sessions: Sequence[str]) -> dict[str, list[int]]:
        keys = list(dict.fromkeys(sessions))
        if not keys:
            return {}

        def read(missing: list[str]) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {k: [] for k in missing}
            with self._reading(thread) as conn:
                for key, rowid in conn.execute(
                    "SELECT s.key, m.id FROM sessions s JOIN messages m"
                    " ON m.scope_id = s.scope_id AND m.session_id = s.id"
                    " WHERE s.scope_id = %(s)s AND s.thread_id = %(t)s"
                    " AND s.key = ANY(%(keys)s) AND NOT m.archived ORDER BY m.idx",
                    {**self._keys(thread), "keys": missing},
                ).fetchall():
                    out[key].append(int(rowid))
            return out

        # Kept between searches while the thread is unchanged (see .kept).
        got = self._kept.get_many(thread.id, self._thread_stamp(thread), "members", keys, read)
        return {k: list(got.get(k, ())) for k in keys}


def _old_window(order: Sequence[Member], j: int) -> list[str]:
    """The terms of the window at position ``j`` of the stored order."""
    out: list[str] = []
    for m in order[max(0, j - WINDOW_RADIUS) : j + WINDOW_RADIUS + 1]:
        out.extend(m.terms)
    return out


__all__ = ["PostgresMessages", "make_thread", "scope_of", "tenant_of"]
