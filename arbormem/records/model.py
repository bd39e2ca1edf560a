"""The typed memory record and its JSON form.

A :class:`Record` is one self-contained statement distilled from the lossless
log: "Sam lives in Lyon.", "Ana is allergic to peanuts.", "Caroline went to an
LGBTQ support group on 7 May 2023." Where it states the value of something that
can change it names the ``subject``, the ``attribute`` (from the vocabulary in
:mod:`arbormem.records.vocab`, or an open one) and the ``value``; a later record
with another value for the same subject and attribute closes it (``valid_to``,
``superseded_by``) without deleting it, so the history stays readable.

A :class:`Composite` fuses related records (or composites) into one summary
entry, so records form a hierarchy recall can drill down through.

Ids are idempotent: :func:`record_id` hashes the scope and the normalised text,
so adding the same statement twice gives one record.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from arbormem.errors import InputError
from arbormem.timeutil import ensure_utc, format_timestamp, parse_stored

__all__ = [
    "KINDS",
    "RECORD_FORMAT",
    "Composite",
    "Record",
    "check_kind",
    "composite_from_dict",
    "normalise_text",
    "record_from_dict",
    "record_id",
    "value_key",
]

#: The kinds of record, as the issue and the LLM prompt name them.
KINDS: tuple[str, ...] = (
    "fact",
    "preference",
    "event",
    "constraint",
    "procedure",
    "failure_pattern",
    "tool_affordance",
)
#: The version of the JSON form written by :meth:`Record.to_dict` (export files carry it).
RECORD_FORMAT = 1
#: Longest record text kept; longer statements are not memories but documents.
MAX_TEXT = 400
MAX_BODY = 20_000

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\s\"'“”‘’(]+|[\s.!?;:,\"'“”‘’)]+$")
_VALUE_JUNK = re.compile(r"[^\w@+]+")
_PHONE_LIKE = re.compile(r"\+?[\d\s().-]{7,}")


def normalise_text(text: str) -> str:
    """``text`` as compared for identity: space collapsed, case folded, edge punctuation off.

    >>> normalise_text("  Sam lives in  Lyon. ")
    'sam lives in lyon'
    """
    return _EDGE_PUNCT.sub("", _SPACE.sub(" ", text)).casefold()


def value_key(value: str | None) -> str:
    """A value as compared for equality: "+1 (555) 010-2000" and "15550102000" are one.

    Words keep their order; punctuation, case and articles go.

    >>> value_key("The Acme Corp.") == value_key("acme corp")
    True
    """
    if not value:
        return ""
    if _PHONE_LIKE.fullmatch(value.strip()):
        return re.sub(r"\D", "", value)
    words = _VALUE_JUNK.sub(" ", value.casefold()).split()
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def record_id(scope: str, text: str, epoch: datetime | None = None) -> str:
    """The id of the record stating ``text`` in ``scope``: the same input, the same id.

    ``epoch`` tells apart a statement that comes back after it was superseded
    ("Sam lives in Paris" again, after Lyon): the returning one is a new record.
    """
    key = f"{scope}\x1f{normalise_text(text)}"
    if epoch is not None:
        key += f"\x1f{format_timestamp(epoch)}"
    return "rec-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def check_kind(kind: Any, *, where: str = "record") -> str:
    """``kind`` if it is one of :data:`KINDS`; an :class:`InputError` naming the choices otherwise."""
    if not isinstance(kind, str) or kind not in KINDS:
        raise InputError(
            f"unknown record kind {kind!r}",
            field=f"{where}.kind",
            hint=f"use one of {', '.join(KINDS)}",
        )
    return kind


def _time(value: Any, name: str, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return ensure_utc(value)
    if isinstance(value, str):
        try:
            return (
                parse_stored(value)
                if value.endswith("Z")
                else ensure_utc(datetime.fromisoformat(value))
            )
        except ValueError:
            pass
    raise InputError(
        f"{value!r} is not a time",
        field=f"{where}.{name}",
        hint="use ISO 8601 such as 2024-05-08T13:56:00Z",
    )


def _text(value: Any, name: str, where: str, limit: int, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"must be a string (got {type(value).__name__})", field=f"{where}.{name}")
    text = value.strip()
    if not text:
        if optional:
            return None
        raise InputError("must not be empty", field=f"{where}.{name}")
    if len(text) > limit:
        raise InputError(f"is longer than {limit} characters", field=f"{where}.{name}")
    return text


def _strings(value: Any, name: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError("must be a list of strings", field=f"{where}.{name}")
    return tuple(dict.fromkeys(v.strip() for v in value if v.strip()))


def _number(value: Any, name: str, where: str, low: float, high: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number (got {value!r})", field=f"{where}.{name}")
    if value < low or (high is not None and value > high):
        top = f" and {high:g}" if high is not None else ""
        raise InputError(f"must be between {low:g}{top} (got {value!r})", field=f"{where}.{name}")
    return float(value)


def _stamp(value: datetime | None) -> str | None:
    return format_timestamp(value) if value is not None else None


@dataclass(frozen=True)
class Record:
    """One typed memory record. Never edited in place: updates are new versions
    (:func:`dataclasses.replace`) written back by the record book or store."""

    id: str
    kind: str
    #: A self-contained statement: names, not pronouns; absolute dates.
    text: str
    #: Who or what it is about ("Sam", "weekly sync"); None when it is about nothing named.
    subject: str | None = None
    #: The changeable thing it states the value of ("home", "employer", "favourite colour").
    attribute: str | None = None
    value: str | None = None
    #: A statement that something no longer holds ("Sam is no longer allergic to nuts").
    negated: bool = False
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    #: Ids of the messages it was distilled from, oldest first.
    sources: tuple[str, ...] = ()
    #: When it became true: a date stated in the text, else the time it was said.
    valid_from: datetime | None = None
    #: When a later record replaced it; None while it holds.
    valid_to: datetime | None = None
    superseded_by: str | None = None
    #: The record this one replaced (the other end of ``superseded_by``).
    supersedes: str | None = None
    confidence: float = 0.5
    importance: float = 0.5
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: How often recall returned it.
    recall_count: int = 0
    #: How often it was said (merged restatements count here).
    mentions: int = 1
    #: Procedures only: what the procedure achieves, and its steps as Markdown.
    intent: str | None = None
    body: str | None = None
    #: Owner of the record: ``user/agent``, as :class:`arbormem.models.Scope` prints.
    scope: str = "default/default"

    @property
    def current(self) -> bool:
        """Whether it still holds (no later record closed it)."""
        return self.valid_to is None and self.superseded_by is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; :func:`record_from_dict` reads it back unchanged."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, datetime):
                value = format_timestamp(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    def with_sources(self, sources: Iterable[str]) -> Record:
        """A copy with ``sources`` appended (duplicates dropped, order kept)."""
        return replace(self, sources=tuple(dict.fromkeys([*self.sources, *sources])))


def record_from_dict(data: Any, *, where: str = "record") -> Record:
    """A :class:`Record` from :meth:`Record.to_dict` output, checked field by field.

    Bad input raises :class:`~arbormem.errors.InputError` naming the field
    (``where`` prefixes it, e.g. ``"records[3]"``).
    """
    if not isinstance(data, Mapping):
        raise InputError("must be a JSON object", field=where)
    known = {f.name for f in fields(Record)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(
            f"unknown field {unknown[0]!r}", field=where, hint="was it written by a newer arbormem?"
        )
    kind = check_kind(data.get("kind"), where=where)
    text = _text(data.get("text"), "text", where, MAX_TEXT, optional=False)
    rid = _text(data.get("id"), "id", where, 80, optional=False)
    assert text is not None and rid is not None
    scope = _text(data.get("scope", "default/default"), "scope", where, 300, optional=False)
    negated = data.get("negated", False)
    if not isinstance(negated, bool):
        raise InputError("must be true or false", field=f"{where}.negated")
    recall = data.get("recall_count", 0)
    mentions = data.get("mentions", 1)
    for name, count in (("recall_count", recall), ("mentions", mentions)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InputError(
                f"must be a whole number >= 0 (got {count!r})", field=f"{where}.{name}"
            )
    return Record(
        id=rid,
        kind=kind,
        text=text,
        subject=_text(data.get("subject"), "subject", where, 200, optional=True),
        attribute=_text(data.get("attribute"), "attribute", where, 80, optional=True),
        value=_text(data.get("value"), "value", where, 300, optional=True),
        negated=negated,
        tags=_strings(data.get("tags"), "tags", where),
        entities=_strings(data.get("entities"), "entities", where),
        sources=_strings(data.get("sources"), "sources", where),
        valid_from=_time(data.get("valid_from"), "valid_from", where),
        valid_to=_time(data.get("valid_to"), "valid_to", where),
        superseded_by=_text(data.get("superseded_by"), "superseded_by", where, 80, optional=True),
        supersedes=_text(data.get("supersedes"), "supersedes", where, 80, optional=True),
        confidence=_number(data.get("confidence", 0.5), "confidence", where, 0.0, 1.0),
        importance=_number(data.get("importance", 0.5), "importance", where, 0.0, 1.0),
        created_at=_time(data.get("created_at"), "created_at", where),
        updated_at=_time(data.get("updated_at"), "updated_at", where),
        recall_count=recall,
        mentions=mentions,
        intent=_text(data.get("intent"), "intent", where, MAX_TEXT, optional=True),
        body=_text(data.get("body"), "body", where, MAX_BODY, optional=True),
        scope=scope or "default/default",
    )


@dataclass(frozen=True)
class Composite:
    """Related records fused into one entry; ``level`` 1 holds records, level n+1 composites."""

    id: str
    level: int
    #: The representative member's text (highest confidence, then most recent).
    text: str
    #: Ids of the records (level 1) or composites (higher levels) it fuses.
    members: tuple[str, ...]
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    #: The span its members cover: earliest valid_from, latest valid_from.
    first: datetime | None = None
    last: datetime | None = None
    scope: str = "default/default"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "level": self.level,
            "text": self.text,
            "members": list(self.members),
            "entities": list(self.entities),
            "tags": list(self.tags),
            "first": _stamp(self.first),
            "last": _stamp(self.last),
            "scope": self.scope,
            "extra": dict(self.extra),
        }


def composite_from_dict(data: Any, *, where: str = "composite") -> Composite:
    """A :class:`Composite` from :meth:`Composite.to_dict` output, checked."""
    if not isinstance(data, Mapping):
        raise InputError("must be a JSON object", field=where)
    level = data.get("level")
    if isinstance(level, bool) or not isinstance(level, int) or level < 1:
        raise InputError(f"must be a whole number >= 1 (got {level!r})", field=f"{where}.level")
    members = _strings(data.get("members"), "members", where)
    if not members:
        raise InputError("must list at least one member", field=f"{where}.members")
    extra = data.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise InputError("must be a JSON object", field=f"{where}.extra")
    cid = _text(data.get("id"), "id", where, 80, optional=False)
    text = _text(data.get("text"), "text", where, MAX_TEXT, optional=False)
    scope = _text(data.get("scope", "default/default"), "scope", where, 300, optional=False)
    assert cid is not None and text is not None and scope is not None
    return Composite(
        id=cid,
        level=level,
        text=text,
        members=members,
        entities=_strings(data.get("entities"), "entities", where),
        tags=_strings(data.get("tags"), "tags", where),
        first=_time(data.get("first"), "first", where),
        last=_time(data.get("last"), "last", where),
        scope=scope,
        extra=dict(extra),
    )
