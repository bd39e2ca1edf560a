"""Storage back-ends. SQLite is the default; others plug in behind :class:`Backend`."""

from __future__ import annotations

import os

from arbormem.errors import ConfigError
from arbormem.store.base import (
    LEXICAL_KEYS,
    NODE_KEYS,
    Backend,
    Deleted,
    Filters,
    NewMessage,
    NodeBrief,
    NodeRow,
    Purge,
    Row,
    Thread,
    ThreadState,
    TreeLogEntry,
    TreeState,
)
from arbormem.store.sqlite import SQLiteBackend

__all__ = [
    "LEXICAL_KEYS",
    "NODE_KEYS",
    "Backend",
    "Deleted",
    "Filters",
    "NewMessage",
    "NodeBrief",
    "NodeRow",
    "Purge",
    "Row",
    "SQLiteBackend",
    "Thread",
    "ThreadState",
    "TreeLogEntry",
    "TreeState",
    "open_backend",
]


def open_backend(target: str | os.PathLike[str], **options: object) -> Backend:
    """Open a back-end from a path or URL.

    A plain path (or ``sqlite:///path``) opens SQLite; ``:memory:`` an in-memory
    SQLite database.
    """
    text = os.fspath(target)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ConfigError(
            f"unsupported store URL scheme {scheme!r}: give a file path or sqlite:///path"
        )
    return SQLiteBackend(text, **options)  # type: ignore[arg-type]
