"""Storage back-ends, opened by URL.

:func:`open_store` picks the back-end from the URL's scheme: a plain path,
``sqlite:///path`` or ``:memory:`` opens SQLite; other schemes are registered by
the back-ends that serve them (:func:`register_store`), so nothing above the store
knows a file name or a driver. Every back-end implements
:class:`~arbormem.store.base.Backend`, the union of the capabilities in this package.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from arbormem.errors import ConfigError
from arbormem.store.base import Backend
from arbormem.store.types import (
    LEXICAL_KEYS,
    NODE_KEYS,
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
    "open_store",
    "register_store",
    "store_schemes",
]

#: Opens a store from its URL (the part after the scheme is the opener's to read).
Opener = Callable[..., Backend]

_OPENERS: dict[str, Opener] = {}


def register_store(scheme: str, opener: Opener) -> None:
    """Serve ``scheme://...`` URLs with ``opener(url, **options)``."""
    _OPENERS[scheme.lower()] = opener


def store_schemes() -> list[str]:
    """The URL schemes :func:`open_store` can open, the built-in ``sqlite`` first."""
    return ["sqlite", *sorted(s for s in _OPENERS if s != "sqlite")]


def _open_sqlite(url: str, **options: object) -> Backend:
    from arbormem.store.sqlite import SQLiteBackend

    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else url
    return SQLiteBackend(path, **options)  # type: ignore[arg-type]


register_store("sqlite", _open_sqlite)


def open_store(target: str | os.PathLike[str], **options: object) -> Backend:
    """Open the store at ``target``: a path or ``:memory:`` (SQLite), or a URL whose
    scheme a back-end registered (``sqlite:///path``; ``postgresql://...`` with the
    ``postgres`` extra installed). ``options`` go to the back-end."""
    text = os.fspath(target)
    if "://" not in text:
        return _OPENERS["sqlite"](text, **options)
    scheme = text.split("://", 1)[0].lower()
    opener = _OPENERS.get(scheme)
    if opener is None:
        raise ConfigError(
            f"unsupported store URL scheme {scheme!r}: give a file path, or a URL of "
            f"{', '.join(s + '://' for s in store_schemes())}"
        )
    return opener(text, **options)


def __getattr__(name: str) -> object:
    # The SQLite back-end is imported when first used: a store of another kind never
    # loads it.
    if name == "SQLiteBackend":
        from arbormem.store.sqlite import SQLiteBackend

        return SQLiteBackend
    raise AttributeError(f"module 'arbormem.store' has no attribute {name!r}")
