"""The default back-end: one SQLite file in WAL mode.

The back-end is one class, :class:`SQLiteBackend`, assembled from one module per
capability of :mod:`arbormem.store`: :mod:`.connection` (connections and
transactions), :mod:`.messages`, :mod:`.lexical`, :mod:`.vectors`, :mod:`.tree` and
:mod:`.state`; :mod:`.schema` holds the tables and their forward migrations,
:mod:`.checkpoint` the WAL checkpoints and :mod:`.driver` the choice of SQLite
driver.
"""

from __future__ import annotations

import os

from arbormem.store.base import Backend
from arbormem.store.sidecar import Sidecar
from arbormem.store.sqlite.dense import ANN_THRESHOLD
from arbormem.store.sqlite.messages import SQLiteMessages
from arbormem.store.types import Thread


class SQLiteBackend(SQLiteMessages, Backend):
    """Messages, full-text index, vectors, trees and session state in one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        timeout: float = 30.0,
        read_only: bool | None = None,
        ann_threshold: int = ANN_THRESHOLD,
    ) -> None:
        super().__init__(
            path,
            synchronous=synchronous,
            timeout=timeout,
            read_only=read_only,
            ann_threshold=ann_threshold,
        )
        if self._memory or self.read_only:
            return
        self.purged_on_open = self._finish_interrupted_purges()
        if self.cache_folder is not None:
            # Files crashed saves left, of forgotten threads, of earlier generations.
            Sidecar(self.cache_folder).sweep(self._generation)

    def _generation(self, thread_id: int) -> int | None:
        """A thread's generation, None when it is gone."""
        generation = self.state(Thread(thread_id, "", "")).generation
        return None if generation < 0 else generation


__all__ = ["SQLiteBackend"]
