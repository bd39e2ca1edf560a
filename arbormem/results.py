"""What the operations of :class:`~arbormem.Memory` return, as typed records.

Every public method returns one of these, a model of :mod:`arbormem.models`, or a
plain value, never a bare ``dict``: the HTTP API and the MCP tools derive their
schemas from these classes. Each has ``to_dict()`` for JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from arbormem.models import Message


@dataclass(frozen=True)
class Forgotten:
    """What :meth:`Memory.forget <arbormem.Memory.forget>` deleted, and whether the
    forgotten text has left the store's files."""

    messages: int = 0
    sessions: int = 0
    threads: int = 0
    #: True when no copy of the forgotten text is left in the store's files.
    purged: bool = True
    #: Why not, when not: ``"readers"`` (another connection reads an older snapshot;
    #: :meth:`~arbormem.Memory.purge` finishes once it ends) or ``"rewrite"`` (the file
    #: is too large to rewrite on every forget; ``purge()`` rewrites it). None when purged.
    purge_pending: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Purged:
    """What :meth:`Memory.purge <arbormem.Memory.purge>` achieved."""

    purged: bool = True
    #: As :attr:`Forgotten.purge_pending`.
    purge_pending: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Stats:
    """Counts of one scope's thread, and the vectors the store holds by model."""

    scope: str
    messages: int
    sessions: int
    embedder: str
    vector_models: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["vector_models"] = dict(self.vector_models)
        return out


@dataclass(frozen=True)
class Reorganized:
    """What one run of :meth:`Memory.reorganize <arbormem.Memory.reorganize>` did."""

    merged: int = 0
    pruned: int = 0
    skipped: int = 0
    duration_secs: float = 0.0
    #: The run's entry in the tree log, to undo it with ``undo_reorganize``; None when
    #: nothing was changed.
    log_id: int | None = None
    #: Why the run changed nothing, when another writer changed the tree meanwhile.
    aborted: str | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Reorganized:
        return cls(
            merged=int(data.get("merged", 0)),
            pruned=int(data.get("pruned", 0)),
            skipped=int(data.get("skipped", 0)),
            duration_secs=float(data.get("duration_secs", 0.0)),
            log_id=data.get("log_id"),
            aborted=data.get("aborted"),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Undone:
    """What :meth:`Memory.undo_reorganize <arbormem.Memory.undo_reorganize>` put back."""

    #: Tree operations reversed.
    undone: int = 0
    #: True when the reorganisation had been undone already (nothing changed).
    already: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TreeLogEntry:
    """One logged tree operation (a reorganisation, a rebuild), newest first."""

    id: int
    kind: str
    #: When it ran (ISO 8601, UTC).
    at: str
    stats: Mapping[str, Any] = field(default_factory=dict)
    undone_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["stats"] = dict(self.stats)
        return out


@dataclass(frozen=True)
class Exported:
    """An export: the document (the arbormem export format, JSON-ready) and what it
    holds. ``path`` is where it was written, when a destination was given."""

    document: Mapping[str, Any]
    threads: int
    messages: int
    path: str | None = None
    #: Typed records exported (every version, current and closed).
    records: int = 0
    #: Image memories exported, bytes included.
    images: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The export document itself, as written to a file."""
        return dict(self.document)


@dataclass(frozen=True)
class Imported:
    """What :meth:`Memory.import_ <arbormem.Memory.import_>` restored."""

    threads: int = 0
    messages: int = 0
    #: Messages already stored under their id with the same content (not added twice).
    skipped: int = 0
    #: Messages archived again, as the export had them.
    archived: int = 0
    #: Messages the export had archived that are back in recall: their exchanges
    #: could not be archived whole (the tree is off, or one joined an open exchange).
    not_archived: int = 0
    #: Sessions whose memory mode, tracked state and summary were restored.
    session_states: int = 0
    #: Typed records restored with their history (an export of version 3 carries them).
    records: int = 0
    #: Image memories restored with their bytes (an export of version 4 carries them).
    images: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PreparedSearch:
    """What :meth:`Memory.prepare_search <arbormem.Memory.prepare_search>` built."""

    vectors: int = 0
    #: Whether dense search over them is approximate.
    approximate: bool = False
    #: Whether it is kept for the next process (False: a full disk, a read-only folder).
    saved: bool = True
    #: Topic summary vectors gathered for multi-path recall.
    topics: int = 0
    duration_secs: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reembedded:
    """What :meth:`Memory.reembed <arbormem.Memory.reembed>` did."""

    #: Messages embedded with the current model.
    embedded: int = 0
    #: Vectors of other models deleted.
    pruned: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RankingFeatures:
    """The candidates recall weighs for a query, each with every feature of the
    ranker (see :meth:`Memory.ranking_features <arbormem.Memory.ranking_features>`):
    what ``arbormem bench fit`` fits the weights on, and a way to see why a turn
    ranked where it did."""

    #: The candidate messages, in the order of the matrix's rows.
    messages: tuple[Message, ...]
    #: The feature names, in the order of its columns
    #: (:data:`arbormem.recall.features.FEATURES`).
    features: tuple[str, ...]
    #: One row per candidate, one column per feature (float32).
    matrix: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "candidates": [
                {"id": m.id, "values": [round(float(v), 6) for v in row]}
                for m, row in zip(self.messages, self.matrix)
            ],
        }


@dataclass(frozen=True)
class Remembered:
    """What :meth:`Memory.remember <arbormem.Memory.remember>` did with the statement."""

    #: ``added`` (a new record), ``merged`` (into one kept already), ``superseded``
    #: (a new record closing the ones it replaces), ``closed`` (a denial closing
    #: records), ``history`` (a record of the past) or ``ignored``.
    action: str
    #: The record the statement is now (new or merged into); None when ignored.
    record: Any = None
    #: Ids of the records it closed.
    closed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "record": self.record.to_dict() if self.record is not None else None,
            "closed": list(self.closed),
        }


@dataclass(frozen=True)
class RecordsForgotten:
    """What :meth:`Memory.forget_record <arbormem.Memory.forget_record>` deleted, and
    whether the deleted text has left the store's files (as :class:`Forgotten`)."""

    #: Ids of the records deleted: the one named (composites built on it go too).
    records: tuple[str, ...] = ()
    purged: bool = True
    purge_pending: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": list(self.records),
            "purged": self.purged,
            "purge_pending": self.purge_pending,
        }


@dataclass(frozen=True)
class ImageMemory:
    """One image memory (see :meth:`Memory.add_image <arbormem.Memory.add_image>`).

    ``id`` is the reference to resolve with :meth:`~arbormem.Memory.get_image`;
    ``file`` is where its bytes are on disk (None for a store that keeps them in
    its database, and for a remote picture recorded by ``url`` only).
    """

    id: str
    caption: str
    #: Where the caption came from: ``caller``, ``vision``, ``file``, ``context`` or ``url``.
    caption_source: str
    session: str
    timestamp: str
    mime: str
    size: int
    #: sha256 of the bytes (or ``url:`` and the sha256 of the URL).
    digest: str
    scene: str = "other"
    importance: float = 0.0
    entities: tuple[str, ...] = ()
    width: int | None = None
    height: int | None = None
    speaker: str | None = None
    #: The message that indexes the caption (None while soft-expired).
    message_id: str | None = None
    #: The message that shared the picture, when there was one.
    shared_in: str | None = None
    url: str | None = None
    file: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    recalls: int = 0
    #: From 1 (just stored or recalled) down towards 0 (see :mod:`arbormem.images.fading`).
    strength: float = 1.0
    expired: bool = False
    #: True when ``add_image`` found the same bytes already stored in the scope.
    duplicate: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["entities"] = list(self.entities)
        out["metadata"] = dict(self.metadata)
        return out


@dataclass(frozen=True)
class ImageHit:
    """An image found by :meth:`~arbormem.Memory.search_images`, with its score."""

    image: ImageMemory
    score: float
    #: Perceptual-hash distance (0 to 64 bits) when found by ``similar_images``.
    distance: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "distance": self.distance, **self.image.to_dict()}


@dataclass(frozen=True)
class ImagesExpired:
    """What :meth:`~arbormem.Memory.expire_images` did."""

    #: Images newly soft-expired (out of recall, restorable).
    expired: tuple[str, ...] = ()
    #: Soft-expired images past the maximum age, deleted with their bytes.
    purged: tuple[str, ...] = ()
    #: Images still in recall.
    live: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"expired": list(self.expired), "purged": list(self.purged), "live": self.live}
