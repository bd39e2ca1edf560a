"""The data model: scopes, sessions, messages and search hits.

A *scope* is one user talking to one agent; everything arbormem stores lives in
exactly one scope. The stream of one scope across all of its sessions is a
*thread*; every message has a position (``index``) in its thread that never
changes. Messages are stored verbatim and never rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from arbormem.timeutil import format_timestamp

if TYPE_CHECKING:
    from arbormem.records.service import RecordHit

#: Roles a message may have. Aliases accepted on input are listed in ``ROLE_ALIASES``.
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")

#: Common spellings from other chat formats, normalised on input.
ROLE_ALIASES: Mapping[str, str] = {
    "human": "user",
    "ai": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "function": "tool",
    "developer": "system",
}

DEFAULT_USER = "default"
DEFAULT_AGENT = "default"


@dataclass(frozen=True)
class Scope:
    """One user with one agent (of one tenant). Queries never cross users."""

    user: str = DEFAULT_USER
    agent: str = DEFAULT_AGENT
    #: The tenant ("" outside a server that keeps several in one store).
    tenant: str = ""

    def __str__(self) -> str:
        base = f"{self.user}/{self.agent}"
        return f"{self.tenant}:{base}" if self.tenant else base


@dataclass(frozen=True)
class Message:
    """One stored message, exactly as it was added."""

    id: str
    role: str
    content: str
    timestamp: datetime
    session: str
    index: int
    speaker: str | None = None
    user: str = DEFAULT_USER
    agent: str = DEFAULT_AGENT
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: The tenant of its scope ("" in a store of one tenant; not in :meth:`to_dict`:
    #: a caller only ever sees its own tenant's messages).
    tenant: str = ""

    @property
    def scope(self) -> Scope:
        return Scope(self.user, self.agent, self.tenant)

    @property
    def text(self) -> str:
        """The content prefixed with its speaker, the way it is indexed and rendered."""
        return f"{self.speaker}: {self.content}" if self.speaker else self.content

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "index": self.index,
            "session": self.session,
            "role": self.role,
            "speaker": self.speaker,
            "content": self.content,
            "timestamp": format_timestamp(self.timestamp),
            "user": self.user,
            "agent": self.agent,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True)
class Session:
    """A session of a thread, with its time span and size."""

    id: str
    user: str
    agent: str
    started_at: datetime
    last_at: datetime
    message_count: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "agent": self.agent,
            "started_at": format_timestamp(self.started_at),
            "last_at": format_timestamp(self.last_at),
            "message_count": self.message_count,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True)
class ImageRef:
    """The image a recalled caption message stands for: enough to tell what it is
    and to fetch it. ``Memory.image_bytes(id)`` reads the bytes from any store;
    ``file`` is the stored file beside a SQLite store (None when the bytes are
    inside the database, or when the picture was recorded by ``url`` only)."""

    id: str
    #: sha256 of the bytes, hex (``u`` and the sha256 of the URL for a picture
    #: recorded without its bytes).
    sha256: str
    mime: str
    size: int
    file: str | None = None
    url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sha256": self.sha256,
            "mime": self.mime,
            "size": self.size,
            "file": self.file,
            "url": self.url,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ImageRef:
        return cls(
            id=str(d["id"]),
            sha256=str(d["sha256"]),
            mime=str(d["mime"]),
            size=int(d["size"]),
            file=d.get("file"),
            url=d.get("url"),
        )


@dataclass(frozen=True)
class Hit:
    """One recalled message with the score of every signal that ranked it.

    ``signals`` holds the value of each ranking feature that counted for this
    hit (for example ``bm_t``, BM25 of the turn; ``bm_w``, of its window;
    ``de_t``, the query's cosine with the turn; ``bm_topic``, of its topic; the
    full list is :data:`arbormem.recall.features.FEATURES`); ``score`` is the weighted
    sum the ranking used. ``neighbors`` holds the surrounding turns of the same session
    when they were asked for, in thread order, the hit itself excluded.
    """

    message: Message
    score: float
    signals: Mapping[str, float] = field(default_factory=dict)
    neighbors: tuple[Message, ...] = ()
    #: Id of a later hit that updates this one ("she can eat nuts now" after
    #: "she is allergic to nuts"): this hit is the earlier statement.
    superseded_by: str | None = None
    #: The image this hit's message captions (None for every other message).
    image: ImageRef | None = None

    @property
    def id(self) -> str:
        return self.message.id

    @property
    def message_ids(self) -> list[str]:
        """The hit's message id followed by its neighbours' ids, in thread order."""
        ids = [m.id for m in self.neighbors if m.index < self.message.index]
        ids.append(self.message.id)
        ids.extend(m.id for m in self.neighbors if m.index > self.message.index)
        return ids

    @property
    def session(self) -> str:
        return self.message.session

    @property
    def timestamp(self) -> datetime:
        return self.message.timestamp

    @property
    def speaker(self) -> str | None:
        return self.message.speaker

    def to_dict(self) -> dict[str, Any]:
        out = self.message.to_dict()
        out["score"] = round(self.score, 6)
        out["signals"] = {k: round(v, 6) for k, v in self.signals.items()}
        out["message_ids"] = self.message_ids
        # Every key on every hit, null or empty when there is nothing: a key left out
        # made each consumer test for its presence.
        out["superseded_by"] = self.superseded_by
        out["neighbors"] = [m.to_dict() for m in self.neighbors]
        out["image"] = None if self.image is None else self.image.to_dict()
        return out


@dataclass(frozen=True)
class Ingested:
    """What :meth:`Memory.ingest <arbormem.Memory.ingest>` did with the messages it was
    given."""

    #: One for each message given, in order: the message stored now, or the stored
    #: message it repeats.
    messages: tuple[Message, ...]
    #: Positions (among the messages given) of those already stored, and so skipped.
    skipped: tuple[int, ...] = ()

    @property
    def added(self) -> list[Message]:
        """The messages stored by this call, in order."""
        skipped = set(self.skipped)
        return [m for i, m in enumerate(self.messages) if i not in skipped]


class Hits(list[Hit]):
    """What :meth:`Memory.search` returns: the hits, best first, as a list, with
    word of the archived messages the search left out.

    ``archived`` holds the ids of soft-archived messages (small talk archived by
    ``reorganize(prune_trivial_leaves=True)``) of the same scope and filters that
    hold any of the query's words, best match first, at most as many as the
    hits asked for; ``archived_count`` counts them all. Search never returns
    them as hits: ``Memory.get(id)`` reads one, ``restore_archived()`` brings
    them back into recall.

    ``records`` holds the typed records found beside the turns when the search asked
    for them (``records=True``), best first (:class:`~arbormem.records.RecordHit`:
    the record, its score, its source ``message_ids``); empty otherwise. They are
    not in the list: the turns are ranked as without them.
    """

    def __init__(
        self,
        hits: Iterable[Hit] = (),
        *,
        archived: Sequence[str] = (),
        archived_count: int = 0,
        records: Sequence[RecordHit] = (),
    ) -> None:
        super().__init__(hits)
        self.archived: list[str] = list(archived)
        self.archived_count = max(archived_count, len(self.archived))
        self.records: list[RecordHit] = list(records)

    def to_dict(self) -> dict[str, Any]:
        """The hits, the record hits and the archived matches, for JSON."""
        return {
            "hits": [h.to_dict() for h in self],
            "records": [r.to_dict() for r in self.records],
            "archived": list(self.archived),
            "archived_count": self.archived_count,
        }
