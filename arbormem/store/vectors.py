"""The vectors capability: embeddings stored by content hash, and dense search.

Vectors are keyed by ``(model, content hash)``, so a text said twice is embedded
once, and a change of model keeps the old vectors until they are pruned.

Nearest-neighbour search is the store's to answer (:meth:`VectorStore.nearest`):
the SQLite back-end keeps each searched thread's vectors in memory (an exact
matrix, an approximate index past a size), a database with vector search answers
it where the vectors live. The embedder is passed in because the search needs its
model's vectors, and rows stored without one (an embedding call that failed, a new
model) are embedded with it first.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arbormem.embed.base import Embedder
from arbormem.store.core import StoreCore
from arbormem.store.types import (
    Row,
    Thread,
)


@dataclass(frozen=True)
class NearestIndex:
    """What :meth:`VectorStore.prepare_nearest` built for a thread."""

    #: Vectors the thread's search structure holds.
    vectors: int
    #: Whether search over them is approximate (an HNSW graph) rather than exact.
    approximate: bool
    #: Whether it is saved where the next process finds it (False: a full disk, a
    #: read-only folder; the next process builds it again).
    saved: bool


class VectorStore(StoreCore):
    """Embeddings of messages and topic summaries, by model and content hash."""

    @abc.abstractmethod
    def vectors(self, model_id: str, chashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``model_id`` for these content hashes (those that exist)."""

    @abc.abstractmethod
    def put_vectors(self, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors by content hash (existing ones are kept)."""

    @abc.abstractmethod
    def thread_vectors(
        self,
        thread: Thread,
        model_id: str,
        after_rowid: int = 0,
        limit: int | None = None,
        dim: int | None = None,
    ) -> tuple[np.ndarray, list[str], np.ndarray, list[Row]]:
        """Rows after ``after_rowid`` (the first ``limit`` of them): ``(rowids, session
        keys, matrix)`` of those with a vector of ``model_id``, and the rows that have
        none yet. With ``dim``, a stored vector of another length counts as none (an
        endpoint that changed its model's dimension under the same name)."""

    @abc.abstractmethod
    def prune_vectors(self, keep_model: str, *also: str) -> int:
        """Delete vectors of every model but ``keep_model`` (and those in ``also``);
        returns how many went."""

    @abc.abstractmethod
    def vector_models(self) -> dict[str, int]:
        """How many vectors each model has stored."""

    # -- dense search ------------------------------------------------------------------

    @abc.abstractmethod
    def nearest(
        self,
        thread: Thread,
        embedder: Embedder,
        query: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The row numbers of the thread's ``k`` live messages nearest to ``query`` by
        cosine, with their similarities, best first; only rows in ``allowed`` (sorted
        int64) when given. The vectors are ``embedder``'s model's: messages stored
        without one are embedded with it first (and the vectors stored, unless the
        store is read-only)."""

    @abc.abstractmethod
    def vectors_at(
        self, thread: Thread, embedder: Embedder, rowids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of these rows under ``embedder``'s model: a boolean mask of the
        rows that have one, and a matrix row for row (zeros where the mask is False)."""

    @abc.abstractmethod
    def session_centroids(
        self, thread: Thread, embedder: Embedder, sessions: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """The unit-length mean vector of each session's live messages (for the
        sessions that have vectors)."""

    def prepare_nearest(self, thread: Thread, embedder: Embedder) -> NearestIndex:
        """Build now what the thread's first search would build on the spot (an
        approximate index after a large import) and keep it for the next process
        when the back-end can. This default has nothing to build."""
        return NearestIndex(0, False, True)

    def preload_session_sums(
        self, thread: Thread, embedder: Embedder, stop: threading.Event | None = None
    ) -> int:
        """Read, in one pass, what later searches would read session by session for
        their session centroids; returns how many sessions (0 when ``stop`` was set,
        or there is nothing to preload: this default)."""
        return 0

    def holds_session_sums(self, thread: Thread, embedder: Embedder) -> bool:
        """Whether :meth:`preload_session_sums` has nothing (more) to do for the thread."""
        return True
