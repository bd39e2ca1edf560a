"""Image memories in exports and copies between stores.

An export (version 4) lists each thread's images beside its sessions::

    "images": [{"id", "sha256", "mime", "size", "width", "height", "phash",
                "session", "timestamp", "caption", "caption_source", "scene",
                "importance", "entities", "speaker", "caption_message", "shared_in",
                "url", "metadata", "recalls", "recalled_at", "expired_at",
                "created_at", "data"}]

``caption_message`` is the id of the message that indexes the caption (null while
the image is soft-expired); ``data`` is the bytes in base64 (null for a picture
recorded by its URL only). An import checks every entry (the bytes must hash to
``sha256``) before anything is written, and restores the rows with their ids, their
fading state and their bytes. (``arbormem migrate`` copies them store to store:
:mod:`arbormem.store.migrate`.)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from arbormem.errors import InputError
from arbormem.store.base import Backend
from arbormem.store.images import ImageRow
from arbormem.store.types import Thread
from arbormem.timeutil import format_timestamp, parse_timestamp

_DIGEST = re.compile(r"u?[0-9a-f]{64}")
_PHASH = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class PlannedImage:
    """One checked image entry of an export, ready to be stored."""

    row: ImageRow
    #: The id of its caption message (None: soft-expired).
    caption_message: str | None
    data: bytes | None


def _stamp(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def export_images(backend: Backend, thread: Thread) -> list[dict[str, Any]]:
    """The thread's image memories as the export format lists them, bytes included."""
    rows = backend.images([thread])
    captions = backend.rows([r.caption_rowid for r in rows if r.caption_rowid is not None])
    out = []
    for r in rows:
        data = backend.blob(r.digest) if r.size else None
        caption = captions.get(r.caption_rowid) if r.caption_rowid is not None else None
        out.append(
            {
                "id": r.id,
                "sha256": r.digest,
                "mime": r.mime,
                "size": r.size,
                "width": r.width,
                "height": r.height,
                "phash": r.phash,
                "session": r.session,
                "timestamp": format_timestamp(r.timestamp),
                "caption": r.caption,
                "caption_source": r.caption_source,
                "scene": r.scene,
                "importance": r.importance,
                "entities": list(r.entities),
                "speaker": r.speaker,
                "caption_message": None if caption is None else caption.message.id,
                "shared_in": r.shared_in,
                "url": r.url,
                "metadata": dict(r.metadata),
                "recalls": r.recalls,
                "recalled_at": _stamp(r.recalled_at),
                "expired_at": _stamp(r.expired_at),
                "created_at": _stamp(r.created_at),
                "data": None if data is None else base64.b64encode(data).decode("ascii"),
            }
        )
    return out


class _Entry:
    """Reads the fields of one image entry, each failure naming the field."""

    def __init__(self, value: Mapping[str, Any], source: str, where: str) -> None:
        self.value = value
        self.source = source
        self.where = where

    def fail(self, name: str, problem: str, hint: str | None = None) -> InputError:
        return InputError(problem, source=self.source, field=f"{self.where}.{name}", hint=hint)

    def text(self, name: str, *, optional: bool = False, blank: bool = False) -> Any:
        v = self.value.get(name)
        if v is None and optional:
            return None
        if not isinstance(v, str) or (not blank and not v.strip()):
            raise self.fail(name, f"must be a{'' if blank else ' non-blank'} string, got {v!r}")
        return v

    def integer(self, name: str, *, optional: bool = False) -> Any:
        v = self.value.get(name)
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self.fail(name, f"must be a non-negative integer, got {v!r}")
        return v

    def time(self, name: str, *, optional: bool = False) -> datetime | None:
        v = self.value.get(name)
        if v is None and optional:
            return None
        if not isinstance(v, str):
            raise self.fail(name, f"must be a timestamp string, got {v!r}")
        return parse_timestamp(v, field=f"{self.where}.{name}")


def check_images(
    value: Any,
    thread_messages: Mapping[str, str],
    source: str,
    where: str,
    seen: set[str],
) -> list[PlannedImage]:
    """A thread's exported images, every field checked (``thread_messages``: the ids
    of the thread's exported messages with their session; ``seen``: image ids met
    so far in the export). Raises :class:`InputError` naming the entry and field."""
    if not isinstance(value, list):
        raise InputError("must be a list", source=source, field=where)
    out: list[PlannedImage] = []
    digests: set[str] = set()
    for j, item in enumerate(value):
        at = f"{where}[{j}]"
        if not isinstance(item, Mapping):
            raise InputError("must be an object", source=source, field=at)
        e = _Entry(item, source, at)
        image_id = e.text("id")
        if image_id in seen:
            raise e.fail("id", f"duplicate image id {image_id!r}")
        seen.add(image_id)
        digest = e.text("sha256")
        if not _DIGEST.fullmatch(digest):
            raise e.fail("sha256", f"must be 64 lowercase hex digits, got {digest!r}")
        if digest in digests:
            raise e.fail("sha256", "names the same bytes as an earlier image of the thread")
        digests.add(digest)
        size = e.integer("size")
        data: bytes | None = None
        raw = item.get("data")
        if raw is not None:
            if not isinstance(raw, str):
                raise e.fail("data", f"must be a base64 string or null, got {type(raw).__name__}")
            try:
                data = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise e.fail("data", f"is not valid base64 ({exc})") from None
            if hashlib.sha256(data).hexdigest() != digest:
                raise e.fail(
                    "data", "does not hash to its sha256: the bytes were changed or cut short"
                )
            if len(data) != size:
                raise e.fail("size", f"is {size:,}, but the data holds {len(data):,} bytes")
        elif size or not digest.startswith("u"):
            raise e.fail("data", "is missing: only a picture recorded by its URL has no bytes")
        importance = item.get("importance", 0.0)
        if (
            isinstance(importance, bool)
            or not isinstance(importance, (int, float))
            or not (math.isfinite(importance) and 0 <= importance <= 1)
        ):
            raise e.fail("importance", f"must be a number from 0 to 1, got {importance!r}")
        entities = item.get("entities", [])
        if not isinstance(entities, list) or not all(isinstance(x, str) for x in entities):
            raise e.fail("entities", "must be a list of strings")
        metadata = item.get("metadata", {})
        if not isinstance(metadata, Mapping):
            raise e.fail("metadata", "must be an object")
        phash = e.text("phash", optional=True)
        if phash is not None and not _PHASH.fullmatch(phash):
            raise e.fail("phash", f"must be 16 lowercase hex digits, got {phash!r}")
        session = e.text("session")
        caption_message = e.text("caption_message", optional=True)
        expired_at = e.time("expired_at", optional=True)
        if caption_message is None and expired_at is None:
            raise e.fail("caption_message", "is missing, and the image is not soft-expired")
        if caption_message is not None and thread_messages.get(caption_message) != session:
            raise e.fail(
                "caption_message",
                f"{caption_message!r} is not a message of session {session!r} of this thread",
            )
        timestamp = e.time("timestamp")
        assert timestamp is not None
        row = ImageRow(
            id=image_id,
            thread_id=0,
            digest=digest,
            mime=e.text("mime", blank=True),
            size=size,
            session=session,
            timestamp=timestamp,
            caption=e.text("caption", blank=True),
            caption_source=e.text("caption_source"),
            scene=e.text("scene", optional=True) or "other",
            importance=float(importance),
            entities=tuple(entities),
            width=e.integer("width", optional=True),
            height=e.integer("height", optional=True),
            phash=phash,
            speaker=e.text("speaker", optional=True),
            shared_in=e.text("shared_in", optional=True),
            url=e.text("url", optional=True),
            metadata=dict(metadata),
            recalls=e.integer("recalls", optional=True) or 0,
            recalled_at=e.time("recalled_at", optional=True),
            expired_at=expired_at,
            created_at=e.time("created_at", optional=True),
        )
        out.append(PlannedImage(row, caption_message, data))
    return out


def restore_images(
    backend: Backend,
    thread: Thread,
    planned: Sequence[PlannedImage],
    appended: Mapping[str, int],
) -> int:
    """Store a thread's checked images (inside the caller's transaction); an image
    whose id, or whose bytes in this thread, are stored already is left as it is.
    ``appended`` maps the ids of the messages just stored to their rows (a caption
    message stored before is looked up). How many were stored."""
    stored = 0
    for p in planned:
        if backend.image(p.row.id) is not None:
            continue
        if backend.image_by_digest(thread, p.row.digest) is not None:
            continue
        rowid = None
        if p.caption_message is not None:
            rowid = appended.get(p.caption_message)
            if rowid is None and (row := backend.get(p.caption_message)) is not None:
                rowid = row.rowid
        if p.data is not None:
            backend.put_blob(p.row.digest, p.data)
        backend.insert_image(replace(p.row, thread_id=thread.id, caption_rowid=rowid))
        stored += 1
    return stored
