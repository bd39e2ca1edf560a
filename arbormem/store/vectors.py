"""The vectors capability: embeddings stored by content hash, and session sums.

Vectors are keyed by ``(model, content hash)``, so a text said twice is embedded
once, and a change of model keeps the old vectors until they are pruned.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from arbormem.store.core import StoreCore
from arbormem.store.types import (
    Row,
    Thread,
)


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

    def session_vector_sums(
        self, thread: Thread, sessions: Sequence[str], model_id: str
    ) -> dict[str, np.ndarray]:
        """The stored sum of each session's message vectors under ``model_id``, for
        the sessions that have one (a back-end need not keep any: callers sum the
        sessions it leaves out themselves)."""
        return {}

    def every_session_vector_sum(
        self, thread: Thread, model_id: str, dimensions: int, stop: threading.Event | None = None
    ) -> tuple[list[str], np.ndarray] | None:
        """Every stored session sum of ``dimensions`` numbers under ``model_id`` in the
        thread, in one pass: the sessions' keys and their sums row for row (float32).
        None when ``stop`` was set before the pass ended, or when the back-end keeps
        none (this default)."""
        return None

    @abc.abstractmethod
    def prune_vectors(self, keep_model: str) -> int:
        """Delete vectors of every other model; returns how many went."""

    @abc.abstractmethod
    def vector_models(self) -> dict[str, int]:
        """How many vectors each model has stored."""
