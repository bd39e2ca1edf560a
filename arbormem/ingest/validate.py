"""Validation and normalisation of incoming messages.

Everything that enters the store passes through :func:`prepare`, which either
returns a :class:`~arbormem.store.NewMessage` or raises an
:class:`~arbormem.errors.InputError` naming the source, line and field with a
fix. The rules (also in ``docs/python-api.md``):

* ``content`` must be a non-empty string of valid UTF-8, at most
  ``max_message_bytes`` (1 MiB by default) when encoded; larger messages are
  refused, never truncated: split them, or raise the limit.
* ``role`` is one of user, assistant, system, tool; the aliases human, ai, bot,
  model, function and developer are mapped; anything else is refused.
* ``timestamp`` is optional (now, UTC) and read by :mod:`arbormem.timeutil`.
* ``speaker`` is an optional non-empty string and ``id`` an optional one, each at
  most ``max_name_bytes`` (1 KiB); ``metadata`` a JSON object of at most
  ``max_metadata_bytes`` (64 KiB) as JSON. No string anywhere may hold an unpaired
  surrogate (see :mod:`arbormem.arguments`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from arbormem import arguments
from arbormem.arguments import MAX_MESSAGE_BYTES, Limits
from arbormem.errors import InputError, MessageTooLarge
from arbormem.ids import content_hash, new_id
from arbormem.models import ROLE_ALIASES, ROLES
from arbormem.store.types import NewMessage
from arbormem.text import analyze_message
from arbormem.timeutil import parse_timestamp, utcnow

KNOWN_FIELDS = frozenset(
    {"id", "role", "content", "speaker", "name", "timestamp", "metadata", "session"}
)


@dataclass(frozen=True)
class Where:
    """Where a record came from, for error messages."""

    source: str | None = None
    line: int | None = None
    prefix: str = ""

    def field(self, name: str) -> str:
        return f"{self.prefix}{name}" if self.prefix else name


#: ``json.dumps(value, ensure_ascii=False, allow_nan=False)``, built once: json.dumps
#: given options builds a new encoder on every call (twice per message checked).
_STRICT_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def normalize_role(value: Any, where: Where = Where()) -> str:
    if not isinstance(value, str):
        raise InputError(
            f"must be a string, got {_type_name(value)}",
            source=where.source,
            line=where.line,
            field=where.field("role"),
            hint=f"use one of {', '.join(ROLES)}",
        )
    role = value.strip().lower()
    role = ROLE_ALIASES.get(role, role)
    if role not in ROLES:
        raise InputError(
            f"unknown role {arguments.shown(value)}",
            source=where.source,
            line=where.line,
            field=where.field("role"),
            hint=f"use one of {', '.join(ROLES)} (aliases: {', '.join(ROLE_ALIASES)})",
        )
    return role


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_content(value: Any, where: Where = Where(), *, max_bytes: int = MAX_MESSAGE_BYTES) -> str:
    name = where.field("content")
    if not isinstance(value, str):
        raise InputError(
            f"must be a string (got {_type_name(value)})",
            source=where.source,
            line=where.line,
            field=name,
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InputError(
            f"is not valid UTF-8 (unpaired surrogate at character {exc.start})",
            source=where.source,
            line=where.line,
            field=name,
            hint="decode the source text as UTF-8 before adding it",
        ) from None
    if not value.strip():
        raise InputError(
            "is empty",
            source=where.source,
            line=where.line,
            field=name,
            hint="every message needs some text; drop empty messages before adding",
        )
    if "\x00" in value:
        raise InputError(
            "contains a NUL character", source=where.source, line=where.line, field=name
        )
    if size > max_bytes:
        raise MessageTooLarge(
            f"is {size:,} bytes, over the limit of {max_bytes:,}",
            source=where.source,
            line=where.line,
            field=name,
            hint="split it into several messages, or raise max_message_bytes",
        )
    return value


#: Levels of objects and arrays metadata may nest.
MAX_METADATA_DEPTH = 64


def _depth(value: Any) -> int:
    """How deep objects and arrays nest (without recursion, so any depth is measured)."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_METADATA_DEPTH:
            return deepest
        todo.extend((child, level + 1) for child in children)
    return deepest


def check_metadata(
    value: Any, where: Where = Where(), *, max_bytes: int | None = None
) -> dict[str, Any]:
    """A JSON object of valid UTF-8 (at most ``max_bytes`` as JSON when given)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(
            f"must be an object, got {_type_name(value)}",
            source=where.source,
            line=where.line,
            field=where.field("metadata"),
        )
    if _depth(value) > MAX_METADATA_DEPTH:
        # Stored, it passed the fast encoder here and then broke export, whose
        # indented output goes through the recursive one.
        raise InputError(
            f"is nested more than {MAX_METADATA_DEPTH} levels deep",
            source=where.source,
            line=where.line,
            field=where.field("metadata"),
        )
    try:
        # NaN and Infinity are not JSON: stored, they made every --json output and
        # every export unreadable to strict parsers (JavaScript's JSON.parse).
        encoded = _STRICT_JSON(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(
            f"is not JSON-serialisable: {exc}",
            source=where.source,
            line=where.line,
            field=where.field("metadata"),
            hint="use null or a string where a number is NaN or infinite",
        ) from None
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:
        # It passed the encoder above, then failed the store's with a raw error.
        raise InputError(
            "holds a key or value that is not valid UTF-8 (an unpaired surrogate)",
            source=where.source,
            line=where.line,
            field=where.field("metadata"),
            hint="decode the source text as UTF-8 before passing it",
        ) from None
    arguments.utf8_size(
        encoded,
        where.field("metadata"),
        max_bytes=max_bytes,
        setting="max_metadata_bytes",
        source=where.source,
        line=where.line,
    )
    return dict(value)


def check_name(
    value: Any, name: str, where: Where = Where(), *, max_bytes: int | None = None
) -> str | None:
    """None, or a non-blank string of valid UTF-8 (at most ``max_bytes`` when given),
    stripped of surrounding spaces."""
    if value is None:
        return None
    return arguments.name(
        value, where.field(name), max_bytes=max_bytes, source=where.source, line=where.line
    )


def prepare(
    *,
    content: Any,
    role: Any = "user",
    speaker: Any = None,
    timestamp: Any = None,
    metadata: Any = None,
    session: str,
    message_id: Any = None,
    where: Where = Where(),
    max_bytes: int = MAX_MESSAGE_BYTES,
    now: datetime | None = None,
    limits: Limits = arguments.DEFAULT_LIMITS,
    metadata_checked: bool = False,
) -> NewMessage:
    """Validate one message and compute what the store needs to index it.
    ``max_bytes`` limits the content; ``limits`` the names and the metadata.
    ``metadata_checked``: ``metadata`` is a dict that :func:`check_metadata` returned
    under the same ``limits``, and is not checked again."""
    text = check_content(content, where, max_bytes=max_bytes)
    role_name = normalize_role(role, where)
    speaker_name = check_name(speaker, "speaker", where, max_bytes=limits.name_bytes)
    if timestamp is None:
        when = now or utcnow()
    else:
        try:
            when = parse_timestamp(timestamp)
        except InputError as exc:
            raise InputError(
                exc.problem,
                source=where.source,
                line=where.line,
                field=where.field("timestamp"),
                hint=exc.hint,
            ) from None
    meta = (
        dict(metadata)
        if metadata_checked
        else check_metadata(metadata, where, max_bytes=limits.metadata_bytes)
    )
    uid = check_name(message_id, "id", where, max_bytes=limits.name_bytes) or new_id()
    indexed = f"{speaker_name}: {text}" if speaker_name else text
    return NewMessage(
        id=uid,
        role=role_name,
        content=text,
        timestamp=when,
        session=session,
        speaker=speaker_name,
        metadata=meta,
        terms=" ".join(analyze_message(text, speaker_name)),
        chash=content_hash(indexed),
    )
