"""Text helpers, bounded merging and strict JSON checks shared by the trackers."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from arbormem.context.trackers.base import clip

T = TypeVar("T")


def words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``, for word lists kept readable in source."""
    return frozenset(text.split())


FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
URL = re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+", re.I)
BULLET = re.compile(r"^\s*(?:[-*•>]+|#+|\d{1,3}[.)])\s+")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
CONDITIONAL = re.compile(
    r"^(?:if|unless|whether|when|once|suppose|supposing|what if|in case|even if|maybe|perhaps)\b",
    re.I,
)
NEGATED = re.compile(r"\b(?:not|never|no longer)\b|n't\b|n’t\b", re.I)
WS = re.compile(r"\s+")
MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)"
)

AMOUNT = re.compile(
    r"(?<![\w$€£¥])[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:[kKmMbB]n?|million|billion|thousand)\b)?"
    r"|\b\d[\d,]*(?:\.\d+)?\s?(?:[kKmM]\s)?(?:USD|EUR|GBP|dollars|euros|pounds)\b"
)


def prose(text: str) -> str:
    """``text`` without fenced code blocks and URLs, inline code kept as plain text."""
    text = FENCE.sub("\n", text)
    text = URL.sub(" ", text)
    return text.replace("`", "")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``: lines split after . ! ?, list markers removed."""
    out = []
    for line in text.splitlines():
        line = BULLET.sub("", line)
        for part in SENTENCE_SPLIT.split(line):
            part = part.strip().strip("*_").strip()
            if part:
                out.append(part)
    return out


def asserted(sentence: str) -> bool:
    """Whether a sentence states something: not a question, not a condition."""
    return not sentence.rstrip().endswith("?") and not CONDITIONAL.match(sentence)


def norm(text: str) -> str:
    """``text`` for comparisons: space collapsed, case folded."""
    return WS.sub(" ", text).strip().casefold()


def remember(
    items: Sequence[T], new: Sequence[T], limit: int, key: Callable[[T], Hashable]
) -> list[T]:
    """``new`` (front first) in front of ``items``, duplicates by ``key`` removed, bounded."""
    out: list[T] = []
    seen: set[Hashable] = set()
    for item in [*new, *items]:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out[:limit]


def tidy(fragment: str, limit: int = 120) -> str:
    """A captured clause without surrounding space, quotes and end punctuation."""
    fragment = WS.sub(" ", fragment).strip(" \t\"'“”‘’")
    fragment = fragment.rstrip(" .!?;:,—–-")
    return clip(fragment, limit)


def bullets(header: str, items: Iterable[str], cap: int) -> list[str]:
    """A header and one ``- item`` line per item, at most ``cap`` (with a "+N more" line)."""
    items = list(items)
    if not items:
        return []
    lines = [header, *(f"- {clip(item)}" for item in items[:cap])]
    if len(items) > cap:
        lines.append(f"- (+{len(items) - cap} more)")
    return lines


def saved_texts(value: Any, limit: int) -> list[str]:
    """Strings from a saved list, non-strings and empty ones skipped."""
    if not isinstance(value, list):
        return []
    return [clip(v, 300) for v in value if isinstance(v, str) and v.strip()][:limit]


def saved_mappings(value: Any, required: str) -> list[Mapping[str, Any]]:
    """The mappings of a saved list that have a non-empty string under ``required``."""
    if not isinstance(value, list):
        return []
    return [
        item
        for item in value
        if isinstance(item, Mapping) and isinstance(item.get(required), str) and item[required]
    ]


# ----- strict checks for LLM answers (ValueError becomes an LLMError upstream)


def json_object(value: Any, keys: Sequence[str]) -> Mapping[str, Any]:
    """``value`` if it is an object with at least one of ``keys``."""
    if not isinstance(value, Mapping):
        raise ValueError("expected a JSON object")
    if not any(k in value for k in keys):
        raise ValueError(f"expected at least one of the keys {', '.join(keys)}")
    return value


def json_string(value: Any, name: str, limit: int = 300, *, optional: bool = False) -> str | None:
    """A string of at most ``limit`` characters, space collapsed (``None`` if optional and empty)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string (got {type(value).__name__})")
    text = WS.sub(" ", value).strip()
    if len(text) > limit:
        raise ValueError(f"{name} is longer than {limit} characters")
    if not text:
        if optional:
            return None
        raise ValueError(f"{name} is empty")
    return text


def json_list(obj: Mapping[str, Any], key: str, limit: int = 30) -> list[Any]:
    """``obj[key]`` as a list of at most ``limit`` items (missing or null: empty)."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key!r} must be a list (got {type(value).__name__})")
    if len(value) > limit:
        raise ValueError(f"{key!r} has {len(value)} items, at most {limit} expected")
    return value


def json_strings(obj: Mapping[str, Any], key: str, limit: int = 300) -> list[str]:
    """``obj[key]`` as a list of strings, each at most ``limit`` characters."""
    out = []
    for i, item in enumerate(json_list(obj, key)):
        text = json_string(item, f"{key}[{i}]", limit, optional=True)
        if text:
            out.append(text)
    return out
