"""What the SQLite back-end's modules share: row decoding, batching, the file
checks made before opening, and the tunables of the file itself."""

from __future__ import annotations

import json
import logging
import os
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from arbormem.errors import StoreError
from arbormem.models import Session
from arbormem.store.sqlite.driver import sqlite3
from arbormem.store.types import Filters, Row, Thread, message_row, session_row
from arbormem.timeutil import format_timestamp, parse_stored

if TYPE_CHECKING:
    from arbormem.store.sqlite.connection import SQLiteConnection

ROW_SELECT = (
    "SELECT m.id, m.uid, m.idx, m.role, m.speaker, m.content, m.ts, m.metadata, m.chash,"
    " s.key, t.user_id, t.agent_id, t.tenant"
    " FROM messages m JOIN sessions s ON s.id = m.session_id JOIN threads t ON t.id = m.thread_id"
)


def load_json(text: str) -> dict[str, Any]:
    if text == "{}":
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


T = TypeVar("T")

# json.dumps given any option builds a new encoder on every call, which cost more
# than encoding a node's keyphrases or a turn's metadata; these are built once and
# give the very same text.
#: ``json.dumps(value, ensure_ascii=False)``.
to_json = json.JSONEncoder(ensure_ascii=False).encode
#: ``json.dumps(value, ensure_ascii=False, sort_keys=True)``.
to_sorted_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


SQLITE_CANTOPEN = 14
SQLITE_READONLY = 8
SQLITE_PERM = 3


def error_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of a driver error (its extended code's low byte)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    text = str(exc)  # a driver without error codes (pysqlite3)
    if "unable to open database file" in text:
        return SQLITE_CANTOPEN
    return SQLITE_READONLY if "readonly database" in text else None


def unwritable(exc: StoreError) -> bool:
    """Whether opening failed because the file or its folder refuses writes."""
    return (
        error_code(exc.__cause__) in (SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM)
        if exc.__cause__
        else False
    )


def fts_levels(conn: sqlite3.Connection, table: str) -> int:
    """How many levels an FTS5 index's structure record lists (the varint after
    its four-byte cookie, in the record of id 10)."""
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 10").fetchone()
    block = bytes(row[0]) if row and row[0] else b""
    value = 0
    for byte in block[4:13]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return 0


def file_stamp(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def refuses_writes(path: str) -> bool:
    """Whether an existing file cannot be written by this process. (Asked with
    access(2): opening the file to find out, then closing it, would drop the locks
    SQLite holds on it through any other connection of this process.)"""
    return Path(path).is_file() and not os.access(path, os.W_OK)


def foreign(conn: sqlite3.Connection) -> bool:
    """Whether the database holds tables but no sign of being arbormem's."""
    tables, ours = conn.execute(
        "SELECT COUNT(*), TOTAL(name = 'schema_migrations') FROM sqlite_master WHERE type = 'table'"
    ).fetchone()
    return bool(tables) and not ours


def batches(items: Sequence[T], size: int = 500) -> Iterator[tuple[list[T], str]]:
    """``items`` in slices that stay under SQLite's limit on bound parameters, each
    with its ``?,?,...`` placeholders for an ``IN (...)`` clause."""
    for start in range(0, len(items), size):
        chunk = list(items[start : start + size])
        yield chunk, ",".join("?" * len(chunk))


def row_of(r: Sequence[Any]) -> Row:
    return message_row(r, parse_stored)


def session_of(r: Sequence[Any], thread: Thread) -> Session:
    return session_row(r, thread, parse_stored)


def blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype="<f4").tobytes()


#: The log file is cut back to this size when it starts over (it keeps its
#: largest size otherwise).
WAL_KEEP_BYTES = 64 * 1024 * 1024
#: How much of the database file one reader connection maps into memory (SQLite
#: caps it at its build's limit, 2 GB for Python's). A search reads a few hundred
#: rows scattered over the file; through the map, a page the cache lacks comes in
#: with its neighbours in one read, and rows that belong together (a session's
#: turns, a topic's nodes) sit side by side. At a million turns with a cold page
#: cache this took search p95 from 79 to 55 ms. Mapped pages are the page cache's,
#: but they count in the resident memory of each mapping, so only one reader
#: connection at a time maps: the first searching thread's (see map_for_search).
READ_MAP_BYTES = 2**31
#: The page size of a new store (an existing file keeps its own). A search's cold
#: reads cost one request each whatever their size, and related rows share a 16 KB
#: page more often than a 4 KB one: at a million turns the file was 8% smaller and
#: search p95 53 ms against 59, ingest within the machine's spread.
PAGE_BYTES = 16384

#: Seconds close() waits for other threads' reads to end before closing anyway.
CLOSE_WAIT = 10.0
#: SQLite 3.40's full-text indexes (Debian 12's; later versions fixed it, 3.51 has)
#: place the segment each 'optimize' writes one level above the last, and an index
#: that reaches 2,000 levels is unreadable for good ("database disk image is
#: malformed"): about a thousand forgets did it. Past this many levels an index is
#: rebuilt from its own content instead, which starts it again at one level.
FTS_LEVEL_LIMIT = 1500
#: A purge rewrites (VACUUMs) a store file up to this size without being asked; the
#: rewrite costs time and page cache in proportion to the file (figures in
#: docs/storage.md). A larger file is rewritten on request only (Memory.purge).
REWRITE_LIMIT_BYTES = 64 * 1024 * 1024

log = logging.getLogger(__name__)

#: Running-statistics deltas gathered during a batch: key -> [documents, tokens].
Stats = dict[str, list[int]]


def drop_reader(store: weakref.ref[SQLiteConnection], conn: sqlite3.Connection) -> None:
    """Hand the reader connection of a thread that has ended to its store, which
    closes it on its next new connection or on close. This runs inside the garbage
    collector, possibly while that very store holds its locks: it takes none."""
    backend = store()
    if backend is not None:
        backend._ended.append(conn)
    else:
        conn.close()


def filter_sql(
    threads: Sequence[Thread], filters: Filters | None, *, archived: bool = False
) -> tuple[str, list[Any]]:
    marks = ",".join("?" * len(threads))
    sql = f"m.thread_id IN ({marks}) AND m.archived = {int(archived)}"
    args: list[Any] = [t.id for t in threads]
    if filters is None:
        return sql, args
    if filters.sessions:
        keys = ",".join("?" * len(filters.sessions))
        sql += (
            f" AND m.session_id IN (SELECT id FROM sessions WHERE thread_id IN ({marks})"
            f" AND key IN ({keys}))"
        )
        args += [t.id for t in threads] + list(filters.sessions)
    if filters.since is not None:
        sql += " AND m.ts >= ?"
        args.append(format_timestamp(filters.since))
    if filters.until is not None:
        sql += " AND m.ts < ?"
        args.append(format_timestamp(filters.until))
    if filters.roles:
        sql += f" AND m.role IN ({','.join('?' * len(filters.roles))})"
        args += list(filters.roles)
    return sql, args


def read_rows(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, Row]:
    """Messages by row number (those that exist)."""
    out: dict[int, Row] = {}
    ids = list(dict.fromkeys(int(r) for r in rowids))
    for chunk, marks in batches(ids):
        for r in conn.execute(ROW_SELECT + f" WHERE m.id IN ({marks})", chunk):
            row = row_of(r)
            out[row.rowid] = row
    return out
