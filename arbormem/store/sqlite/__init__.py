"""The default back-end: one SQLite file in WAL mode.

The back-end is one class, :class:`SQLiteBackend`, assembled from one module per
capability of :mod:`arbormem.store`: :mod:`.connection` (connections and
transactions), :mod:`.messages`, :mod:`.lexical`, :mod:`.vectors`, :mod:`.tree`,
:mod:`.state` and :mod:`.records`; :mod:`.schema` holds the tables and their
forward migrations, :mod:`.checkpoint` the WAL checkpoints and :mod:`.driver` the
choice of SQLite driver.
"""

from __future__ import annotations

from arbormem.store.base import Backend
from arbormem.store.sqlite.messages import SQLiteMessages


class SQLiteBackend(SQLiteMessages, Backend):
    """Messages, full-text index, vectors, trees, session state and records in one SQLite file."""


__all__ = ["SQLiteBackend"]
