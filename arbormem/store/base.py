"""The storage back-end interface.

A back-end keeps messages verbatim, their lexical index and their vectors, all
partitioned by thread (one user with one agent). Everything above it (recall,
the topic tree, the API) talks to storage only through this class, and the
contract tests in ``tests/test_store_contract.py`` run against every back-end.

Writes happen inside :meth:`Backend.transaction`; a write method called outside
one opens its own. Either the whole transaction lands or nothing does.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from arbormem.models import Message, Session

#: Lexical keys every back-end indexes for each message: the turn alone, and
#: the turn with its neighbours in the same session (one before, one after).
LEXICAL_KEYS = ("turn", "window")


@dataclass(frozen=True)
class Thread:
    """One user with one agent, as the back-end knows it."""

    id: int
    user: str
    agent: str


@dataclass
class NewMessage:
    """A validated message ready to be stored (built by :mod:`arbormem.ingest`)."""

    id: str
    role: str
    content: str
    timestamp: datetime
    session: str
    speaker: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Space-joined analysed terms of the message text (see :mod:`arbormem.text`).
    terms: str = ""
    #: Content hash of the text that is embedded (keys the vector store).
    chash: str = ""
    #: Position in the thread; ``None`` appends. Given only by imports, which
    #: restore exported positions (they must lie beyond the thread's last one).
    index: int | None = None


@dataclass(frozen=True)
class Row:
    """A stored message with the back-end's internal row number."""

    rowid: int
    message: Message
    chash: str


@dataclass(frozen=True)
class Filters:
    """Restrictions a search applies on top of its scope."""

    sessions: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    roles: tuple[str, ...] | None = None

    @property
    def empty(self) -> bool:
        return not (self.sessions or self.since or self.until or self.roles)


@dataclass(frozen=True)
class ThreadState:
    """What an in-memory cache needs to know to stay in step with the store.

    ``generation`` changes whenever rows are deleted or rewritten; ``max_rowid``
    grows with every append.
    """

    generation: int
    max_rowid: int
    count: int
    #: The position the next appended message will get.
    next_index: int = 0


@dataclass
class Deleted:
    """What a deletion removed."""

    messages: int = 0
    sessions: int = 0
    threads: int = 0
    #: Content hashes whose vectors were dropped because nothing refers to them now.
    chashes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, int]:
        return {"messages": self.messages, "sessions": self.sessions, "threads": self.threads}


class Backend(abc.ABC):
    """Durable storage for messages, their lexical index and their vectors."""

    #: A short name for the back-end, reported in benchmark configurations.
    name: str

    # -- lifecycle ---------------------------------------------------------

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction; nested calls join the outer one."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections. The back-end is unusable afterwards."""

    # -- threads and sessions ----------------------------------------------

    @abc.abstractmethod
    def thread(self, user: str, agent: str, *, create: bool = False) -> Thread | None:
        """The thread of a scope, created on request."""

    @abc.abstractmethod
    def threads(self, user: str | None = None) -> list[Thread]:
        """All threads, or those of one user."""

    @abc.abstractmethod
    def sessions(self, thread: Thread) -> list[Session]:
        """The sessions of a thread in order of their first message."""

    @abc.abstractmethod
    def last_session(self, thread: Thread) -> Session | None:
        """The session holding the thread's most recent message."""

    # -- messages ------------------------------------------------------------

    @abc.abstractmethod
    def append(
        self,
        thread: Thread,
        messages: Sequence[NewMessage],
        vectors: Mapping[str, np.ndarray] | None = None,
        model_id: str | None = None,
    ) -> list[Row]:
        """Store messages at the end of the thread, with their index rows and vectors.

        ``vectors`` maps content hashes to vectors of ``model_id``; hashes that
        already have a vector for that model are left as they are.
        """

    @abc.abstractmethod
    def get(self, message_id: str) -> Row | None:
        """One message by its public id, whatever its scope."""

    @abc.abstractmethod
    def rows(self, rowids: Sequence[int]) -> dict[int, Row]:
        """Messages by row number."""

    @abc.abstractmethod
    def messages(
        self,
        thread: Thread,
        *,
        session: str | None = None,
        start: int | None = None,
        end: int | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        """Messages of a thread in order, optionally one session's, or indexes [start, end)."""

    @abc.abstractmethod
    def neighbors(self, rowid: int, before: int, after: int) -> list[Row]:
        """Up to ``before`` and ``after`` messages around ``rowid`` in the same session."""

    @abc.abstractmethod
    def state(self, thread: Thread) -> ThreadState:
        """The thread's change markers, cheap enough to read before every search."""

    # -- search ----------------------------------------------------------------

    @abc.abstractmethod
    def lexical_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        filters: Filters | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 over one lexical key: ``(rowid, score)`` pairs, best first, scores > 0."""

    @abc.abstractmethod
    def allowed_rowids(self, threads: Sequence[Thread], filters: Filters) -> np.ndarray:
        """Row numbers of the threads' messages that pass the filters (sorted int64)."""

    # -- vectors -----------------------------------------------------------------

    @abc.abstractmethod
    def vectors(self, model_id: str, chashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``model_id`` for these content hashes (those that exist)."""

    @abc.abstractmethod
    def put_vectors(self, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors by content hash (existing ones are kept)."""

    @abc.abstractmethod
    def thread_vectors(
        self, thread: Thread, model_id: str, after_rowid: int = 0
    ) -> tuple[np.ndarray, np.ndarray, list[Row]]:
        """Rows after ``after_rowid``: ``(rowids, matrix)`` of those with a vector of
        ``model_id``, and the rows that have none yet."""

    @abc.abstractmethod
    def prune_vectors(self, keep_model: str) -> int:
        """Delete vectors of every other model; returns how many went."""

    @abc.abstractmethod
    def vector_models(self) -> dict[str, int]:
        """How many vectors each model has stored."""

    # -- deletion ------------------------------------------------------------------

    @abc.abstractmethod
    def delete_messages(self, message_ids: Sequence[str], thread: Thread | None = None) -> Deleted:
        """Delete messages and everything derived from them."""

    @abc.abstractmethod
    def delete_session(self, thread: Thread, session: str) -> Deleted:
        """Delete a session, its messages and everything derived from them."""

    @abc.abstractmethod
    def delete_thread(self, thread: Thread) -> Deleted:
        """Delete a whole thread."""

    # -- extension state (tree, summaries...) ----------------------------------------

    @abc.abstractmethod
    def iter_rows(self, thread: Thread, batch: int = 5000) -> Iterator[Row]:
        """Every message of a thread in order, streamed."""
