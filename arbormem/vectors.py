"""Dense search: per-thread vector indexes kept in step with the store.

:class:`ExactIndex` is a float32 matrix of unit vectors searched by one matrix
product: exact, and fast up to a few hundred thousand rows. Every index speaks
the small :class:`VectorIndex` interface so an approximate one can take over
for large threads without the callers noticing.

:class:`VectorCache` owns one index per thread, loads it lazily on first
search, appends rows as they are written, reloads when another process
deleted rows, and embeds rows that have no vector for the current model yet
(after the embedder changed, or after an embedding call failed).
"""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Sequence

import numpy as np

from arbormem.embed.base import Embedder
from arbormem.store.base import Backend, Thread, ThreadState

log = logging.getLogger(__name__)


class VectorIndex(abc.ABC):
    """Vectors keyed by int64 row ids (ascending as they are added)."""

    dim: int

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Append rows; ids are larger than any already present."""

    @abc.abstractmethod
    def remove(self, ids: np.ndarray) -> None:
        """Drop rows (unknown ids are ignored)."""

    @abc.abstractmethod
    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k ``(ids, cosine scores)``, best first, optionally within ``allowed`` ids."""

    @abc.abstractmethod
    def scores(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Cosine of the query with each given id (NaN for unknown ids)."""

    @abc.abstractmethod
    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(found mask, vectors)`` for the given ids (zero rows where not found)."""


class ExactIndex(VectorIndex):
    """Brute-force cosine over a growable float32 matrix."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self._n]

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: self._n]

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        need = self._n + len(ids)
        if need > len(self._ids):
            capacity = max(need, int(len(self._ids) * 1.5) + 1024)
            grown_ids = np.zeros(capacity, dtype=np.int64)
            grown_ids[: self._n] = self._ids[: self._n]
            grown = np.zeros((capacity, self.dim), dtype=np.float32)
            grown[: self._n] = self._matrix[: self._n]
            self._ids, self._matrix = grown_ids, grown
        self._ids[self._n : need] = ids
        self._matrix[self._n : need] = vectors
        self._n = need
        if self._n > len(ids) and self._ids[self._n - len(ids) - 1] > ids[0]:
            order = np.argsort(self._ids[: self._n], kind="stable")
            self._ids[: self._n] = self._ids[: self._n][order]
            self._matrix[: self._n] = self._matrix[: self._n][order]

    def remove(self, ids: np.ndarray) -> None:
        keep = ~np.isin(self.ids, np.asarray(ids, dtype=np.int64))
        n = int(keep.sum())
        self._ids[:n] = self.ids[keep]
        self._matrix[:n] = self.matrix[keep]
        self._n = n

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if self._n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self.matrix @ np.asarray(query, dtype=np.float32)
        ids = self.ids
        if allowed is not None:
            mask = np.isin(ids, allowed)
            ids, scores = ids[mask], scores[mask]
            if ids.size == 0:
                return ids, scores
        k = min(k, ids.size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return ids[top], scores[top]

    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, dtype=np.int64)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        if self._n == 0 or ids.size == 0:
            return np.zeros(len(ids), dtype=bool), out
        pos = np.clip(np.searchsorted(self.ids, ids), 0, self._n - 1)
        found = self.ids[pos] == ids
        out[found] = self.matrix[pos[found]]
        return found, out

    def scores(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        out = np.full(ids.shape, np.nan, dtype=np.float32)
        if self._n == 0 or ids.size == 0:
            return out
        pos = np.searchsorted(self.ids, ids)
        pos = np.clip(pos, 0, self._n - 1)
        found = self.ids[pos] == ids
        if found.any():
            out[found] = self.matrix[pos[found]] @ np.asarray(query, dtype=np.float32)
        return out


class _Entry:
    __slots__ = ("generation", "index", "session_n", "session_sum", "upto")

    def __init__(self, index: VectorIndex, generation: int, upto: int) -> None:
        self.index = index
        self.generation = generation
        self.upto = upto
        #: Running sum and count of vectors per session key (session centroids).
        self.session_sum: dict[str, np.ndarray] = {}
        self.session_n: dict[str, int] = {}

    def add(self, ids: np.ndarray, sessions: Sequence[str], vectors: np.ndarray) -> None:
        self.index.add(ids, vectors)
        for key, vec in zip(sessions, vectors):
            if key in self.session_sum:
                self.session_sum[key] += vec
                self.session_n[key] += 1
            else:
                self.session_sum[key] = np.array(vec, dtype=np.float32)
                self.session_n[key] = 1


class VectorCache:
    """One vector index per thread, lazily loaded and kept in step with writes."""

    def __init__(self, backend: Backend, embedder: Embedder) -> None:
        self.backend = backend
        self.embedder = embedder
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.RLock()

    def _entry(self, thread: Thread, state: ThreadState | None = None) -> _Entry:
        state = state or self.backend.state(thread)
        with self._lock:
            entry = self._entries.get(thread.id)
            if entry is None or entry.generation != state.generation:
                entry = _Entry(ExactIndex(self.embedder.dimensions), state.generation, 0)
                self._entries[thread.id] = entry
            if entry.upto < state.max_rowid:
                self._catch_up(thread, entry)
                entry.upto = state.max_rowid
            return entry

    def index(self, thread: Thread, state: ThreadState | None = None) -> VectorIndex:
        """The thread's index, brought up to date with the store first."""
        return self._entry(thread, state).index

    def session_centroids(self, thread: Thread, sessions: Sequence[str]) -> dict[str, np.ndarray]:
        """Unit-length mean vector of each session (those that have vectors)."""
        entry = self._entry(thread)
        out = {}
        for key in sessions:
            total = entry.session_sum.get(key)
            if total is not None:
                norm = float(np.linalg.norm(total))
                out[key] = total / norm if norm else total
        return out

    def _catch_up(self, thread: Thread, entry: _Entry) -> None:
        model = self.embedder.model_id
        ids, sessions, matrix, missing = self.backend.thread_vectors(
            thread, model, after_rowid=entry.upto
        )
        if len(ids):
            entry.add(ids, sessions, matrix)
        if missing:
            # Rows stored without a vector of this model: embed them now and keep the result.
            log.info("embedding %d messages with %s for thread %s", len(missing), model, thread.id)
            texts = [row.message.text for row in missing]
            vectors = self.embedder.embed_many(texts)
            self.backend.put_vectors(model, {row.chash: v for row, v in zip(missing, vectors)})
            order = np.argsort([row.rowid for row in missing])
            entry.add(
                np.asarray([missing[i].rowid for i in order], dtype=np.int64),
                [missing[i].message.session for i in order],
                vectors[order],
            )

    def appended(
        self, thread: Thread, rowids: Sequence[int], sessions: Sequence[str], vectors: np.ndarray
    ) -> None:
        """Rows this process just wrote: extend a loaded index without a store round trip."""
        with self._lock:
            entry = self._entries.get(thread.id)
            if entry is None or not len(rowids):
                return
            if min(rowids) <= entry.upto:
                return
            state = self.backend.state(thread)
            if state.generation != entry.generation or state.max_rowid != max(rowids):
                return  # someone else wrote too; the next search reloads what it must
            entry.add(np.asarray(rowids, dtype=np.int64), sessions, vectors)
            entry.upto = max(rowids)

    def invalidate(self, thread: Thread | None = None) -> None:
        """Drop cached indexes (one thread's, or all)."""
        with self._lock:
            if thread is None:
                self._entries.clear()
            else:
                self._entries.pop(thread.id, None)
