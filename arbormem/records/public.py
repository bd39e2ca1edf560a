"""The records operations of :class:`~arbormem.Memory`, with their arguments checked.

:class:`RecordsAPI` is what ``Memory.remember``, ``Memory.records``,
``Memory.search_records``, ``Memory.record_history`` and ``Memory.forget_record``
delegate to: each checks its arguments (an :class:`~arbormem.errors.InputError`
naming the field), resolves the scope's thread on the engine, and runs the
operation on a :class:`~arbormem.records.service.RecordService` over the store.
Reads first wait for the extraction still running in the background, so a record
said just before is found. It also renders the records section of a prompt
(:meth:`RecordsAPI.context_section`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from arbormem import arguments
from arbormem.errors import InputError, NotFound
from arbormem.models import Scope
from arbormem.records.model import KINDS, MAX_BODY, MAX_TEXT, Record
from arbormem.records.service import RecordHit, RecordService, as_of_from_query
from arbormem.results import Remembered
from arbormem.store.types import Thread
from arbormem.timeutil import parse_timestamp, utcnow
from arbormem.tokens import TokenCounter

if TYPE_CHECKING:
    from arbormem.engine import Engine

__all__ = ["MAX_RECORDS", "RecordsAPI"]

#: The most records one call lists or finds.
MAX_RECORDS = 10_000
#: Records a prompt's records section offers at most, best first.
CONTEXT_RECORDS = 6
#: Share of the query's terms a record that states no attribute the query asks about
#: must hold to be offered to a prompt.
LEXICAL_FLOOR = 0.6

_ACTIONS = {
    "add": "added",
    "merge": "merged",
    "supersede": "superseded",
    "close": "closed",
    "history": "history",
    "ignore": "ignored",
}


def _kind(value: Any, field: str) -> str:
    if not isinstance(value, str) or value not in KINDS:
        raise InputError(
            f"unknown record kind {arguments.shown(value)}",
            field=field,
            hint=f"use one of {', '.join(KINDS)}",
        )
    return value


def _optional_text(value: Any, field: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(
            f"must be a non-empty string or None, got {arguments.shown(value)}", field=field
        )
    if len(value) > limit:
        raise InputError(f"is longer than {limit} characters", field=field)
    arguments.utf8_size(value, field)  # a lone surrogate cannot be stored
    return value.strip()


def _moment(value: Any, field: str) -> datetime | None:
    return None if value is None else parse_timestamp(value, field=field)


class RecordsAPI:
    """The records operations of one engine, per scope (see the module docs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _service(self, scope: Scope, *, create: bool = False) -> RecordService | None:
        thread = self.engine.thread(scope, create=create, wait=False)
        return None if thread is None else self.engine.records.service(thread)

    def _settled(self, scope: Scope) -> RecordService | None:
        """The scope's records once the extraction under way has written what it read."""
        self.engine.jobs.wait(kind="records")
        return self._service(scope)

    # -- writing ---------------------------------------------------------------------

    def remember(
        self,
        scope: Scope,
        text: Any,
        *,
        kind: Any = "fact",
        subject: Any = None,
        attribute: Any = None,
        value: Any = None,
        negated: Any = False,
        when: Any = None,
        tags: Any = None,
        intent: Any = None,
        body: Any = None,
    ) -> Remembered:
        """Store an explicit record (see :meth:`Memory.remember <arbormem.Memory.remember>`)."""
        if not isinstance(text, str) or not text.strip():
            raise InputError(
                f"must be a non-empty string, got {arguments.shown(text)}", field="text"
            )
        if len(text) > MAX_TEXT:
            raise InputError(
                f"is longer than {MAX_TEXT} characters",
                field="text",
                hint="a record is one statement; store documents as messages with add()",
            )
        arguments.utf8_size(text, "text")  # a lone surrogate cannot be stored
        kind = _kind(kind, "kind")
        subject = _optional_text(subject, "subject", 200)
        attribute = _optional_text(attribute, "attribute", 80)
        value = _optional_text(value, "value", 300)
        intent = _optional_text(intent, "intent", MAX_TEXT)
        body = _optional_text(body, "body", MAX_BODY)
        arguments.flag(negated, "negated")
        at = _moment(when, "when")
        if tags is not None and (
            isinstance(tags, str)
            or not isinstance(tags, (list, tuple))
            or not all(isinstance(t, str) and t.strip() for t in tags)
        ):
            raise InputError("must be a list of non-empty strings", field="tags")
        for i, tag in enumerate(tags or ()):
            arguments.utf8_size(tag, f"tags[{i}]")
        self.engine.backend.writable()
        # After what was said before it: the newest statement of a value wins.
        self.engine.jobs.wait(kind="records")
        with self.engine.write_lock:
            service = self._service(scope, create=True)
            assert service is not None
            plan = service.remember(
                text,
                kind=kind,
                subject=subject,
                attribute=attribute,
                value=value,
                negated=negated,
                when=at,
                tags=tuple(tags or ()),
                intent=intent,
                body=body,
            )
            record = service.get(plan.record.id) if plan.record is not None else None
        return Remembered(_ACTIONS.get(plan.action, plan.action), record, tuple(plan.closed))

    def forget(self, scope: Scope, record_id: Any) -> tuple[str, ...]:
        """Delete one record (and the composites on it); the ids deleted."""
        record_id = _optional_text(record_id, "record_id", 80)
        if record_id is None:
            raise InputError("must be a record id such as 'rec-0a1b...'", field="record_id")
        self.engine.backend.writable()
        self.engine.jobs.wait(kind="records")
        with self.engine.write_lock:
            thread = self.engine.thread(scope, wait=False)
            if thread is None or self.engine.backend.record(thread, record_id) is None:
                raise NotFound(f"no record {record_id!r} in scope {scope}")
            with self.engine.backend.transaction():
                deleted = self.engine.backend.delete_records(thread, [record_id])
        return tuple(deleted)

    def rebuild(self, scope: Scope, start: Any, end: Any) -> int:
        """Extract the records of a range of message positions again (see
        :meth:`Memory.rebuild_records <arbormem.Memory.rebuild_records>`)."""
        arguments.count(start, "start", 0, 2**62)
        if end is not None:
            arguments.count(end, "end", 0, 2**62)
        self.engine.backend.writable()
        self.engine.jobs.wait(kind="records")
        thread = self.engine.thread(scope, wait=False)
        if thread is None:
            raise NotFound(f"nothing stored for scope {scope}")
        return self.engine.records.rebuild(thread, start, end)

    # -- reading ---------------------------------------------------------------------

    def listing(
        self,
        scope: Scope,
        *,
        kind: Any = None,
        subject: Any = None,
        attribute: Any = None,
        current: Any = True,
        as_of: Any = None,
        limit: Any = None,
    ) -> list[Record]:
        """Records of the scope, newest first (see :meth:`Memory.records
        <arbormem.Memory.records>`)."""
        if kind is not None:
            kind = _kind(kind, "kind")
        subject = _optional_text(subject, "subject", 200)
        attribute = _optional_text(attribute, "attribute", 80)
        arguments.flag(current, "current")
        moment = _moment(as_of, "as_of")
        if limit is not None:
            arguments.count(limit, "limit", 1, MAX_RECORDS)
        service = self._settled(scope)
        if service is None:
            return []
        found = service.records(
            kind=kind, subject=subject, attribute=attribute, current=current, as_of=moment
        )
        return found[:limit] if limit is not None else found

    def history(self, scope: Scope, record_id: Any) -> list[Record]:
        """Every version of what the record states, oldest first."""
        record_id = _optional_text(record_id, "record_id", 80)
        if record_id is None:
            raise InputError("must be a record id such as 'rec-0a1b...'", field="record_id")
        service = self._settled(scope)
        if service is None or service.get(record_id) is None:
            raise NotFound(f"no record {record_id!r} in scope {scope}")
        return service.history(record_id)

    def search(
        self,
        scope: Scope,
        query: str,
        *,
        k: Any = 10,
        current: Any = True,
        as_of: Any = None,
        kind: Any = None,
        speaker: Any = None,
    ) -> list[RecordHit]:
        """Records for ``query``, best first (see :meth:`Memory.search_records
        <arbormem.Memory.search_records>`)."""
        arguments.count(k, "k", 1, MAX_RECORDS)
        arguments.flag(current, "current")
        moment = _moment(as_of, "as_of")
        kinds = None if kind is None else [_kind(kind, "kind")]
        speaker = _optional_text(speaker, "speaker", 200)
        service = self._settled(scope)
        if service is None:
            return []
        return service.search(query, k, current=current, as_of=moment, kinds=kinds, speaker=speaker)

    def beside_turns(self, threads: Iterable[Thread], query: str, k: int) -> list[RecordHit]:
        """The current records of ``threads`` for ``query``, best first, at most ``k``
        (what ``Memory.search(records=True)`` returns beside the turns)."""
        threads = list(threads)
        if not threads:
            return []
        self.engine.jobs.wait(kind="records")
        found = [
            hit
            for thread in threads
            for hit in self.engine.records.service(thread).search(query, k, current=True)
        ]
        # A stable sort: one thread's ties keep their order (newer first, as searched).
        return sorted(found, key=lambda h: -h.score)[:k]

    # -- the prompt ------------------------------------------------------------------

    def context_section(
        self,
        thread: Thread | None,
        query: str,
        budget: int,
        counter: TokenCounter,
        recalled: Iterable[str] = (),
    ) -> str:
        """The records a prompt for ``query`` should carry, within ``budget`` tokens
        at most: what holds now about what the query asks, best first, each with
        the value it replaced marked as earlier with its dates. A record that states
        no attribute the query asks about, and whose every source is among the
        ``recalled`` messages, is left out: the turns say it already, and a prompt's
        room is better spent on more of them. Empty when none."""
        if thread is None or budget <= 0:
            return ""
        service = self.engine.records.service(thread)
        recalled = set(recalled)
        moment = as_of_from_query(query, utcnow())
        hits = service.search(query, CONTEXT_RECORDS, current=moment is None, as_of=moment)
        lines: list[str] = []
        used = 0
        for hit in hits:
            if "attribute" not in hit.signals and hit.signals.get("lexical", 0.0) < LEXICAL_FLOOR:
                # Naming its subject alone is not enough: every record about Caroline
                # would crowd out the turns that answer a question about her.
                continue
            sources = hit.record.sources
            if "attribute" not in hit.signals and sources and set(sources) <= recalled:
                continue
            line = "- " + _render(hit.record, service)
            cost = counter.count(line) + 1
            if used + cost > budget:
                continue
            lines.append(line)
            used += cost
        return "\n".join(lines)


def _day(moment: datetime | None) -> str:
    return moment.date().isoformat() if moment is not None else "?"


def _render(record: Record, service: RecordService) -> str:
    """One record as a prompt line: its text, since when, and what it replaced."""
    text = record.text
    if record.valid_from is not None:
        text += f" (since {_day(record.valid_from)})"
    if record.valid_to is not None:
        text += f" (earlier: held until {_day(record.valid_to)})"
    previous = service.get(record.supersedes) if record.supersedes else None
    if previous is not None:
        what = previous.value or previous.text
        text += f" Earlier: {what}, {_day(previous.valid_from)} to {_day(previous.valid_to)}."
    return text
