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
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from arbormem.errors import StoreError
from arbormem.models import Message, Session

#: Lexical keys every back-end indexes for each message: the turn alone, and the
#: turn with its neighbours in the same session (two before, two after).
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


#: Lexical keys over tree nodes: topic names/summaries/keyphrases, and topic contents.
NODE_KEYS = ("topic", "segment")


@dataclass
class NodeRow:
    """One node of a thread's topic tree as stored: a topic, a width-control group, or a
    leaf (one exchange). ``parent_id`` None means the node hangs from the thread's root."""

    id: int | None
    parent_id: int | None
    kind: str
    seq: int
    first_index: int
    last_index: int
    first_at: datetime
    last_at: datetime
    level: int = 0
    name: str = ""
    summary: str = ""
    keyphrases: list[str] = field(default_factory=list)
    message_count: int = 0
    child_count: int = 0
    frozen: bool = False
    archived: bool = False
    origin: str = "heuristic"
    chash: str | None = None


class NodeBrief(NamedTuple):
    """The shape of a node without its text: enough to walk and filter a large tree."""

    id: int
    parent_id: int | None
    kind: str
    first_index: int
    last_index: int
    frozen: bool
    archived: bool
    chash: str | None


class NodeShapes:
    """The shapes of many nodes in a few arrays, looked up by id.

    A :class:`NodeBrief` costs about 300 bytes in memory; a million-turn tree
    has 800,000 nodes, which these arrays hold in about 30 MB. Content hashes
    are not kept (a looked-up shape's ``chash`` is None).
    """

    __slots__ = ("archived", "first", "frozen", "ids", "kind", "kinds", "last", "parent")

    def __init__(
        self,
        ids: np.ndarray,
        parent: np.ndarray,
        kind: np.ndarray,
        kinds: Sequence[str],
        first: np.ndarray,
        last: np.ndarray,
        frozen: np.ndarray,
        archived: np.ndarray,
    ) -> None:
        """Columns row for row, in any order; ``parent`` is -1 at the root level and
        ``kind`` indexes ``kinds``."""
        order = np.argsort(ids, kind="stable")
        self.ids = np.asarray(ids, dtype=np.int64)[order]
        self.parent = np.asarray(parent, dtype=np.int64)[order]
        self.kind = np.asarray(kind, dtype=np.int8)[order]
        self.kinds = list(kinds)
        self.first = np.asarray(first, dtype=np.int64)[order]
        self.last = np.asarray(last, dtype=np.int64)[order]
        self.frozen = np.asarray(frozen, dtype=np.bool_)[order]
        self.archived = np.asarray(archived, dtype=np.bool_)[order]

    @classmethod
    def of(cls, briefs: Sequence[NodeBrief]) -> NodeShapes:
        kinds = sorted({b.kind for b in briefs})
        code = {k: i for i, k in enumerate(kinds)}
        return cls(
            np.asarray([b.id for b in briefs], dtype=np.int64),
            np.asarray([-1 if b.parent_id is None else b.parent_id for b in briefs], np.int64),
            np.asarray([code[b.kind] for b in briefs], dtype=np.int8),
            kinds,
            np.asarray([b.first_index for b in briefs], dtype=np.int64),
            np.asarray([b.last_index for b in briefs], dtype=np.int64),
            np.asarray([b.frozen for b in briefs], dtype=np.bool_),
            np.asarray([b.archived for b in briefs], dtype=np.bool_),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def get(self, node_id: int) -> tuple[Any, ...] | None:
        """The node's shape as a plain tuple of :class:`NodeBrief`'s fields, or None."""
        i = int(np.searchsorted(self.ids, node_id))
        if i >= len(self.ids) or int(self.ids[i]) != node_id:
            return None
        parent = int(self.parent[i])
        return (
            node_id,
            None if parent < 0 else parent,
            self.kinds[int(self.kind[i])],
            int(self.first[i]),
            int(self.last[i]),
            bool(self.frozen[i]),
            bool(self.archived[i]),
            None,
        )


@dataclass
class TreeState:
    """Where a thread's tree grows next; ``version`` changes with every tree write."""

    version: int = 0
    active_id: int | None = None
    leaf_id: int | None = None
    next_seq: int = 0


@dataclass
class TreeLogEntry:
    id: int
    kind: str
    at: datetime
    stats: dict[str, Any]
    undo: list[Any]
    undone_at: datetime | None


class Backend(abc.ABC):
    """Durable storage for messages, their lexical index and their vectors."""

    #: A short name for the back-end, reported in benchmark configurations.
    name: str
    #: True when the store was opened for reading only: every write raises StoreError,
    #: and caches kept beside it (approximate indexes, topic vectors) are not saved.
    read_only: bool = False

    # -- lifecycle ---------------------------------------------------------

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

    def time_span(self, thread: Thread) -> tuple[datetime, datetime] | None:
        """The earliest and latest moments of the thread's messages, by time rather
        than by position (history can be stored out of order); None when empty."""
        sessions = self.sessions(thread)
        if not sessions:
            return None
        return min(s.started_at for s in sessions), max(s.last_at for s in sessions)

    # -- messages ------------------------------------------------------------

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
    def write_tail_windows(self, thread: Thread, session: str) -> int:
        """Write the window keys a ``defer_tail`` append left out of a session;
        returns how many."""

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

    # -- search ----------------------------------------------------------------

    @abc.abstractmethod
    def lexical_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        filters: Filters | None = None,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        """BM25 over one lexical key: ``(rowid, score)`` pairs, best first, scores > 0;
        only rows numbered above ``after``."""

    def lexical_search_spans(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        spans: Sequence[tuple[datetime, datetime]],
        filters: Filters | None = None,
    ) -> list[list[tuple[int, float]]]:
        """:meth:`lexical_search` inside each ``[since, until)`` span, one list per
        span. A span narrows the filters' own dates, never widens them. Back-ends
        may answer all spans in one pass; this default searches span by span."""
        base = filters or Filters()
        out: list[list[tuple[int, float]]] = []
        for since, until in spans:
            lo = max(since, base.since) if base.since is not None else since
            hi = min(until, base.until) if base.until is not None else until
            narrowed = replace(base, since=lo, until=hi)
            out.append(self.lexical_search(threads, key, terms, limit, narrowed) if lo < hi else [])
        return out

    @abc.abstractmethod
    def lexical_stats(self, key: str) -> tuple[int, float]:
        """Number of documents under a lexical key and their mean length in terms."""

    @abc.abstractmethod
    def change_mark(self) -> tuple[int, int]:
        """Something that changes whenever messages are added or removed anywhere in
        the store: (highest message row number, a count of forgets and rewrites).
        It is read on every search, so it must cost the same however many threads."""

    @abc.abstractmethod
    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        """How many documents under ``key`` contain each term."""

    def map_for_search(self) -> None:
        """Let this thread's reads go through a memory map of the store, when the
        backend has one to give (this default has none). A search calls it first."""
        return None

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        """Every term in at least ``min_docs`` documents under ``key`` with its
        document count, read in one pass, with the key's document count, mean length
        and :meth:`change_mark` as of that pass; None when ``stop`` was set before
        it ended, or when the backend cannot list its terms (this default)."""
        return None

    @abc.abstractmethod
    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        """How many window documents hold each pair's two terms side by side.

        A pair is written ``first_second`` (see :func:`arbormem.text.pairs`).
        """

    @abc.abstractmethod
    def around(self, rowids: Sequence[int], radius: int) -> dict[int, list[tuple[int, int, str]]]:
        """For each message, the messages of its session within ``radius`` positions
        (itself included): ``(rowid, index, analysed terms)`` in order."""

    @abc.abstractmethod
    def speakers(self, thread: Thread, after_rowid: int = 0) -> list[str]:
        """Distinct speaker names in a thread (of messages after ``after_rowid``)."""

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
    def session_members(self, thread: Thread, sessions: Sequence[str]) -> dict[str, list[int]]:
        """Row numbers of the (not archived) messages of these sessions, in order."""

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
    def sessions_written_from(self, thread: Thread, index: int) -> list[str]:
        """Keys of the thread's sessions holding messages at position ``index`` or later."""

    @abc.abstractmethod
    def prune_vectors(self, keep_model: str, *also: str) -> int:
        """Delete vectors of every model but ``keep_model`` (and those in ``also``);
        returns how many went."""

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

    @abc.abstractmethod
    def purge(self) -> list[str]:
        """Make deleted data unrecoverable from the storage (merge indexes, reclaim pages),
        and delete vectors that no message or topic uses any more; returns their hashes."""

    # -- extension state (tree, summaries...) ----------------------------------------

    @abc.abstractmethod
    def count(self, thread: Thread, *, upto: int | None = None) -> int:
        """How many messages the thread holds (with ``upto``: of those whose row
        number is at most ``upto``, which only a forget can lower)."""

    @abc.abstractmethod
    def iter_rows(self, thread: Thread, batch: int = 5000) -> Iterator[Row]:
        """Every message of a thread in order, streamed."""

    # -- per-session working memory -------------------------------------------------------

    @abc.abstractmethod
    def session_state(self, thread: Thread, session: str) -> dict[str, Any]:
        """The stored working-memory state of a session (``{}`` when none)."""

    @abc.abstractmethod
    def put_session_state(self, thread: Thread, session: str, state: Mapping[str, Any]) -> None:
        """Store a session's working-memory state (a JSON object)."""

    # -- the topic tree ------------------------------------------------------------------

    @abc.abstractmethod
    def tree_state(self, thread: Thread) -> TreeState:
        """The thread's tree cursor (an empty state when it has no tree yet)."""

    @abc.abstractmethod
    def set_tree_state(self, thread: Thread, state: TreeState) -> TreeState:
        """Store the cursor and bump ``version``; returns the stored state."""

    @abc.abstractmethod
    def tree_nodes(
        self,
        thread: Thread,
        *,
        ids: Sequence[int] | None = None,
        parent: int | object | None = ...,
        kinds: Sequence[str] | None = None,
        frozen: bool | None = None,
    ) -> list[NodeRow]:
        """Nodes of a thread, by id, by parent (``None`` = root level), kind or state,
        ordered by ``seq``."""

    @abc.abstractmethod
    def node_briefs(
        self,
        thread: Thread,
        kinds: Sequence[str] | None = None,
        ids: Sequence[int] | None = None,
    ) -> list[NodeBrief]:
        """The shape of the thread's nodes of these kinds, or with these ids (no
        names, summaries or dates): cheap even for hundreds of thousands of topics."""

    def node_shapes(self, thread: Thread, stop: threading.Event | None = None) -> NodeShapes | None:
        """The shape of every node of the thread, read in one pass (see
        :meth:`node_briefs`); None when ``stop`` was set before it ended."""
        return NodeShapes.of(self.node_briefs(thread))

    @abc.abstractmethod
    def tree_checked(self, thread: Thread) -> tuple[int, int | None]:
        """The tree's version, and the version that last passed the consistency
        check (None: never, or the tree changed since: every tree write clears it)."""

    @abc.abstractmethod
    def mark_tree_checked(self, thread: Thread, version: int) -> bool:
        """Record that the tree passed the check at ``version``; False (and nothing
        recorded) when the tree has changed since."""

    @abc.abstractmethod
    def put_nodes(self, thread: Thread, nodes: Sequence[NodeRow]) -> None:
        """Insert nodes whose ``id`` is None (assigning it) and update the others."""

    @abc.abstractmethod
    def delete_nodes(self, thread: Thread, ids: Sequence[int] | None = None) -> int:
        """Delete nodes (all of the thread's when ``ids`` is None) and their index rows."""

    @abc.abstractmethod
    def set_message_leaf(self, rowids: Sequence[int], leaf_id: int | None) -> None:
        """Record which leaf each message belongs to."""

    @abc.abstractmethod
    def set_archived(self, thread: Thread, leaf_ids: Sequence[int], archived: bool) -> int:
        """Soft-archive (or restore) leaves and their messages: kept, but out of recall.
        Returns how many messages changed."""

    @abc.abstractmethod
    def message_leaves(self, rowids: Sequence[int]) -> dict[int, int]:
        """Leaf id of each message that has one."""

    @abc.abstractmethod
    def index_nodes(self, key: str, docs: Mapping[int, str]) -> None:
        """Replace the lexical documents (analysed terms) of nodes under ``key``."""

    @abc.abstractmethod
    def parents(self, thread: Thread, ids: Sequence[int]) -> dict[int, int | None]:
        """The parent of each node (``None`` at the root level), without the rest."""

    @abc.abstractmethod
    def rowids_between(self, thread: Thread, start: int, end: int, limit: int) -> list[int]:
        """Row numbers of the thread's live (not archived) messages at positions
        [start, end), at most ``limit``, in order."""

    @abc.abstractmethod
    def node_docs(self, key: str, ids: Sequence[int]) -> dict[int, str]:
        """The stored lexical documents (analysed terms) of nodes under ``key``."""

    @abc.abstractmethod
    def node_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        """BM25 over node documents: ``(node id, score)``, best first; only nodes
        numbered above ``after``."""

    @abc.abstractmethod
    def term_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Document frequency of each term over all messages, and the message count."""

    @abc.abstractmethod
    def check_tree(self, thread: Thread, max_children: int) -> list[tuple[int | None, str]]:
        """Consistency problems of a thread's tree as ``(node id, what is wrong)``:
        dangling parents, the width rule, index ranges, child counts, messages
        outside the tree. Empty when the tree is sound."""

    @abc.abstractmethod
    def log_tree(self, thread: Thread, kind: str, stats: Mapping[str, Any], undo: list[Any]) -> int:
        """Record a tree operation (with what it takes to undo it); returns its id."""

    @abc.abstractmethod
    def tree_log(self, thread: Thread, entry_id: int | None = None) -> list[TreeLogEntry]:
        """A thread's tree operations, newest first (or one of them)."""

    @abc.abstractmethod
    def mark_undone(self, entry_id: int) -> None:
        """Note that a logged operation was undone."""

    @abc.abstractmethod
    def leaf_messages(self, thread: Thread, leaf_ids: Sequence[int]) -> list[Row]:
        """The messages placed in these leaves (archived ones too), in thread order."""

    @abc.abstractmethod
    def archived_rowids(self, thread: Thread) -> set[int]:
        """Row numbers of the thread's archived messages."""

    @abc.abstractmethod
    def archived_leaves(self, thread: Thread, *, which: str = "whole") -> list[int]:
        """Leaves with archived messages: ``"whole"`` all of them archived, ``"partly"``
        some but not all (which only replaying messages into new leaves can leave
        behind), ``"any"`` either."""
