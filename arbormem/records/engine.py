"""An in-memory record book: the reference implementation of what a store holds.

:class:`RecordBook` keeps the records of one or more scopes in dictionaries and
implements every operation the records layer needs, so that extraction,
updates, history, "as of" questions and search can be exercised and measured
before any storage back-end carries them. A store capability (SQLite,
PostgreSQL) is to implement the same operations with the same contracts; the
tests of this module are written to become that capability's contract suite.

Writing: :meth:`RecordBook.add_exchange` (extract, then resolve each
candidate), :meth:`RecordBook.add` (one candidate), :meth:`RecordBook.remember`
(an explicit record, no extraction), :meth:`RecordBook.forget_source`.
Reading: :meth:`RecordBook.get`, :meth:`RecordBook.records`,
:meth:`RecordBook.history`, :meth:`RecordBook.search`. The reads the resolver
needs (:class:`arbormem.records.resolve.RecordView`) are ``get``, ``about`` and
``similar``.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
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
from arbormem.text import analyze, query_terms
from arbormem.timeexpr import find_ranges
from arbormem.timeutil import utcnow

if TYPE_CHECKING:
    from arbormem.embed import Embedder
    from arbormem.llm import LLMClient

__all__ = ["RecordBook", "RecordHit", "as_of_from_query"]

#: Weights of the search score's signals (see :meth:`RecordBook.search`).
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
_WORD = re.compile(r"[A-Za-z][\w'-]*")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class RecordHit:
    """A record found by :meth:`RecordBook.search`, with the signals that ranked it."""

    record: Record
    score: float
    signals: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = self.record.to_dict()
        out["score"] = round(self.score, 6)
        out["signals"] = {k: round(v, 6) for k, v in self.signals.items()}
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


class RecordBook:
    """Typed records with history, in memory. Not thread-safe; one writer at a time.

    >>> from datetime import datetime, timezone
    >>> book = RecordBook()
    >>> t = datetime(2024, 5, 1, tzinfo=timezone.utc)
    >>> _ = book.add_exchange([Turn("m1", "I moved to Lyon last week.", t, "Sam")])
    >>> [r.text for r in book.records(subject="Sam")]
    ['Sam lives in Lyon.']
    """

    def __init__(self, scope: str = "default/default") -> None:
        self.scope = scope
        self._records: dict[str, Record] = {}
        self._by_attribute: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._by_term: dict[str, set[str]] = defaultdict(set)
        self._by_source: dict[str, set[str]] = defaultdict(set)
        self._terms: dict[str, frozenset[str]] = {}
        self.composites: dict[str, Composite] = {}

    def __len__(self) -> int:
        return len(self._records)

    # ----------------------------------------------------------------- RecordView

    def get(self, record_id: str) -> Record | None:
        """The record with this id, current or closed; None if there is none."""
        return self._records.get(record_id)

    def about(self, scope: str, subject: str, attribute: str) -> list[Record]:
        """Every record of ``scope`` stating ``attribute`` of ``subject`` (loosely matched)."""
        ids = self._by_attribute.get((scope, attribute), set())
        return [r for i in ids if same_subject((r := self._records[i]).subject, subject)]

    def similar(self, scope: str, kind: str, text: str, limit: int = 5) -> list[Record]:
        """Current records of ``kind`` sharing the most words with ``text``."""
        terms = set(analyze(text))
        counts: dict[str, int] = defaultdict(int)
        for term in terms:
            for rid in self._by_term.get(term, ()):
                counts[rid] += 1
        ranked = sorted(counts, key=lambda rid: -counts[rid])
        out = []
        for rid in ranked:
            r = self._records[rid]
            if r.scope == scope and r.kind == kind and r.current:
                out.append(r)
                if len(out) >= limit:
                    break
        return out

    # ----------------------------------------------------------------- writing

    def add(self, candidate: Candidate | Record) -> Plan:
        """Resolve one candidate against the book and apply the plan."""
        if isinstance(candidate, Record):
            candidate = Candidate(candidate)
        plan = resolve(candidate, self)
        self.apply(plan)
        return plan

    def apply(self, plan: Plan) -> None:
        """Store every record of ``plan`` (new ones added, updated ones replaced)."""
        for record in plan.writes:
            self._put(record)

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

        All of an exchange's plans are computed before the first is applied only
        in the sense that each sees the ones before it; a failure part-way leaves
        the book as it was before the exchange.
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
        undo: dict[str, Record | None] = {}  # id -> the record before this exchange
        try:
            for candidate in sorted(found, key=_statement_order):
                plan = resolve(
                    candidate if isinstance(candidate, Candidate) else Candidate(candidate), self
                )
                for record in plan.writes:
                    undo.setdefault(record.id, self._records.get(record.id))
                self.apply(plan)
                plans.append(plan)
        except Exception:
            for rid, old in undo.items():  # one exchange, one transaction
                if rid in self._records:
                    self._drop(rid)
                if old is not None:
                    self._put(old)
            raise
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
        gone: list[str] = []
        for rid in sorted(self._by_source.pop(message_id, set())):
            record = self._records[rid]
            sources = tuple(s for s in record.sources if s != message_id)
            if sources:
                self._put(replace(record, sources=sources))
            else:
                self._drop(rid)
                gone.append(rid)
        if gone:
            self._drop_composites(set(gone))
        return gone

    def touch(self, ids: Iterable[str]) -> None:
        """Count one recall of each record."""
        for rid in ids:
            if rid in self._records:
                r = self._records[rid]
                self._records[rid] = replace(r, recall_count=r.recall_count + 1)

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
        pool = [
            r
            for r in self._records.values()
            if (kind is None or r.kind == kind)
            and (subject is None or same_subject(r.subject, subject))
            and (attribute is None or r.attribute == attribute)
        ]
        if as_of is not None:
            pool = self._held(pool, as_of)
        elif current:
            pool = [r for r in pool if r.current]
        return sorted(pool, key=_newest, reverse=True)

    def _held(self, pool: list[Record], when: datetime) -> list[Record]:
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

    def history(self, record_id: str) -> list[Record]:
        """The record's whole history, oldest first: every value its subject's attribute
        had, or the chain of records linked by ``supersedes``/``superseded_by``."""
        record = self._records.get(record_id)
        if record is None:
            raise NotFound(f"no record {record_id!r}")
        if record.attribute and record.subject:
            chain = self.about(record.scope, record.subject, record.attribute)
        else:
            chain, seen, todo = [], set(), [record_id]
            while todo:
                rid = todo.pop()
                r = self._records.get(rid)
                if r is None or rid in seen:
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
        of the same attribute holds too) and ``confidence``. ``current=True`` keeps only records
        that still hold; ``as_of`` keeps what held then; ``speaker`` is who "I"
        and "my" in the query are.
        """
        if k <= 0:
            return []
        terms = query_terms(query)
        asked = query_attributes(query)
        named = self._subjects_named(query, speaker)
        wanted_kinds = set(kinds) if kinds is not None else None
        pool_ids: set[str] = set()
        for term in terms:
            pool_ids |= self._by_term.get(term, set())
        for attribute in asked:
            pool_ids |= self._by_attribute.get((self.scope, attribute), set())
        pool = [self._records[i] for i in pool_ids]
        if wanted_kinds is not None:
            pool = [r for r in pool if r.kind in wanted_kinds]
        if as_of is not None:
            pool = self._held(pool, as_of)
        elif current:
            pool = [r for r in pool if r.current]
        if not pool:
            return []
        order = sorted(pool, key=_oldest)
        rank = {r.id: i / max(1, len(order) - 1) for i, r in enumerate(order)}
        hits = []
        qset = set(terms)
        # a denial ranks below a value of the same attribute that holds, not below others
        held = {
            (r.attribute, subject_key(r.subject)) for r in pool if r.attribute and not r.negated
        }
        for r in pool:
            signals: dict[str, float] = {}
            if qset:
                overlap = len(qset & self._terms.get(r.id, frozenset()))
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
            score = sum(WEIGHTS[name] * value for name, value in signals.items())
            hits.append(RecordHit(r, score, signals))
        hits.sort(key=lambda h: (-h.score, -(_newest(h.record).timestamp())))
        hits = hits[:k]
        if touch:
            self.touch(h.record.id for h in hits)
            hits = [replace(h, record=self._records[h.record.id]) for h in hits]
        return hits

    def search_procedures(
        self, query: str, embedder: Embedder, *, llm: LLMClient | None = None, k: int = 5
    ) -> list[RecordHit]:
        """Current procedures for a how-to ``query``, ranked by embedding (a HyDE draft
        with ``llm``, see :mod:`arbormem.records.skills`); each one returned counts a use."""
        from arbormem.records.skills import rank_procedures

        ranked = rank_procedures(query, self.records(kind="procedure"), embedder, llm=llm, k=k)
        self.touch(r.id for r, _ in ranked)
        return [RecordHit(self._records[r.id], score, {"dense": score}) for r, score in ranked]

    def _subjects_named(self, query: str, speaker: str | None) -> list[str]:
        """Subjects of the book the query names; ``speaker`` for "I", "my", "me"."""
        words = {w.casefold().removesuffix("'s") for w in _WORD.findall(query)}
        found: list[str] = []
        seen: set[str] = set()
        for r in self._records.values():
            if not r.subject or r.subject in seen:
                continue
            seen.add(r.subject)
            key = subject_key(r.subject)
            names = {w.removesuffix("'s") for w in key}
            if (r.subject[:1].isupper() and names <= words) or (
                r.subject[:1].islower() and key and key <= words
            ):
                found.append(r.subject)
        if speaker and words & {"i", "my", "me", "mine"}:
            found.append(speaker)
        return found

    # ----------------------------------------------------------------- composites

    def fuse(
        self, vectors: Mapping[str, Sequence[float]], *, threshold: float = 0.75
    ) -> list[Composite]:
        """Fuse the current records into composites (see :func:`arbormem.records.fuse.fuse`),
        replacing the previous ones. ``vectors`` maps record ids to embeddings."""
        import numpy as np

        from arbormem.records.fuse import fuse

        records = [r for r in self._records.values() if r.current and r.id in vectors]
        if not records:
            self.composites = {}
            return []
        matrix = np.asarray([vectors[r.id] for r in records], dtype=np.float32)
        built = fuse(records, matrix, threshold=threshold, scope=self.scope)
        self.composites = {c.id: c for c in built}
        return built

    def expand(self, composite_id: str) -> list[Record]:
        """The atomic records under a composite, drilling down through every level."""
        from arbormem.records.fuse import leaves

        if composite_id not in self.composites:
            raise NotFound(f"no composite {composite_id!r}")
        return [
            self._records[i] for i in leaves(composite_id, self.composites) if i in self._records
        ]

    def _drop_composites(self, record_ids: set[str]) -> None:
        dead = set(record_ids)
        changed = True
        while changed:
            changed = False
            for cid, c in list(self.composites.items()):
                if dead & set(c.members):
                    del self.composites[cid]
                    dead.add(cid)
                    changed = True

    # ----------------------------------------------------------------- export

    def to_dict(self) -> dict[str, Any]:
        """Every record and composite as JSON-ready data (lossless)."""
        return {
            "format": RECORD_FORMAT,
            "scope": self.scope,
            "records": [r.to_dict() for r in sorted(self._records.values(), key=_oldest)],
            "composites": [c.to_dict() for c in self.composites.values()],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<input>") -> RecordBook:
        """A book restored from :meth:`to_dict` output; bad data raises
        :class:`~arbormem.errors.InputError` naming the record and field."""
        if not isinstance(data, Mapping):
            raise InputError("must be a JSON object", source=source)
        if data.get("format") != RECORD_FORMAT:
            raise InputError(
                f"unknown records format {data.get('format')!r}",
                source=source,
                field="format",
                hint=f"this arbormem reads format {RECORD_FORMAT}",
            )
        scope = data.get("scope", "default/default")
        if not isinstance(scope, str) or not scope:
            raise InputError("must be a non-empty string", source=source, field="scope")
        book = cls(scope)
        items = data.get("records", [])
        if not isinstance(items, list):
            raise InputError("must be a list", source=source, field="records")
        records = []
        for i, item in enumerate(items):
            try:
                records.append(record_from_dict(item, where=f"records[{i}]"))
            except InputError as exc:
                raise InputError(
                    exc.problem, source=source, field=exc.field, hint=exc.hint
                ) from None
        composites = data.get("composites", [])
        if not isinstance(composites, list):
            raise InputError("must be a list", source=source, field="composites")
        built = []
        for i, item in enumerate(composites):
            try:
                built.append(composite_from_dict(item, where=f"composites[{i}]"))
            except InputError as exc:
                raise InputError(
                    exc.problem, source=source, field=exc.field, hint=exc.hint
                ) from None
        book._reset(records)
        book.composites = {c.id: c for c in built}
        return book

    # ----------------------------------------------------------------- internals

    def _put(self, record: Record) -> None:
        old = self._records.get(record.id)
        if old is not None:
            self._unindex(old)
        self._records[record.id] = record
        if record.attribute:
            self._by_attribute[(record.scope, record.attribute)].add(record.id)
        terms = frozenset(
            analyze(" ".join(x for x in (record.text, record.subject, record.value) if x))
        )
        self._terms[record.id] = terms
        for term in terms:
            self._by_term[term].add(record.id)
        for source in record.sources:
            self._by_source[source].add(record.id)

    def _unindex(self, record: Record) -> None:
        if record.attribute:
            self._by_attribute[(record.scope, record.attribute)].discard(record.id)
        for term in self._terms.pop(record.id, frozenset()):
            self._by_term[term].discard(record.id)
        for source in record.sources:
            self._by_source[source].discard(record.id)

    def _drop(self, record_id: str) -> None:
        record = self._records.pop(record_id)
        self._unindex(record)

    def _reset(self, records: Iterable[Record]) -> None:
        self._records.clear()
        self._by_attribute.clear()
        self._by_term.clear()
        self._by_source.clear()
        self._terms.clear()
        for r in records:
            self._put(r)


def _oldest(r: Record) -> tuple[float, float]:
    start = r.valid_from or r.created_at
    said = r.created_at or r.valid_from
    return (start.timestamp() if start else -math.inf, said.timestamp() if said else -math.inf)


def _newest(r: Record) -> datetime:
    return r.updated_at or r.created_at or r.valid_from or _EPOCH


def _statement_order(c: Candidate) -> tuple[int, float]:
    """Within an exchange: what was true before ("used to", "moved from") first."""
    r = c.record
    start = r.valid_from or r.valid_to
    return (0 if c.past else 1, start.timestamp() if start else -math.inf)
