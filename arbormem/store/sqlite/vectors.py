"""Vectors in SQLite: little-endian float32 blobs by model and content hash, a
running sum of each session's vectors, and dense search over them.

SQLite has no vector index here, so dense search is done in this process: each
searched thread's vectors are held in memory by a :class:`~.dense.VectorCache` (one
per embedding model), exact up to a size and approximate past it, saved beside
the file when approximate. The caches follow every write of this process after it
commits, and notice other processes' writes by the threads' change markers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from arbormem.embed.base import Embedder
from arbormem.errors import EmbedderError
from arbormem.store.sqlite.common import (
    batches,
    blob,
    read_rows,
)
from arbormem.store.sqlite.connection import SQLiteConnection
from arbormem.store.sqlite.dense import AnnIndex, VectorCache
from arbormem.store.types import (
    Row,
    Thread,
)
from arbormem.store.vectors import NearestIndex

log = logging.getLogger("arbormem.store.sqlite")


if TYPE_CHECKING:
    from arbormem.store.sqlite import SQLiteBackend


class SQLiteVectors(SQLiteConnection):
    """Vectors by model and content hash, session sums, and dense search in memory."""

    # -- dense search --------------------------------------------------------------------

    def dense_cache(self, embedder: Embedder) -> VectorCache:
        """The in-memory vector indexes of ``embedder``'s model (made on first use)."""
        with self._lock:
            cache = self._dense.get(embedder.model_id)
            if cache is None:
                cache = VectorCache(
                    cast("SQLiteBackend", self),
                    embedder,
                    self.cache_folder,
                    self._ann_threshold,
                )
                self._dense[embedder.model_id] = cache
            return cache

    def nearest(
        self,
        thread: Thread,
        embedder: Embedder,
        query: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.dense_cache(embedder).index(thread).search(query, k, allowed)

    def vectors_at(
        self, thread: Thread, embedder: Embedder, rowids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.dense_cache(embedder).index(thread).get(rowids)

    def session_centroids(
        self, thread: Thread, embedder: Embedder, sessions: Sequence[str]
    ) -> dict[str, np.ndarray]:
        return self.dense_cache(embedder).session_centroids(thread, sessions)

    def prepare_nearest(self, thread: Thread, embedder: Embedder) -> NearestIndex:
        index, saved = self.dense_cache(embedder).prepare(thread)
        return NearestIndex(len(index), isinstance(index, AnnIndex), saved)

    def preload_session_sums(
        self, thread: Thread, embedder: Embedder, stop: threading.Event | None = None
    ) -> int:
        return self.dense_cache(embedder).preload_sums(thread, stop)

    def holds_session_sums(self, thread: Thread, embedder: Embedder) -> bool:
        return self.dense_cache(embedder).holds_sums(thread)

    def _dense_appended(
        self,
        thread: Thread,
        rowids: Sequence[int],
        vectors: Mapping[str, np.ndarray],
        chashes: Sequence[str],
        model_id: str,
    ) -> None:
        """After an append commits: extend the model's indexes without reading back."""
        cache = self._dense.get(model_id)
        if cache is not None:
            cache.appended(thread, rowids, np.vstack([vectors[h] for h in chashes]))

    def _rows_changed(self, thread_ids: Iterable[int], *, forgotten: bool) -> None:
        """After rows left threads (deleted, or archived out of recall): drop what the
        caches hold of them, and with ``forgotten`` the files saved of them too (an
        index may hold vectors of forgotten messages)."""
        with self._lock:
            caches = list(self._dense.values())
        for thread_id in thread_ids:
            thread = Thread(thread_id, "", "")
            for cache in caches:
                cache.invalidate(thread)
                if forgotten:
                    cache.discard_files(thread)
            if forgotten and not caches and self.cache_folder is not None:
                VectorCache.discard_thread_files(self.cache_folder, thread)
        super()._rows_changed(thread_ids, forgotten=forgotten)

    def _closing(self) -> None:
        with self._lock:
            caches = list(self._dense.values())
        for cache in caches:
            try:
                cache.save()
            except Exception as exc:  # a cache: losing it only costs a rebuild
                log.warning("could not save the vector index: %s", exc)
        super()._closing()

    # -- stored vectors ------------------------------------------------------------------

    def _add_to_session_sum(
        self,
        sid: int,
        chashes: Sequence[str],
        vectors: Mapping[str, np.ndarray] | None,
        model_id: str | None,
        new_session: bool,
    ) -> None:
        """Add new messages' vectors to their session's sum (see ``session_vectors``):
        to the stored sum, or to none for a new session, or to the session's whole
        sum read again when the stored one is missing or another model's. A session
        with a member that has no vector of the model gets no sum."""
        c = self._writer
        if not vectors or not model_id or any(h not in vectors for h in chashes):
            # Some message has no vector yet: the sum would miss it. Searches sum
            # the session from the vector index until an append rebuilds it.
            c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
            return
        added = np.stack([np.asarray(vectors[h], dtype=np.float32) for h in chashes]).sum(axis=0)
        row = c.execute(
            "SELECT model, total FROM session_vectors WHERE session_id = ?", (sid,)
        ).fetchone()
        size = 4 * len(added)
        if row is not None and row[0] == model_id and len(row[1]) == size:
            total = np.frombuffer(row[1], dtype="<f4") + added
        elif new_session:
            total = added
        else:
            blobs = [
                blob
                for (blob,) in c.execute(
                    "SELECT v.vec FROM messages m"
                    " LEFT JOIN vectors v ON v.model = ? AND v.chash = m.chash"
                    " WHERE m.session_id = ? AND m.archived = 0 ORDER BY m.idx",
                    (model_id, sid),
                )
            ]
            if not blobs or any(b is None or len(b) != size for b in blobs):
                # An older member lacks a vector (a failed embedding, another model):
                # searches sum it from the index, which embeds what is missing.
                c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
                return
            # The new messages are stored already, so they are among these.
            total = np.stack([np.frombuffer(b, dtype="<f4") for b in blobs]).sum(axis=0)
        c.execute(
            "INSERT OR REPLACE INTO session_vectors (session_id, model, total) VALUES (?, ?, ?)",
            (sid, model_id, blob(total)),
        )

    def session_vector_sums(
        self, thread: Thread, sessions: Sequence[str], model_id: str
    ) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(sessions))
        out: dict[str, np.ndarray] = {}
        with self._reading() as conn:
            for chunk, marks in batches(keys, 300):
                for key, blob in conn.execute(
                    "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                    f" ON v.session_id = s.id WHERE s.thread_id = ? AND s.key IN ({marks})"
                    " AND v.model = ?",
                    [thread.id, *chunk, model_id],
                ):
                    out[key] = np.frombuffer(blob, dtype="<f4")
        return out

    def every_session_vector_sum(
        self, thread: Thread, model_id: str, dimensions: int, stop: threading.Event | None = None
    ) -> tuple[list[str], np.ndarray] | None:
        keys: list[str] = []
        chunks: list[bytes] = []
        with self._reading() as conn:
            cursor = conn.execute(
                "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                " ON v.session_id = s.id WHERE s.thread_id = ? AND v.model = ?"
                " AND length(v.total) = ?",
                (thread.id, model_id, 4 * dimensions),
            )
            while rows := cursor.fetchmany(1024):
                if stop is not None and stop.is_set():
                    return None
                keys.extend(r[0] for r in rows)
                chunks.append(b"".join(r[1] for r in rows))
        # Read-only, over one buffer: the sums are shared by every search.
        matrix = np.frombuffer(b"".join(chunks), dtype="<f4").reshape(len(keys), dimensions)
        return keys, matrix

    def vectors(self, model_id: str, chashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        keys = list(dict.fromkeys(chashes))
        with self._reading() as conn:
            for chunk, marks in batches(keys):
                for chash, vec in conn.execute(
                    f"SELECT chash, vec FROM vectors WHERE model = ? AND chash IN ({marks})",
                    [model_id, *chunk],
                ):
                    out[chash] = np.frombuffer(vec, dtype="<f4")
        return out

    def put_vectors(self, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        if not vectors:
            return
        with self.transaction():
            self._writer.executemany(
                # A stored vector is kept, unless it has another length (see thread_vectors).
                "INSERT INTO vectors (model, chash, dim, vec) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (model, chash) DO UPDATE SET dim = excluded.dim, vec = excluded.vec"
                " WHERE vectors.dim != excluded.dim",
                [(model_id, h, int(np.asarray(v).shape[-1]), blob(v)) for h, v in vectors.items()],
            )

    def thread_vectors(
        self,
        thread: Thread,
        model_id: str,
        after_rowid: int = 0,
        limit: int | None = None,
        dim: int | None = None,
    ) -> tuple[np.ndarray, list[str], np.ndarray, list[Row]]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT m.id, s.key, v.vec FROM messages m"
                " JOIN sessions s ON s.id = m.session_id"
                " LEFT JOIN vectors v ON v.model = ? AND v.chash = m.chash"
                " WHERE m.thread_id = ? AND m.id > ? AND m.archived = 0 ORDER BY m.id"
                " LIMIT ?",
                (model_id, thread.id, after_rowid, -1 if limit is None else limit),
            ).fetchall()
        size = None if dim is None else 4 * dim

        def usable(vec: bytes | None) -> bool:
            return vec is not None and (size is None or len(vec) == size)

        have = [r for r in rows if usable(r[2])]
        missing_ids = [r[0] for r in rows if not usable(r[2])]
        if size is None and len({len(r[2]) for r in have}) > 1:
            raise EmbedderError(
                f"stored vectors of {model_id} have different lengths; "
                "run 'arbormem reembed' to embed them again"
            )
        ids = np.fromiter((r[0] for r in have), dtype=np.int64, count=len(have))
        sessions = [r[1] for r in have]
        if have:
            matrix = np.frombuffer(b"".join(r[2] for r in have), dtype="<f4").reshape(len(have), -1)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        missing: list[Row] = []
        if missing_ids:
            with self._reading() as conn:
                missing = list(read_rows(conn, missing_ids).values())
        missing.sort(key=lambda row: row.rowid)
        return ids, sessions, matrix, missing

    def prune_vectors(self, keep_model: str, *also: str) -> int:
        kept = [keep_model, *also]
        marks = ", ".join("?" * len(kept))
        with self.transaction():
            cur = self._writer.execute(f"DELETE FROM vectors WHERE model NOT IN ({marks})", kept)

            def drop_others() -> None:
                with self._lock:
                    for model in [m for m in self._dense if m not in kept]:
                        del self._dense[model]

            self._on_commit(drop_others)
            return int(cur.rowcount)

    def vector_models(self) -> dict[str, int]:
        with self._reading() as conn:
            return {
                m: n for m, n in conn.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model")
            }
