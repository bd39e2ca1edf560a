"""Images met while ingesting conversations.

* OpenAI content parts ``{"type": "image_url", "image_url": {"url": ...}}`` (kept by
  :mod:`arbormem.ingest.formats` in a message's ``metadata.parts``): a ``data:`` URL
  or a local path (``file://`` or plain, relative to the conversation file) is read
  and stored; a remote ``http(s)`` URL is recorded without its bytes, unless the
  ``image_fetch_remote`` setting allows fetching it.
* LoCoMo's shared pictures (``img_url`` with ``blip_caption``): recorded by URL with
  the caption as their text.

Every image is read and checked before any message is stored, so a bad one refuses
the whole batch with an error naming its file, line and field; the images are
stored after their messages, each linked to the message that shared it.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from arbormem.errors import InputError
from arbormem.images.files import ImageFile, check, data_url, read_source
from arbormem.ingest.formats import Record
from arbormem.models import Message
from arbormem.settings import Settings

#: Seconds a remote picture may take to download (only with ``image_fetch_remote``).
FETCH_TIMEOUT = 20.0


@dataclass(frozen=True)
class Pending:
    """An image to store once the message at ``index`` of the batch is stored."""

    index: int
    image: ImageFile | None = None
    url: str | None = None
    caption: str | None = None


def _image_url(part: Any) -> str | None:
    if not isinstance(part, Mapping) or part.get("type") != "image_url":
        return None
    inner = part.get("image_url")
    url = inner.get("url") if isinstance(inner, Mapping) else inner
    return url if isinstance(url, str) else None


def _fetch(url: str, max_bytes: int) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "arbormem"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:
        data: bytes = response.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"it is over the limit of {max_bytes:,} bytes")
    return data


def extract(records: Sequence[Record], settings: Settings) -> tuple[list[Record], list[Pending]]:
    """The records with their images taken out of the metadata (a data URL becomes a
    short reference to the stored bytes), and the images to store after them."""
    out: list[Record] = []
    pending: list[Pending] = []
    most = settings.image_max_bytes
    for i, record in enumerate(records):
        meta = record.metadata if isinstance(record.metadata, Mapping) else {}
        parts = meta.get("parts")
        new_parts: list[Any] | None = None
        if isinstance(parts, list):
            new_parts = []
            for j, part in enumerate(parts):
                url = _image_url(part)
                if url is None:
                    new_parts.append(part)
                    continue
                field = record.where.field(f"parts[{j}].image_url")
                item = _read(url, field, record, settings, most)
                pending.append(replace(item, index=i))
                if item.image is not None and url.startswith("data:"):
                    part = {
                        "type": "image_url",
                        "image_url": {"url": f"sha256:{item.image.digest}"},
                    }
                new_parts.append(part)
        pictures = meta.get("img_url")
        caption = meta.get("blip_caption")
        if pictures and isinstance(caption, str) and caption.strip():
            first = pictures[0] if isinstance(pictures, list) and pictures else pictures
            if isinstance(first, str) and first.strip():
                pending.append(Pending(i, url=first.strip(), caption=caption.strip()))
        if new_parts is not None:
            record = replace(record, metadata={**meta, "parts": new_parts})
        out.append(record)
    return out, pending


def _read(url: str, field: str, record: Record, settings: Settings, most: int) -> Pending:
    where = record.where
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    try:
        if url.startswith("data:"):
            return Pending(0, image=check(data_url(url, field, max_bytes=most), field))
        if scheme in ("http", "https"):
            if not settings.image_fetch_remote:
                return Pending(0, url=url)
            try:
                data = _fetch(url, most)
            except (OSError, ValueError) as exc:
                raise InputError(
                    f"could not fetch {url}: {exc}",
                    field=field,
                    hint="check the URL, or turn image_fetch_remote off to record it unfetched",
                ) from None
            return Pending(0, image=check(data, field, name=Path(url).name), url=url)
        path = (
            Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
            if scheme == "file"
            else Path(url)
        )
        if scheme not in ("", "file") and len(scheme) > 1:  # C:\ is a path, s3:// is not
            raise InputError(
                f"cannot read an image from a {scheme}: URL",
                field=field,
                hint="give a data: URL, an http(s) URL or a local path",
            )
        if not path.is_absolute() and where.source:
            path = Path(where.source).parent / path
        data, name = read_source(path, field, max_bytes=most)
        return Pending(0, image=check(data, field, name=name))
    except InputError as exc:
        if exc.source or not where.source:
            raise
        raise InputError(
            exc.problem, source=where.source, line=where.line, field=exc.field, hint=exc.hint
        ) from None


def attach(add: Any, messages: Sequence[Message], pending: Sequence[Pending]) -> None:
    """Store each pending image with ``add`` (the service's), linked to its message."""
    for item in pending:
        message = messages[item.index]
        add(
            message.scope,
            None,
            checked=item.image,
            url=item.url,
            caption=item.caption,
            session=message.session,
            timestamp=message.timestamp,
            speaker=message.speaker,
            role=message.role,
            shared_in=message.id,
            field="image",
        )
