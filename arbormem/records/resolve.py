"""What a new candidate does to the records already kept: pure functions.

:func:`resolve` reads what it needs through a :class:`RecordView` (the records
about one subject's attribute, and records whose text is close to a new one)
and returns a :class:`Plan`: the records to write, new and updated versions
both. It never writes; the caller applies the plan in one transaction, so a
crash leaves the records as they were.

The rules, in order:

* the same statement again (same id) merges: sources and counts added;
* a denial ("no longer allergic to nuts", "Tom and I split up") closes the
  current records it denies; one that denies nothing known is dropped when it
  could be about something else ("left Acme");
* a new value for a subject's single-valued attribute (home, employer, phone...)
  closes the current one (``valid_to``, ``superseded_by``) and links back to it
  (``supersedes``); a change dated before the current value began is history,
  placed before it; several-valued attributes (pets, allergies, likes) add;
* "used to" closes the matching current value, or goes into history;
* any other record merges into a near-duplicate of the same kind and subject.

:func:`value_at` answers "as of" questions over one attribute's history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from arbormem.context.trackers.common import words as word_set
from arbormem.records.extract import Candidate
from arbormem.records.model import Record, record_id, value_key
from arbormem.records.vocab import ATTRIBUTES
from arbormem.text import analyze

__all__ = [
    "Plan",
    "RecordView",
    "merge",
    "near_duplicate",
    "resolve",
    "same_subject",
    "same_value",
    "subject_key",
    "value_at",
]

#: Share of words two texts must have in common to be one record said twice.
DUPLICATE_OVERLAP = 0.8

_LEADING = word_set(
    "the a an our my your their his her this that weekly daily monthly regular usual"
)


class RecordView(Protocol):
    """The reads :func:`resolve` needs; a record book or a store implements them."""

    def get(self, record_id: str) -> Record | None:
        """The record with this id, current or closed; None if there is none."""

    def about(self, scope: str, subject: str, attribute: str) -> Sequence[Record]:
        """Every record, current or closed, stating ``attribute`` of a subject that
        :func:`same_subject` matches with ``subject``, in any order."""

    def similar(self, scope: str, kind: str, text: str, limit: int = 5) -> Sequence[Record]:
        """Current records of ``kind`` whose text is close to ``text``, best first."""


@dataclass(frozen=True)
class Plan:
    """What to write for one candidate.

    ``action``: ``add`` (a new record), ``merge`` (into ``record``, an existing
    one), ``supersede`` (new record closing others), ``close`` (a denial closing
    others), ``history`` (a record of the past, current records untouched) or
    ``ignore`` (nothing to write). ``writes`` lists every record to store, new
    and updated, in order; ``closed`` the ids it closed.
    """

    action: str
    record: Record | None = None
    writes: tuple[Record, ...] = ()
    closed: tuple[str, ...] = ()


# --------------------------------------------------------------------------- matching


def subject_key(subject: str | None) -> frozenset[str]:
    """The words that identify a subject: "the weekly sync" and "sync" share them."""
    if not subject:
        return frozenset()
    words = subject.casefold().replace("’", "'").split()
    return frozenset(w for w in words if w not in _LEADING) or frozenset(words)


def same_subject(a: str | None, b: str | None) -> bool:
    """Whether two subjects name the same person or thing ("Sam" and "Sam Lee" do)."""
    ka, kb = subject_key(a), subject_key(b)
    return bool(ka and kb) and (ka <= kb or kb <= ka)


def same_value(a: Record, b: Record) -> bool:
    """Whether two records state the same value ("Lyon" and "Lyon, France" do; a pet
    by name or by kind)."""
    ka, kb = value_key(a.value), value_key(b.value)
    if not ka or not kb:
        return False
    if ka == kb or ka.startswith(kb + " ") or kb.startswith(ka + " "):
        return True
    if a.attribute == "pets":  # "our dog died" closes "a dog named Rex"
        unnamed_a, unnamed_b = a.value[:1].islower(), b.value[:1].islower()  # type: ignore[index]
        return (unnamed_a and ka in b.tags) or (unnamed_b and kb in a.tags)
    return False


def _terms(text: str) -> set[str]:
    return set(analyze(text))


def near_duplicate(a: Record, b: Record, overlap: float = DUPLICATE_OVERLAP) -> bool:
    """Same kind, same subject, and at least ``overlap`` of the words in common."""
    if a.kind != b.kind or not (same_subject(a.subject, b.subject) or a.subject == b.subject):
        return False
    ta, tb = _terms(a.text), _terms(b.text)
    if not ta or not tb:
        return False
    return len(ta & tb) / max(len(ta), len(tb)) >= overlap


# --------------------------------------------------------------------------- plans


def merge(existing: Record, new: Record) -> Record:
    """``existing`` with ``new``'s sources, entities and tags added, counted once more."""
    return replace(
        existing.with_sources(new.sources),
        mentions=existing.mentions + new.mentions,
        confidence=max(existing.confidence, new.confidence),
        importance=max(existing.importance, new.importance),
        entities=tuple(dict.fromkeys([*existing.entities, *new.entities])),
        tags=tuple(dict.fromkeys([*existing.tags, *new.tags])),
        updated_at=_later(existing.updated_at, new.updated_at),
    )


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return max(a, b)


def _replayed(existing: Record, new: Record) -> bool:
    """A candidate whose every source the record already has: extraction run again."""
    return bool(new.sources) and set(new.sources) <= set(existing.sources)


def _merge_plan(existing: Record, new: Record) -> Plan:
    if _replayed(existing, new):
        return Plan("ignore", existing)
    merged = merge(existing, new)
    return Plan("merge", merged, (merged,))


def _close(record: Record, at: datetime | None, by: str) -> Record:
    if record.valid_from is not None and at is not None and at < record.valid_from:
        at = record.valid_from  # never an interval that ends before it starts
    return replace(record, valid_to=at, superseded_by=by, updated_at=_later(record.updated_at, at))


def _said_at(record: Record) -> datetime | None:
    return record.created_at or record.valid_from


def resolve(candidate: Candidate, view: RecordView) -> Plan:
    """The plan for ``candidate`` given the records ``view`` holds. Pure: writes nothing."""
    new = candidate.record
    existing = view.get(new.id)
    if existing is not None:
        if existing.current or _replayed(existing, new):
            return _merge_plan(existing, new)
        # said again after it was replaced ("back in Paris"): a record of its own
        new = replace(new, id=record_id(new.scope, new.text, epoch=new.valid_from or _said_at(new)))
        again = view.get(new.id)
        if again is not None:
            return _merge_plan(again, new)
    if new.attribute and new.subject:
        return _resolve_attribute(replace(candidate, record=new), view)
    for other in view.similar(new.scope, new.kind, new.text):
        if other.current and near_duplicate(other, new):
            return _merge_plan(other, new)
    return Plan("add", new, (new,))


def _resolve_attribute(candidate: Candidate, view: RecordView) -> Plan:
    new = candidate.record
    assert new.subject is not None and new.attribute is not None
    chain = list(view.about(new.scope, new.subject, new.attribute))
    current = [r for r in chain if r.current]
    positive = [r for r in current if not r.negated]
    denials = [r for r in current if r.negated]
    spec = ATTRIBUTES.get(new.attribute)
    multi = spec.multi if spec else False

    if new.negated:
        targets = [r for r in positive if not new.value or same_value(r, new)]
        if not new.value and multi:
            targets = []  # "it died" with no name: which pet?
        twin = next(
            (r for r in denials if same_value(r, new) or (not r.value and not new.value)), None
        )
        if twin is not None and not targets:
            return _merge_plan(twin, new)
        if not targets and candidate.needs_match:
            return Plan("ignore")
        if not new.value and len(targets) == 1 and targets[0].value:
            new = _naming(new, targets[0].value)  # "we broke up": with whom is known
        return _closing(new, targets, "close" if targets else "add")

    if candidate.past:
        targets = [r for r in positive if same_value(r, new)]
        if targets:
            return _closing(new, targets, "close", at=new.valid_to)
        twin = next((r for r in chain if not r.current and same_value(r, new)), None)
        if twin is not None and twin.valid_from is None:
            return _merge_plan(twin, new)
        known = [r for r in chain if r.valid_from is not None and not r.negated]
        if known and not multi:
            # "I used to live in Rome" while Lyon is known: Rome came before all of it
            first = min(known, key=lambda r: r.valid_from)  # type: ignore[arg-type, return-value]
            new = replace(new, valid_to=first.valid_from, superseded_by=first.id)
        return Plan("history", new, (new,))

    same = [r for r in positive if same_value(r, new)]
    if same:
        plan = _merge_plan(same[0], new)
        flipped = [_close(r, new.valid_from, same[0].id) for r in denials if same_value(r, new)]
        if flipped and plan.record is not None:
            return Plan(
                "merge", plan.record, (*plan.writes, *flipped), tuple(r.id for r in flipped)
            )
        return plan

    if multi:
        flips = [r for r in denials if same_value(r, new)]
        return _closing(new, flips, "supersede" if flips else "add")

    # one value at a time: the newest statement wins, unless it is dated before the current one
    others = positive + denials
    changed = "change" in new.tags and new.valid_from is not None
    after = [
        r
        for r in others
        if changed
        and r.valid_from is not None
        and r.valid_from > new.valid_from  # type: ignore[operator]
        and "change" in r.tags
    ]
    if after:
        first = min(after, key=lambda r: r.valid_from)  # type: ignore[arg-type, return-value]
        older = replace(new, valid_to=first.valid_from, superseded_by=first.id)
        return Plan("history", older, (older,))
    extra: list[Record] = []
    if candidate.former and not any(
        value_key(r.value) == value_key(candidate.former) for r in chain
    ):
        extra.append(_former(candidate, new))
    plan = _closing(new, others, "supersede" if others else "add")
    return Plan(plan.action, plan.record, (*plan.writes, *extra), plan.closed)


def _naming(denial: Record, value: str) -> Record:
    """A denial that named no value, given the one it closes."""
    from arbormem.records.vocab import render

    assert denial.subject is not None and denial.attribute is not None
    text = render(denial.attribute, denial.subject, value, negated=True)
    return replace(denial, value=value, text=text, id=record_id(denial.scope, text))


def _closing(
    new: Record, targets: Iterable[Record], action: str, at: datetime | None = None
) -> Plan:
    """``new`` added, closing ``targets`` when it became true (or at ``at``)."""
    targets = list(targets)
    closed: list[Record] = []
    for r in targets:
        when = at or new.valid_from
        if when is not None and r.valid_from is not None and when < r.valid_from:
            when = _said_at(new)  # "have lived here since 2019": closes what was current when said
        closed.append(_close(r, when, new.id))
    positive = [r for r in targets if not r.negated]
    link = (positive or targets)[0].id if targets else None
    added = replace(new, supersedes=link) if link else new
    return Plan(action, added, (added, *closed), tuple(r.id for r in closed))


def _former(candidate: Candidate, new: Record) -> Record:
    """The record a "moved from Paris" implies: Paris until the move."""
    from arbormem.records.vocab import render

    assert new.subject is not None and new.attribute is not None and candidate.former is not None
    text = render(new.attribute, new.subject, candidate.former, past=True)
    return replace(
        new,
        id=record_id(new.scope, text),
        text=text,
        value=candidate.former,
        tags=(new.attribute, "past"),
        entities=tuple(dict.fromkeys([*new.entities[:1], candidate.former])),
        valid_from=None,
        valid_to=new.valid_from,
        superseded_by=new.id,
        supersedes=None,
    )


# --------------------------------------------------------------------------- as of


def value_at(chain: Sequence[Record], when: datetime) -> list[Record]:
    """The records of one attribute's history that held at ``when``.

    A record holds from ``valid_from`` until ``valid_to``. The first value of a
    history that was simply stated ("I live in Paris", not "I moved to Paris")
    is taken to hold before it was first said too: people mention where they
    live long after they moved there.
    """
    held = [
        r
        for r in chain
        if not r.negated
        and (r.valid_from is None or r.valid_from <= when)
        and (r.valid_to is None or r.valid_to > when)
    ]
    dated = sorted(
        (r for r in chain if r.valid_from is not None and not r.negated),
        key=lambda r: r.valid_from,  # type: ignore[arg-type, return-value]
    )
    known = [r for r in held if r.valid_from is not None]
    if known:
        return sorted(known, key=lambda r: r.valid_from, reverse=True)  # type: ignore[arg-type, return-value]
    if dated and "change" not in dated[0].tags and dated[0].valid_from > when:  # type: ignore[operator]
        # before its first mention a simply stated value is taken to hold already; an
        # undated "used to" is older still
        return [dated[0]]
    return held
