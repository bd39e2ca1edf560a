"""The images capability: image memories and the bytes they point at.

An image memory is a row (what the picture shows, when and where it was shared,
how strongly it is remembered) plus its bytes, kept once per content hash. The
SQLite back-end keeps the bytes in files beside the database; a database server
keeps them in a table. Nothing above the store knows which: it asks for the
bytes of a hash, and for the file holding them when there is one.

A forget that removes an image's caption message, session or thread removes the
image row in the same transaction; the bytes no row uses any more go at the next
purge (:meth:`ImageStore.sweep_blobs`, which every purge runs).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from arbormem.store.core import StoreCore
from arbormem.store.types import Thread

#: What an image row's ``update_image`` may change.
MUTABLE_FIELDS = frozenset({"caption_rowid", "expired_at", "recalls", "recalled_at", "importance"})


@dataclass(frozen=True)
class ImageRow:
    """One stored image memory, as the store keeps it."""

    id: str
    thread_id: int
    #: sha256 of the bytes (hex), or ``url:<sha256 of the URL>`` for a remote picture
    #: recorded without its bytes.
    digest: str
    mime: str
    size: int
    session: str
    timestamp: datetime
    caption: str
    #: Where the caption came from: caller, vision, file or url.
    caption_source: str
    scene: str = "other"
    importance: float = 0.0
    entities: tuple[str, ...] = ()
    width: int | None = None
    height: int | None = None
    #: 64-bit perceptual hash (difference hash) as 16 hex digits, None without pixels.
    phash: str | None = None
    speaker: str | None = None
    #: Row number of the message that indexes the caption (None while soft-expired).
    caption_rowid: int | None = None
    #: Public id of the message that shared the picture, when there was one.
    shared_in: str | None = None
    url: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    recalls: int = 0
    recalled_at: datetime | None = None
    expired_at: datetime | None = None
    created_at: datetime | None = None


#: The columns of an image row, in the order :func:`image_row` reads them (the same
#: in every back-end's ``images`` table).
IMAGE_COLUMNS = (
    "uid, thread_id, digest, mime, size, width, height, phash, session_key, ts, caption,"
    " caption_source, scene, importance, entities, speaker, caption_rowid, shared_in, url,"
    " metadata, recalls, recalled_at, expired_at, created_at"
)


def image_row(r: Sequence[Any], when: Callable[[Any], datetime]) -> ImageRow:
    """An :class:`ImageRow` from the values of :data:`IMAGE_COLUMNS`; ``when`` turns a
    stored time into an aware datetime (each back-end stores times its own way)."""
    metadata = json.loads(r[19]) if r[19] else {}
    return ImageRow(
        id=r[0],
        thread_id=int(r[1]),
        digest=r[2],
        mime=r[3],
        size=int(r[4]),
        width=r[5],
        height=r[6],
        phash=r[7],
        session=r[8],
        timestamp=when(r[9]),
        caption=r[10],
        caption_source=r[11],
        scene=r[12],
        importance=float(r[13]),
        entities=tuple(json.loads(r[14])),
        speaker=r[15],
        caption_rowid=None if r[16] is None else int(r[16]),
        shared_in=r[17],
        url=r[18],
        metadata=metadata if isinstance(metadata, dict) else {},
        recalls=int(r[20]),
        recalled_at=when(r[21]) if r[21] else None,
        expired_at=when(r[22]) if r[22] else None,
        created_at=when(r[23]),
    )


class ImageStore(StoreCore):
    """Image rows and their bytes, content-addressed."""

    @abc.abstractmethod
    def put_blob(self, digest: str, data: bytes) -> None:
        """Keep ``data`` under ``digest`` (nothing happens when it is kept already)."""

    @abc.abstractmethod
    def blob(self, digest: str) -> bytes | None:
        """The bytes kept under ``digest``, None when there are none."""

    def blob_file(self, digest: str) -> Path | None:
        """The file holding the bytes of ``digest``, for a back-end that keeps files
        (None by default: the bytes are only to be had from :meth:`blob`)."""
        return None

    @abc.abstractmethod
    def sweep_blobs(self) -> int:
        """Remove the bytes no image row refers to; how many went."""

    @abc.abstractmethod
    def insert_image(self, row: ImageRow) -> ImageRow:
        """Store a new image row (its ``digest`` unique within the thread); returns it
        as stored (with ``created_at``)."""

    @abc.abstractmethod
    def image(self, image_id: str) -> ImageRow | None:
        """One image row by its public id, whatever its thread."""

    @abc.abstractmethod
    def image_by_digest(self, thread: Thread, digest: str) -> ImageRow | None:
        """The thread's image with these bytes (or this URL), if any."""

    @abc.abstractmethod
    def images(
        self,
        threads: Sequence[Thread],
        *,
        expired: bool | None = None,
        caption_rowids: Sequence[int] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[ImageRow]:
        """The threads' image rows in the order they were stored: all, only the live
        (``expired=False``) or soft-expired ones, those indexed by these caption
        message rows, or those of these ids."""

    @abc.abstractmethod
    def update_image(self, image_id: str, **changes: Any) -> None:
        """Change fields of :data:`MUTABLE_FIELDS` of one image row."""

    def recall_images(self, recalls: Mapping[str, int], at: datetime) -> None:
        """Add to each image's count of recalls (id -> how many more), its last recall
        being ``at``. This reference version updates them one at a time."""
        with self.transaction():
            for row in self.images_by_id(list(recalls)):
                self.update_image(row.id, recalls=row.recalls + recalls[row.id], recalled_at=at)

    def images_by_id(self, image_ids: Sequence[str]) -> list[ImageRow]:
        """Image rows by id, whatever their thread (those that exist)."""
        return [r for i in image_ids if (r := self.image(i)) is not None]

    @abc.abstractmethod
    def delete_images(self, image_ids: Sequence[str]) -> int:
        """Delete image rows (their bytes go at the next :meth:`sweep_blobs`)."""

    @abc.abstractmethod
    def cached_caption(self, digest: str, model: str) -> dict[str, Any] | None:
        """A vision model's validated answer for these bytes, when one was kept."""

    @abc.abstractmethod
    def cache_caption(self, digest: str, model: str, answer: Mapping[str, Any]) -> None:
        """Keep a vision model's validated answer for these bytes."""
