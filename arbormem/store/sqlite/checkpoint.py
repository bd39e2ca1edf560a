"""Write-ahead-log checkpoints on a thread of their own.

In WAL mode every commit appends pages to ``<db>-wal``; a checkpoint copies
them back into the database file and syncs both files to disk. SQLite runs one
by default inside the commit that takes the log past 1,000 pages, so whoever
commits then waits for the copy and two disk syncs: at a million turns that is
about a fifth of bulk-ingest time, and an occasional long ``add`` for a live
exchange.

:class:`Checkpointer` takes that work off the writer. The writer's connection
has automatic checkpoints turned off and calls :meth:`Checkpointer.committed`
after each commit; a background thread with its own connection then runs a
``PASSIVE`` checkpoint (which never blocks readers or the writer), at most one
per :data:`INTERVAL`. Durability is unchanged: the same syncs happen, on
another thread.

SQLite starts the log from its beginning again only when a writer begins a
transaction after a checkpoint has copied every page, and a writer committing
without pause always has pages the background checkpoint has not reached yet.
:meth:`before_write` bounds the log: once its file reaches :data:`LIMIT`
bytes, the writer waits for the checkpoint in flight and then copies the rest
itself (about a transaction's worth), so its next transaction restarts the
log. It pays for one such copy per :data:`LIMIT` bytes of log instead of a
whole checkpoint every 1,000 pages.

After a forget that could not empty the log (another connection was reading an
older snapshot), :meth:`Checkpointer.truncate_when_possible` has the thread try a
truncating checkpoint at each tick until one succeeds, so the old copies of the
forgotten text leave the files once that reader is done, without a later call.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from arbormem.store.sqlite.driver import sqlite3

log = logging.getLogger(__name__)

#: Seconds between the starts of two background checkpoints: a burst of small
#: commits shares one checkpoint (and its two disk syncs).
INTERVAL = 0.5
#: Size of the log file past which the writer makes sure the log restarts.
LIMIT = 256 * 1024 * 1024


class Checkpointer:
    """Runs the checkpoints of one database file in the background."""

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], wal_path: str, limit: int = LIMIT
    ) -> None:
        self._connect = connect
        self.wal_path = wal_path
        #: Bytes of log file past which the writer makes sure the log restarts.
        self.limit = limit
        self._cond = threading.Condition()
        self._pending = False
        self._running = False
        self._stopped = False
        #: Whether the last checkpoint copied every page of the log.
        self._complete = True
        self._failed = False
        #: A forget is waiting for the log to be emptied (see truncate_when_possible).
        self._truncate = False
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """Called by the writer after each commit: a checkpoint is due."""
        with self._cond:
            if self._stopped:
                return
            if self._pending and self._thread is not None:
                # Already due: the thread runs it at its next tick without being woken.
                # Waking it at every commit of a burst (most of an ingest's) only made
                # it take the interpreter from the writer to go back to sleep.
                return
            self._pending = True
            self._start()

    def truncate_when_possible(self) -> None:
        """Try, one tick after another, to copy the whole log into the file and cut it
        to nothing, until a try succeeds (or the store closes)."""
        with self._cond:
            if self._stopped:
                return
            self._truncate = self._pending = True
            self._start()

    def _start(self) -> None:
        """Start the thread if needed and wake it (the caller holds the lock)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="arbormem-checkpoint", daemon=True
            )
            self._thread.start()
        self._cond.notify_all()

    def before_write(self, writer: sqlite3.Connection) -> None:
        """Called by the writer before it begins a transaction: keeps the log bounded."""
        with self._cond:
            if self._failed:
                # The thread could not run: SQLite's own checkpoints take over again.
                self._failed = False
                self._stopped = True
                writer.execute("PRAGMA wal_autocheckpoint = 1000")
                return
            try:
                size = os.path.getsize(self.wal_path)
            except OSError:
                return
            if size < self.limit:
                return
            # Let the checkpoint in flight finish first: it has copied most of the log.
            while self._running and not self._stopped:
                self._cond.wait()
            if self._complete and not self._pending:
                return  # everything is copied: the transaction about to begin restarts the log
            # Copy the rest here, between two transactions, where no commit can outrun
            # it; the transaction about to begin then starts the log from its beginning
            # (and SQLite cuts the file back to the journal size limit).
            self._pending = False
            try:
                self._record(writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
            except sqlite3.Error as exc:  # another process's checkpoint: the write goes on
                log.debug("checkpoint before a write failed: %s", exc)

    def stop(self) -> None:
        """Stop the thread after the checkpoint in flight (the final one is SQLite's,
        when the last connection closes)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _record(self, result: tuple[int, int, int] | None) -> None:
        """Note what a checkpoint left in the log (the caller holds the lock)."""
        if result is None:
            return
        busy, pages, copied = result
        self._complete = not busy and copied == pages

    def _loop(self) -> None:
        conn: sqlite3.Connection | None = None
        last = 0.0
        try:
            conn = self._connect()
            # A truncating checkpoint holds the write lock while it waits for readers:
            # this thread never waits (the next tick tries again). Passive ones never wait.
            conn.execute("PRAGMA busy_timeout = 0")
            while True:
                with self._cond:
                    while not self._pending and not self._stopped:
                        self._cond.wait()
                    if self._stopped:
                        return
                with self._cond:
                    # Commits meanwhile join this checkpoint; stop() does not wait it out.
                    deadline = last + INTERVAL
                    while not self._stopped and (left := deadline - time.monotonic()) > 0:
                        self._cond.wait(left)
                    if self._stopped:
                        return
                    self._pending = False
                    self._running = True
                    mode = "TRUNCATE" if self._truncate else "PASSIVE"
                last = time.monotonic()
                try:
                    result = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
                except sqlite3.Error as exc:
                    # A busy or failing checkpoint loses nothing: the pages stay in the log
                    # and the next one (or the writer's own) copies them.
                    log.debug("background checkpoint failed: %s", exc)
                    result = None
                with self._cond:
                    self._record(result)
                    if mode == "TRUNCATE":
                        if result is not None and not result[0]:
                            self._truncate = False
                        else:
                            self._pending = True  # readers still: again at the next tick
                    self._running = False
                    self._cond.notify_all()
        except sqlite3.Error as exc:
            log.warning("background checkpoints stopped, SQLite's own take over: %s", exc)
            with self._cond:
                self._failed = True
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()
            if conn is not None:
                conn.close()
