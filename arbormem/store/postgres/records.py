"""Typed records in PostgreSQL: one JSON row per record, one per composite, and the
extraction cursor of each thread.

Queries run over the thread's records loaded into the reference implementation
(:class:`~arbormem.store.records_memory.MemoryRecordStore`), which defines the
answers; a write loads them, applies the change there and writes the thread's
records back in the same transaction, under the thread's lock. A thread holds
hundreds to a few thousand records, so this costs one read of them per call: simple
and exactly the contract, though not yet an index per query.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from arbormem.errors import StoreError
from arbormem.store.postgres.connection import PostgresConnection
from arbormem.store.records_memory import MemoryRecordStore
from arbormem.store.types import Thread

if TYPE_CHECKING:
    from arbormem.records.model import Composite, Record

T = TypeVar("T")


class PostgresRecords(PostgresConnection):
    """The :class:`~arbormem.store.records.RecordStore` capability."""

    def _shelf_of(self, conn: Any, thread: Thread) -> MemoryRecordStore:
        from arbormem.records.model import composite_from_dict, record_from_dict

        k = self._keys(thread)
        store = MemoryRecordStore()
        shelf = store._shelf(thread)
        rows = conn.execute(
            "SELECT seq, data FROM record_rows WHERE scope_id = %(s)s AND thread_id = %(t)s"
            " ORDER BY seq",
            k,
        ).fetchall()
        for seq, data in rows:
            record = record_from_dict(json.loads(data))
            store._restore(shelf, record.id, record, int(seq))
            shelf.next_seq = int(seq) + 1
        groups = conn.execute(
            "SELECT data FROM record_composites WHERE scope_id = %(s)s AND thread_id = %(t)s"
            " ORDER BY id",
            k,
        ).fetchall()
        shelf.composites = {
            c.id: c for c in (composite_from_dict(json.loads(text)) for (text,) in groups)
        }
        row = conn.execute(
            "SELECT position FROM record_cursors WHERE scope_id = %(s)s AND thread_id = %(t)s",
            k,
        ).fetchone()
        shelf.cursor = int(row[0]) if row else 0
        return store

    def _read(self, thread: Thread, ask: Callable[[MemoryRecordStore], T]) -> T:
        with self._reading(thread) as conn:
            return ask(self._shelf_of(conn, thread))

    def _change(self, thread: Thread, change: Callable[[MemoryRecordStore], T]) -> T:
        with self._writing(thread) as conn:
            alive = conn.execute(
                "SELECT 1 FROM threads WHERE scope_id = %(s)s AND id = %(t)s", self._keys(thread)
            ).fetchone()
            if alive is None:
                raise StoreError(
                    f"thread {thread.user}/{thread.agent} is no longer stored (forgotten):"
                    " its records cannot be written"
                )
            store = self._shelf_of(conn, thread)
            out = change(store)
            shelf = store._shelf(thread)
            k = self._keys(thread)
            for table in ("record_rows", "record_composites"):
                conn.execute(f"DELETE FROM {table} WHERE scope_id = %(s)s AND thread_id = %(t)s", k)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO record_rows (scope_id, thread_id, id, seq, data)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    [
                        (k["s"], k["t"], rid, shelf.seq[rid], json.dumps(r.to_dict()))
                        for rid, r in shelf.records.items()
                    ],
                )
                cur.executemany(
                    "INSERT INTO record_composites (scope_id, thread_id, id, data)"
                    " VALUES (%s, %s, %s, %s)",
                    [
                        (k["s"], k["t"], cid, json.dumps(c.to_dict()))
                        for cid, c in shelf.composites.items()
                    ],
                )
            conn.execute(
                "INSERT INTO record_cursors (scope_id, thread_id, position)"
                " VALUES (%(s)s, %(t)s, %(p)s) ON CONFLICT (scope_id, thread_id)"
                " DO UPDATE SET position = excluded.position",
                {**k, "p": shelf.cursor},
            )
            return out

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
