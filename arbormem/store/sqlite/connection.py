"""Connections to the SQLite file: one writer under a lock, a reader per thread,
transactions, read-only and unchanging files, closing.

* Writes go through one connection under a lock, each inside ``BEGIN IMMEDIATE``
  ... ``COMMIT``; reads use a connection per thread, so searches never wait for
  a writer and never see half a write.
* ``synchronous=NORMAL`` in WAL mode: a committed write survives the process
  being killed; pass ``synchronous="FULL"`` to also survive power loss.
* A store that cannot be written (the file, or the folder its WAL files live
  in) opens read-only: searches work, writes raise :class:`StoreError`.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from arbormem.errors import SchemaError, StoreError
from arbormem.store.core import StoreCore
from arbormem.store.sqlite.checkpoint import Checkpointer
from arbormem.store.sqlite.common import (
    CLOSE_WAIT,
    PAGE_BYTES,
    READ_MAP_BYTES,
    SQLITE_CANTOPEN,
    SQLITE_READONLY,
    WAL_KEEP_BYTES,
    drop_reader,
    error_code,
    file_stamp,
    foreign,
    refuses_writes,
    unwritable,
)
from arbormem.store.sqlite.dense import ANN_THRESHOLD, VectorCache
from arbormem.store.sqlite.driver import sqlite3
from arbormem.store.sqlite.schema import LATEST, current_version, migrate
from arbormem.store.sqlite.template import create_from_template

log = logging.getLogger("arbormem.store.sqlite")


class SQLiteConnection(StoreCore):
    """The connections, transactions and lifecycle every SQLite capability uses."""

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        timeout: float = 30.0,
        read_only: bool | None = None,
        ann_threshold: int = ANN_THRESHOLD,
    ) -> None:
        """``read_only``: True opens an existing store for reading only; False
        requires write access; None (the default) writes when it can and reads
        only when the file or its folder cannot be written. ``ann_threshold``: the
        vectors per thread past which dense search is approximate."""
        self._memory = str(path) == ":memory:"
        # "~/memory.db" from a config file or a quoted flag reaches us unexpanded.
        # Absolute: a process that changes its working folder must still name (and
        # recognise, see Memory.export) the same file.
        self.path = str(path) if self._memory else str(Path(path).expanduser().absolute())
        #: Approximate indexes and topic vectors are saved beside the file.
        self.cache_folder = None if self._memory else Path(f"{self.path}.ann")
        self._ann_threshold = ann_threshold
        #: Work to do once the current write transaction commits (see _on_commit).
        self._after_commit: list[Callable[[], None]] = []
        #: Dense-search caches by embedding model (see SQLiteVectors.dense_cache).
        self._dense: dict[str, VectorCache] = {}
        self._synchronous = str(synchronous).upper()
        if self._synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        if read_only and self._memory:
            raise StoreError("an in-memory store cannot be opened read-only: it starts empty")
        if read_only and not Path(self.path).is_file():
            raise StoreError(f"no store at {self.path} to open read-only")
        #: Whether this store only reads (see :meth:`transaction`), and why.
        self.read_only = bool(read_only)
        self._why_read_only = "it was opened read-only"
        #: Read-only, in a folder where SQLite cannot keep the WAL's shared-memory file:
        #: read as an unchanging file, whose size and time must stay as they were.
        self._immutable = False
        self._stamp: tuple[int, int, int] | None = None
        if not self._memory and not self.read_only:
            parent = Path(self.path).resolve().parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder for {self.path}: {exc}") from exc
        self._timeout = timeout
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None
        self._local = threading.local()
        #: Reader connections by id, with the thread that reads through each. A
        #: thread's connection is closed when the thread ends (see _read).
        self._readers: dict[int, tuple[sqlite3.Connection, int]] = {}
        self._readers_lock = threading.Lock()
        #: The reader connection that maps the file (see READ_MAP_BYTES), by id, and
        #: the thread it reads for.
        self._mapped: int | None = None
        self._map_holder: weakref.ref[threading.Thread] | None = None
        #: Connections of ended threads, queued by their finalizers (see drop_reader).
        self._ended: collections.deque[sqlite3.Connection] = collections.deque()
        self._closed = False
        #: Reads in flight per thread: close() waits for other threads' reads to end
        #: before closing their connections (closing one mid-read crashed the process).
        self._active: dict[int, int] = {}
        # Reads take the condition's lock itself: the condition's own ``with`` is a
        # Python call more at each end of each of a search's thirty-odd reads.
        self._idle_lock = threading.Lock()
        self._idle = threading.Condition(self._idle_lock)
        if not self.read_only and not self._memory and refuses_writes(self.path):
            # SQLite would open it read-only without a word, and fail at the first write.
            if read_only is False:
                raise StoreError(f"{self.path} cannot be written (check its permissions)")
            self.read_only = True
            self._why_read_only = "the file refuses writes (check its permissions)"
            log.info("%s cannot be written: opened read-only", self.path)
        if self.read_only:
            self._writer = self._open_read_only()
        else:
            try:
                self._writer = self._open_writable()
            except StoreError as exc:
                if read_only is False or not unwritable(exc) or not Path(self.path).is_file():
                    raise
                # The file, or the folder SQLite keeps the WAL's files in, refuses
                # writes: a backup on read-only media, another user's store.
                self.read_only = True
                self._why_read_only = f"it or its folder refuses writes ({exc.__cause__})"
                log.info("%s cannot be written: opened read-only", self.path)
                self._writer = self._open_read_only()
        #: Checkpoints run on their own thread (see :mod:`arbormem.store.sqlite.checkpoint`).
        self._checkpointer: Checkpointer | None = None
        if not self._memory and not self.read_only:
            self._writer.execute("PRAGMA wal_autocheckpoint = 0")
            self._writer.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")
            self._checkpointer = Checkpointer(self._connect, self.path + "-wal")

    def _open_writable(self) -> sqlite3.Connection:
        if not self._memory:
            create_from_template(self.path)  # a new store: its schema copied, not rebuilt
        conn = self._connect(first=True)
        try:
            migrate(conn, self.path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{self.path} is not a usable arbormem database: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        """The first read-only connection, once the schema is known to be current."""
        conn: sqlite3.Connection | None = None
        try:
            try:
                conn = self._connect(first=True)
                version = current_version(conn)
            except (sqlite3.OperationalError, StoreError) as exc:
                if conn is not None:
                    conn.close()
                cause = exc.__cause__ if isinstance(exc, StoreError) else exc
                shm = Path(self.path + "-shm")
                if (
                    cause is None
                    or error_code(cause) not in (SQLITE_CANTOPEN, SQLITE_READONLY)
                    or shm.exists()
                ):
                    raise
                # WAL mode needs a shared-memory file beside the store, which a folder
                # that refuses writes cannot take (SQLite says "unable to open" or
                # "readonly directory"). With no log to read, SQLite can read the file
                # as unchanging; a log that may hold commits must be merged first.
                wal = Path(self.path + "-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    raise StoreError(
                        f"{wal} may hold writes not yet merged into {self.path}, and they "
                        "cannot be read where the folder refuses writes: open the store "
                        "once where its folder is writable (any arbormem command merges them)"
                    ) from exc
                self._immutable = True
                self._stamp = file_stamp(self.path)
                log.info("%s: its folder refuses writes, read as an unchanging file", self.path)
                conn = self._connect(first=True)
                version = current_version(conn)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise StoreError(f"cannot open {self.path} read-only: {exc}") from exc
        if version != LATEST:
            conn.close()
            if version > LATEST:
                raise SchemaError(
                    f"{self.path} has schema version {version}, newer than this arbormem "
                    f"understands ({LATEST}); upgrade arbormem (pip install -U arbormem) to open it"
                )
            if version == 0:
                raise StoreError(f"{self.path} is empty or not an arbormem store")
            raise StoreError(
                f"{self.path} has schema version {version} and this arbormem reads {LATEST}: "
                "open it once with write access to upgrade it"
            )
        return conn

    def _check_unchanged(self) -> None:
        """A store read as unchanging must be: another process writing it (through a
        view of the folder that can be written) would make reads fail or go wrong."""
        if file_stamp(self.path) != self._stamp:
            raise StoreError(
                f"{self.path} was changed by another process since it was opened, and it "
                "is read as an unchanging file (its folder refuses writes, so SQLite cannot "
                "follow the writer): open it again"
            )

    def _connect(self, first: bool = False) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = None
        try:
            if self.read_only and not self._memory:
                flags = "mode=ro&immutable=1" if self._immutable else "mode=ro"
                conn = sqlite3.connect(
                    f"file:{urllib.parse.quote(self.path)}?{flags}",
                    uri=True,
                    timeout=self._timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            else:
                conn = sqlite3.connect(
                    self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
                )
            if first and not self._memory and foreign(conn):
                # Opening it would switch it to WAL and add arbormem's tables: a mistyped
                # --db once changed another program's database that way.
                raise StoreError(
                    f"{self.path} is another program's SQLite database (it has tables, none "
                    "of them arbormem's); give arbormem a file of its own"
                )
            if first and not self._memory and not self.read_only:
                # Takes effect only while the file is empty; a no-op on any other.
                conn.execute(f"PRAGMA page_size = {PAGE_BYTES}")
            if not self._memory and not self.read_only:
                mode = self._wal(conn)
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: cannot switch to WAL mode (got {mode})")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA cache_size = -65536")
            conn.execute("PRAGMA temp_store = MEMORY")
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise StoreError(f"cannot open {self.path}: {exc}") from exc
            raise
        return conn

    def _wal(self, conn: sqlite3.Connection) -> str:
        """Switch a new file to WAL mode. The switch does not wait for the busy
        timeout: processes opening a new store together found it locked, so it is
        tried again until the timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _owns_transaction(self) -> bool:
        return bool(self._depth) and self._owner == threading.get_ident()

    def _read(self) -> sqlite3.Connection:
        """The connection to read with: the writer inside our own transaction, else per thread."""
        if self._memory or self._owns_transaction():
            # The thread that holds the write transaction finishes it even when
            # close() has begun (close waits for it).
            return self._writer
        if self._closed:
            raise StoreError(f"{self.path} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            self._close_ended()
            conn = self._connect()
            with self._readers_lock:
                if self._closed:
                    conn.close()
                    raise StoreError(f"{self.path} is closed")
                self._readers[id(conn)] = (conn, threading.get_ident())
            self._local.conn = conn
            # A thread that ends takes its connection with it: a server running each
            # request on a new thread kept one open file per request it had served.
            # A thread Python did not start is never seen to end: its connection
            # lasts one read (see _reading).
            thread = threading.current_thread()
            if isinstance(thread, threading._DummyThread):
                self._local.once = True
            else:
                done = weakref.finalize(thread, drop_reader, weakref.ref(self), conn)
                done.atexit = False
        return conn

    def _close_ended(self) -> None:
        while self._ended:
            try:
                conn = self._ended.popleft()
            except IndexError:
                return
            self._drop(conn)

    def _drop(self, conn: sqlite3.Connection) -> None:
        with self._readers_lock:
            if self._readers.pop(id(conn), None) is None:
                return  # closed already
            if self._mapped == id(conn):
                self._mapped = None
        conn.close()

    def map_for_search(self) -> None:
        if self._memory:
            return
        self._close_ended()  # the map's holder may have ended
        if self._mapped is not None:
            holder = self._map_holder() if self._map_holder is not None else None
            if holder is not None and holder.is_alive():
                return  # a searching thread holds the map
            # Its thread ended, but its connection lingers while something still
            # holds the Thread object (a list of workers, an executor): it reads no more.
            with self._readers_lock:
                entry = self._readers.get(self._mapped) if self._mapped is not None else None
            if entry is not None:
                self._drop(entry[0])
        with self._reading() as conn:
            if conn is self._writer:
                return
            with self._readers_lock:
                if self._mapped is None and id(conn) in self._readers:
                    self._mapped = id(conn)
                    self._map_holder = weakref.ref(threading.current_thread())
                    conn.execute(f"PRAGMA mmap_size = {READ_MAP_BYTES}")

    def concurrent_reads(self) -> bool:
        # Each thread reads through its own connection, except inside this thread's
        # own write transaction, whose uncommitted rows other connections cannot see.
        # An in-memory database has a single connection.
        return not self._memory and not self._owns_transaction()

    def _reading(self) -> _Read:
        """A read through this thread's connection (the writer inside this thread's
        own write transaction, or in an in-memory store), as ``with ... as conn``."""
        return _Read(self)

    def writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path} cannot be changed: {self._why_read_only}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.writable()
        with self._lock:
            # (Holding the lock, this thread owns any transaction under way: a nested
            # one joins it even when close() has begun, and close waits for both.)
            if self._closed and not self._depth:
                raise StoreError(f"{self.path} is closed")
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            if self._checkpointer is not None:
                self._checkpointer.before_write(self._writer)
            try:
                self._writer.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StoreError(f"{self.path}: cannot start a write: {self._why(exc)}") from exc
            self._depth, self._owner = 1, threading.get_ident()
            try:
                yield
            except sqlite3.Error as exc:
                # The driver's errors stop here: a read-only file, a full disk (after
                # which SQLite has already rolled the transaction back itself).
                self._rollback()
                raise StoreError(f"{self.path}: the write failed: {self._why(exc)}") from exc
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self._before_commit()
                    self._writer.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()
                    raise StoreError(f"{self.path}: commit failed: {self._why(exc)}") from exc
                except BaseException:
                    self._rollback()
                    raise
                if self._checkpointer is not None:
                    self._checkpointer.committed()
                self._run_after_commit()
            finally:
                self._depth, self._owner = 0, None
                self._after_commit.clear()

    def _why(self, exc: sqlite3.Error) -> str:
        """The driver's reason, and for a lock held past the busy timeout, what to do:
        "database is locked" alone did not say that another process was writing."""
        text = str(exc)
        if "locked" in text or "busy" in text:
            return (
                f"{text}: another process kept the store locked for more than the "
                f"{self._timeout:g} s a write waits (the lock_wait setting, "
                "ARBORMEM_LOCK_WAIT: raise it if several servers write this file)"
            )
        return text

    def _on_commit(self, work: Callable[[], None]) -> None:
        """Run ``work`` once the write transaction under way commits (at once when
        there is none); never when it rolls back. For caches of what was written."""
        if self._owns_transaction():
            self._after_commit.append(work)
        else:
            work()

    def _run_after_commit(self) -> None:
        for work in self._after_commit:
            try:
                work()
            except Exception as exc:  # caches: the write itself has landed
                log.warning("%s: a cache was not kept in step with a write: %s", self.path, exc)

    def owns_path(self, path: Path) -> bool:
        if self._memory:
            return False
        base = Path(self.path).resolve()
        target = path.resolve()
        companions = {base, *(base.with_name(base.name + s) for s in ("-wal", "-shm", "-journal"))}
        cache = self.cache_folder.resolve() if self.cache_folder is not None else None
        return target in companions or (cache is not None and cache in target.parents)

    def _rows_changed(self, thread_ids: Iterable[int], *, forgotten: bool) -> None:
        """Called after a commit that took rows out of these threads (deleted, or
        archived out of recall): capabilities that cache rows drop them here."""

    def _before_commit(self) -> None:
        """Called in the write transaction just before it commits: capabilities that
        keep writes back until then (see SQLiteLexical.index_nodes) make them here."""

    def _closing(self) -> None:
        """Called first by :meth:`close`, while reads still work: capabilities that
        keep caches save them here."""

    def _rollback(self) -> None:
        if self._writer.in_transaction:
            self._writer.execute("ROLLBACK")

    def close(self) -> None:
        me = threading.get_ident()
        if not self._closed:
            self._closing()
        with self._idle:
            if self._closed:
                return
            self._closed = True  # reads not yet started are refused from here on
            # Reads under way on other threads finish first (without the write lock,
            # which a read opening its connection takes). A read left suspended (a
            # generator another thread stopped iterating) is not waited for forever:
            # its connection is then closed by that thread when the read ends.
            deadline = time.monotonic() + CLOSE_WAIT
            while any(t != me for t in self._active):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning("%s: closing with reads still under way", self.path)
                    break
                self._idle.wait(remaining)
            busy = {t for t in self._active if t != me}
        with self._lock:  # a write transaction under way ends first
            if self._checkpointer is not None:
                self._checkpointer.stop()
            self._close_ended()
            with self._readers_lock:
                idle = [c for c, t in self._readers.values() if t not in busy]
                for conn in idle:
                    del self._readers[id(conn)]
            for conn in idle:
                conn.close()
            self._writer.close()

    def change_mark(self) -> tuple[int, int]:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT (SELECT MAX(id) FROM messages), (SELECT ticks FROM store_clock)"
            ).fetchone()
        return int(row[0] or 0), int(row[1] or 0)


class _Read:
    """One read of a :class:`SQLiteConnection` (see ``_reading``). A class rather than
    a generator-based context manager: a search opens dozens of reads, and this is
    a third of the cost of each."""

    __slots__ = ("me", "store")

    def __init__(self, store: SQLiteConnection) -> None:
        self.store = store
        self.me = 0

    def __enter__(self) -> sqlite3.Connection:
        s = self.store
        if s._memory:
            # An in-memory database has one connection, so readers queue behind writers.
            s._lock.acquire()
            if s._closed and not s._owns_transaction():
                s._lock.release()
                raise StoreError(f"{s.path} is closed")
            return s._writer
        me = self.me = threading.get_ident()
        if s._immutable:
            s._check_unchanged()
        with s._idle_lock:
            if s._closed and not s._owns_transaction():
                raise StoreError(f"{s.path} is closed")
            s._active[me] = s._active.get(me, 0) + 1
        try:
            return s._read()
        except BaseException:
            self._end()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        s = self.store
        if s._memory:
            s._lock.release()
            return
        try:
            if isinstance(exc, sqlite3.ProgrammingError):
                if s._closed:  # closed by another thread while this read ran
                    raise StoreError(f"{s.path} is closed") from exc
            elif isinstance(exc, sqlite3.DatabaseError) and s._immutable:
                s._check_unchanged()  # changed while it was read
        finally:
            self._end()

    def _end(self) -> None:
        s, me = self.store, self.me
        with s._idle_lock:
            left = s._active[me] - 1
            if left:
                s._active[me] = left
            else:
                del s._active[me]
                # close() waits for threads to have no read under way: only the end of
                # a thread's last one can be what it waits for, and only once it has
                # set _closed (under this lock) can it be waiting.
                if s._closed:
                    s._idle.notify_all()
        if not left and (s._closed or getattr(s._local, "once", False)):
            # close() gave up waiting for this read and left its connection open, or
            # this thread keeps no connection between reads.
            conn = getattr(s._local, "conn", None)
            s._local.conn = None
            if conn is not None:
                s._drop(conn)
