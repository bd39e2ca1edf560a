"""Taking what a forget deleted out of the files of a SQLite store.

Deleting a row does not take its text out of the files:

* FTS5 records a deletion as a tombstone in a newer segment; the deleted terms stay
  in the older segments until the index is merged (``optimize``).
* ``secure_delete`` zeroes a deleted row's bytes and every page that is freed. But a
  page that SQLite reorganised while the row was alive (when a page fills, its cells
  are spread over its siblings and the page is rebuilt) keeps stale copies of cells
  that moved away in its unused space, and deleting the row later leaves them. On a
  store of 2,000 messages about one forget in five left such a fragment of the
  forgotten text behind. Only rewriting the file (``VACUUM``) removes them.
* In WAL mode a change is appended to the log; the database file and older log
  frames keep earlier versions of each page until a checkpoint copies the new ones
  back and the log is cut to zero bytes (``wal_checkpoint(TRUNCATE)``). A connection
  reading an older snapshot, in this process or another, holds that up: SQLite may
  not overwrite pages that snapshot can still read.

A forget therefore records what it owes in ``pending_purges`` (schema migration 16)
in the transaction that deletes: a ``merge`` row per thread. The purge merges the
indexes and replaces those rows with one ``rewrite`` row in one transaction, so a
process killed at any point leaves a row saying what is left to do; the rewrite of
the file clears it. The log is emptied last; it needs no row, since any later
checkpoint that empties it (or the last connection closing) finishes that part.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from arbormem.store.sqlite.driver import sqlite3
from arbormem.timeutil import format_timestamp, utcnow

log = logging.getLogger(__name__)

#: Longest a single attempt to empty the log waits for readers (in seconds): the
#: attempt holds the store's write lock meanwhile, so other writers wait that long.
ATTEMPT_SECONDS = 0.1
#: Pause between two attempts that failed at once (another checkpoint under way).
RETRY_PAUSE = 0.01


def record(conn: sqlite3.Connection, thread_ids: Sequence[int]) -> None:
    """Note, inside the deleting transaction, that these threads' deletions need a purge."""
    at = format_timestamp(utcnow())
    conn.executemany(
        "INSERT INTO pending_purges (stage, thread_id, at) VALUES ('merge', ?, ?)",
        [(t, at) for t in dict.fromkeys(thread_ids)],
    )


def merges_owed(conn: sqlite3.Connection) -> list[tuple[int, int | None]]:
    """``(row id, thread id)`` of every deletion whose indexes were not merged yet."""
    return [
        (int(r[0]), r[1])
        for r in conn.execute("SELECT id, thread_id FROM pending_purges WHERE stage = 'merge'")
    ]


def merged(conn: sqlite3.Connection, row_ids: Sequence[int]) -> None:
    """The indexes are merged (same transaction): what is owed now is a rewrite."""
    conn.executemany("DELETE FROM pending_purges WHERE id = ?", [(i,) for i in row_ids])
    if not conn.execute("SELECT 1 FROM pending_purges WHERE stage = 'rewrite'").fetchone():
        conn.execute(
            "INSERT INTO pending_purges (stage, at) VALUES ('rewrite', ?)",
            (format_timestamp(utcnow()),),
        )


def rewrite_owed(conn: sqlite3.Connection) -> int | None:
    """The newest ``rewrite`` row, or None when the file holds nothing to rewrite away."""
    row = conn.execute("SELECT MAX(id) FROM pending_purges WHERE stage = 'rewrite'").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def rewritten(conn: sqlite3.Connection, upto: int) -> None:
    """The file was rewritten after row ``upto`` was written: those rows are settled.
    (A forget committed since by another process keeps its own row.)"""
    conn.execute("DELETE FROM pending_purges WHERE stage = 'rewrite' AND id <= ?", (upto,))


def rewrite(conn: sqlite3.Connection) -> None:
    """Rebuild the database file from its live rows (``VACUUM``), outside any transaction."""
    # The rebuilt copy is made in a temporary database first: in memory (the store's
    # setting for sorting) that would cost as much memory as the store is large.
    temp = int(conn.execute("PRAGMA temp_store").fetchone()[0])
    conn.execute("PRAGMA temp_store = FILE")
    try:
        conn.execute("VACUUM")
    finally:
        conn.execute(f"PRAGMA temp_store = {temp}")


def empty_log(attempt: Callable[[float], bool], wait: float) -> bool:
    """Try to checkpoint the whole log and cut it to zero bytes until that works or
    ``wait`` seconds have passed; True if it did. ``attempt(seconds)`` makes one try
    that waits at most that long for readers."""
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        left = deadline - time.monotonic()
        if attempt(min(max(left, 0.0), ATTEMPT_SECONDS)):
            return True
        if time.monotonic() >= deadline:
            return False
        # A try that failed without waiting met another checkpoint (the background
        # one, another process's): it holds its lock for a moment only.
        time.sleep(RETRY_PAUSE)


def truncate_once(conn: sqlite3.Connection, seconds: float, timeout_ms: int) -> bool:
    """One ``wal_checkpoint(TRUNCATE)`` waiting at most ``seconds`` for readers; the
    connection's busy timeout is set back to ``timeout_ms`` after."""
    conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
    try:
        # The pragma does not raise when readers hold it up: its first column says so.
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.OperationalError as exc:
        log.debug("truncating checkpoint failed: %s", exc)
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
    return not busy
