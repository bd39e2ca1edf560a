"""What every storage capability shares: transactions, read-only stores, closing.

A back-end is one object implementing every capability of :mod:`arbormem.store`
(:class:`~arbormem.store.base.Backend`); each capability is an abstract class of its
own so that its contract can be read, and tested, on its own.
"""

from __future__ import annotations

import abc
from contextlib import AbstractContextManager
from pathlib import Path
from typing import ClassVar

from arbormem.errors import StoreError
from arbormem.store.types import Purge


class StoreCore(abc.ABC):
    """Transactions, the read-only switch and the lifecycle of a store."""

    #: A short name for the back-end, reported in benchmark configurations.
    name: ClassVar[str] = "store"
    #: True when the store was opened for reading only: every write raises StoreError,
    #: and caches kept beside it (approximate indexes, topic vectors) are not saved.
    read_only: bool = False
    #: A folder beside the store where derived caches may be kept between processes
    #: (None: keep none, as for an in-memory store or a database server).
    cache_folder: Path | None = None
    #: What opening the store did to finish the purges of forgets a crash cut short
    #: (None when there were none): the caller drops its caches of those threads.
    purged_on_open: Purge | None = None

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction; nested calls join the outer one. Raises StoreError on a
        read-only store (see :meth:`writable`)."""

    def writable(self) -> None:
        """Raise :class:`StoreError` saying why, when the store is read-only: callers
        check before work that a refused write would waste (embedding, an LLM call)."""
        if self.read_only:
            raise StoreError(f"the {self.name} store cannot be changed: it is read-only")

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections. The back-end is unusable afterwards."""

    def concurrent_reads(self) -> bool:
        """Whether reads issued now from other threads run beside each other and see
        what this thread sees. False by default: one connection, or none to spare."""
        return False

    def owns_path(self, path: Path) -> bool:
        """Whether writing to ``path`` would overwrite this store or one of the files
        it keeps beside it (an export must not replace its own database)."""
        return False

    @abc.abstractmethod
    def change_mark(self) -> tuple[int, int]:
        """Something that changes whenever messages are added or removed anywhere in
        the store, or a tree node's lexical documents are replaced: (highest message
        row number, a count of forgets, rewrites and such replacements).
        It is read on every search, so it must cost the same however many threads."""

    def map_for_search(self) -> None:
        """Let this thread's reads go through a memory map of the store, when the
        backend has one to give (this default has none). A search calls it first."""
        return None
