"""The data a store holds and hands back: threads, rows, filters, tree nodes.

Every back-end speaks in these types; they carry no behaviour of a back-end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from arbormem.models import Message, Session

#: Lexical keys every back-end indexes for each message: the turn alone, and the
#: turn with its neighbours in the same session (two before, two after).
LEXICAL_KEYS = ("turn", "window")


@dataclass(frozen=True)
class Thread:
    """One user with one agent (of one tenant), as the back-end knows it."""

    id: int
    user: str
    agent: str
    #: The tenant the user belongs to ("" in a store of one tenant): two tenants'
    #: "alice" are two people with two threads.
    tenant: str = ""


@dataclass
class NewMessage:
    """A validated message ready to be stored (built by :mod:`arbormem.ingest.validate`)."""

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


#: Seconds a forget waits, by default, for other connections reading an older snapshot
#: of the store before it reports the purge as pending.
PURGE_WAIT = 2.0

#: Why forgotten text may still be in the store's files (:attr:`Purge.pending`).
#: ``"readers"``: another connection was reading an older snapshot, whose pages the
#: store may not overwrite until it ends. ``"rewrite"``: the file was not rewritten, so
#: bytes of deleted rows may remain in the unused space of pages still in use.
PURGE_PENDING = ("readers", "rewrite")


@dataclass
class Purge:
    """What a purge did, and whether deleted text has left the storage."""

    #: True when no copy of deleted text is left in the store's files.
    purged: bool = True
    #: Why not, when not: one of :data:`PURGE_PENDING`; None when purged.
    pending: str | None = None
    #: Content hashes of the vectors dropped because no message or topic uses them.
    chashes: list[str] = field(default_factory=list)
    #: Threads whose deletions this purge merged into the indexes: their files beside
    #: the store are to be deleted too (a forget killed before its purge left its own
    #: to the next purge).
    threads: list[int] = field(default_factory=list)


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


def stored_json(text: str | None) -> dict[str, Any]:
    """A stored metadata object ({} for none, or for anything but an object)."""
    if not text or text == "{}":
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def message_row(r: Sequence[Any], when: Callable[[Any], datetime]) -> Row:
    """A :class:`Row` from a message query's columns (row id, id, position, role,
    speaker, content, time, metadata, content hash, session, user, agent, tenant);
    ``when`` turns a stored time into an aware datetime, as each back-end stores it."""
    message = Message(
        id=r[1],
        index=r[2],
        role=r[3],
        speaker=r[4],
        content=r[5],
        timestamp=when(r[6]),
        metadata=stored_json(r[7]),
        session=r[9],
        user=r[10],
        agent=r[11],
        tenant=r[12],
    )
    return Row(rowid=r[0], message=message, chash=r[8])


def session_row(r: Sequence[Any], thread: Thread, when: Callable[[Any], datetime]) -> Session:
    """A :class:`~arbormem.models.Session` from a session query's columns (id, first
    and last time, message count, metadata)."""
    return Session(
        id=r[0],
        user=thread.user,
        agent=thread.agent,
        started_at=when(r[1]),
        last_at=when(r[2]),
        message_count=r[3],
        metadata=stored_json(r[4]),
    )
