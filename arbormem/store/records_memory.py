"""The reference implementation of :class:`~arbormem.store.records.RecordStore`,
in dictionaries.

It defines what every back-end must answer (the contract suite runs it beside
SQLite and PostgreSQL) and backs :class:`arbormem.records.engine.RecordBook`, the
record book that needs no database. Transactions are real: a write that fails
part-way is undone from a journal of what each write replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from arbormem.store.records import (
    RecordStore,
    check_scope,
    record_terms,
    sort_time,
    subject_words,
)
from arbormem.store.types import Thread

if TYPE_CHECKING:
    from arbormem.records.model import Composite, Record

__all__ = ["MemoryRecordStore"]


@dataclass
class _Shelf:
    """One thread's records and their lookups."""

    records: dict[str, Record] = field(default_factory=dict)
    #: The order records were first written (breaks every tie).
    seq: dict[str, int] = field(default_factory=dict)
    terms: dict[str, frozenset[str]] = field(default_factory=dict)
    by_term: dict[str, set[str]] = field(default_factory=dict)
    by_attribute: dict[str, set[str]] = field(default_factory=dict)
    by_source: dict[str, set[str]] = field(default_factory=dict)
    composites: dict[str, Composite] = field(default_factory=dict)
    cursor: int = 0
    next_seq: int = 0


def _subject_matches(stored: str | None, wanted: str | None) -> bool:
    """:func:`~arbormem.records.resolve.same_subject` on stored word keys."""
    if stored is None or wanted is None:
        return False
    a, b = set(stored.split()), set(wanted.split())
    return a <= b or b <= a


class MemoryRecordStore(RecordStore):
    """Records in memory, for one process. Not thread-safe: one writer at a time."""

    name = "memory"

    def __init__(self) -> None:
        self._shelves: dict[int, _Shelf] = {}
        self._depth = 0
        #: Undo steps of the transaction under way, run newest first on failure.
        self._journal: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ core

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        except BaseException:
            if self._depth == 1:
                for undo in reversed(self._journal):
                    undo()
                self._journal.clear()
            raise
        finally:
            self._depth -= 1
            if not self._depth:
                self._journal.clear()

    def close(self) -> None:
        self._shelves.clear()

    def change_mark(self) -> tuple[int, int]:
        return (0, 0)  # holds no messages

    # ------------------------------------------------------------------ internals

    def _shelf(self, thread: Thread) -> _Shelf:
        shelf = self._shelves.get(thread.id)
        if shelf is None:
            shelf = self._shelves[thread.id] = _Shelf()
        return shelf

    def _ordered(self, shelf: _Shelf, ids: Iterable[str]) -> list[Record]:
        return [shelf.records[i] for i in sorted(set(ids), key=shelf.seq.__getitem__)]

    def _set(self, shelf: _Shelf, rid: str, record: Record | None, seq: int | None) -> None:
        """Put (or with None, drop) one record with its lookups; journalled."""
        old, old_seq = shelf.records.get(rid), shelf.seq.get(rid)
        if self._depth:
            self._journal.append(lambda: self._restore(shelf, rid, old, old_seq))
        self._restore(shelf, rid, record, seq)

    def _restore(self, shelf: _Shelf, rid: str, record: Record | None, seq: int | None) -> None:
        old = shelf.records.pop(rid, None)
        shelf.seq.pop(rid, None)
        if old is not None:
            for term in shelf.terms.pop(rid, frozenset()):
                shelf.by_term[term].discard(rid)
            if old.attribute:
                shelf.by_attribute[old.attribute].discard(rid)
            for source in old.sources:
                shelf.by_source[source].discard(rid)
        if record is None or seq is None:
            return
        shelf.records[rid] = record
        shelf.seq[rid] = seq
        terms = frozenset(record_terms(record))
        shelf.terms[rid] = terms
        for term in terms:
            shelf.by_term.setdefault(term, set()).add(rid)
        if record.attribute:
            shelf.by_attribute.setdefault(record.attribute, set()).add(rid)
        for source in record.sources:
            shelf.by_source.setdefault(source, set()).add(rid)

    def _set_composites(self, shelf: _Shelf, composites: dict[str, Composite]) -> None:
        old = shelf.composites
        if self._depth:
            self._journal.append(lambda: setattr(shelf, "composites", old))
        shelf.composites = composites

    # ------------------------------------------------------------------ reading

    def record(self, thread: Thread, record_id: str) -> Record | None:
        return self._shelf(thread).records.get(record_id)

    def records_about(self, thread: Thread, subject: str, attribute: str) -> list[Record]:
        shelf = self._shelf(thread)
        wanted = subject_words(subject)
        return [
            r
            for r in self._ordered(shelf, shelf.by_attribute.get(attribute, ()))
            if _subject_matches(subject_words(r.subject), wanted)
        ]

    def similar_records(self, thread: Thread, kind: str, text: str, limit: int = 5) -> list[Record]:
        from arbormem.text import analyze

        shelf = self._shelf(thread)
        counts: dict[str, int] = {}
        for term in set(analyze(text)):
            for rid in shelf.by_term.get(term, ()):
                counts[rid] = counts.get(rid, 0) + 1
        ranked = sorted(counts, key=lambda rid: (-counts[rid], shelf.seq[rid]))
        found = (shelf.records[rid] for rid in ranked)
        return [r for r in found if r.kind == kind and r.current][: max(0, limit)]

    def record_candidates(
        self,
        thread: Thread,
        terms: Sequence[str],
        attributes: Sequence[str] = (),
        *,
        kinds: Sequence[str] | None = None,
        current: bool = True,
        limit: int | None = None,
    ) -> list[Record]:
        shelf = self._shelf(thread)
        wanted = set(kinds) if kinds is not None else None

        def passes(rid: str) -> bool:
            r = shelf.records[rid]
            return (wanted is None or r.kind in wanted) and (not current or r.current)

        counts: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            for rid in shelf.by_term.get(term, ()):
                if passes(rid):
                    counts[rid] = counts.get(rid, 0) + 1
        matched = list(counts)
        if limit is not None and len(matched) > limit:
            # This store's full-text ranking: the most query terms held.
            matched = sorted(matched, key=lambda rid: (-counts[rid], shelf.seq[rid]))[:limit]
        pool = set(matched)
        for attribute in attributes:
            pool.update(rid for rid in shelf.by_attribute.get(attribute, ()) if passes(rid))
        return self._ordered(shelf, pool)

    def list_records(
        self,
        thread: Thread,
        *,
        kind: str | None = None,
        subject: str | None = None,
        attribute: str | None = None,
        current: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Record]:
        shelf = self._shelf(thread)
        wanted = subject_words(subject) if subject is not None else None
        pool = [
            r
            for r in self._ordered(shelf, shelf.records)
            if (kind is None or r.kind == kind)
            and (subject is None or _subject_matches(subject_words(r.subject), wanted))
            and (attribute is None or r.attribute == attribute)
            and (not current or r.current)
        ]
        pool.sort(key=sort_time, reverse=True)  # stable: ties stay in written order
        end = None if limit is None else offset + max(0, limit)
        return pool[offset:end]

    def record_subjects(self, thread: Thread) -> list[str]:
        shelf = self._shelf(thread)
        found = (r.subject for r in self._ordered(shelf, shelf.records) if r.subject)
        return list(dict.fromkeys(found))

    def records_for_messages(self, thread: Thread, message_ids: Sequence[str]) -> list[Record]:
        shelf = self._shelf(thread)
        ids = {rid for m in message_ids for rid in shelf.by_source.get(m, ())}
        return self._ordered(shelf, ids)

    def composites(self, thread: Thread) -> list[Composite]:
        return list(self._shelf(thread).composites.values())

    def records_cursor(self, thread: Thread) -> int:
        return self._shelf(thread).cursor

    # ------------------------------------------------------------------ writing

    def write_records(self, thread: Thread, records: Sequence[Record]) -> None:
        check_scope(thread, records)
        with self.transaction():
            shelf = self._shelf(thread)
            for record in records:
                seq = shelf.seq.get(record.id)
                if seq is None:
                    seq = shelf.next_seq
                    shelf.next_seq += 1
                self._set(shelf, record.id, record, seq)

    def touch_records(self, thread: Thread, record_ids: Iterable[str]) -> None:
        with self.transaction():
            shelf = self._shelf(thread)
            for rid in dict.fromkeys(record_ids):
                r = shelf.records.get(rid)
                if r is not None:
                    self._set(
                        shelf, rid, replace(r, recall_count=r.recall_count + 1), shelf.seq[rid]
                    )

    def delete_records(self, thread: Thread, record_ids: Iterable[str]) -> list[str]:
        with self.transaction():
            shelf = self._shelf(thread)
            doomed = [
                r.id for r in self._ordered(shelf, (i for i in record_ids if i in shelf.records))
            ]
            for rid in doomed:
                gone = shelf.records[rid]
                # Splice it out: what it closed takes its end, what replaced it its start.
                for other in list(shelf.records.values()):
                    changed = other
                    if other.superseded_by == rid:
                        changed = replace(
                            changed, valid_to=gone.valid_to, superseded_by=gone.superseded_by
                        )
                    if other.supersedes == rid:
                        changed = replace(changed, supersedes=gone.supersedes)
                    if changed is not other:  # a doomed one too: its own turn reads this
                        self._set(shelf, other.id, changed, shelf.seq[other.id])
                self._set(shelf, rid, None, None)
            if doomed:
                self._drop_composites_on(shelf, set(doomed))
            return doomed

    def _drop_composites_on(self, shelf: _Shelf, dead: set[str]) -> None:
        kept = dict(shelf.composites)
        changed = True
        while changed:
            changed = False
            for cid, c in list(kept.items()):
                if dead.intersection(c.members):
                    del kept[cid]
                    dead.add(cid)
                    changed = True
        if len(kept) != len(shelf.composites):
            self._set_composites(shelf, kept)

    def forget_record_sources(self, thread: Thread, message_ids: Sequence[str]) -> list[str]:
        with self.transaction():
            shelf = self._shelf(thread)
            forgotten = set(message_ids)
            doomed: list[str] = []
            for r in self.records_for_messages(thread, message_ids):
                sources = tuple(s for s in r.sources if s not in forgotten)
                if sources:
                    self._set(shelf, r.id, replace(r, sources=sources), shelf.seq[r.id])
                else:
                    doomed.append(r.id)
            return self.delete_records(thread, doomed)

    def replace_composites(self, thread: Thread, composites: Sequence[Composite]) -> None:
        check_scope(thread, composites)
        with self.transaction():
            self._set_composites(self._shelf(thread), {c.id: c for c in composites})

    def set_records_cursor(self, thread: Thread, index: int) -> None:
        with self.transaction():
            shelf = self._shelf(thread)
            old = shelf.cursor
            self._journal.append(lambda: setattr(shelf, "cursor", old))
            shelf.cursor = index
