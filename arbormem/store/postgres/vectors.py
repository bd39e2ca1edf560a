"""Vectors in PostgreSQL with pgvector: the content-addressed cache, each live
message's vector by thread, session sums, and nearest-neighbour search done by
the database.

* ``vectors`` is SQLite's table: ``(content hash, model) -> vector``, for messages
  and topic summaries alike (a text said twice is embedded once).
* ``message_vectors`` holds each live message's vector under each model, keyed
  by ``(scope, thread, model, message)``: dense search reads a thread's rows
  there. Below ``ann_threshold`` messages a search is exact (the thread's rows in
  key order, a top-k sort); past it the thread gets an HNSW index of its own, a
  partial index on its rows (``WHERE thread_id = ...``), never built during an
  import (maintaining one costs twenty times the rest of an append,
  docs/storage.md): its first search starts the build on a thread of its own and
  searches exactly until it is ready (minutes at a million turns), and
  ``prepare_nearest`` builds it at once. Archived messages have no row there.
* ``vector_progress`` says how far a thread's rows are complete under a model;
  rows stored without a vector (a failed embedding, a new model) are found from
  there, taken from the cache or embedded with the search's embedder.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from arbormem.embed.base import Embedder
from arbormem.errors import EmbedderError
from arbormem.store.postgres.common import ROW_SELECT, row_of, scope_of
from arbormem.store.postgres.connection import ANN_LOCK, PostgresConnection, advisory_key
from arbormem.store.types import Row, Thread, ThreadState
from arbormem.store.vectors import NearestIndex

if TYPE_CHECKING:
    from arbormem.store.postgres import PostgresBackend

log = logging.getLogger("arbormem.store.postgres")

#: A search restricted to at most this many rows is exact over them (as SQLite's).
EXACT_ALLOWED = 20_000
#: pgvector's HNSW build settings (its defaults) and the search breadth.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: What pgvector's HNSW build holds for each vector besides the vector itself (its
#: neighbour lists at ``m = 16`` and bookkeeping). Measured: with 1 GB, a build of a
#: million 256-dimension vectors loaded 661,000 in 406 s and 3,000 in the next two
#: minutes, the pace of a graph past its memory (1 GB is 1.6 KB for each of 661,000);
#: given 2 GB the whole build took under 8 minutes.
HNSW_BYTES_PER_VECTOR = 700
#: Seconds before a search starts again an HNSW build that failed.
BUILD_RETRY_SECONDS = 60
#: The build's memory (``maintenance_work_mem``): at least pgvector's usual 1 GB, and
#: at most this, whatever the thread's size (the database server's memory is its
#: operator's: past the cap the build still finishes, on disk).
BUILD_MEMORY_MIN = 1 << 30
BUILD_MEMORY_MAX = 8 << 30


def build_memory(rows: int, dim: int) -> int:
    """Bytes of ``maintenance_work_mem`` for an HNSW build of ``rows`` vectors of
    ``dim`` dimensions: enough for the graph to stay in memory (a quarter to spare),
    within :data:`BUILD_MEMORY_MIN` and :data:`BUILD_MEMORY_MAX`."""
    need = int(max(0, rows) * (4 * max(1, dim) + HNSW_BYTES_PER_VECTOR) * 1.25)
    return max(BUILD_MEMORY_MIN, min(BUILD_MEMORY_MAX, need))


def _index_name(thread_id: int, model: str, dim: int) -> str:
    tag = hashlib.md5(model.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"mv_hnsw_{thread_id}_{tag}_{dim}"


def _literal(text: str) -> str:
    """A SQL string literal (for a partial index's predicate, which a query must
    repeat word for word for the planner to use the index)."""
    return "'" + text.replace("'", "''") + "'"


class PostgresVectors(PostgresConnection):
    """Vectors by content hash and by message, session sums, dense search."""

    def _whole(self) -> PostgresBackend:
        """This store as the whole back-end (whose other capabilities this one uses)."""
        return cast("PostgresBackend", self)

    def _vector_caches(self) -> None:
        if not hasattr(self, "_complete"):
            #: (thread id, model, dim) -> (generation, max rowid) known complete.
            self._complete: dict[tuple[int, str, int], tuple[int, int]] = {}
            #: (thread id, model, dim) -> whether its HNSW index exists and is valid.
            self._ann: dict[tuple[int, str, int], bool] = {}
            #: (thread id, session key) -> ((members, last rowid), centroid).
            self._centroids: dict[tuple[int, str], tuple[tuple[int, int], np.ndarray]] = {}
            #: Vectors computed for a read-only store, kept for this process only.
            self._extra: dict[tuple[int, str], dict[int, np.ndarray]] = {}
            #: HNSW builds a search started, running on threads of their own, with
            #: the connection each builds on (cancelled when the store closes).
            self._builds: dict[tuple[int, str, int], threading.Thread] = {}
            self._building: dict[tuple[int, str, int], Any] = {}
            #: When a build that failed may be tried again (monotonic seconds).
            self._build_retry: dict[tuple[int, str, int], float] = {}
            #: Set when the store starts closing: no build starts after it.
            self._builds_stopped = threading.Event()

            self._vector_lock = threading.RLock()

    # -- the content-addressed cache -----------------------------------------------

    def vectors(self, model_id: str, chashes: Sequence[str]) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(chashes))
        if not keys:
            return {}
        with self._reading() as conn, conn.cursor(binary=True) as cur:
            rows = cur.execute(
                "SELECT chash, vec FROM vectors WHERE model = %s AND chash = ANY(%s)",
                (model_id, keys),
            ).fetchall()
        return {h: v for h, v in rows}

    def put_vectors(self, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        if not vectors:
            return
        with self._writing() as conn:
            self._put_vectors(conn, model_id, vectors)

    @staticmethod
    def _put_vectors(conn: Any, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        items = sorted(vectors.items())
        # A stored vector is kept, unless it has another length (see thread_vectors).
        conn.execute(
            "INSERT INTO vectors (chash, model, dim, vec) SELECT h, %(m)s, vector_dims(v), v"
            " FROM unnest(%(h)s::text[], %(v)b::vector[]) AS u(h, v)"
            " ON CONFLICT (chash, model) DO UPDATE SET dim = excluded.dim, vec = excluded.vec"
            " WHERE vectors.dim <> excluded.dim",
            {
                "m": model_id,
                "h": [h for h, _ in items],
                "v": [np.asarray(v, dtype=np.float32).reshape(-1) for _, v in items],
            },
            binary=True,
        )

    def thread_vectors(
        self,
        thread: Thread,
        model_id: str,
        after_rowid: int = 0,
        limit: int | None = None,
        dim: int | None = None,
    ) -> tuple[np.ndarray, list[str], np.ndarray, list[Row]]:
        with self._reading(thread) as conn, conn.cursor(binary=True) as cur:
            found = cur.execute(
                "SELECT m.id, m.session_id, v.vec FROM messages m"
                " LEFT JOIN vectors v ON v.chash = m.chash AND v.model = %(m)s"
                " WHERE m.scope_id = %(s)s AND m.thread_id = %(t)s AND m.id > %(a)s"
                " AND NOT m.archived ORDER BY m.id LIMIT %(n)s",
                {**self._keys(thread), "m": model_id, "a": after_rowid, "n": limit},
            ).fetchall()
            # The sessions' keys by their ids, apart: joined in the statement above, a
            # plan made from statistics older than an import's growth read all of the
            # scope's sessions for each message (606,140 rows for 5,616 messages at
            # 6,000 turns), a background cost that grew with the square of the thread.
            keys = dict(
                cur.execute(
                    "SELECT id, key FROM sessions WHERE scope_id = %(s)s AND id = ANY(%(i)s)",
                    {**self._keys(thread), "i": sorted({int(r[1]) for r in found})},
                ).fetchall()
            )
        rows = [(r[0], keys[r[1]], r[2]) for r in found if r[1] in keys]

        def usable(vec: np.ndarray | None) -> bool:
            return vec is not None and (dim is None or len(vec) == dim)

        have = [r for r in rows if usable(r[2])]
        missing_ids = [int(r[0]) for r in rows if not usable(r[2])]
        if dim is None and len({len(r[2]) for r in have}) > 1:
            raise EmbedderError(
                f"stored vectors of {model_id} have different lengths; "
                "run 'arbormem reembed' to embed them again"
            )
        ids = np.fromiter((r[0] for r in have), dtype=np.int64, count=len(have))
        sessions = [r[1] for r in have]
        matrix = (
            np.vstack([r[2] for r in have]).astype(np.float32)
            if have
            else np.zeros((0, 0), dtype=np.float32)
        )
        missing = sorted(self._whole().rows(missing_ids).values(), key=lambda r: r.rowid)
        return ids, sessions, matrix, missing

    def prune_vectors(self, keep_model: str, *also: str) -> int:
        kept = [keep_model, *also]
        with self._writing() as conn:
            cur = conn.execute("DELETE FROM vectors WHERE NOT (model = ANY(%s))", (kept,))
            for table in ("message_vectors", "vector_progress", "session_vectors"):
                conn.execute(f"DELETE FROM {table} WHERE NOT (model = ANY(%s))", (kept,))
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
                    " AND tablename = 'message_vectors' AND indexname LIKE 'mv\\_hnsw\\_%%'",
                    (self.schema,),
                ).fetchall()
            ]
            keep = {hashlib.md5(m.encode("utf-8", "surrogatepass")).hexdigest()[:8] for m in kept}
            for name in names:
                if name.split("_")[3] not in keep:
                    conn.execute(f'DROP INDEX IF EXISTS "{name}"')
            self._on_commit(self._forget_vector_caches)
            return int(cur.rowcount)

    def _forget_vector_caches(self) -> None:
        self._vector_caches()
        self._kept.forget()
        with self._vector_lock:
            self._complete.clear()
            self._ann.clear()
            self._centroids.clear()
            self._extra.clear()

    def vector_models(self) -> dict[str, int]:
        with self._reading() as conn:
            rows = conn.execute("SELECT model, count(*) FROM vectors GROUP BY model").fetchall()
        return {m: int(n) for m, n in rows}

    # -- writing with an append ------------------------------------------------------

    def _store_vectors(
        self,
        conn: Any,
        thread: Thread,
        rows: Sequence[Row],
        vectors: Mapping[str, np.ndarray],
        model_id: str,
        last_id: int,
        sessions: Mapping[str, tuple[int, bool]],
    ) -> None:
        """Store an append's vectors: the cache, the messages' rows, and how far the
        thread is complete under the model."""
        self._put_vectors(conn, model_id, vectors)
        s = scope_of(thread)
        have = [r for r in rows if r.chash in vectors]
        if have:
            with (
                conn.cursor() as cur,
                cur.copy(
                    "COPY message_vectors (scope_id, thread_id, model, message_id, session_id, vec)"
                    " FROM STDIN (FORMAT BINARY)"
                ) as cp,
            ):
                cp.set_types(["int8", "int8", "text", "int8", "int8", "vector"])
                for r in have:
                    cp.write_row(
                        (
                            s,
                            thread.id,
                            model_id,
                            r.rowid,
                            sessions[r.message.session][0],
                            np.asarray(vectors[r.chash], dtype=np.float32).reshape(-1),
                        )
                    )
        if len(have) == len(rows):
            top = max(r.rowid for r in rows)
            # Complete still, when it was complete up to the thread's last message (a
            # thread's first messages make it complete).
            conn.execute(
                "INSERT INTO vector_progress (scope_id, thread_id, model, upto)"
                " VALUES (%(s)s, %(t)s, %(m)s, %(top)s)"
                " ON CONFLICT (scope_id, thread_id, model) DO UPDATE SET upto = excluded.upto"
                if last_id == 0
                else "UPDATE vector_progress SET upto = %(top)s WHERE scope_id = %(s)s"
                " AND thread_id = %(t)s AND model = %(m)s AND upto >= %(last)s",
                {"s": s, "t": thread.id, "m": model_id, "top": top, "last": last_id},
            )

    def _session_sums(
        self,
        conn: Any,
        thread: Thread,
        members: Mapping[int, Sequence[str]],
        vectors: Mapping[str, np.ndarray] | None,
        model_id: str | None,
        new_session: Mapping[int, bool],
    ) -> None:
        """Add new messages' vectors to their sessions' sums (see SQLite's
        ``session_vectors``, whose rules these are)."""
        s = scope_of(thread)
        drop: list[int] = []
        keep: dict[int, np.ndarray] = {}
        full = [sid for sid in members]
        with conn.cursor(binary=True) as cur:
            stored = {
                int(r[0]): (r[1], r[2])
                for r in cur.execute(
                    "SELECT session_id, model, total FROM session_vectors"
                    " WHERE scope_id = %s AND session_id = ANY(%s)",
                    (s, full),
                ).fetchall()
            }
        for sid, chashes in members.items():
            if not vectors or not model_id or any(h not in vectors for h in chashes):
                drop.append(sid)
                continue
            added = np.stack([np.asarray(vectors[h], dtype=np.float32) for h in chashes]).sum(
                axis=0
            )
            row = stored.get(sid)
            if row is not None and row[0] == model_id and len(row[1]) == len(added):
                keep[sid] = row[1] + added
            elif new_session[sid]:
                keep[sid] = added
            else:
                with conn.cursor(binary=True) as cur:
                    blobs = [
                        r[0]
                        for r in cur.execute(
                            "SELECT v.vec FROM messages m LEFT JOIN vectors v ON v.model = %s"
                            " AND v.chash = m.chash WHERE m.scope_id = %s AND m.session_id = %s"
                            " AND NOT m.archived ORDER BY m.idx",
                            (model_id, s, sid),
                        ).fetchall()
                    ]
                if not blobs or any(b is None or len(b) != len(added) for b in blobs):
                    drop.append(sid)
                    continue
                keep[sid] = np.stack(blobs).sum(axis=0)
        if drop:
            conn.execute(
                "DELETE FROM session_vectors WHERE scope_id = %s AND session_id = ANY(%s)",
                (s, drop),
            )
        if keep and model_id:
            conn.execute(
                "INSERT INTO session_vectors (scope_id, session_id, model, total)"
                " SELECT %(s)s, i, %(m)s, v FROM unnest(%(i)s::int8[], %(v)b::vector[]) AS u(i, v)"
                " ON CONFLICT (scope_id, session_id) DO UPDATE SET model = excluded.model,"
                " total = excluded.total",
                {"s": s, "m": model_id, "i": list(keep), "v": list(keep.values())},
                binary=True,
            )

    def session_vector_sums(
        self, thread: Thread, sessions: Sequence[str], model_id: str
    ) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(sessions))
        if not keys:
            return {}

        def read(missing: list[str]) -> dict[str, np.ndarray]:
            with self._reading(thread) as conn, conn.cursor(binary=True) as cur:
                rows = cur.execute(
                    "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                    " ON v.scope_id = s.scope_id AND v.session_id = s.id"
                    " WHERE s.scope_id = %(s)s AND s.thread_id = %(t)s AND s.key = ANY(%(k)s)"
                    " AND v.model = %(m)s",
                    {**self._keys(thread), "k": missing, "m": model_id},
                ).fetchall()
            return {k: v for k, v in rows}

        # Kept between searches while the thread is unchanged (see .kept): every
        # change of a session's sum is an append, archive or delete of the thread.
        kind = ("sums", model_id)
        got = self._kept.get_many(thread.id, self._thread_stamp(thread), kind, keys, read)
        return {k: v.copy() for k, v in got.items()}

    def every_session_vector_sum(
        self, thread: Thread, model_id: str, dimensions: int, stop: threading.Event | None = None
    ) -> tuple[list[str], np.ndarray] | None:
        keys: list[str] = []
        rows: list[np.ndarray] = []
        with self._reading(thread) as conn, conn.cursor(binary=True) as cur:
            cur.execute(
                "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                " ON v.scope_id = s.scope_id AND v.session_id = s.id WHERE s.scope_id = %(s)s"
                " AND s.thread_id = %(t)s AND v.model = %(m)s AND vector_dims(v.total) = %(d)s",
                {**self._keys(thread), "m": model_id, "d": dimensions},
            )
            while chunk := cur.fetchmany(1024):
                if stop is not None and stop.is_set():
                    return None
                keys.extend(r[0] for r in chunk)
                rows.extend(r[1] for r in chunk)
        matrix = (
            np.vstack(rows).astype(np.float32)
            if rows
            else np.zeros((0, dimensions), dtype=np.float32)
        )
        matrix.flags.writeable = False  # shared by every search
        return keys, matrix

    # -- dense search ------------------------------------------------------------------

    def _ensure_vectors(self, thread: Thread, embedder: Embedder) -> ThreadState:
        """Give every live message of the thread a row in ``message_vectors`` under
        the embedder's model: from the cache, else embedded now. Returns the
        thread's state as it was read."""
        self._vector_caches()
        model, dim = embedder.model_id, int(embedder.dimensions)
        state = self._whole().state(thread)
        key = (thread.id, model, dim)
        if self._complete.get(key) == (state.generation, state.max_rowid):
            return state
        k = {**self._keys(thread), "m": model, "d": dim}
        with self._reading(thread) as conn:
            row = conn.execute(
                "SELECT upto FROM vector_progress WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND model = %(m)s",
                k,
            ).fetchone()
        upto = int(row[0]) if row else 0
        if upto < state.max_rowid:
            self._catch_up(thread, embedder, upto, state.max_rowid)
        self._complete[key] = (state.generation, state.max_rowid)
        return state

    def _catch_up(self, thread: Thread, embedder: Embedder, upto: int, top: int) -> None:
        model, dim = embedder.model_id, int(embedder.dimensions)
        k = {**self._keys(thread), "m": model, "d": dim, "a": upto, "top": top}
        missing_sql = (
            ROW_SELECT + " WHERE m.scope_id = %(s)s AND m.thread_id = %(t)s AND m.id > %(a)s"
            " AND m.id <= %(top)s AND NOT m.archived AND NOT EXISTS (SELECT 1 FROM"
            " message_vectors v WHERE v.scope_id = m.scope_id AND v.thread_id = m.thread_id"
            " AND v.model = %(m)s AND v.message_id = m.id AND vector_dims(v.vec) = %(d)s)"
            " ORDER BY m.id"
        )
        if self.read_only:
            with self._reading(thread) as conn:
                missing = [row_of(r) for r in conn.execute(missing_sql, k).fetchall()]
            self._embed_for_process(thread, embedder, missing)
            return
        with self._writing(thread) as conn:
            # From the cache first: vectors stored by content hash (an earlier
            # model run, a reembed, another thread saying the same).
            conn.execute(
                "INSERT INTO message_vectors (scope_id, thread_id, model, message_id,"
                " session_id, vec) SELECT m.scope_id, m.thread_id, %(m)s, m.id, m.session_id,"
                " v.vec FROM messages m JOIN vectors v ON v.chash = m.chash AND v.model = %(m)s"
                " AND v.dim = %(d)s WHERE m.scope_id = %(s)s AND m.thread_id = %(t)s"
                " AND m.id > %(a)s AND m.id <= %(top)s AND NOT m.archived"
                " ON CONFLICT (scope_id, thread_id, model, message_id) DO UPDATE"
                " SET vec = excluded.vec WHERE vector_dims(message_vectors.vec) <> %(d)s",
                k,
            )
            missing = [row_of(r) for r in conn.execute(missing_sql, k).fetchall()]
        for start in range(0, len(missing), 2048):
            chunk = missing[start : start + 2048]
            log.info("embedding %d messages with %s for thread %s", len(chunk), model, thread.id)
            vecs = embedder.embed_many([r.message.text for r in chunk])
            with self._writing(thread) as conn:
                self._put_vectors(conn, model, {r.chash: v for r, v in zip(chunk, vecs)})
                conn.execute(
                    "INSERT INTO message_vectors (scope_id, thread_id, model, message_id,"
                    " session_id, vec) SELECT %(s)s, %(t)s, %(m)s, m.id, m.session_id, u.v"
                    " FROM unnest(%(i)s::int8[], %(v)b::vector[]) AS u(i, v)"
                    " JOIN messages m ON m.scope_id = %(s)s AND m.id = u.i"
                    " ON CONFLICT (scope_id, thread_id, model, message_id) DO UPDATE"
                    " SET vec = excluded.vec",
                    {
                        **k,
                        "i": [r.rowid for r in chunk],
                        "v": [np.asarray(v, dtype=np.float32).reshape(-1) for v in vecs],
                    },
                    binary=True,
                )
        with self._writing(thread) as conn:
            conn.execute(
                "INSERT INTO vector_progress (scope_id, thread_id, model, upto)"
                " VALUES (%(s)s, %(t)s, %(m)s, %(top)s) ON CONFLICT (scope_id, thread_id, model)"
                " DO UPDATE SET upto = greatest(vector_progress.upto, excluded.upto)",
                k,
            )

    def _embed_for_process(
        self, thread: Thread, embedder: Embedder, missing: Sequence[Row]
    ) -> None:
        """A read-only store's messages without vectors: embedded for this process."""
        extra = self._extra.setdefault((thread.id, embedder.model_id), {})
        todo = [r for r in missing if r.rowid not in extra]
        if todo:
            vecs = embedder.embed_many([r.message.text for r in todo])
            extra.update({r.rowid: np.asarray(v, dtype=np.float32) for r, v in zip(todo, vecs)})

    def _ann_ready(
        self, thread: Thread, model: str, dim: int, state: ThreadState, *, wait: bool
    ) -> bool:
        """Whether the thread searches an HNSW index: it has one, or is past the
        threshold and one is built now (``wait``) or started in the background (the
        search is exact meanwhile, as it is while another process builds it)."""
        key = (thread.id, model, dim)
        if self._ann.get(key):
            return True
        if state.next_index <= self._ann_threshold:
            return False
        if not wait:
            with self._vector_lock:
                running = self._builds.get(key)
            if running is not None and running.is_alive():
                return False  # this process builds it: exact meanwhile
        with self._reading() as conn:
            valid = self._index_valid(conn, _index_name(thread.id, model, dim))
        if valid:
            self._ann[key] = True
            return True
        if self.read_only:
            return False
        if not wait:
            self._build_later(thread, model, dim, rows=state.next_index)
            return False
        with self._vector_lock:
            running = self._builds.get(key)
        if running is not None:  # started by a search: its end is awaited
            running.join()
            if self._ann.get(key):
                return True
        return self._build_ann(thread, model, dim, rows=state.next_index)

    def _index_valid(self, conn: Any, name: str) -> bool | None:
        """Whether the index ``name`` of this schema is valid (None: there is none)."""
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s"
            " AND c.relname = %s",
            (self.schema, name),
        ).fetchone()
        return None if row is None else bool(row[0])

    def _build_later(self, thread: Thread, model: str, dim: int, *, rows: int) -> None:
        """Start building the thread's HNSW index on a thread of its own, unless a
        build of it runs, or failed less than :data:`BUILD_RETRY_SECONDS` ago."""
        key = (thread.id, model, dim)
        with self._vector_lock:
            running = self._builds.get(key)
            if (running is not None and running.is_alive()) or self._builds_stopped.is_set():
                return
            if time.monotonic() < self._build_retry.get(key, 0.0):
                return

            def build() -> None:
                try:
                    self._build_ann(thread, model, dim, rows=rows)
                except Exception as exc:
                    if not self._builds_stopped.is_set():  # not a cancel by close
                        log.warning(
                            "thread %s: the HNSW build failed (%s); searches stay exact"
                            " and the build is tried again in %d s",
                            thread.id,
                            exc,
                            BUILD_RETRY_SECONDS,
                        )
                    self._build_retry[key] = time.monotonic() + BUILD_RETRY_SECONDS

            worker = threading.Thread(target=build, name=f"arbormem-hnsw-{thread.id}", daemon=True)
            self._builds[key] = worker
        worker.start()

    def _build_ann(self, thread: Thread, model: str, dim: int, *, rows: int) -> bool:
        key = (thread.id, model, dim)
        name = _index_name(thread.id, model, dim)
        s = scope_of(thread)
        predicate = (
            f"scope_id = {int(s)} AND thread_id = {int(thread.id)} AND model = {_literal(model)}"
            f" AND vector_dims(vec) = {int(dim)}"
        )
        lock = advisory_key(thread.id, ANN_LOCK)
        with self._reading() as conn:
            if not conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()[0]:
                return False  # another process is building it: exact meanwhile
            self._building[key] = conn
            try:
                # Another process may have built it since it was looked for; one
                # interrupted (a process killed, a store closed) left it invalid.
                valid = self._index_valid(conn, name)
                if valid:
                    self._ann[key] = True
                    return True
                if valid is not None:
                    conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
                log.info("thread %s: building its HNSW index (%s)", thread.id, name)
                # Sized to the thread: a graph that outgrows it is built on disk.
                megabytes = -(-build_memory(rows, dim) // 2**20)
                conn.execute(f"SET maintenance_work_mem = '{megabytes}MB'")
                conn.execute(
                    f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON message_vectors'
                    f" USING hnsw ((vec::vector({int(dim)})) vector_ip_ops)"
                    f" WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
                    f" WHERE {predicate}"
                )
                conn.execute("RESET maintenance_work_mem")
            finally:
                self._building.pop(key, None)
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
                except Exception:  # a connection lost: its session, and the lock, ended
                    pass
        self._ann[key] = True
        return True

    def _closing(self) -> None:
        # A build a search started is cancelled (the store may be closing for good;
        # the next search after opening starts it again) and awaited.
        self._vector_caches()
        self._builds_stopped.set()
        with self._vector_lock:
            builds = list(self._builds.values())
            building = list(self._building.values())
        for conn in building:
            try:
                conn.cancel_safe(timeout=5.0)
            except Exception:  # already done, or the server gone: the join ends it
                pass
        for worker in builds:
            worker.join(timeout=self._timeout)
        super()._closing()

    def _drop_ann_indexes(self, conn: Any, thread: Thread) -> None:
        for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
            " AND tablename = 'message_vectors' AND indexname LIKE %s",
            (self.schema, f"mv\\_hnsw\\_{int(thread.id)}\\_%"),
        ).fetchall():
            conn.execute(f'DROP INDEX IF EXISTS "{name}"')

    def prepare_nearest(self, thread: Thread, embedder: Embedder) -> NearestIndex:
        state = self._ensure_vectors(thread, embedder)
        approximate = self._ann_ready(
            thread, embedder.model_id, int(embedder.dimensions), state, wait=True
        )
        return NearestIndex(state.next_index, approximate, True)

    def nearest(
        self,
        thread: Thread,
        embedder: Embedder,
        query: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        state = self._ensure_vectors(thread, embedder)
        model, dim = embedder.model_id, int(embedder.dimensions)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        base = {**self._keys(thread), "m": model, "d": dim, "q": q}
        narrow = allowed is not None and len(allowed) <= EXACT_ALLOWED
        if not narrow and self._ann_ready(thread, model, dim, state, wait=False):
            want = k if allowed is None else k * 8
            predicate = (
                f"scope_id = {int(base['s'])} AND thread_id = {int(thread.id)}"
                f" AND model = {_literal(model)} AND vector_dims(vec) = {dim}"
            )
            sql = (
                f"SELECT message_id, -(vec::vector({dim}) <#> %(q)s) FROM message_vectors"
                f" WHERE {predicate} ORDER BY vec::vector({dim}) <#> %(q)s LIMIT {int(want)}"
            )
            args: dict[str, Any] = {"q": q}
        else:
            sql = (
                "SELECT message_id, -(vec <#> %(q)s) AS score FROM message_vectors"
                " WHERE scope_id = %(s)s AND thread_id = %(t)s AND model = %(m)s"
                " AND vector_dims(vec) = %(d)s"
                + (" AND message_id = ANY(%(allowed)s)" if allowed is not None else "")
                # By the score (the negative distance): one product per row, not two.
                + " ORDER BY score DESC, message_id LIMIT %(k)s"
            )
            args = {**base, "k": k}
            if allowed is not None:
                args["allowed"] = [int(x) for x in allowed]
        with self._reading() as conn:
            rows = conn.execute(sql, args, binary=True).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        scores = np.fromiter((r[1] for r in rows), dtype=np.float32, count=len(rows))
        extra = self._extra.get((thread.id, model)) if self.read_only else None
        if extra:
            more = np.asarray(list(extra), dtype=np.int64)
            mat = np.vstack(list(extra.values()))
            ids = np.concatenate([ids, more])
            scores = np.concatenate([scores, mat @ q])
            order = np.argsort(-scores, kind="stable")
            ids, scores = ids[order], scores[order]
        if allowed is not None:
            keep = np.isin(ids, allowed)
            ids, scores = ids[keep], scores[keep]
        return ids[:k], scores[:k]

    def vectors_at(
        self, thread: Thread, embedder: Embedder, rowids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(rowids, dtype=np.int64)
        dim = int(embedder.dimensions)
        out = np.zeros((len(ids), dim), dtype=np.float32)
        found = np.zeros(len(ids), dtype=bool)
        if not len(ids):
            return found, out
        self._ensure_vectors(thread, embedder)
        got = self._message_vectors(thread, embedder.model_id, dim, ids.tolist())
        for i, rid in enumerate(ids.tolist()):
            vec = got.get(rid)
            if vec is not None:
                found[i] = True
                out[i] = vec
        return found, out

    def _message_vectors(
        self, thread: Thread, model: str, dim: int, ids: Iterable[int]
    ) -> dict[int, np.ndarray]:
        wanted = sorted(set(ids))

        def read(missing: list[int]) -> dict[int, np.ndarray]:
            with self._reading() as conn:
                rows = conn.execute(
                    "SELECT message_id, vec FROM message_vectors WHERE scope_id = %(s)s"
                    " AND thread_id = %(t)s AND model = %(m)s AND message_id = ANY(%(i)s)"
                    " AND vector_dims(vec) = %(d)s",
                    {**self._keys(thread), "m": model, "d": dim, "i": missing},
                    binary=True,
                ).fetchall()
            return {int(r[0]): r[1] for r in rows}

        # Kept between searches while the thread is unchanged (see .kept); a message
        # without a vector is read again (the next search may embed it).
        got = self._kept.get_many(
            thread.id,
            self._thread_stamp(thread),
            ("vec", model, dim),
            wanted,
            read,
            keep_missing=False,
        )
        out = dict(got)
        extra = self._extra.get((thread.id, model)) if self.read_only else None
        if extra:
            out.update({i: extra[i] for i in wanted if i in extra and i not in out})
        return out

    def session_centroids(
        self, thread: Thread, embedder: Embedder, sessions: Sequence[str]
    ) -> dict[str, np.ndarray]:
        self._ensure_vectors(thread, embedder)
        model, dim = embedder.model_id, int(embedder.dimensions)
        out: dict[str, np.ndarray] = {}
        for key, total in self.session_vector_sums(thread, sessions, model).items():
            if len(total) != dim:
                continue  # summed from vectors of another length: computed below
            norm = float(np.linalg.norm(total))
            out[key] = total / norm if norm else total
        rest = [s for s in sessions if s not in out]
        if not rest:
            return out
        todo: list[tuple[str, list[int]]] = []
        for key, rowids in self._whole().session_members(thread, rest).items():
            if not rowids:
                continue
            cached = self._centroids.get((thread.id, key))
            if cached is not None and cached[0] == (len(rowids), rowids[-1]):
                out[key] = cached[1]
            else:
                todo.append((key, rowids))
        if not todo:
            return out
        got = self._message_vectors(thread, model, dim, (r for _, ids in todo for r in ids))
        for key, rowids in todo:
            mine = [got[r] for r in rowids if r in got]
            if not mine:
                continue
            total = np.vstack(mine).sum(axis=0)
            norm = float(np.linalg.norm(total))
            centroid = total / norm if norm else total
            if len(self._centroids) > 100_000:
                self._centroids.clear()
            self._centroids[(thread.id, key)] = ((len(rowids), rowids[-1]), centroid)
            out[key] = centroid
        return out

    def _rows_changed(self, threads: Iterable[Thread], *, forgotten: bool) -> None:
        self._vector_caches()
        ids = {t.id for t in threads}
        with self._vector_lock:
            for key in [k for k in self._complete if k[0] in ids]:
                del self._complete[key]
            for key in [k for k in self._ann if k[0] in ids]:
                del self._ann[key]
            self._centroids = {k: v for k, v in self._centroids.items() if k[0] not in ids}
            for pair in [k for k in self._extra if k[0] in ids]:
                del self._extra[pair]
        super()._rows_changed(threads, forgotten=forgotten)
