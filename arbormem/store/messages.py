"""The messages capability: threads, sessions and the messages themselves.

Messages are kept verbatim, in order, partitioned by thread (one user with one
agent). Appending a message also indexes it (see :mod:`arbormem.store.lexical`) and
stores its vector (see :mod:`arbormem.store.vectors`) in the same transaction;
deleting one removes everything derived from it.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

import numpy as np

from arbormem.models import Session
from arbormem.store.core import StoreCore
from arbormem.store.types import (
    PURGE_WAIT,
    Deleted,
    Filters,
    NewMessage,
    Purge,
    Row,
    Thread,
    ThreadState,
)


class MessageStore(StoreCore):
    """Threads, sessions and messages: the lossless log."""

    @abc.abstractmethod
    def thread(
        self, user: str, agent: str, *, create: bool = False, tenant: str = ""
    ) -> Thread | None:
        """The thread of a scope (of ``tenant``), created on request."""

    @abc.abstractmethod
    def threads(self, user: str | None = None, *, tenant: str | None = "") -> list[Thread]:
        """The threads of ``tenant`` (every tenant's with None), all of them or those of
        one user, in the order they were made."""

    @abc.abstractmethod
    def sessions(self, thread: Thread) -> list[Session]:
        """The sessions of a thread in order of their first message."""

    @abc.abstractmethod
    def last_session(self, thread: Thread) -> Session | None:
        """The session holding the thread's most recent message."""

    def time_span(self, thread: Thread) -> tuple[datetime, datetime] | None:
        """The earliest and latest moments of the thread's messages, by time rather
        than by position (history can be stored out of order); None when empty."""
        sessions = self.sessions(thread)
        if not sessions:
            return None
        return min(s.started_at for s in sessions), max(s.last_at for s in sessions)

    @abc.abstractmethod
    def append(
        self,
        thread: Thread,
        messages: Sequence[NewMessage],
        vectors: Mapping[str, np.ndarray] | None = None,
        model_id: str | None = None,
        defer_tail: bool = False,
    ) -> list[Row]:
        """Store messages at the end of the thread, with their index rows and vectors.

        ``vectors`` maps content hashes to vectors of ``model_id``; hashes that
        already have a vector for that model are left as they are. With
        ``defer_tail`` the window keys of a session's newest messages, which its next
        messages would change again, are left out: the caller writes them with
        :meth:`write_tail_windows` when the session pauses.
        """

    @abc.abstractmethod
    def get(self, message_id: str) -> Row | None:
        """One message by its public id, whatever its scope."""

    @abc.abstractmethod
    def rows(self, rowids: Sequence[int]) -> dict[int, Row]:
        """Messages by row number."""

    def with_hashes(self, thread: Thread, chashes: Sequence[str]) -> list[Row]:
        """The thread's messages whose content hash is one of ``chashes``, in thread
        order, archived ones included. This reference version reads the whole thread;
        a back-end with an index on the hashes answers from it."""
        wanted = set(chashes)
        return [row for row in self.iter_rows(thread) if row.chash in wanted]

    @abc.abstractmethod
    def messages(
        self,
        thread: Thread,
        *,
        session: str | None = None,
        start: int | None = None,
        end: int | None = None,
        limit: int | None = None,
        last: int | None = None,
        archived: bool = True,
    ) -> list[Row]:
        """Messages of a thread in order, optionally one session's, or indexes [start, end);
        ``limit`` keeps the first n of those, ``last`` the last n (still in order);
        ``archived=False`` leaves out soft-archived ones."""

    @abc.abstractmethod
    def neighbors(self, rowid: int, before: int, after: int) -> list[Row]:
        """Up to ``before`` and ``after`` messages around ``rowid`` in the same session."""

    @abc.abstractmethod
    def state(self, thread: Thread) -> ThreadState:
        """The thread's change markers, cheap enough to read before every search."""

    @abc.abstractmethod
    def speakers(self, thread: Thread, after_rowid: int = 0) -> list[str]:
        """Distinct speaker names in a thread (of messages after ``after_rowid``)."""

    @abc.abstractmethod
    def allowed_rowids(self, threads: Sequence[Thread], filters: Filters) -> np.ndarray:
        """Row numbers of the threads' messages that pass the filters (sorted int64)."""

    @abc.abstractmethod
    def session_members(self, thread: Thread, sessions: Sequence[str]) -> dict[str, list[int]]:
        """Row numbers of the (not archived) messages of these sessions, in order."""

    @abc.abstractmethod
    def sessions_written_from(self, thread: Thread, index: int) -> list[str]:
        """Keys of the thread's sessions holding messages at position ``index`` or later."""

    @abc.abstractmethod
    def delete_messages(self, message_ids: Sequence[str], thread: Thread | None = None) -> Deleted:
        """Delete messages and everything derived from them."""

    @abc.abstractmethod
    def delete_session(self, thread: Thread, session: str) -> Deleted:
        """Delete a session, its messages and everything derived from them."""

    @abc.abstractmethod
    def delete_thread(self, thread: Thread) -> Deleted:
        """Delete a whole thread."""

    @abc.abstractmethod
    def purge(self, *, wait: float = PURGE_WAIT, rewrite: bool | None = None) -> Purge:
        """Make deleted data unrecoverable from the storage: merge the indexes that
        still hold deleted terms, delete vectors no message or topic uses any more,
        and overwrite old copies of pages, waiting up to ``wait`` seconds for other
        readers. ``rewrite``: True rewrites the whole storage if anything deleted may
        linger in it, False never does, None does when that is cheap."""

    @abc.abstractmethod
    def count(self, thread: Thread, *, upto: int | None = None) -> int:
        """How many messages the thread holds (with ``upto``: of those whose row
        number is at most ``upto``, which only a forget can lower)."""

    @abc.abstractmethod
    def iter_rows(self, thread: Thread, batch: int = 5000) -> Iterator[Row]:
        """Every message of a thread in order, streamed."""
