"""Typed records in PostgreSQL: one JSON row per record, one per composite, and the
extraction cursor of each thread.

Queries run over the thread's records loaded into the reference implementation
(:class:`~arbormem.store.records_memory.MemoryRecordStore`), which defines the
answers. Each process keeps the records it loaded, stamped with the version of the
thread's cursor row (its ``xmin``: every change of a thread's records rewrites that
row in the same transaction, so the stamp moves with any process's change); a read
checks the stamp (one small query) and loads the rows again only when it moved. A
change applies itself to the loaded records under the thread's lock; the rows it touched are written back once, just before the
transaction commits, with the cursor row (whose new version is the next stamp). So a
batch of extraction that resolves and writes a few hundred records costs one round
trip of writes, not four per record, and no pass over the thread's other records.
"""

from __future__ import annotations

import heapq
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from arbormem.errors import StoreError
from arbormem.store.postgres.connection import PostgresConnection
from arbormem.store.records import subject_words
from arbormem.store.records_memory import MemoryRecordStore
from arbormem.store.types import Thread

if TYPE_CHECKING:
    from arbormem.records.model import Composite, Record

T = TypeVar("T")


class _Tracked(MemoryRecordStore):
    """One thread's records as loaded, noting what each change touched since they
    were last written (see :meth:`PostgresRecords._write_back`).

    The two reads extraction makes for nearly every statement it resolves are
    answered from lookups kept here, not from a pass over the thread's records, whose
    number grows with the thread: the records about a subject's attribute (by
    attribute and subject word) and the near records of a kind (the best few by a
    heap, not a sort of every record sharing a word). The answers are the reference
    store's."""

    def __init__(self, thread: Thread) -> None:
        super().__init__()
        self.thread = thread
        #: Ids of the records put or dropped since the last write-back.
        self.touched: set[str] = set()
        #: The composites as the table holds them (by id), to find what changed.
        self.stored_composites: dict[str, Composite] = {}
        #: (attribute, subject word) -> ids of the records stating it of such a subject.
        self._about: dict[tuple[str, str], set[str]] = {}
        #: Record id -> its subject's words (:func:`subject_words`), for those in _about.
        self._subject_of: dict[str, str] = {}

    def _set(self, shelf: Any, rid: str, record: Record | None, seq: int | None) -> None:
        self.touched.add(rid)
        super()._set(shelf, rid, record, seq)

    def _restore(self, shelf: Any, rid: str, record: Record | None, seq: int | None) -> None:
        old = shelf.records.get(rid)
        words = self._subject_of.pop(rid, None)
        if old is not None and old.attribute and words:
            for word in words.split():
                self._about[(old.attribute, word)].discard(rid)
        super()._restore(shelf, rid, record, seq)
        if record is not None and seq is not None and record.attribute:
            words = subject_words(record.subject)
            if words:
                self._subject_of[rid] = words
                for word in words.split():
                    self._about.setdefault((record.attribute, word), set()).add(rid)

    def records_about(self, thread: Thread, subject: str, attribute: str) -> list[Record]:
        wanted = subject_words(subject)
        if wanted is None:
            return []
        # One subject's words hold all of the other's: both share a word, so the
        # records under the wanted words are every candidate.
        want = set(wanted.split())
        ids: set[str] = set()
        for word in want:
            ids.update(self._about.get((attribute, word), ()))
        found = []
        for r in self._ordered(self._shelf(thread), ids):
            have = set(self._subject_of[r.id].split())
            if have <= want or want <= have:
                found.append(r)
        return found

    def similar_records(self, thread: Thread, kind: str, text: str, limit: int = 5) -> list[Record]:
        from arbormem.text import analyze

        shelf = self._shelf(thread)
        records, seq = shelf.records, shelf.seq
        counts: dict[str, int] = {}
        for term in set(analyze(text)):
            for rid in shelf.by_term.get(term, ()):
                counts[rid] = counts.get(rid, 0) + 1
        best = heapq.nsmallest(
            max(0, limit),
            (
                (-n, seq[rid], rid)
                for rid, n in counts.items()
                if (r := records[rid]).kind == kind and r.current
            ),
        )
        return [records[rid] for _, _, rid in best]


_Loaded = tuple[threading.Lock, dict[int, tuple[str | None, _Tracked]]]


class PostgresRecords(PostgresConnection):
    """The :class:`~arbormem.store.records.RecordStore` capability."""

    #: See :meth:`_records_cache` (made on first use: the capabilities share no __init__).
    _records_loaded: _Loaded | None = None

    def _shelf_of(self, conn: Any, thread: Thread) -> _Tracked:
        from arbormem.records.model import composite_from_dict, record_from_dict

        k = self._keys(thread)
        store = _Tracked(thread)
        shelf = store._shelf(thread)
        # The records (0), the composites (1) and the cursor (2) in one round trip.
        rows = conn.execute(
            "SELECT 0, seq, NULL::text, data FROM record_rows WHERE scope_id = %(s)s"
            " AND thread_id = %(t)s UNION ALL SELECT 1, NULL, id, data FROM record_composites"
            " WHERE scope_id = %(s)s AND thread_id = %(t)s UNION ALL SELECT 2, position, NULL,"
            " NULL FROM record_cursors WHERE scope_id = %(s)s AND thread_id = %(t)s"
            " ORDER BY 1, 2, 3",
            k,
        ).fetchall()
        composites: list[Composite] = []
        shelf.cursor = 0
        for part, number, _, data in rows:
            if part == 0:
                record = record_from_dict(json.loads(data))
                store._restore(shelf, record.id, record, int(number))
                shelf.next_seq = int(number) + 1
            elif part == 1:
                composites.append(composite_from_dict(json.loads(data)))
            else:
                shelf.cursor = int(number)
        shelf.composites = {c.id: c for c in composites}
        store.stored_composites = dict(shelf.composites)
        return store

    def _records_cache(self) -> _Loaded:
        """The loaded records of each thread with their stamp, and the lock readers
        hold while they ask them (a change never mutates what a reader holds: it
        takes the entry out first)."""
        cache = self._records_loaded
        if cache is None:
            with self._lock:
                cache = self._records_loaded
                if cache is None:
                    cache = self._records_loaded = (threading.Lock(), {})
        return cache

    def _stamp(self, conn: Any, thread: Thread) -> str | None:
        row = conn.execute(
            "SELECT xmin::text FROM record_cursors WHERE scope_id = %(s)s AND thread_id = %(t)s",
            self._keys(thread),
        ).fetchone()
        return None if row is None else str(row[0])

    def _read(self, thread: Thread, ask: Callable[[MemoryRecordStore], T]) -> T:
        lock, loaded = self._records_cache()
        with self._reading(thread) as conn:
            tx = self._tx()
            if tx is not None and thread.id in tx.records:
                return ask(tx.records[thread.id])  # as this transaction left them
            # The stamp first, the rows after: rows newer than their stamp only
            # cost a reload next time, never a stale answer.
            stamp = self._stamp(conn, thread)
            with lock:
                entry = loaded.get(thread.id)
                if entry is not None and entry[0] == stamp and stamp is not None:
                    return ask(entry[1])
            store = self._shelf_of(conn, thread)
        with lock:
            if stamp is not None and not self._owns_transaction():
                # Inside a write transaction the rows may hold its uncommitted
                # changes: those are never kept.
                loaded[thread.id] = (stamp, store)
            return ask(store)

    def _change(self, thread: Thread, change: Callable[[MemoryRecordStore], T]) -> T:
        lock, loaded = self._records_cache()
        # Records have a stamp of their own (the cursor row's xmin): their writes
        # leave the thread's change counter, and what searches keep, as they are.
        with self._writing(thread, quiet=True) as conn:
            tx = self._tx()
            assert tx is not None
            store = tx.records.get(thread.id)
            if store is None:
                # The first change of the thread in this transaction: whether it is
                # still stored, and the records' stamp, at once. Later changes find
                # it in tx.records (its lock held, nobody else changes it; forgetting
                # the thread takes it out).
                alive, stamp = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM threads WHERE scope_id = %(s)s AND id = %(t)s),"
                    " (SELECT xmin::text FROM record_cursors WHERE scope_id = %(s)s"
                    " AND thread_id = %(t)s)",
                    self._keys(thread),
                ).fetchone()
                if not alive:
                    raise StoreError(
                        f"thread {thread.user}/{thread.agent} is no longer stored (forgotten):"
                        " its records cannot be written"
                    )
                with lock:
                    entry = loaded.pop(thread.id, None)
                if entry is not None and entry[0] == stamp and stamp is not None:
                    store = entry[1]
                else:
                    store = self._shelf_of(conn, thread)
                store.touched.clear()
                tx.records[thread.id] = store
                self._before_commit(self._write_records_back)
            return change(store)

    def _write_records_back(self) -> None:
        """Write what this transaction's changes touched, thread by thread (see
        :meth:`_write_back`), and keep each thread's records, under their new
        stamp, once it commits."""
        tx = self._tx()
        assert tx is not None
        lock, loaded = self._records_cache()
        for tid, store in list(tx.records.items()):
            if not isinstance(store, _Tracked):
                continue
            new_stamp = self._write_back(tx.conn, self._keys(store.thread), store)

            def keep(tid: int = tid, store: _Tracked = store, stamp: str = new_stamp) -> None:
                with lock:
                    loaded[tid] = (stamp, store)

            self._on_commit(keep)

    def _write_back(self, conn: Any, k: dict[str, Any], store: _Tracked) -> str:
        """Write the rows the changes since the last write-back touched (records are
        frozen: a changed one is a new object), and the cursor row, whose new version
        is the next stamp (returned)."""
        shelf = store._shelf(store.thread)
        touched = sorted(store.touched, key=lambda rid: shelf.seq.get(rid, -1))
        gone = [rid for rid in touched if rid not in shelf.records]
        put = [
            (k["s"], k["t"], rid, shelf.seq[rid], json.dumps(shelf.records[rid].to_dict()))
            for rid in touched
            if rid in shelf.records
        ]
        before_composites = store.stored_composites
        gone_composites = [cid for cid in before_composites if cid not in shelf.composites]
        put_composites = [
            (k["s"], k["t"], cid, json.dumps(c.to_dict()))
            for cid, c in shelf.composites.items()
            if before_composites.get(cid) is not c
        ]
        if gone:
            conn.execute(
                "DELETE FROM record_rows WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND id = ANY(%(i)s)",
                {**k, "i": gone},
            )
        if gone_composites:
            conn.execute(
                "DELETE FROM record_composites WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND id = ANY(%(i)s)",
                {**k, "i": gone_composites},
            )
        with conn.cursor() as cur:
            if put:
                cur.executemany(
                    "INSERT INTO record_rows (scope_id, thread_id, id, seq, data)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (scope_id, thread_id, id)"
                    " DO UPDATE SET seq = excluded.seq, data = excluded.data",
                    put,
                )
            if put_composites:
                cur.executemany(
                    "INSERT INTO record_composites (scope_id, thread_id, id, data)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (scope_id, thread_id, id)"
                    " DO UPDATE SET data = excluded.data",
                    put_composites,
                )
        row = conn.execute(
            "INSERT INTO record_cursors (scope_id, thread_id, position)"
            " VALUES (%(s)s, %(t)s, %(p)s) ON CONFLICT (scope_id, thread_id)"
            " DO UPDATE SET position = excluded.position RETURNING xmin::text",
            {**k, "p": shelf.cursor},
        ).fetchone()
        store.touched.clear()
        store.stored_composites = dict(shelf.composites)
        return str(row[0])

    def _rows_changed(self, threads: Iterable[Thread], *, forgotten: bool) -> None:
        if forgotten:
            lock, loaded = self._records_cache()
            with lock:
                for t in threads:
                    loaded.pop(t.id, None)
        super()._rows_changed(threads, forgotten=forgotten)

    def _closing(self) -> None:
        lock, loaded = self._records_cache()
        with lock:
            loaded.clear()
        super()._closing()

    # -- reading ----------------------------------------------------------------------

    def record(self, thread: Thread, record_id: str) -> Record | None:
        return self._read(thread, lambda m: m.record(thread, record_id))

    def records_about(self, thread: Thread, subject: str, attribute: str) -> list[Record]:
        return self._read(thread, lambda m: m.records_about(thread, subject, attribute))

    def similar_records(self, thread: Thread, kind: str, text: str, limit: int = 5) -> list[Record]:
        return self._read(thread, lambda m: m.similar_records(thread, kind, text, limit))

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
        return self._read(
            thread,
            lambda m: m.record_candidates(
                thread, terms, attributes, kinds=kinds, current=current, limit=limit
            ),
        )

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
        return self._read(
            thread,
            lambda m: m.list_records(
                thread,
                kind=kind,
                subject=subject,
                attribute=attribute,
                current=current,
                limit=limit,
                offset=offset,
            ),
        )

    def record_subjects(self, thread: Thread) -> list[str]:
        return self._read(thread, lambda m: m.record_subjects(thread))

    def records_for_messages(self, thread: Thread, message_ids: Sequence[str]) -> list[Record]:
        return self._read(thread, lambda m: m.records_for_messages(thread, message_ids))

    def composites(self, thread: Thread) -> list[Composite]:
        return self._read(thread, lambda m: m.composites(thread))

    def records_cursor(self, thread: Thread) -> int:
        return self._read(thread, lambda m: m.records_cursor(thread))

    # -- writing ----------------------------------------------------------------------

    def write_records(self, thread: Thread, records: Sequence[Record]) -> None:
        self._change(thread, lambda m: m.write_records(thread, records))

    def touch_records(self, thread: Thread, record_ids: Iterable[str]) -> None:
        ids = list(record_ids)
        self._change(thread, lambda m: m.touch_records(thread, ids))

    def delete_records(self, thread: Thread, record_ids: Iterable[str]) -> list[str]:
        ids = list(record_ids)
        return self._change(thread, lambda m: m.delete_records(thread, ids))

    def forget_record_sources(self, thread: Thread, message_ids: Sequence[str]) -> list[str]:
        return self._change(thread, lambda m: m.forget_record_sources(thread, message_ids))

    def replace_composites(self, thread: Thread, composites: Sequence[Composite]) -> None:
        self._change(thread, lambda m: m.replace_composites(thread, composites))

    def set_records_cursor(self, thread: Thread, index: int) -> None:
        self._change(thread, lambda m: m.set_records_cursor(thread, index))
