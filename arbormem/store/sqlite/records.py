"""Typed records in SQLite: one row per record, a full-text index of their terms,
a table of (thread, source message) -> record, composites with a table of their
members, and each thread's extraction cursor (tables of schema version 18).

A record's subject is kept a second time as its sorted words between spaces
(:func:`~arbormem.store.records.subject_words`), so "one subject's words hold
all of the other's" is two string tests SQL can run on the
``(thread, attribute, subject)`` index, without reading the rows.
"""

from __future__ import annotations

import heapq
import json
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from arbormem.errors import StoreError
from arbormem.records.model import Composite, Record
from arbormem.store.records import (
    check_scope,
    record_terms,
    sort_time,
    subject_words,
    thread_scope,
)
from arbormem.store.sqlite import purge as purging
from arbormem.store.sqlite.common import batches, to_json, to_sorted_json
from arbormem.store.sqlite.connection import SQLiteConnection
from arbormem.store.sqlite.driver import sqlite3
from arbormem.store.types import Thread
from arbormem.text import analyze, fts_query
from arbormem.timeutil import format_timestamp, parse_stored

log = logging.getLogger("arbormem.store.sqlite")

#: The columns a record is written to, in the order :func:`_values` gives them.
_COLUMNS = (
    "kind",
    "text",
    "subject",
    "subject_key",
    "attribute",
    "value",
    "negated",
    "tags",
    "entities",
    "sources",
    "valid_from",
    "valid_to",
    "superseded_by",
    "supersedes",
    "confidence",
    "importance",
    "created_at",
    "updated_at",
    "sort_at",
    "recall_count",
    "mentions",
    "intent",
    "body",
)
_INSERT = (
    f"INSERT INTO records (thread_id, uid, {', '.join(_COLUMNS)})"
    f" VALUES (?, ?, {', '.join('?' * len(_COLUMNS))})"
)
_UPDATE = f"UPDATE records SET {', '.join(f'{c} = ?' for c in _COLUMNS)} WHERE id = ?"
#: What a read selects: the row number, then the fields of :func:`_record_of`.
_SELECT = (
    "SELECT r.id, r.uid, r.kind, r.text, r.subject, r.attribute, r.value, r.negated, r.tags,"
    " r.entities, r.sources, r.valid_from, r.valid_to, r.superseded_by, r.supersedes,"
    " r.confidence, r.importance, r.created_at, r.updated_at, r.recall_count, r.mentions,"
    " r.intent, r.body"
)
_CURRENT = "r.valid_to IS NULL AND r.superseded_by IS NULL"


def _stamp(value: datetime | None) -> str | None:
    return format_timestamp(value) if value is not None else None


def _time(value: str | None) -> datetime | None:
    return parse_stored(value) if value is not None else None


def _strings(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text)) if text != "[]" else ()


def _dump(items: Sequence[str]) -> str:
    return to_json(list(items))


def _values(r: Record) -> tuple[Any, ...]:
    return (
        r.kind,
        r.text,
        r.subject,
        subject_words(r.subject),
        r.attribute,
        r.value,
        int(r.negated),
        _dump(r.tags),
        _dump(r.entities),
        _dump(r.sources),
        _stamp(r.valid_from),
        _stamp(r.valid_to),
        r.superseded_by,
        r.supersedes,
        r.confidence,
        r.importance,
        _stamp(r.created_at),
        _stamp(r.updated_at),
        format_timestamp(sort_time(r)),
        r.recall_count,
        r.mentions,
        r.intent,
        r.body,
    )


def _record_of(row: Sequence[Any], scope: str) -> Record:
    return Record(
        id=row[1],
        kind=row[2],
        text=row[3],
        subject=row[4],
        attribute=row[5],
        value=row[6],
        negated=bool(row[7]),
        tags=_strings(row[8]),
        entities=_strings(row[9]),
        sources=_strings(row[10]),
        valid_from=_time(row[11]),
        valid_to=_time(row[12]),
        superseded_by=row[13],
        supersedes=row[14],
        confidence=row[15],
        importance=row[16],
        created_at=_time(row[17]),
        updated_at=_time(row[18]),
        recall_count=row[19],
        mentions=row[20],
        intent=row[21],
        body=row[22],
        scope=scope,
    )


def _subject_sql(column: str, wanted: str) -> tuple[str, list[str]]:
    """SQL true when the stored word key in ``column`` matches ``wanted`` (both from
    :func:`subject_words`): all of the wanted words are in it, or taking the wanted
    words out of it leaves nothing."""
    words = wanted.split()
    holds_all = " AND ".join(f"instr({column}, ?) > 0" for _ in words)
    left = column
    for _ in words:
        left = f"replace({left}, ?, ' ')"
    padded = [f" {w} " for w in words]
    return f"({column} IS NOT NULL AND (({holds_all}) OR {left} = ' '))", padded * 2


class SQLiteRecords(SQLiteConnection):
    """Records, their sources, full-text terms, composites and cursor in SQLite."""

    # ------------------------------------------------------------------ reading

    def record(self, thread: Thread, record_id: str) -> Record | None:
        with self._reading() as conn:
            row = conn.execute(
                _SELECT + " FROM records r WHERE r.thread_id = ? AND r.uid = ?",
                (thread.id, record_id),
            ).fetchone()
        return _record_of(row, thread_scope(thread)) if row else None

    def records_about(self, thread: Thread, subject: str, attribute: str) -> list[Record]:
        wanted = subject_words(subject)
        if wanted is None:
            return []
        match, args = _subject_sql("r.subject_key", wanted)
        with self._reading() as conn:
            rows = conn.execute(
                _SELECT + " FROM records r WHERE r.thread_id = ? AND r.attribute = ?"
                f" AND {match} ORDER BY r.id",
                [thread.id, attribute, *args],
            ).fetchall()
        scope = thread_scope(thread)
        return [_record_of(r, scope) for r in rows]

    def similar_records(self, thread: Thread, kind: str, text: str, limit: int = 5) -> list[Record]:
        wanted = set(analyze(text))
        if not wanted or limit <= 0:
            return []
        with self._reading() as conn:
            # Every current record of the kind sharing a term matches, and their number
            # grows with the thread (extraction asks this for most statements): only
            # their row numbers and terms are read, then the few best records whole.
            rows = conn.execute(
                "SELECT r.id, f.terms FROM record_fts f CROSS JOIN records r ON r.id = f.rowid"
                f" WHERE record_fts MATCH ? AND r.thread_id = ? AND r.kind = ? AND {_CURRENT}",
                (fts_query(sorted(wanted)), thread.id, kind),
            ).fetchall()
            # Counted on the terms themselves: the tokenizer may split a term the
            # full-text query then matched as a phrase of its pieces.
            best = heapq.nsmallest(
                limit,
                (
                    (-shared, rowid)
                    for rowid, terms in rows
                    if (shared := len(wanted.intersection(terms.split())))
                ),
            )
            if not best:
                return []
            ids = [rowid for _, rowid in best]
            found = {
                row[0]: row
                for row in conn.execute(
                    _SELECT + f" FROM records r WHERE r.id IN ({','.join('?' * len(ids))})", ids
                )
            }
        scope = thread_scope(thread)
        return [_record_of(found[rowid], scope) for rowid in ids]

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
        where, args = "r.thread_id = ?", list[Any]([thread.id])
        if kinds is not None:
            kinds = list(dict.fromkeys(kinds))
            if not kinds:
                return []
            where += f" AND r.kind IN ({','.join('?' * len(kinds))})"
            args += kinds
        if current:
            where += f" AND {_CURRENT}"
        found: dict[int, Sequence[Any]] = {}
        wanted = set(terms)
        with self._reading() as conn:
            if wanted:
                sql = (
                    _SELECT + ", f.terms FROM record_fts f CROSS JOIN records r ON r.id = f.rowid"
                    f" WHERE record_fts MATCH ? AND {where}"
                )
                extra: list[Any] = []
                if limit is not None:
                    sql += " ORDER BY bm25(record_fts) LIMIT ?"
                    extra.append(max(0, limit))
                for row in conn.execute(sql, [fts_query(sorted(wanted)), *args, *extra]):
                    if wanted.intersection(row[-1].split()):
                        found[row[0]] = row
            named = list(dict.fromkeys(attributes))
            for chunk, marks in batches(named):
                for row in conn.execute(
                    _SELECT + f" FROM records r WHERE {where} AND r.attribute IN ({marks})",
                    [*args, *chunk],
                ):
                    found.setdefault(row[0], row)
        scope = thread_scope(thread)
        return [_record_of(found[k], scope) for k in sorted(found)]

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
        where, args = "r.thread_id = ?", list[Any]([thread.id])
        if kind is not None:
            where += " AND r.kind = ?"
            args.append(kind)
        if attribute is not None:
            where += " AND r.attribute = ?"
            args.append(attribute)
        if subject is not None:
            wanted = subject_words(subject)
            if wanted is None:
                return []
            match, more = _subject_sql("r.subject_key", wanted)
            where += f" AND {match}"
            args += more
        if current:
            where += f" AND {_CURRENT}"
        sql = _SELECT + f" FROM records r WHERE {where} ORDER BY r.sort_at DESC, r.id"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            args += [-1 if limit is None else max(0, limit), max(0, offset)]
        with self._reading() as conn:
            rows = conn.execute(sql, args).fetchall()
        scope = thread_scope(thread)
        return [_record_of(r, scope) for r in rows]

    def record_subjects(self, thread: Thread) -> list[str]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT subject FROM records WHERE thread_id = ? AND subject IS NOT NULL"
                " GROUP BY subject ORDER BY MIN(id)",
                (thread.id,),
            ).fetchall()
        return [r[0] for r in rows]

    def records_for_messages(self, thread: Thread, message_ids: Sequence[str]) -> list[Record]:
        found: dict[int, Sequence[Any]] = {}
        with self._reading() as conn:
            for chunk, marks in batches(list(dict.fromkeys(message_ids))):
                for row in conn.execute(
                    _SELECT + " FROM records r WHERE r.id IN (SELECT record_id FROM"
                    f" record_sources WHERE thread_id = ? AND message_id IN ({marks}))",
                    [thread.id, *chunk],
                ):
                    found[row[0]] = row
        scope = thread_scope(thread)
        return [_record_of(found[k], scope) for k in sorted(found)]

    def composites(self, thread: Thread) -> list[Composite]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT uid, level, text, members, entities, tags, first_at, last_at, extra"
                " FROM record_composites WHERE thread_id = ? ORDER BY id",
                (thread.id,),
            ).fetchall()
        scope = thread_scope(thread)
        return [
            Composite(
                id=r[0],
                level=r[1],
                text=r[2],
                members=_strings(r[3]),
                entities=_strings(r[4]),
                tags=_strings(r[5]),
                first=_time(r[6]),
                last=_time(r[7]),
                scope=scope,
                extra=json.loads(r[8]),
            )
            for r in rows
        ]

    def records_cursor(self, thread: Thread) -> int:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT next_index FROM record_cursor WHERE thread_id = ?", (thread.id,)
            ).fetchone()
        return int(row[0]) if row else 0

    # ------------------------------------------------------------------ writing

    def _thread_held(self, thread: Thread) -> None:
        if not self._writer.execute("SELECT 1 FROM threads WHERE id = ?", (thread.id,)).fetchone():
            raise StoreError(
                f"thread {thread_scope(thread)} is not in {self.path} (forgotten meanwhile?): "
                "its records were not written"
            )

    def write_records(self, thread: Thread, records: Sequence[Record]) -> None:
        check_scope(thread, records)
        if not records:
            return
        with self.transaction():
            self._thread_held(thread)
            for record in records:
                self._write_record(thread.id, record)

    def _write_record(self, tid: int, r: Record) -> None:
        c = self._writer
        terms = " ".join(record_terms(r))
        old = c.execute(
            "SELECT id, sources FROM records WHERE thread_id = ? AND uid = ?", (tid, r.id)
        ).fetchone()
        if old is None:
            rowid = c.execute(_INSERT, (tid, r.id, *_values(r))).lastrowid
            assert rowid is not None
            c.execute("INSERT INTO record_fts (rowid, terms) VALUES (?, ?)", (rowid, terms))
            before: set[str] = set()
        else:
            rowid = int(old[0])
            c.execute(_UPDATE, (*_values(r), rowid))
            indexed = c.execute(
                "SELECT c0 FROM record_fts_content WHERE id = ?", (rowid,)
            ).fetchone()
            if indexed is None or indexed[0] != terms:
                c.execute("DELETE FROM record_fts WHERE rowid = ?", (rowid,))
                c.execute("INSERT INTO record_fts (rowid, terms) VALUES (?, ?)", (rowid, terms))
            before = set(_strings(old[1]))
        after = set(r.sources)
        for gone, marks in batches(sorted(before - after)):
            c.execute(
                "DELETE FROM record_sources WHERE thread_id = ? AND record_id = ?"
                f" AND message_id IN ({marks})",
                [tid, rowid, *gone],
            )
        c.executemany(
            "INSERT OR IGNORE INTO record_sources (thread_id, message_id, record_id)"
            " VALUES (?, ?, ?)",
            [(tid, m, rowid) for m in sorted(after - before)],
        )

    def touch_records(self, thread: Thread, record_ids: Iterable[str]) -> None:
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return
        with self.transaction():
            for chunk, marks in batches(ids):
                self._writer.execute(
                    "UPDATE records SET recall_count = recall_count + 1"
                    f" WHERE thread_id = ? AND uid IN ({marks})",
                    [thread.id, *chunk],
                )

    def delete_records(self, thread: Thread, record_ids: Iterable[str]) -> list[str]:
        with self.transaction():
            return self._delete_records_in(thread.id, list(dict.fromkeys(record_ids)))

    def _delete_records_in(self, tid: int, uids: Sequence[str]) -> list[str]:
        """Delete records of thread ``tid`` by id, spliced out of their chains, with the
        composites on them; the ids deleted in the order first written."""
        c = self._writer
        doomed: list[tuple[int, str]] = []
        for chunk, marks in batches(list(uids)):
            doomed += c.execute(
                f"SELECT id, uid FROM records WHERE thread_id = ? AND uid IN ({marks})",
                [tid, *chunk],
            ).fetchall()
        if not doomed:
            return []
        doomed.sort()
        for rowid, uid in doomed:
            # Read now, not before the loop: an earlier deletion may have spliced it.
            valid_to, closed_by, replaced = c.execute(
                "SELECT valid_to, superseded_by, supersedes FROM records WHERE id = ?", (rowid,)
            ).fetchone()
            c.execute(
                "UPDATE records SET valid_to = ?, superseded_by = ?"
                " WHERE thread_id = ? AND superseded_by = ?",
                (valid_to, closed_by, tid, uid),
            )
            c.execute(
                "UPDATE records SET supersedes = ? WHERE thread_id = ? AND supersedes = ?",
                (replaced, tid, uid),
            )
        rowids = [rowid for rowid, _ in doomed]
        for numbers, marks in batches(rowids):
            c.execute(f"DELETE FROM record_fts WHERE rowid IN ({marks})", numbers)
            c.execute(f"DELETE FROM record_sources WHERE record_id IN ({marks})", numbers)
            c.execute(f"DELETE FROM records WHERE id IN ({marks})", numbers)
        gone = [uid for _, uid in doomed]
        self._drop_composites_on(tid, gone)
        # Their words stay in the full-text index's older segments until a purge.
        purging.record(c, [tid])
        return gone

    def _drop_composites_on(self, tid: int, members: Sequence[str]) -> None:
        """Delete the composites holding any of ``members``, then those holding them."""
        c = self._writer
        frontier = list(members)
        while frontier:
            hit: dict[int, str] = {}
            for chunk, marks in batches(frontier):
                for cid, uid in c.execute(
                    "SELECT c.id, c.uid FROM record_composite_members m JOIN record_composites c"
                    f" ON c.id = m.composite_id WHERE m.thread_id = ? AND m.member IN ({marks})",
                    [tid, *chunk],
                ):
                    hit[int(cid)] = str(uid)
            for ids, marks in batches(sorted(hit)):
                c.execute(
                    "DELETE FROM record_composite_members WHERE thread_id = ?"
                    f" AND composite_id IN ({marks})",
                    [tid, *ids],
                )
                c.execute(f"DELETE FROM record_composites WHERE id IN ({marks})", ids)
            frontier = list(hit.values())

    def forget_record_sources(self, thread: Thread, message_ids: Sequence[str]) -> list[str]:
        with self.transaction():
            return self._forget_sources_in(thread.id, message_ids)

    def _forget_sources_in(self, tid: int, message_ids: Sequence[str]) -> list[str]:
        """:meth:`forget_record_sources` by thread id, inside the caller's transaction."""
        c = self._writer
        hits: dict[int, set[str]] = {}
        for chunk, marks in batches(list(dict.fromkeys(message_ids))):
            for rowid, mid in c.execute(
                "SELECT record_id, message_id FROM record_sources"
                f" WHERE thread_id = ? AND message_id IN ({marks})",
                [tid, *chunk],
            ):
                hits.setdefault(int(rowid), set()).add(str(mid))
        doomed: list[str] = []
        for rowid in sorted(hits):
            uid, sources = c.execute(
                "SELECT uid, sources FROM records WHERE id = ?", (rowid,)
            ).fetchone()
            kept = [s for s in _strings(sources) if s not in hits[rowid]]
            if not kept:
                doomed.append(uid)
                continue
            c.execute("UPDATE records SET sources = ? WHERE id = ?", (_dump(kept), rowid))
            for lost, marks in batches(sorted(hits[rowid])):
                c.execute(
                    "DELETE FROM record_sources WHERE thread_id = ? AND record_id = ?"
                    f" AND message_id IN ({marks})",
                    [tid, rowid, *lost],
                )
        return self._delete_records_in(tid, doomed)

    def _drop_thread_records(self, tid: int) -> None:
        """Delete every record, composite and the cursor of a thread being forgotten."""
        c = self._writer
        c.execute(
            "DELETE FROM record_fts WHERE rowid IN (SELECT id FROM records WHERE thread_id = ?)",
            (tid,),
        )
        for table in (
            "record_sources",
            "records",
            "record_composite_members",
            "record_composites",
            "record_cursor",
        ):
            c.execute(f"DELETE FROM {table} WHERE thread_id = ?", (tid,))

    def replace_composites(self, thread: Thread, composites: Sequence[Composite]) -> None:
        check_scope(thread, composites)
        with self.transaction():
            c = self._writer
            self._thread_held(thread)
            c.execute("DELETE FROM record_composite_members WHERE thread_id = ?", (thread.id,))
            c.execute("DELETE FROM record_composites WHERE thread_id = ?", (thread.id,))
            for comp in composites:
                try:
                    cid = c.execute(
                        "INSERT INTO record_composites (thread_id, uid, level, text, members,"
                        " entities, tags, first_at, last_at, extra)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            thread.id,
                            comp.id,
                            comp.level,
                            comp.text,
                            _dump(comp.members),
                            _dump(comp.entities),
                            _dump(comp.tags),
                            _stamp(comp.first),
                            _stamp(comp.last),
                            to_sorted_json(dict(comp.extra)),
                        ),
                    ).lastrowid
                except sqlite3.IntegrityError as exc:
                    raise StoreError(f"composite {comp.id!r} is given twice") from exc
                c.executemany(
                    "INSERT OR IGNORE INTO record_composite_members (thread_id, member,"
                    " composite_id) VALUES (?, ?, ?)",
                    [(thread.id, m, cid) for m in comp.members],
                )

    def set_records_cursor(self, thread: Thread, index: int) -> None:
        with self.transaction():
            self._thread_held(thread)
            self._writer.execute(
                "INSERT OR REPLACE INTO record_cursor (thread_id, next_index) VALUES (?, ?)",
                (thread.id, int(index)),
            )
