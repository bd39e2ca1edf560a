"""Records from an exchange with an LLM: one call per batch, checked strictly.

:func:`llm_extract` sends the batch's messages (with their ids, speakers and
times) and asks for JSON in the shape :data:`SCHEMA_HINT` shows. The answer
is validated as a whole: anything missing or of the wrong type, an unknown
kind, a record citing a message id that is not in the batch, a date that does
not parse, or a value without an attribute fails the batch, and so does a
timeout or an HTTP error. A failed batch gets the pattern extractor's
candidates instead (:func:`arbormem.records.extract.extract`): never a crash,
never a lost message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from arbormem.context.trackers.common import words as word_set
from arbormem.errors import LLMError
from arbormem.llm import LLMClient
from arbormem.records.extract import Candidate, Context, Turn, extract
from arbormem.records.model import KINDS, MAX_BODY, MAX_TEXT, Record, record_id
from arbormem.records.rewrite import utc
from arbormem.records.vocab import attribute_for_noun

__all__ = ["LLM_FEATURE", "SCHEMA_HINT", "Extraction", "llm_extract", "validate_answer"]

log = logging.getLogger("arbormem.records")

#: The usage meter's name for these calls.
LLM_FEATURE = "records"
#: Most records one batch may return; more is a sign of an answer gone wrong.
MAX_RECORDS = 40
MAX_TOKENS = 1200
#: Characters of each message sent (the start, where statements usually are).
MESSAGE_CHARS = 2000

SCHEMA_HINT = (
    '{"records": [{"kind": "fact", "text": "Sam lives in Lyon.", "subject": "Sam", '
    '"attribute": "home", "value": "Lyon", "negated": false, "changed": true, '
    '"valid_from": "2024-05-06", "sources": ["m-12"]}]}'
)
_KEYS = word_set(
    "kind text subject attribute value negated changed valid_from sources tags intent body confidence"
)

_PROMPT = (
    "You distil an assistant's long-term memory from a conversation. From the new "
    "messages, list what is worth remembering about the people in it as self-contained "
    "records. Each record has: kind, one of " + ", ".join(KINDS) + "; text, one sentence "
    "that reads right on its own (names, never I/you/he/she; absolute dates, never "
    '"last week"); subject, who or what it is about; where it states the value of '
    "something that can change (home, employer, job_title, diet, phone, email, partner, "
    "pets, allergy, schedule, or another short name), attribute and value, else null; "
    "negated, true when it says the value no longer holds; changed, true when it says the "
    "value has just changed; valid_from, the date it became true as YYYY-MM-DD if the "
    "messages say, else null; sources, the ids of the messages it comes from. Procedures "
    "also carry intent and body (numbered steps in Markdown). Leave out small talk, "
    "questions, wishes and plans that did not happen. An empty list is a fine answer. "
    "Shape: " + SCHEMA_HINT
)


@dataclass(frozen=True)
class Extraction:
    """What :func:`llm_extract` found and how: ``"llm"``, or ``"patterns"`` after a failure."""

    candidates: list[Candidate]
    source: str
    problem: str | None = None


def _text(value: Any, name: str, limit: int, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string (got {type(value).__name__})")
    text = " ".join(value.split())
    if not text:
        if optional:
            return None
        raise ValueError(f"{name} is empty")
    if len(text) > limit:
        raise ValueError(f"{name} is longer than {limit} characters")
    return text


def _date(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a date string or null")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} {value!r} is not an ISO date") from None
    return utc(parsed)


def validate_answer(value: Any, batch: Sequence[Turn], context: Context) -> list[Candidate]:
    """The model's parsed JSON as candidates; ``ValueError`` at the first thing wrong."""
    if not isinstance(value, Mapping) or set(value) != {"records"}:
        raise ValueError('expected an object with only a "records" list')
    items = value["records"]
    if not isinstance(items, list):
        raise ValueError('"records" must be a list')
    if len(items) > MAX_RECORDS:
        raise ValueError(f"{len(items)} records, at most {MAX_RECORDS} expected")
    times = {t.id: utc(t.timestamp) for t in batch}
    out: list[Candidate] = []
    for i, item in enumerate(items):
        where = f"records[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where} must be an object")
        unknown = set(item) - _KEYS
        if unknown:
            raise ValueError(f"{where} has unknown keys {sorted(unknown)}")
        kind = item.get("kind")
        if kind not in KINDS:
            raise ValueError(f"{where}.kind {kind!r} is not one of {', '.join(KINDS)}")
        text = _text(item.get("text"), f"{where}.text", MAX_TEXT)
        subject = _text(item.get("subject"), f"{where}.subject", 200, optional=True)
        attribute = _text(item.get("attribute"), f"{where}.attribute", 80, optional=True)
        value_text = _text(item.get("value"), f"{where}.value", 300, optional=True)
        if attribute and not (subject and value_text):
            raise ValueError(f"{where}: an attribute needs a subject and a value")
        if value_text and not attribute:
            raise ValueError(f"{where}: a value needs an attribute")
        for flag in ("negated", "changed"):
            if not isinstance(item.get(flag, False), bool):
                raise ValueError(f"{where}.{flag} must be true or false")
        sources = item.get("sources")
        if not isinstance(sources, list) or not sources:
            raise ValueError(f"{where}.sources must be a non-empty list of message ids")
        for source in sources:
            if source not in times:
                raise ValueError(f"{where}.sources names {source!r}, not a message of this batch")
        tags = item.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ValueError(f"{where}.tags must be a list of strings")
        confidence = item.get("confidence", 0.7)
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
            raise ValueError(f"{where}.confidence must be a number")
        if not 0.0 <= confidence <= 1.0:
            raise ValueError(f"{where}.confidence must be between 0 and 1")
        intent = _text(item.get("intent"), f"{where}.intent", MAX_TEXT, optional=True)
        body = item.get("body")
        if body is not None and (not isinstance(body, str) or len(body) > MAX_BODY):
            raise ValueError(f"{where}.body must be a string of at most {MAX_BODY} characters")
        body = body.strip() or None if body else None
        if (intent or body) and kind != "procedure":
            raise ValueError(f"{where}: only a procedure carries intent and body")
        said = max(times[s] for s in sources)
        since = _date(item.get("valid_from"), f"{where}.valid_from") or said
        assert text is not None
        canonical = attribute_for_noun(attribute) if attribute else None
        negated = bool(item.get("negated", False))
        record_tags = [t for t in (canonical, *tags) if t]
        if item.get("changed"):
            record_tags.append("change")
        record_tags.append("llm")
        record = Record(
            id=record_id(context.scope, text),
            kind=kind,
            text=text,
            subject=subject,
            attribute=canonical,
            value=value_text,
            negated=negated,
            tags=tuple(dict.fromkeys(record_tags)),
            entities=(subject,) if subject and subject[:1].isupper() else (),
            sources=tuple(dict.fromkeys(sources)),
            valid_from=since,
            confidence=float(confidence),
            importance=0.7 if canonical else 0.5,
            created_at=said,
            updated_at=said,
            intent=intent,
            body=body,
            scope=context.scope,
        )
        out.append(Candidate(record))
    return out


def _prompt(batch: Sequence[Turn], context: Context) -> list[dict[str, str]]:
    lines = []
    for turn in batch:
        who = turn.speaker or (
            context.assistant_name if turn.role == "assistant" else context.user_name
        )
        when = utc(turn.timestamp).strftime("%Y-%m-%d %H:%M")
        text = (
            turn.text if len(turn.text) <= MESSAGE_CHARS else turn.text[:MESSAGE_CHARS] + " [...]"
        )
        lines.append(f"[{turn.id}] {when} {who} ({turn.role}): {text}")
    known = ", ".join(context.speakers) or "unknown"
    body = f"Speakers in this conversation: {known}.\n\nNew messages:\n" + "\n".join(lines)
    return [{"role": "system", "content": _PROMPT}, {"role": "user", "content": body}]


def llm_extract(batch: Sequence[Turn], context: Context | None, llm: LLMClient) -> Extraction:
    """Candidates for ``batch`` from one LLM call; the patterns' on any failure."""
    context = context or Context()
    usable = [t for t in batch if t.role in ("user", "assistant") and t.text.strip()]
    if not usable:
        return Extraction([], "llm")
    try:
        found = llm.complete_json(
            _prompt(usable, context),
            validate=lambda value: validate_answer(value, usable, context),
            feature=LLM_FEATURE,
            max_tokens=MAX_TOKENS,
        )
        return Extraction(found, "llm")
    except LLMError as exc:
        problem = str(exc)
        log.info("records: LLM extraction failed, using patterns: %s", problem)
    except Exception as exc:  # a client breaking its contract still must not lose the batch
        problem = f"the LLM client raised {exc!r}"
        log.warning("records: %s; using patterns", problem)
    return Extraction(extract(batch, context), "patterns", problem)
