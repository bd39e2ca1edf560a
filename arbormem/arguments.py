"""Checks on what callers pass to the public API, shared by every entry point.

Each helper returns the value it checked (normalised where the API says so) or
raises :class:`~arbormem.errors.InputError` naming the field and the fix, so a
wrong value never reaches SQLite, the embedder or the file system as a raw
``TypeError``, ``UnicodeEncodeError`` or ``sqlite3`` error.

Every string is measured in UTF-8 bytes, and one with an unpaired surrogate
(which UTF-8 cannot encode) is refused. The limits, each a setting (see
``docs/configuration.md``):

* message content, queries and system prompts: ``max_message_bytes`` (1 MiB);
* names: user and agent ids, message ids, session names, speakers, roles and
  modes: ``max_name_bytes`` (1 KiB);
* a message's metadata, as JSON: ``max_metadata_bytes`` (64 KiB).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arbormem.errors import InputError

MAX_MESSAGE_BYTES = 1024 * 1024
MAX_NAME_BYTES = 1024
MAX_METADATA_BYTES = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """The size limits of one store (each a setting of the same name, ``max_*``)."""

    message_bytes: int = MAX_MESSAGE_BYTES
    name_bytes: int = MAX_NAME_BYTES
    metadata_bytes: int = MAX_METADATA_BYTES


DEFAULT_LIMITS = Limits()

#: The setting that raises each limit, named in the error's hint.
_SETTINGS = {
    "message_bytes": "max_message_bytes",
    "name_bytes": "max_name_bytes",
    "metadata_bytes": "max_metadata_bytes",
}


def type_name(value: Any) -> str:
    """How an error names a value's type (``null``, as JSON calls it, for None)."""
    return "null" if value is None else type(value).__name__


def shown(value: Any, width: int = 60) -> str:
    """A value's repr cut to ``width`` characters: an error must not echo 10 MB."""
    try:
        text = repr(value)
    except Exception:  # a caller's object whose repr fails
        text = f"<{type_name(value)}>"
    return text if len(text) <= width else f"{text[: width - 3]}..."


def utf8_size(
    value: str,
    field: str,
    *,
    max_bytes: int | None = None,
    setting: str = "max_name_bytes",
    source: str | None = None,
    line: int | None = None,
) -> int:
    """The UTF-8 size of ``value``; an error for an unpaired surrogate, or a size over
    ``max_bytes`` (whose hint names ``setting``)."""
    # Never fewer bytes than characters: a string far over is refused before it is
    # encoded (a gigabyte string is not copied to be measured).
    if max_bytes is not None and len(value) > 4 * max_bytes:
        raise InputError(
            f"is at least {len(value):,} bytes, over the limit of {max_bytes:,}",
            source=source,
            line=line,
            field=field,
            hint=f"shorten it, or raise {setting}",
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InputError(
            f"is not valid UTF-8 (unpaired surrogate at character {exc.start})",
            source=source,
            line=line,
            field=field,
            hint="decode the source text as UTF-8 before passing it",
        ) from None
    if max_bytes is not None and size > max_bytes:
        raise InputError(
            f"is {size:,} bytes, over the limit of {max_bytes:,}",
            source=source,
            line=line,
            field=field,
            hint=f"shorten it, or raise {setting}",
        )
    return size


def text(
    value: Any,
    field: str,
    *,
    max_bytes: int | None,
    setting: str = "max_message_bytes",
    source: str | None = None,
    line: int | None = None,
    blank: bool = False,
) -> str:
    """A string of valid UTF-8 without NUL, at most ``max_bytes``, and not blank unless
    ``blank``: a query or a system prompt. Returned as given."""
    if not isinstance(value, str):
        raise InputError(
            f"must be a string, got {type_name(value)}", source=source, line=line, field=field
        )
    utf8_size(value, field, max_bytes=max_bytes, setting=setting, source=source, line=line)
    if not blank and not value.strip():
        raise InputError("must be a non-empty string", source=source, line=line, field=field)
    if "\x00" in value:
        raise InputError("contains a NUL character", source=source, line=line, field=field)
    return value


def name(
    value: Any,
    field: str,
    *,
    max_bytes: int | None = MAX_NAME_BYTES,
    source: str | None = None,
    line: int | None = None,
    strip: bool = True,
) -> str:
    """A name (session, speaker, id...): a non-blank string of valid UTF-8 without NUL,
    at most ``max_bytes``; stripped of surrounding spaces unless ``strip=False``."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(
            f"must be a non-empty string, got {shown(value)}",
            source=source,
            line=line,
            field=field,
        )
    utf8_size(value, field, max_bytes=max_bytes, setting="max_name_bytes", source=source, line=line)
    if "\x00" in value:
        raise InputError("contains a NUL character", source=source, line=line, field=field)
    return value.strip() if strip else value


def scope_id(value: Any, field: str, *, max_bytes: int = MAX_NAME_BYTES) -> str | None:
    """A ``user=`` or ``agent=`` argument of a call: None for the store's default,
    else the id as given. A blank id is an error, never the default (a blank
    ``forget(user="")`` once deleted the default user's whole thread). Ids with
    spaces around them are passed on as they are: earlier versions stored some."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(
            f"must be a string (a {field} id), got {type_name(value)}",
            field=field,
            hint=f"leave it out (or pass None) for this store's default {field}",
        )
    if not value.strip():
        raise InputError(
            f"must not be blank, got {shown(value)}",
            field=field,
            hint=f"name one, or leave it out (or pass None) for this store's default {field}",
        )
    return name(value, field, max_bytes=max_bytes, strip=False)


def flag(value: Any, field: str) -> bool:
    """A True/False switch. Anything else is refused: ``everything="no"`` is truthy."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise InputError(f"must be True or False, got {shown(value)}", field=field)


def callback(value: Any, field: str) -> Callable[..., Any] | None:
    """None or something callable (a progress callback)."""
    if value is not None and not callable(value):
        raise InputError(f"must be a function or None, got {type_name(value)}", field=field)
    return value


def path(value: Any, field: str) -> Path:
    """A file path from a string or ``os.PathLike``: not empty, no NUL character."""
    if not isinstance(value, (str, os.PathLike)):
        raise InputError(f"must be a file path, got {type_name(value)}", field=field)
    raw = os.fspath(value)
    if not isinstance(raw, str):
        raise InputError("must be a file path given as text, not bytes", field=field)
    if not raw.strip():
        raise InputError("is empty: give a file path", field=field)
    if "\x00" in raw:
        raise InputError("contains a NUL character", field=field)
    try:
        # Names that are not UTF-8 on disk arrive as \udc80-\udcff and encode back;
        # any other lone surrogate cannot be a file name.
        os.fsencode(raw)
    except UnicodeEncodeError as exc:
        raise InputError(
            f"cannot be a file name here (unpaired surrogate at character {exc.start})",
            field=field,
        ) from None
    return Path(raw).expanduser()


def count(value: Any, field: str, low: int, high: int) -> int:
    """A whole-number argument within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {shown(value)}", field=field)
    if not low <= value <= high:
        raise InputError(f"must be from {low} to {high:,}, got {value}", field=field)
    return value


def seconds(value: Any, field: str) -> float:
    """A number of seconds an argument gives: finite and not negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number of seconds, got {shown(value)}", field=field)
    if not 0 <= value < float("inf"):
        raise InputError(f"must be a finite number of seconds >= 0, got {value!r}", field=field)
    return float(value)
