"""Reading an image a caller gives, and what its bytes say about it.

The format is decided by the bytes (their signature, then a full decode by Pillow),
never by a file name or a declared type: a ``.png`` holding a PDF is refused, a
JPEG named ``photo.bin`` is accepted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from arbormem.errors import InputError

#: Image formats accepted, by their MIME type.
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
ACCEPTED = "PNG, JPEG, WebP or GIF"
#: Pixels decoded at most (a small file can claim a huge canvas: a decompression bomb).
MAX_PIXELS = 64_000_000

_DATA_URL = re.compile(
    r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^,;]*)*?),(?P<data>.*)$", re.S
)


@dataclass(frozen=True)
class ImageFile:
    """A checked image: its bytes and what they say."""

    data: bytes
    digest: str
    mime: str
    width: int
    height: int
    #: 64-bit difference hash, 16 hex digits (similar pictures differ in few bits).
    phash: str
    #: The file's own name, when it came from a file (a caption of last resort).
    name: str | None = None
    #: What the file says of itself: EXIF description and date, PNG text chunks.
    described: str = ""
    taken_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def sniff(data: bytes) -> str | None:
    """The format the signature of ``data`` announces (a key of :data:`FORMATS`)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    return None


def read_source(value: Any, field_name: str, *, max_bytes: int) -> tuple[bytes, str | None]:
    """The bytes of an image given as a path, bytes or a binary file object, and the
    file's name when there is one; :class:`InputError` naming ``field_name`` else."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        name = None
    elif isinstance(value, (str, os.PathLike)):
        path = Path(os.fspath(value)).expanduser()
        if isinstance(value, str) and value.startswith("data:"):
            return data_url(value, field_name, max_bytes=max_bytes), None
        if not path.is_file():
            raise InputError(
                f"no such file: {os.fspath(value)}",
                field=field_name,
                hint="give the path of a PNG, JPEG, WebP or GIF file, its bytes, or a file object",
            )
        size = path.stat().st_size
        if size > max_bytes:
            raise InputError(
                f"{path} is {size:,} bytes, over the limit of {max_bytes:,}",
                field=field_name,
                hint="raise image_max_bytes, or give a smaller image",
            )
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc}", field=field_name) from None
        name = path.name
    elif hasattr(value, "read"):
        try:
            data = value.read(max_bytes + 1)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read the file object: {exc}", field=field_name) from None
        if isinstance(data, str):
            raise InputError(
                "is a text file object",
                field=field_name,
                hint="open the file in binary mode: open(path, 'rb')",
            )
        if not isinstance(data, (bytes, bytearray)):
            raise InputError(f"its read() gave {type(data).__name__}, not bytes", field=field_name)
        data = bytes(data)
        raw_name = getattr(value, "name", None)
        name = Path(raw_name).name if isinstance(raw_name, str) else None
    else:
        raise InputError(
            f"must be a path, bytes or a binary file object, got {type(value).__name__}",
            field=field_name,
        )
    if len(data) > max_bytes:
        raise InputError(
            f"is over the limit of {max_bytes:,} bytes",
            field=field_name,
            hint="raise image_max_bytes, or give a smaller image",
        )
    return data, name


def data_url(url: str, field_name: str, *, max_bytes: int) -> bytes:
    """The bytes of a ``data:`` URL (base64 or percent-encoded)."""
    m = _DATA_URL.match(url)
    if m is None:
        raise InputError("is not a well-formed data: URL", field=field_name)
    payload = m.group("data")
    if len(payload) > max_bytes * 4 // 3 + 8:
        raise InputError(
            f"holds more than the limit of {max_bytes:,} bytes",
            field=field_name,
            hint="raise image_max_bytes, or give a smaller image",
        )
    if ";base64" in (m.group("params") or ""):
        try:
            return base64.b64decode(payload, validate=False)
        except (binascii.Error, ValueError) as exc:
            raise InputError(f"its base64 does not decode: {exc}", field=field_name) from None
    from urllib.parse import unquote_to_bytes

    return unquote_to_bytes(payload)


def check(data: bytes, field_name: str, *, name: str | None = None) -> ImageFile:
    """``data`` as a checked :class:`ImageFile`, or an :class:`InputError` naming
    ``field_name`` that says what the bytes are not."""
    kind = sniff(data)
    if kind is None:
        raise InputError(
            "is not an image arbormem reads: its bytes do not start like a "
            f"{ACCEPTED} file" + (" (it is empty)" if not data else ""),
            field=field_name,
            hint=f"give a {ACCEPTED} image",
        )
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format != kind:
                raise InputError(
                    f"starts like a {kind} file but reads as {img.format}", field=field_name
                )
            width, height = img.size
            if width * height > MAX_PIXELS:
                raise InputError(
                    f"is {width} x {height} pixels, over {MAX_PIXELS:,}",
                    field=field_name,
                    hint="give a smaller image",
                )
            described, taken, extra = _self_description(img)
            img.load()  # a truncated or corrupt file fails here, not later
            phash = dhash(img)
    except InputError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        raise InputError(
            f"is a damaged {kind} file: {exc}",
            field=field_name,
            hint=f"give a whole {ACCEPTED} image",
        ) from None
    except Image.DecompressionBombError as exc:
        raise InputError(f"is too large to decode: {exc}", field=field_name) from None
    return ImageFile(
        data=data,
        digest=hashlib.sha256(data).hexdigest(),
        mime=FORMATS[kind],
        width=width,
        height=height,
        phash=phash,
        name=name,
        described=described,
        taken_at=taken,
        extra=extra,
    )


def dhash(img: Any) -> str:
    """A 64-bit difference hash: the picture shrunk to 9 x 8 grey pixels, one bit per
    pair of horizontal neighbours (is the left one brighter?)."""
    small = img.convert("L").resize((9, 8))
    px = small.tobytes()  # one byte per pixel, row by row
    bits = 0
    for row in range(8):
        for col in range(8):
            left, right = px[row * 9 + col], px[row * 9 + col + 1]
            bits = (bits << 1) | int(left > right)
    return f"{bits:016x}"


def hamming(a: str, b: str) -> int:
    """How many of the 64 bits two difference hashes differ in."""
    return (int(a, 16) ^ int(b, 16)).bit_count()


_EXIF_DESCRIPTION = 0x010E
_EXIF_USER_COMMENT = 0x9286
_EXIF_DATETIME = 0x0132
_EXIF_ORIGINAL = 0x9003
_EXIF_IFD = 0x8769
_PNG_TEXT_KEYS = ("Title", "Description", "Comment", "Subject", "Caption", "Alt", "parameters")


def _self_description(img: Any) -> tuple[str, datetime | None, dict[str, Any]]:
    """What the file says of itself: EXIF image description (or user comment) and
    date taken, and the text chunks of a PNG."""
    parts: list[str] = []
    taken: datetime | None = None
    extra: dict[str, Any] = {}
    try:
        exif = img.getexif()
    except Exception:  # a damaged EXIF block must not refuse a picture that decodes
        exif = None
    if exif:
        inner = {}
        try:
            inner = dict(exif.get_ifd(_EXIF_IFD))
        except Exception:
            inner = {}
        description = exif.get(_EXIF_DESCRIPTION)
        comment = inner.get(_EXIF_USER_COMMENT)
        for value in (description, comment):
            text = _exif_text(value)
            if text:
                parts.append(text)
        stamp = inner.get(_EXIF_ORIGINAL) or exif.get(_EXIF_DATETIME)
        if isinstance(stamp, str):
            try:
                taken = datetime.strptime(stamp.strip(), "%Y:%m:%d %H:%M:%S").replace(
                    tzinfo=timezone.utc
                )
                extra["taken_at"] = taken.isoformat()
            except ValueError:
                pass
    info = getattr(img, "text", None) if img.format == "PNG" else None
    if isinstance(info, dict):
        for key in _PNG_TEXT_KEYS:
            value = info.get(key)
            if isinstance(value, str) and value.strip():
                parts.append(value.strip())
    seen: dict[str, None] = {}
    for p in parts:
        seen.setdefault(p[:1000], None)
    return " ".join(seen), taken, extra


def _exif_text(value: Any) -> str:
    if isinstance(value, bytes):
        # A user comment starts with 8 bytes naming its character code.
        head, body = value[:8], value[8:]
        codec = "utf-16" if head.startswith(b"UNICODE") else "utf-8"
        value = (
            body.decode(codec, "replace")
            if head.strip(b"\x00 ")
            else value.decode("utf-8", "replace")
        )
    if not isinstance(value, str):
        return ""
    return value.strip("\x00 \t\r\n")
