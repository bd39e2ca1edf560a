"""The records layer over a store: extraction in, current records first out.

:class:`RecordService` runs every operation of the records layer for one thread
of a :class:`~arbormem.store.records.RecordStore`: a storage back-end (SQLite,
PostgreSQL), or the in-memory reference store behind
:class:`~arbormem.records.engine.RecordBook`. The rules are the same whatever
keeps the records; only the reads and writes go to the store.

Writing: :meth:`RecordService.add_exchange` (extract, then resolve each
candidate, in one transaction), :meth:`RecordService.add` (one candidate),
:meth:`RecordService.remember` (an explicit record, no extraction),
:meth:`RecordService.forget_source`, :meth:`RecordService.fuse`.
Reading: :meth:`RecordService.get`, :meth:`RecordService.records`,
:meth:`RecordService.history`, :meth:`RecordService.search`,
:meth:`RecordService.search_procedures`, :meth:`RecordService.expand`.
Export: :meth:`RecordService.to_dict` and :meth:`RecordService.load`.
The reads :func:`~arbormem.records.resolve.resolve` needs
(:class:`~arbormem.records.resolve.RecordView`) are ``get``, ``about`` and ``similar``.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from arbormem.errors import InputError, NotFound
from arbormem.records.extract import Candidate, Context, Turn, extract
from arbormem.records.model import (
    RECORD_FORMAT,
    Composite,
    Record,
    check_kind,
    composite_from_dict,
    record_from_dict,
    record_id,
)
from arbormem.records.resolve import Plan, resolve, same_subject, subject_key, value_at
from arbormem.records.vocab import ATTRIBUTES, query_attributes
from arbormem.store.records import RecordStore, record_terms, sort_time, thread_scope
from arbormem.store.types import Thread
from arbormem.text import query_terms
from arbormem.timeexpr import find_ranges
from arbormem.timeutil import utcnow

if TYPE_CHECKING:
    from arbormem.embed import Embedder
    from arbormem.llm import LLMClient

__all__ = ["CANDIDATE_LIMIT", "WEIGHTS", "RecordHit", "RecordService", "as_of_from_query"]

#: Weights of the search score's signals (see :meth:`RecordService.search`).
WEIGHTS: Mapping[str, float] = {
    "lexical": 1.0,
    "subject": 1.2,
    "other_subject": -0.8,
    "attribute": 1.5,
    "recency": 0.3,
    "current": 0.5,
    "denial": -1.5,
    "confidence": 0.1,
}
#: Most records matched by the query's words that a search scores (the store keeps the
#: best by its full-text ranking); records of an attribute the query asks about are
#: always scored.
CANDIDATE_LIMIT = 1000
_WORD = re.compile(r"[A-Za-z][\w'-]*")


@dataclass(frozen=True)
class RecordHit:
    """A record found by :meth:`RecordService.search`, with the signals that ranked it.

    Where turns are scored, a record stands for its source turns
    (:attr:`message_ids`): it is never a turn of its own."""

    record: Record
    score: float
    signals: Mapping[str, float] = field(default_factory=dict)

    @property
    def message_ids(self) -> list[str]:
        """The ids of the messages the record was read from (none for one stated
        with ``remember``), in the order they were cited."""
        return list(self.record.sources)

    def to_dict(self) -> dict[str, Any]:
        out = self.record.to_dict()
        out["score"] = round(self.score, 6)
        out["signals"] = {k: round(v, 6) for k, v in self.signals.items()}
        out["message_ids"] = self.message_ids
        return out


def as_of_from_query(query: str, now: datetime | None = None) -> datetime | None:
    """The moment a question asks about, if it names one ("in March 2024", "as of
    last May"): the middle of the first date range it mentions."""
    ranges = find_ranges(query, now)
    if not ranges:
        return None
    rng = ranges[0]
    if not rng.year_known and now is not None:
        from arbormem.records.rewrite import _pick_year

        rng = _pick_year(rng, now, future=False)
    return rng.start + (rng.end - rng.start) / 2


class RecordService:
    """Typed records with history for one thread of a record store.

    >>> from arbormem.store import open_store
    >>> store = open_store(":memory:")
    >>> records = RecordService(store, store.thread("sam", "bot", create=True))
    >>> from datetime import datetime, timezone
    >>> t = datetime(2024, 5, 1, tzinfo=timezone.utc)
    >>> _ = records.add_exchange([Turn("m1", "I moved to Lyon last week.", t, "Sam")])
    >>> [r.text for r in records.records(subject="Sam")]
    ['Sam lives in Lyon.']
    """

    def __init__(
        self,
        store: RecordStore,
        thread: Thread,
        *,
        candidate_limit: int | None = CANDIDATE_LIMIT,
    ) -> None:
        self.store = store
        self.thread = thread
        #: The scope every record here carries (``user/agent``).
        self.scope = thread_scope(thread)
        self.candidate_limit = candidate_limit

    def __len__(self) -> int:
        return len(self.store.list_records(self.thread, current=False))

    # ----------------------------------------------------------------- RecordView

    def get(self, record_id: str) -> Record | None:
        """The record with this id, current or closed; None if there is none."""
        return self.store.record(self.thread, record_id)

    def about(self, scope: str, subject: str, attribute: str) -> list[Record]:
        """Every record of ``scope`` stating ``attribute`` of ``subject`` (loosely matched)."""
        if scope != self.scope:
            return []
        return self.store.records_about(self.thread, subject, attribute)

    def similar(self, scope: str, kind: str, text: str, limit: int = 5) -> list[Record]:
        """Current records of ``kind`` sharing the most words with ``text``."""
        if scope != self.scope:
            return []
        return self.store.similar_records(self.thread, kind, text, limit)

    # ----------------------------------------------------------------- writing

    def add(self, candidate: Candidate | Record) -> Plan:
        """Resolve one candidate against the records kept and apply the plan."""
        if isinstance(candidate, Record):
            candidate = Candidate(candidate)
        with self.store.transaction():
            plan = resolve(candidate, self)
            self.apply(plan)
        return plan

    def apply(self, plan: Plan) -> None:
        """Store every record of ``plan`` (new ones added, updated ones replaced)."""
        if plan.writes:
            self.store.write_records(self.thread, plan.writes)

    def add_exchange(
        self,
        exchange: Sequence[Turn],
        context: Context | None = None,
        *,
        candidates: Sequence[Candidate] | None = None,
        llm: LLMClient | None = None,
    ) -> list[Plan]:
        """Extract records from ``exchange`` (or take ``candidates``) and add them, in order.
        With ``llm``, one call extracts them (the patterns do if it fails).

        Each candidate is resolved against the records as the ones before it left
        them, all in one transaction: a failure part-way leaves the records as they
        were before the exchange. (The LLM is called before the transaction opens.)
        """
        context = context or Context(scope=self.scope)
        if context.scope != self.scope:
            context = replace(context, scope=self.scope)
        if candidates is not None:
            found = list(candidates)
        elif llm is not None:
            from arbormem.records.llm_extract import llm_extract

            found = llm_extract(exchange, context, llm).candidates
        else:
            found = extract(exchange, context)
        plans: list[Plan] = []
        if not found:
            return plans
        with self.store.transaction():
            for candidate in sorted(found, key=_statement_order):
                plan = resolve(
                    candidate if isinstance(candidate, Candidate) else Candidate(candidate), self
                )
                self.apply(plan)
                plans.append(plan)
        return plans

    def remember(
        self,
        text: str,
        *,
        kind: str = "fact",
        subject: str | None = None,
        attribute: str | None = None,
        value: str | None = None,
        negated: bool = False,
        when: datetime | None = None,
        sources: Iterable[str] = (),
        tags: Iterable[str] = (),
        intent: str | None = None,
        body: str | None = None,
    ) -> Plan:
        """Store an explicit record (no extraction), resolved like any other.

        A value needs an attribute and a subject; a procedure may carry ``intent``
        and ``body``. Bad arguments raise :class:`~arbormem.errors.InputError`.
        """
        check_kind(kind, where="remember")
        if not isinstance(text, str) or not text.strip():
            raise InputError("must be a non-empty string", field="text")
        if (attribute or value) and not (attribute and value and subject):
            raise InputError(
                "a value needs an attribute and a subject",
                field="attribute" if not attribute else "subject" if not subject else "value",
                hint="pass subject=..., attribute=... and value=... together",
            )
        at = when or utcnow()
        record = Record(
            id=record_id(self.scope, text),
            kind=kind,
            text=" ".join(text.split()),
            subject=subject,
            attribute=attribute,
            value=value,
            negated=negated,
            tags=tuple(dict.fromkeys([*([attribute] if attribute else []), *tags, "explicit"])),
            entities=(subject,) if subject else (),
            sources=tuple(sources),
            valid_from=at,
            confidence=0.9,
            importance=0.7,
            created_at=at,
            updated_at=at,
            intent=intent,
            body=body,
            scope=self.scope,
        )
        return self.add(Candidate(record))

    def forget_source(self, message_id: str) -> list[str]:
        """Remove a forgotten message from every record's sources; records left with
        no source are deleted, with the composites built on them. The ids deleted."""
        return self.store.forget_record_sources(self.thread, [message_id])

    def touch(self, ids: Iterable[str]) -> None:
        """Count one recall of each record."""
        self.store.touch_records(self.thread, ids)

    # ----------------------------------------------------------------- reading

    def records(
        self,
        *,
        kind: str | None = None,
        subject: str | None = None,
        attribute: str | None = None,
        current: bool = True,
        as_of: datetime | None = None,
    ) -> list[Record]:
        """Records matching the filters, newest first. ``current=False`` includes
        closed ones; ``as_of`` returns what held at that moment instead."""
        found = self.store.list_records(
            self.thread,
            kind=kind,
            subject=subject,
            attribute=attribute,
            current=current and as_of is None,
        )
        if as_of is None:
            return found
        return sorted(held_at(found, as_of), key=sort_time, reverse=True)

    def history(self, record_id: str) -> list[Record]:
        """The record's whole history, oldest first: every value its subject's attribute
        had, or the chain of records linked by ``supersedes``/``superseded_by``."""
        record = self.get(record_id)
        if record is None:
            raise NotFound(f"no record {record_id!r}")
        if record.attribute and record.subject:
            chain = self.about(record.scope, record.subject, record.attribute)
        else:
            chain, seen, todo = [], set(), [record_id]
            while todo:
                rid = todo.pop()
                r = self.get(rid) if rid not in seen else None
                if r is None:
                    continue
                seen.add(rid)
                chain.append(r)
                todo.extend(x for x in (r.supersedes, r.superseded_by) if x)
        return sorted(chain, key=_oldest)

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        current: bool = True,
        as_of: datetime | None = None,
        speaker: str | None = None,
        kinds: Iterable[str] | None = None,
        touch: bool = False,
    ) -> list[RecordHit]:
        """Records for ``query``, best first, scored by a small hybrid of signals:
        ``lexical`` (share of the query's terms in the record), ``subject`` (the
        query names the record's subject; ``other_subject`` when it names only
        someone else), ``attribute`` (the query asks about the record's
        attribute), ``recency`` (rank of its start among the candidates),
        ``current`` (still holds), ``denial`` (a "no longer" record where a value
        of the same attribute holds too) and ``confidence``. ``current=True`` keeps
        only records that still hold; ``as_of`` keeps what held then; ``speaker``
        is who "I" and "my" in the query are. Ties go to the newer record, then
        to the one written first.
        """
        if k <= 0:
            return []
        terms = query_terms(query)
        asked = query_attributes(query)
        pool = self.store.record_candidates(
            self.thread,
            terms,
            list(asked),
            kinds=list(kinds) if kinds is not None else None,
            current=current and as_of is None,
            limit=self.candidate_limit,
        )
        if as_of is not None:
            pool = held_at(pool, as_of)
        if not pool:
            return []
        hits = score(pool, terms, asked, self._subjects_named(query, speaker))[:k]
        if touch:
            self.touch(h.record.id for h in hits)
            hits = [replace(h, record=self.get(h.record.id) or h.record) for h in hits]
        return hits

    def search_procedures(
        self, query: str, embedder: Embedder, *, llm: LLMClient | None = None, k: int = 5
    ) -> list[RecordHit]:
        """Current procedures for a how-to ``query``, ranked by embedding (a HyDE draft
        with ``llm``, see :mod:`arbormem.records.skills`); each one returned counts a use."""
        from arbormem.records.skills import rank_procedures

        ranked = rank_procedures(query, self.records(kind="procedure"), embedder, llm=llm, k=k)
        self.touch(r.id for r, _ in ranked)
        out = []
        for r, value in ranked:
            out.append(RecordHit(self.get(r.id) or r, value, {"dense": value}))
        return out

    def _subjects_named(self, query: str, speaker: str | None) -> list[str]:
        """Subjects of the records the query names; ``speaker`` for "I", "my", "me"."""
        words = {w.casefold().removesuffix("'s") for w in _WORD.findall(query)}
        found: list[str] = []
        for subject in self.store.record_subjects(self.thread):
            key = subject_key(subject)
            names = {w.removesuffix("'s") for w in key}
            if (subject[:1].isupper() and names <= words) or (
                subject[:1].islower() and key and key <= words
            ):
                found.append(subject)
        if speaker and words & {"i", "my", "me", "mine"}:
            found.append(speaker)
        return found

    # ----------------------------------------------------------------- composites

    @property
    def composites(self) -> dict[str, Composite]:
        """The composites built by the last :meth:`fuse`, by id."""
        return {c.id: c for c in self.store.composites(self.thread)}

    def fuse(
        self, vectors: Mapping[str, Sequence[float]], *, threshold: float = 0.75
    ) -> list[Composite]:
        """Fuse the current records into composites (see :func:`arbormem.records.fuse.fuse`),
        replacing the previous ones. ``vectors`` maps record ids to embeddings."""
        import numpy as np

        from arbormem.records.fuse import fuse

        records = [r for r in self.store.list_records(self.thread) if r.id in vectors]
        built: list[Composite] = []
        if records:
            matrix = np.asarray([vectors[r.id] for r in records], dtype=np.float32)
            built = fuse(records, matrix, threshold=threshold, scope=self.scope)
        self.store.replace_composites(self.thread, built)
        return built

    def expand(self, composite_id: str) -> list[Record]:
        """The atomic records under a composite, drilling down through every level."""
        from arbormem.records.fuse import leaves

        composites = self.composites
        if composite_id not in composites:
            raise NotFound(f"no composite {composite_id!r}")
        found = (self.get(i) for i in leaves(composite_id, composites))
        return [r for r in found if r is not None]

    # ----------------------------------------------------------------- export

    def to_dict(self) -> dict[str, Any]:
        """Every record and composite as JSON-ready data (lossless)."""
        records = sorted(self.store.list_records(self.thread, current=False), key=_oldest)
        return {
            "format": RECORD_FORMAT,
            "scope": self.scope,
            "records": [r.to_dict() for r in records],
            "composites": [c.to_dict() for c in self.store.composites(self.thread)],
        }

    def load(self, data: Any, *, source: str = "<input>") -> int:
        """Write the records and composites of :meth:`to_dict` output, checked first:
        bad data raises :class:`~arbormem.errors.InputError` naming the record and
        field, and nothing is written. Records with a stored id replace it;
        the composites replace the stored ones. Returns how many records."""
        records, composites = parse_export(data, self.scope, source=source)
        with self.store.transaction():
            self.store.write_records(self.thread, records)
            self.store.replace_composites(self.thread, composites)
        return len(records)


# --------------------------------------------------------------------------- helpers


def parse_export(
    data: Any, scope: str, *, source: str = "<input>"
) -> tuple[list[Record], list[Composite]]:
    """The records and composites of :meth:`RecordService.to_dict` output, checked:
    :class:`~arbormem.errors.InputError` names the source, record and field. Every
    item must belong to ``scope``."""
    if not isinstance(data, Mapping):
        raise InputError("must be a JSON object", source=source)
    if data.get("format") != RECORD_FORMAT:
        raise InputError(
            f"unknown records format {data.get('format')!r}",
            source=source,
            field="format",
            hint=f"this arbormem reads format {RECORD_FORMAT}",
        )
    items = data.get("records", [])
    if not isinstance(items, list):
        raise InputError("must be a list", source=source, field="records")
    groups = data.get("composites", [])
    if not isinstance(groups, list):
        raise InputError("must be a list", source=source, field="composites")
    records: list[Record] = []
    composites: list[Composite] = []
    try:
        records = [record_from_dict(x, where=f"records[{i}]") for i, x in enumerate(items)]
        composites = [
            composite_from_dict(x, where=f"composites[{i}]") for i, x in enumerate(groups)
        ]
    except InputError as exc:
        raise InputError(exc.problem, source=source, field=exc.field, hint=exc.hint) from None
    found: list[tuple[str, int, Record | Composite]] = [
        *(("records", i, r) for i, r in enumerate(records)),
        *(("composites", i, c) for i, c in enumerate(composites)),
    ]
    for name, i, item in found:
        if item.scope != scope:
            raise InputError(
                f"belongs to scope {item.scope!r}, not {scope!r}",
                source=source,
                field=f"{name}[{i}].scope",
                hint="load it into its own scope",
            )
    return records, composites


def held_at(pool: Sequence[Record], when: datetime) -> list[Record]:
    """The records of ``pool`` that held at ``when``: for each subject's attribute,
    the value :func:`~arbormem.records.resolve.value_at` gives (one for attributes
    that hold one value at a time); other records by their interval."""
    chains: dict[tuple[str, frozenset[str]], list[Record]] = defaultdict(list)
    out: list[Record] = []
    for r in pool:
        if r.attribute and r.subject:
            chains[(r.attribute, subject_key(r.subject))].append(r)
        elif (r.valid_from is None or r.valid_from <= when) and (
            r.valid_to is None or r.valid_to > when
        ):
            out.append(r)
    for (attribute, _), chain in chains.items():
        spec = ATTRIBUTES.get(attribute)
        held = value_at(chain, when)
        out.extend(held if spec is None or spec.multi else held[:1])
    return out


def score(
    pool: Sequence[Record],
    terms: Sequence[str],
    asked: Mapping[str, float],
    named: Sequence[str],
) -> list[RecordHit]:
    """Every record of ``pool`` scored for a query of ``terms`` that asks about the
    ``asked`` attributes (with their weights) and names the ``named`` subjects;
    best first (see :meth:`RecordService.search`)."""
    order = sorted(pool, key=_oldest)
    rank = {r.id: i / max(1, len(order) - 1) for i, r in enumerate(order)}
    qset = set(terms)
    # a denial ranks below a value of the same attribute that holds, not below others
    held = {(r.attribute, subject_key(r.subject)) for r in pool if r.attribute and not r.negated}
    hits = []
    for r in pool:
        signals: dict[str, float] = {}
        if qset:
            overlap = len(qset.intersection(record_terms(r)))
            if overlap:
                signals["lexical"] = overlap / len(qset)
        if named:
            if any(same_subject(r.subject, n) for n in named) or (
                r.subject and any(n.casefold() in r.subject.casefold() for n in named)
            ):
                signals["subject"] = 1.0
            else:
                signals["other_subject"] = 1.0
        weight = asked.get(r.attribute or "", 0.0)
        if weight:
            signals["attribute"] = weight
            if r.negated and (r.attribute, subject_key(r.subject)) in held:
                signals["denial"] = 1.0
        signals["recency"] = rank[r.id]
        if r.current:
            signals["current"] = 1.0
        signals["confidence"] = r.confidence
        total = sum(WEIGHTS[name] * value for name, value in signals.items())
        hits.append(RecordHit(r, total, signals))
    # stable: equal scores and times keep the pool's order (first written first)
    hits.sort(key=lambda h: (-h.score, -sort_time(h.record).timestamp()))
    return hits


def _oldest(r: Record) -> tuple[float, float]:
    start = r.valid_from or r.created_at
    said = r.created_at or r.valid_from
    return (start.timestamp() if start else -math.inf, said.timestamp() if said else -math.inf)


def _statement_order(c: Candidate) -> tuple[int, float]:
    """Within an exchange: what was true before ("used to", "moved from") first."""
    r = c.record
    start = r.valid_from or r.valid_to
    return (0 if c.past else 1, start.timestamp() if start else -math.inf)
