"""The default back-end: one SQLite file in WAL mode.

* Writes go through one connection under a lock, each inside ``BEGIN IMMEDIATE``
  ... ``COMMIT``; reads use a connection per thread, so searches never wait for
  a writer and never see half a write.
* ``synchronous=NORMAL`` in WAL mode: a committed write survives the process
  being killed; pass ``synchronous="FULL"`` to also survive power loss.
* ``secure_delete`` is on and forgetting merges the full-text index and
  checkpoints the WAL, so deleted text does not linger in free pages.
* A full-text document is read back from its table's ``<name>_content``
  shadow table (FTS5 keeps the indexed text there, ``id`` and ``c0``), which
  is a plain B-tree lookup instead of a trip through the virtual table.
* A store that cannot be written (the file, or the folder its WAL files live
  in) opens read-only: searches work, writes raise :class:`StoreError`.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
import time
import urllib.parse
import weakref
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from arbormem.errors import EmbedderError, SchemaError, StoreError
from arbormem.models import Message, Session
from arbormem.store.base import (
    LEXICAL_KEYS,
    NODE_KEYS,
    Backend,
    Deleted,
    Filters,
    NewMessage,
    NodeBrief,
    NodeRow,
    NodeShapes,
    Row,
    Thread,
    ThreadState,
    TreeLogEntry,
    TreeState,
)
from arbormem.store.checkpoint import Checkpointer
from arbormem.store.driver import sqlite3
from arbormem.store.schema import LATEST, current_version, migrate
from arbormem.text import fts_query
from arbormem.timeutil import format_timestamp, parse_stored, utcnow

_ROW_SELECT = (
    "SELECT m.id, m.uid, m.idx, m.role, m.speaker, m.content, m.ts, m.metadata, m.chash,"
    " s.key, t.user_id, t.agent_id"
    " FROM messages m JOIN sessions s ON s.id = m.session_id JOIN threads t ON t.id = m.thread_id"
)


def _load_json(text: str) -> dict[str, Any]:
    if text == "{}":
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


T = TypeVar("T")


_CANTOPEN = 14
_READONLY = 8
_PERM = 3


def _code(exc: BaseException) -> int | None:
    """SQLite's primary result code of a driver error (its extended code's low byte)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    text = str(exc)  # a driver without error codes (pysqlite3)
    if "unable to open database file" in text:
        return _CANTOPEN
    return _READONLY if "readonly database" in text else None


def _unwritable(exc: StoreError) -> bool:
    """Whether opening failed because the file or its folder refuses writes."""
    return _code(exc.__cause__) in (_CANTOPEN, _READONLY, _PERM) if exc.__cause__ else False


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


def _stamp(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _refuses_writes(path: str) -> bool:
    """Whether an existing file cannot be written by this process. (Asked with
    access(2): opening the file to find out, then closing it, would drop the locks
    SQLite holds on it through any other connection of this process.)"""
    return Path(path).is_file() and not os.access(path, os.W_OK)


def _foreign(conn: sqlite3.Connection) -> bool:
    """Whether the database holds tables but no sign of being arbormem's."""
    tables, ours = conn.execute(
        "SELECT COUNT(*), TOTAL(name = 'schema_migrations') FROM sqlite_master WHERE type = 'table'"
    ).fetchone()
    return bool(tables) and not ours


def _batches(items: Sequence[T], size: int = 500) -> Iterator[tuple[list[T], str]]:
    """``items`` in slices that stay under SQLite's limit on bound parameters, each
    with its ``?,?,...`` placeholders for an ``IN (...)`` clause."""
    for start in range(0, len(items), size):
        chunk = list(items[start : start + size])
        yield chunk, ",".join("?" * len(chunk))


def _row(r: Sequence[Any]) -> Row:
    message = Message(
        id=r[1],
        index=r[2],
        role=r[3],
        speaker=r[4],
        content=r[5],
        timestamp=parse_stored(r[6]),
        metadata=_load_json(r[7]),
        session=r[9],
        user=r[10],
        agent=r[11],
    )
    return Row(rowid=r[0], message=message, chash=r[8])


def _session(r: Sequence[Any], thread: Thread) -> Session:
    return Session(
        id=r[0],
        user=thread.user,
        agent=thread.agent,
        started_at=parse_stored(r[1]),
        last_at=parse_stored(r[2]),
        message_count=r[3],
        metadata=_load_json(r[4]),
    )


def _blob(vec: np.ndarray) -> bytes:
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
#: How long the checkpoint after a forget waits for readers of an older snapshot.
PURGE_CHECKPOINT_WAIT_MS = 2000

log = logging.getLogger(__name__)

#: A turn's window key holds the turn and this many neighbours on each side (same session).
WINDOW_RADIUS = 2

#: Running-statistics deltas gathered during a batch: key -> [documents, tokens].
_Stats = dict[str, list[int]]


def window_doc(parts: Sequence[str]) -> str:
    return " ".join(p for p in parts if p)


def _drop_reader(store: weakref.ref[SQLiteBackend], conn: sqlite3.Connection) -> None:
    """Hand the reader connection of a thread that has ended to its store, which
    closes it on its next new connection or on close. This runs inside the garbage
    collector, possibly while that very store holds its locks: it takes none."""
    backend = store()
    if backend is not None:
        backend._ended.append(conn)
    else:
        conn.close()


class SQLiteBackend(Backend):
    """Messages, full-text index and vectors in one SQLite file."""

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        timeout: float = 30.0,
        read_only: bool | None = None,
    ) -> None:
        """``read_only``: True opens an existing store for reading only; False
        requires write access; None (the default) writes when it can and reads
        only when the file or its folder cannot be written."""
        self._memory = str(path) == ":memory:"
        # "~/memory.db" from a config file or a quoted flag reaches us unexpanded.
        # Absolute: a process that changes its working folder must still name (and
        # recognise, see Memory.export) the same file.
        self.path = str(path) if self._memory else str(Path(path).expanduser().absolute())
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
        #: Connections of ended threads, queued by their finalizers (see _drop_reader).
        self._ended: collections.deque[sqlite3.Connection] = collections.deque()
        self._closed = False
        #: Reads in flight per thread: close() waits for other threads' reads to end
        #: before closing their connections (closing one mid-read crashed the process).
        self._active: dict[int, int] = {}
        self._idle = threading.Condition(threading.Lock())
        if not self.read_only and not self._memory and _refuses_writes(self.path):
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
                if read_only is False or not _unwritable(exc) or not Path(self.path).is_file():
                    raise
                # The file, or the folder SQLite keeps the WAL's files in, refuses
                # writes: a backup on read-only media, another user's store.
                self.read_only = True
                self._why_read_only = f"it or its folder refuses writes ({exc.__cause__})"
                log.info("%s cannot be written: opened read-only", self.path)
                self._writer = self._open_read_only()
        #: Checkpoints run on their own thread (see :mod:`arbormem.store.checkpoint`).
        self._checkpointer: Checkpointer | None = None
        if not self._memory and not self.read_only:
            self._writer.execute("PRAGMA wal_autocheckpoint = 0")
            self._writer.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")
            self._checkpointer = Checkpointer(self._connect, self.path + "-wal")

    # -- connections -----------------------------------------------------------

    def _open_writable(self) -> sqlite3.Connection:
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
                if cause is None or _code(cause) not in (_CANTOPEN, _READONLY) or shm.exists():
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
                self._stamp = _stamp(self.path)
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
        if _stamp(self.path) != self._stamp:
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
            if first and not self._memory and _foreign(conn):
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
                done = weakref.finalize(thread, _drop_reader, weakref.ref(self), conn)
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

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        # An in-memory database has one connection, so readers queue behind writers.
        if self._memory:
            with self._lock:
                if self._closed and not self._owns_transaction():
                    raise StoreError(f"{self.path} is closed")
                yield self._writer
        else:
            me = threading.get_ident()
            if self._immutable:
                self._check_unchanged()
            with self._idle:
                if self._closed and not self._owns_transaction():
                    raise StoreError(f"{self.path} is closed")
                self._active[me] = self._active.get(me, 0) + 1
            try:
                yield self._read()
            except sqlite3.ProgrammingError as exc:
                if self._closed:  # closed by another thread while this read ran
                    raise StoreError(f"{self.path} is closed") from exc
                raise
            except sqlite3.DatabaseError:
                if self._immutable:  # changed while it was read
                    self._check_unchanged()
                raise
            finally:
                with self._idle:
                    left = self._active[me] - 1
                    if left:
                        self._active[me] = left
                    else:
                        del self._active[me]
                    self._idle.notify_all()
                if not left and (self._closed or getattr(self._local, "once", False)):
                    # close() gave up waiting for this read and left its connection
                    # open, or this thread keeps no connection between reads.
                    conn = getattr(self._local, "conn", None)
                    self._local.conn = None
                    if conn is not None:
                        self._drop(conn)

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
                raise StoreError(f"{self.path}: cannot start a write: {exc}") from exc
            self._depth, self._owner = 1, threading.get_ident()
            try:
                yield
            except sqlite3.Error as exc:
                # The driver's errors stop here: a read-only file, a full disk (after
                # which SQLite has already rolled the transaction back itself).
                self._rollback()
                raise StoreError(f"{self.path}: the write failed: {exc}") from exc
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self._writer.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()
                    raise StoreError(f"{self.path}: commit failed: {exc}") from exc
                if self._checkpointer is not None:
                    self._checkpointer.committed()
            finally:
                self._depth, self._owner = 0, None

    def _rollback(self) -> None:
        if self._writer.in_transaction:
            self._writer.execute("ROLLBACK")

    def close(self) -> None:
        me = threading.get_ident()
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

    # -- threads and sessions -------------------------------------------------

    def thread(self, user: str, agent: str, *, create: bool = False) -> Thread | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT id FROM threads WHERE user_id = ? AND agent_id = ?", (user, agent)
            ).fetchone()
        if row:
            return Thread(row[0], user, agent)
        if not create:
            return None
        with self.transaction():
            # A new thread's id is past every id the store has given out: the clock in
            # microseconds, or the newest id + 1 if that is larger. (A forgotten thread's
            # id used to go to the next new thread, whose rows a search resolved for the
            # forgotten one could then read.) Caches, here and in other processes, are
            # keyed by id and generation, and a new thread's generation is new as well.
            now = time.time_ns() // 1000
            self._writer.execute(
                "INSERT OR IGNORE INTO threads (id, user_id, agent_id, created_at, generation)"
                " VALUES (MAX((SELECT COALESCE(MAX(id), 0) FROM threads) + 1, ?), ?, ?, ?, ?)",
                (now, user, agent, format_timestamp(utcnow()), now),
            )
            row = self._writer.execute(
                "SELECT id FROM threads WHERE user_id = ? AND agent_id = ?", (user, agent)
            ).fetchone()
        return Thread(row[0], user, agent)

    def threads(self, user: str | None = None) -> list[Thread]:
        with self._reading() as conn:
            if user is None:
                rows = conn.execute("SELECT id, user_id, agent_id FROM threads ORDER BY id")
            else:
                rows = conn.execute(
                    "SELECT id, user_id, agent_id FROM threads WHERE user_id = ? ORDER BY id",
                    (user,),
                )
            return [Thread(*r) for r in rows.fetchall()]

    def sessions(self, thread: Thread) -> list[Session]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT key, started_at, last_at, message_count, metadata FROM sessions"
                " WHERE thread_id = ? ORDER BY first_index",
                (thread.id,),
            ).fetchall()
        return [_session(r, thread) for r in rows]

    def last_session(self, thread: Thread) -> Session | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT s.key, s.started_at, s.last_at, s.message_count, s.metadata"
                " FROM messages m JOIN sessions s ON s.id = m.session_id"
                " WHERE m.thread_id = ? ORDER BY m.idx DESC LIMIT 1",
                (thread.id,),
            ).fetchone()
        return _session(row, thread) if row else None

    def time_span(self, thread: Thread) -> tuple[datetime, datetime] | None:
        with self._reading() as conn:
            row = conn.execute(
                # Two seeks at the ends of the (thread, time) index.
                "SELECT (SELECT MIN(ts) FROM messages WHERE thread_id = ?1),"
                " (SELECT MAX(ts) FROM messages WHERE thread_id = ?1)",
                (thread.id,),
            ).fetchone()
        if not row or row[0] is None:
            return None
        return parse_stored(row[0]), parse_stored(row[1])

    # -- writes ------------------------------------------------------------------

    def append(
        self,
        thread: Thread,
        messages: Sequence[NewMessage],
        vectors: Mapping[str, np.ndarray] | None = None,
        model_id: str | None = None,
        defer_tail: bool = False,
    ) -> list[Row]:
        if not messages:
            return []
        out: list[Row] = []
        with self.transaction():
            c = self._writer
            next_index = c.execute(
                "SELECT next_index FROM threads WHERE id = ?", (thread.id,)
            ).fetchone()[0]
            sessions: dict[str, int] = {}
            # Per session: (rowid, terms) of the messages whose windows this batch changes:
            # the last few already stored, then the new ones.
            tails: dict[int, list[tuple[int, str]]] = {}
            fresh: dict[int, int] = {}
            members: dict[int, list[str]] = {}
            span: dict[int, list[str]] = {}
            counts: dict[int, int] = {}
            turn_docs = turn_tokens = 0
            # Whether the thread stays in time order (see _rowid_range).
            latest = c.execute(
                "SELECT MAX(ts) FROM messages WHERE thread_id = ?", (thread.id,)
            ).fetchone()[0]
            in_order = True
            for m in messages:
                if m.index is not None:
                    if m.index < next_index:
                        raise StoreError(
                            f"message {m.id!r}: index {m.index} is taken in thread "
                            f"{thread.user}/{thread.agent} (next free index is {next_index})"
                        )
                    next_index = m.index
                ts = format_timestamp(m.timestamp)
                if latest is not None and ts < latest:
                    in_order = False
                else:
                    latest = ts
                sid = sessions.get(m.session)
                if sid is None:
                    sid = self._session_id(thread, m.session, ts, next_index)
                    sessions[m.session] = sid
                    tails[sid] = self._session_tail(sid, next_index)
                    fresh[sid] = len(tails[sid])
                    span[sid] = [ts, ts]
                span[sid] = [min(span[sid][0], ts), max(span[sid][1], ts)]
                counts[sid] = counts.get(sid, 0) + 1
                meta = json.dumps(dict(m.metadata), ensure_ascii=False, sort_keys=True)
                try:
                    rowid = c.execute(
                        "INSERT INTO messages (uid, thread_id, session_id, idx, role, speaker,"
                        " content, ts, metadata, chash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            m.id,
                            thread.id,
                            sid,
                            next_index,
                            m.role,
                            m.speaker,
                            m.content,
                            ts,
                            meta,
                            m.chash,
                        ),
                    ).lastrowid
                except sqlite3.IntegrityError as exc:
                    raise StoreError(f"message id {m.id!r} already exists in {self.path}") from exc
                assert rowid is not None
                c.execute("INSERT INTO turn_fts (rowid, terms) VALUES (?, ?)", (rowid, m.terms))
                turn_docs += 1
                turn_tokens += len(m.terms.split())
                tails[sid].append((rowid, m.terms))
                members.setdefault(sid, []).append(m.chash)
                message = Message(
                    id=m.id,
                    role=m.role,
                    content=m.content,
                    timestamp=m.timestamp,
                    session=m.session,
                    index=next_index,
                    speaker=m.speaker,
                    user=thread.user,
                    agent=thread.agent,
                    metadata=dict(m.metadata),
                )
                out.append(Row(rowid, message, m.chash))
                next_index += 1
            self._bump_stats("turn", turn_docs, turn_tokens)
            if not in_order:
                c.execute("UPDATE threads SET time_ordered = 0 WHERE id = ?", (thread.id,))
            stats: _Stats = {}
            for sid, rows in tails.items():
                # Each changed window is written once per batch: the stored messages near
                # the new ones gain neighbours; the new ones get their first window.
                first_new = fresh[sid]
                for j in range(max(0, first_new - WINDOW_RADIUS), len(rows)):
                    if defer_tail and j + WINDOW_RADIUS >= len(rows):
                        # Short of neighbours after it: the next message would change it
                        # again. An older one written meanwhile is kept current.
                        if j < first_new:
                            self._write_window(rows, j, stats=stats, present_only=True)
                        continue
                    self._write_window(rows, j, new=j >= first_new, stats=stats)
                c.execute(
                    "UPDATE sessions SET message_count = message_count + ?,"
                    " started_at = MIN(started_at, ?), last_at = MAX(last_at, ?) WHERE id = ?",
                    (counts[sid], span[sid][0], span[sid][1], sid),
                )
            for key, (docs, tokens) in stats.items():
                self._bump_stats(key, docs, tokens)
            c.execute("UPDATE threads SET next_index = ? WHERE id = ?", (next_index, thread.id))
            if vectors and model_id:
                self.put_vectors(model_id, vectors)
            for sid, chashes in members.items():
                self._add_to_session_sum(sid, chashes, vectors, model_id, fresh[sid] == 0)
        return out

    def _add_to_session_sum(
        self,
        sid: int,
        chashes: Sequence[str],
        vectors: Mapping[str, np.ndarray] | None,
        model_id: str | None,
        new_session: bool,
    ) -> None:
        """Add new messages' vectors to their session's sum (see ``session_vectors``):
        to the stored sum, or to none for a new session, or to the session's whole
        sum read again when the stored one is missing or another model's. A session
        with a member that has no vector of the model gets no sum."""
        c = self._writer
        if not vectors or not model_id or any(h not in vectors for h in chashes):
            # Some message has no vector yet: the sum would miss it. Searches sum
            # the session from the vector index until an append rebuilds it.
            c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
            return
        added = np.stack([np.asarray(vectors[h], dtype=np.float32) for h in chashes]).sum(axis=0)
        row = c.execute(
            "SELECT model, total FROM session_vectors WHERE session_id = ?", (sid,)
        ).fetchone()
        size = 4 * len(added)
        if row is not None and row[0] == model_id and len(row[1]) == size:
            total = np.frombuffer(row[1], dtype="<f4") + added
        elif new_session:
            total = added
        else:
            blobs = [
                blob
                for (blob,) in c.execute(
                    "SELECT v.vec FROM messages m"
                    " LEFT JOIN vectors v ON v.model = ? AND v.chash = m.chash"
                    " WHERE m.session_id = ? AND m.archived = 0 ORDER BY m.idx",
                    (model_id, sid),
                )
            ]
            if not blobs or any(b is None or len(b) != size for b in blobs):
                # An older member lacks a vector (a failed embedding, another model):
                # searches sum it from the index, which embeds what is missing.
                c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
                return
            # The new messages are stored already, so they are among these.
            total = np.stack([np.frombuffer(b, dtype="<f4") for b in blobs]).sum(axis=0)
        c.execute(
            "INSERT OR REPLACE INTO session_vectors (session_id, model, total) VALUES (?, ?, ?)",
            (sid, model_id, _blob(total)),
        )

    def session_vector_sums(
        self, thread: Thread, sessions: Sequence[str], model_id: str
    ) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(sessions))
        out: dict[str, np.ndarray] = {}
        with self._reading() as conn:
            for chunk, marks in _batches(keys, 300):
                for key, blob in conn.execute(
                    "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                    f" ON v.session_id = s.id WHERE s.thread_id = ? AND s.key IN ({marks})"
                    " AND v.model = ?",
                    [thread.id, *chunk, model_id],
                ):
                    out[key] = np.frombuffer(blob, dtype="<f4")
        return out

    def every_session_vector_sum(
        self, thread: Thread, model_id: str, dimensions: int, stop: threading.Event | None = None
    ) -> tuple[list[str], np.ndarray] | None:
        keys: list[str] = []
        chunks: list[bytes] = []
        with self._reading() as conn:
            cursor = conn.execute(
                "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                " ON v.session_id = s.id WHERE s.thread_id = ? AND v.model = ?"
                " AND length(v.total) = ?",
                (thread.id, model_id, 4 * dimensions),
            )
            while rows := cursor.fetchmany(1024):
                if stop is not None and stop.is_set():
                    return None
                keys.extend(r[0] for r in rows)
                chunks.append(b"".join(r[1] for r in rows))
        # Read-only, over one buffer: the sums are shared by every search.
        matrix = np.frombuffer(b"".join(chunks), dtype="<f4").reshape(len(keys), dimensions)
        return keys, matrix

    def sessions_written_from(self, thread: Thread, index: int) -> list[str]:
        with self._reading() as conn:
            return [
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT s.key FROM messages m JOIN sessions s ON s.id = m.session_id"
                    " WHERE m.thread_id = ? AND m.idx >= ?",
                    (thread.id, index),
                )
            ]

    def _session_id(self, thread: Thread, key: str, ts: str, first_index: int) -> int:
        c = self._writer
        row = c.execute(
            "SELECT id FROM sessions WHERE thread_id = ? AND key = ?", (thread.id, key)
        ).fetchone()
        if row:
            return int(row[0])
        sid = c.execute(
            "INSERT INTO sessions (thread_id, key, started_at, last_at, first_index)"
            " VALUES (?, ?, ?, ?, ?)",
            (thread.id, key, ts, ts, first_index),
        ).lastrowid
        assert sid is not None
        return sid

    def _session_tail(self, sid: int, before_index: int) -> list[tuple[int, str]]:
        rows = self._writer.execute(
            "SELECT m.id, f.c0 FROM messages m JOIN turn_fts_content f ON f.id = m.id"
            " WHERE m.session_id = ? AND m.idx < ? AND +m.archived = 0"
            " ORDER BY m.idx DESC LIMIT ?",
            (sid, before_index, 2 * WINDOW_RADIUS),
        ).fetchall()
        return [(r[0], r[1]) for r in reversed(rows)]

    def _bump_stats(self, key: str, docs: int, tokens: int) -> None:
        self._writer.execute(
            "INSERT INTO lexicon_stats (key, docs, tokens) VALUES (?, ?, ?)"
            " ON CONFLICT(key) DO UPDATE SET docs = docs + excluded.docs,"
            " tokens = tokens + excluded.tokens",
            (key, docs, tokens),
        )

    def _write_window(
        self,
        rows: Sequence[tuple[int, str]],
        j: int,
        new: bool = False,
        stats: _Stats | None = None,
        present_only: bool = False,
    ) -> None:
        """Replace the window document of ``rows[j]`` (its terms with its neighbours'
        in ``rows``), keeping the running statistics exact. ``new`` skips looking for
        a previous version, ``present_only`` writes only over one; with ``stats`` the
        statistics are added up there and written by the caller."""
        c = self._writer
        rowid = rows[j][0]
        old = (
            None
            if new
            else c.execute("SELECT c0 FROM window_fts_content WHERE id = ?", (rowid,)).fetchone()
        )
        if present_only and old is None:
            return
        doc = window_doc([t for _, t in rows[max(0, j - WINDOW_RADIUS) : j + WINDOW_RADIUS + 1]])
        if old is not None:
            c.execute("DELETE FROM window_fts WHERE rowid = ?", (rowid,))
        c.execute("INSERT INTO window_fts (rowid, terms) VALUES (?, ?)", (rowid, doc))
        before = len(old[0].split()) if old else 0
        docs, tokens = 0 if old else 1, len(doc.split()) - before
        if stats is None:
            self._bump_stats("window", docs, tokens)
        else:
            total = stats.setdefault("window", [0, 0])
            total[0] += docs
            total[1] += tokens

    def write_tail_windows(self, thread: Thread, session: str) -> int:
        with self.transaction():
            c = self._writer
            found = c.execute(
                "SELECT id FROM sessions WHERE thread_id = ? AND key = ?", (thread.id, session)
            ).fetchone()
            if found is None:
                return 0
            next_index = c.execute(
                "SELECT next_index FROM threads WHERE id = ?", (thread.id,)
            ).fetchone()[0]
            rows = self._session_tail(found[0], next_index)
            stats: _Stats = {}
            written = 0
            for j in range(max(0, len(rows) - WINDOW_RADIUS), len(rows)):
                present = c.execute(
                    "SELECT 1 FROM window_fts_content WHERE id = ?", (rows[j][0],)
                ).fetchone()
                if present is None:
                    self._write_window(rows, j, new=True, stats=stats)
                    written += 1
            for key, (docs, tokens) in stats.items():
                self._bump_stats(key, docs, tokens)
            return written

    def _rebuild_windows(self, session_ids: Sequence[int]) -> None:
        """Recompute the window key of every live message in these sessions from its
        live neighbours (an archived message's words reach no search)."""
        c = self._writer
        for sid in session_ids:
            rows = c.execute(
                "SELECT m.id, f.c0 FROM messages m JOIN turn_fts_content f ON f.id = m.id"
                " WHERE m.session_id = ? AND +m.archived = 0 ORDER BY m.idx",
                (sid,),
            ).fetchall()
            stats: _Stats = {}
            for i in range(len(rows)):
                self._write_window(rows, i, stats=stats)
            for key, (docs, tokens) in stats.items():
                self._bump_stats(key, docs, tokens)

    # -- reads --------------------------------------------------------------------

    def get(self, message_id: str) -> Row | None:
        with self._reading() as conn:
            r = conn.execute(_ROW_SELECT + " WHERE m.uid = ?", (message_id,)).fetchone()
        return _row(r) if r else None

    def rows(self, rowids: Sequence[int]) -> dict[int, Row]:
        out: dict[int, Row] = {}
        ids = list(dict.fromkeys(int(r) for r in rowids))
        with self._reading() as conn:
            for chunk, marks in _batches(ids):
                for r in conn.execute(_ROW_SELECT + f" WHERE m.id IN ({marks})", chunk):
                    row = _row(r)
                    out[row.rowid] = row
        return out

    def messages(
        self,
        thread: Thread,
        *,
        session: str | None = None,
        start: int | None = None,
        end: int | None = None,
        limit: int | None = None,
        last: int | None = None,
        archived: bool = True,
    ) -> list[Row]:
        sql = _ROW_SELECT + " WHERE m.thread_id = ?"
        args: list[Any] = [thread.id]
        if not archived:
            sql += " AND m.archived = 0"
        if session is not None:
            sql += " AND s.key = ?"
            args.append(session)
        if start is not None:
            sql += " AND m.idx >= ?"
            args.append(start)
        if end is not None:
            sql += " AND m.idx < ?"
            args.append(end)
        if last is not None:
            sql += " ORDER BY m.idx DESC LIMIT ?"
            args.append(last)
            with self._reading() as conn:
                return [_row(r) for r in reversed(conn.execute(sql, args).fetchall())]
        sql += " ORDER BY m.idx"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._reading() as conn:
            return [_row(r) for r in conn.execute(sql, args).fetchall()]

    def neighbors(self, rowid: int, before: int, after: int) -> list[Row]:
        with self._reading() as conn:
            anchor = conn.execute(
                "SELECT session_id, idx FROM messages WHERE id = ?", (rowid,)
            ).fetchone()
            if not anchor:
                return []
            sid, idx = anchor
            prev = conn.execute(
                _ROW_SELECT + " WHERE m.session_id = ? AND m.idx < ? AND +m.archived = 0"
                " ORDER BY m.idx DESC LIMIT ?",
                (sid, idx, before),
            ).fetchall()
            nxt = conn.execute(
                _ROW_SELECT + " WHERE m.session_id = ? AND m.idx > ? AND +m.archived = 0"
                " ORDER BY m.idx LIMIT ?",
                (sid, idx, after),
            ).fetchall()
        return [_row(r) for r in reversed(prev)] + [_row(r) for r in nxt]

    def state(self, thread: Thread) -> ThreadState:
        with self._reading() as conn:
            row = conn.execute(
                # Positions grow with row numbers, so the last position's row is the
                # largest, found through the (thread, position) index without a scan.
                "SELECT t.generation, (SELECT id FROM messages WHERE thread_id = t.id"
                " ORDER BY idx DESC LIMIT 1), t.next_index FROM threads t WHERE t.id = ?",
                (thread.id,),
            ).fetchone()
        if not row:
            return ThreadState(-1, 0, 0)
        return ThreadState(int(row[0]), int(row[1] or 0), int(row[2]))

    def count(self, thread: Thread, *, upto: int | None = None) -> int:
        with self._reading() as conn:
            if upto is not None:
                return int(
                    conn.execute(
                        "SELECT COUNT(*) FROM messages WHERE thread_id = ? AND id <= ?",
                        (thread.id, upto),
                    ).fetchone()[0]
                )
            row = conn.execute(
                "SELECT COALESCE(SUM(message_count), 0) FROM sessions WHERE thread_id = ?",
                (thread.id,),
            ).fetchone()
        return int(row[0])

    def iter_rows(self, thread: Thread, batch: int = 5000) -> Iterator[Row]:
        last = -1
        while True:
            with self._reading() as conn:
                chunk = conn.execute(
                    _ROW_SELECT + " WHERE m.thread_id = ? AND m.idx > ? ORDER BY m.idx LIMIT ?",
                    (thread.id, last, batch),
                ).fetchall()
            if not chunk:
                return
            for r in chunk:
                yield _row(r)
            last = chunk[-1][2]

    # -- search -------------------------------------------------------------------

    @staticmethod
    def _filter_sql(threads: Sequence[Thread], filters: Filters | None) -> tuple[str, list[Any]]:
        marks = ",".join("?" * len(threads))
        sql = f"m.thread_id IN ({marks}) AND m.archived = 0"
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

    def lexical_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        filters: Filters | None = None,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        if not terms or not threads:
            return []
        table = f"{key}_fts"
        with self._reading() as conn:
            if (filters is None or filters.empty) and self._only_threads(conn, threads):
                found = self._best_live(conn, table, terms, limit, "messages", after)
                if found is not None:
                    return found
            where, args = self._filter_sql(threads, filters)
            if after > 0:
                where += " AND f.rowid > ?"
                args.append(after)
            if filters is not None and (filters.since or filters.until):
                rng = self._rowid_range(
                    conn,
                    threads,
                    format_timestamp(filters.since) if filters.since else None,
                    format_timestamp(filters.until) if filters.until else None,
                )
                if rng is not None:
                    where += " AND f.rowid BETWEEN ? AND ?"
                    args += list(rng)
            sql = (
                f"SELECT f.rowid, bm25({table}) AS r FROM {table} f"
                f" CROSS JOIN messages m ON m.id = f.rowid WHERE {table} MATCH ? AND {where}"
                " ORDER BY r LIMIT ?"
            )
            rows = conn.execute(sql, [fts_query(terms), *args, limit]).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0]

    def lexical_search_spans(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        spans: Sequence[tuple[datetime, datetime]],
        filters: Filters | None = None,
    ) -> list[list[tuple[int, float]]]:
        # One pass over the terms' postings for every span: a question naming a month
        # with no year asks for that month in each year of the thread, and searching
        # each apart read the same posting lists again for every year.
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        bounds = [(format_timestamp(a), format_timestamp(b)) for a, b in spans]
        out: list[list[tuple[int, float]]] = [[] for _ in spans]
        if not terms or not threads or not spans:
            return out
        table = f"{key}_fts"
        where, args = self._filter_sql(threads, filters)
        query = fts_query(terms)
        with self._reading() as conn:
            ranges = [self._rowid_range(conn, threads, lo, hi) for lo, hi in bounds]
            if all(r is not None for r in ranges):
                # Each span is a stretch of row numbers: the index reads only the
                # postings inside it, and SQL keeps the best of each.
                sql = (
                    f"SELECT f.rowid, bm25({table}) AS r FROM {table} f"
                    f" CROSS JOIN messages m ON m.id = f.rowid WHERE {table} MATCH ?"
                    f" AND f.rowid BETWEEN ? AND ? AND {where}"
                    " AND m.ts >= ? AND m.ts < ? ORDER BY r LIMIT ?"
                )
                for i, ((lo, hi), rng) in enumerate(zip(bounds, ranges)):
                    assert rng is not None
                    if rng[0] > rng[1]:
                        continue
                    rows = conn.execute(sql, [query, *rng, *args, lo, hi, limit])
                    out[i] = [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0]
                return out
            inside = " OR ".join("(m.ts >= ? AND m.ts < ?)" for _ in bounds)
            sql = (
                f"SELECT f.rowid, bm25({table}) AS r, m.ts FROM {table} f"
                f" CROSS JOIN messages m ON m.id = f.rowid WHERE {table} MATCH ? AND {where}"
                f" AND ({inside}) ORDER BY r"
            )
            flat = [b for pair in bounds for b in pair]
            for rowid, r, ts in conn.execute(sql, [query, *args, *flat]):
                if r >= 0:
                    break
                for i, (lo, hi) in enumerate(bounds):
                    if lo <= ts < hi and len(out[i]) < limit:
                        out[i].append((int(rowid), -float(r)))
                if all(len(found) >= limit for found in out):
                    break
        return out

    @staticmethod
    def _rowid_range(
        conn: sqlite3.Connection, threads: Sequence[Thread], lo: str | None, hi: str | None
    ) -> tuple[int, int] | None:
        """Row numbers that hold every message of these threads dated in [lo, hi)
        (more may fall between), or None when a thread was not stored in time order
        (then no stretch of row numbers is known to hold them). An empty range has
        its first number past its last."""
        marks = ",".join("?" * len(threads))
        ids = [t.id for t in threads]
        unordered = conn.execute(
            f"SELECT 1 FROM threads WHERE id IN ({marks}) AND time_ordered = 0 LIMIT 1", ids
        ).fetchone()
        if unordered:
            return None
        runs: list[tuple[int, int]] = []
        for tid in ids:
            # In a time-ordered thread the messages from lo on are a run of row numbers
            # that starts at the first of them by time, and those before hi one that
            # ends at the last: one seek each in the (thread, time) index. (Stored
            # times are digits, which sort before "~".)
            a = conn.execute(
                "SELECT id FROM messages WHERE thread_id = ? AND ts >= ? ORDER BY ts, id LIMIT 1",
                (tid, lo or ""),
            ).fetchone()
            b = conn.execute(
                "SELECT id FROM messages WHERE thread_id = ? AND ts < ?"
                " ORDER BY ts DESC, id DESC LIMIT 1",
                (tid, hi or "~"),
            ).fetchone()
            if a is not None and b is not None and a[0] <= b[0]:
                runs.append((int(a[0]), int(b[0])))
        if not runs:
            return (1, 0)
        return min(r[0] for r in runs), max(r[1] for r in runs)

    @staticmethod
    def _only_threads(conn: sqlite3.Connection, threads: Sequence[Thread]) -> bool:
        n = conn.execute("SELECT COUNT(*) FROM threads").fetchone()[0]
        return int(n) <= len(threads)

    @staticmethod
    def _best_live(
        conn: sqlite3.Connection,
        table: str,
        terms: Sequence[str],
        limit: int,
        rows_of: str,
        after: int = 0,
    ) -> list[tuple[int, float]] | None:
        """The best ``limit`` matches of a full-text table whose rowids are ids of
        ``rows_of`` (messages or tree nodes), leaving archived ones out, for a store
        that holds only the searched threads. Joining every match to its row costs
        more than half of a search at a million turns, so the few best are taken
        with some to spare and only they are checked. None when archived rows took
        all the spare: the caller's joined query answers then."""
        rows = conn.execute(
            f"SELECT rowid, bm25({table}) AS r FROM {table} WHERE {table} MATCH ?"
            " AND rowid > ? ORDER BY r LIMIT ?",
            (fts_query(terms), after, limit + 16),
        ).fetchall()
        archived = {
            int(i)
            for chunk, marks in _batches([r[0] for r in rows])
            for (i,) in conn.execute(
                f"SELECT id FROM {rows_of} INDEXED BY {rows_of}_archived"
                f" WHERE archived = 1 AND id IN ({marks})",
                chunk,
            )
        }
        found = [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0 and r[0] not in archived]
        return found[:limit] if len(found) >= limit or len(rows) < limit + 16 else None

    def lexical_stats(self, key: str) -> tuple[int, float]:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT docs, tokens FROM lexicon_stats WHERE key = ?", (key,)
            ).fetchone()
        if not row or not row[0]:
            return 0, 0.0
        return int(row[0]), float(row[1]) / float(row[0])

    def change_mark(self) -> tuple[int, int]:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT (SELECT MAX(id) FROM messages), (SELECT ticks FROM store_clock)"
            ).fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        wanted = list(dict.fromkeys(terms))
        out: dict[str, int] = {}
        with self._reading() as conn:
            for chunk, marks in _batches(wanted):
                for term, doc in conn.execute(
                    f"SELECT term, doc FROM {key}_vocab WHERE term IN ({marks})", chunk
                ):
                    out[term] = int(doc)
        return out

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        counts: dict[str, int] = {}
        with self._reading() as conn:
            # One snapshot: the counts and the state they describe must agree. (The
            # writer, inside this thread's transaction or an in-memory store's lock,
            # sees one already.)
            own = conn is not self._writer
            if own:
                conn.execute("BEGIN")
            try:
                docs, mean = self.lexical_stats(key)
                mark = self.change_mark()
                cursor = conn.execute(
                    f"SELECT term, doc FROM {key}_vocab WHERE doc >= ?", (min_docs,)
                )
                while rows := cursor.fetchmany(1024):
                    if stop is not None and stop.is_set():
                        return None
                    counts.update(rows)
            finally:
                if own:
                    conn.execute("COMMIT")
        return counts, docs, mean, mark

    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        # A phrase query on the window key: both terms in a row. (A pair never spans
        # two turns, a phrase may; that extra is too rare to matter.)
        out: dict[str, int] = {}
        with self._reading() as conn:
            for pair in dict.fromkeys(pairs):
                phrase = '"' + pair.replace('"', '""').replace("_", " ") + '"'
                out[pair] = int(
                    conn.execute(
                        "SELECT COUNT(*) FROM window_fts WHERE window_fts MATCH ?", (phrase,)
                    ).fetchone()[0]
                )
        return out

    def around(self, rowids: Sequence[int], radius: int) -> dict[int, list[tuple[int, int, str]]]:
        ids = list(dict.fromkeys(int(r) for r in rowids))
        out: dict[int, list[tuple[int, int, str]]] = {}
        with self._reading() as conn:
            anchors: list[tuple[int, int, int]] = []
            for chunk, marks in _batches(ids):
                anchors += conn.execute(
                    f"SELECT id, session_id, idx FROM messages WHERE id IN ({marks})", chunk
                ).fetchall()
            # The positions near the anchors, as runs per session (overlaps merged), all
            # looked up in one statement: a search's candidates fall in a hundred
            # sessions, and a statement per session cost more than its reads.
            runs: list[tuple[int, int, int]] = []
            for sid, idx in sorted({(sid, idx) for _, sid, idx in anchors}):
                lo, hi = max(0, idx - radius), idx + radius
                if runs and runs[-1][0] == sid and lo <= runs[-1][2] + 1:
                    runs[-1] = (sid, runs[-1][1], max(hi, runs[-1][2]))
                else:
                    runs.append((sid, lo, hi))
            near: dict[int, list[tuple[int, int, str]]] = {}
            for part, _ in _batches(runs, 300):
                values = ",".join("(?, ?, ?)" for _ in part)
                for sid, rid, idx, terms in conn.execute(
                    f"WITH near(sid, lo, hi) AS (VALUES {values})"
                    " SELECT near.sid, m.id, m.idx, f.c0 FROM near"
                    " CROSS JOIN messages m INDEXED BY messages_by_session"
                    " ON m.session_id = near.sid AND m.idx BETWEEN near.lo AND near.hi"
                    " JOIN turn_fts_content f ON f.id = m.id WHERE +m.archived = 0",
                    [v for run in part for v in run],
                ):
                    near.setdefault(sid, []).append((rid, idx, terms))
            for rows in near.values():
                rows.sort(key=lambda r: r[1])
            sorted_idx = {sid: [r[1] for r in rows] for sid, rows in near.items()}
            for rowid, sid, idx in anchors:
                at = sorted_idx.get(sid, [])
                lo = bisect_left(at, idx - radius)
                hi = bisect_right(at, idx + radius)
                out[rowid] = near.get(sid, [])[lo:hi]
        return out

    def speakers(self, thread: Thread, after_rowid: int = 0) -> list[str]:
        with self._reading() as conn:
            if after_rowid > 0:  # the messages since: a range of the primary key
                rows = conn.execute(
                    "SELECT DISTINCT speaker FROM messages WHERE +thread_id = ? AND id > ?"
                    " AND +speaker IS NOT NULL",
                    (thread.id, after_rowid),
                )
            else:  # every speaker: hop through the index, one seek per speaker
                rows = conn.execute(
                    "WITH RECURSIVE s(name) AS ("
                    " SELECT MIN(speaker) FROM messages WHERE thread_id = ?1 AND speaker IS NOT NULL"
                    " UNION ALL SELECT (SELECT MIN(speaker) FROM messages"
                    "  WHERE thread_id = ?1 AND speaker > s.name)"
                    " FROM s WHERE s.name IS NOT NULL)"
                    " SELECT name FROM s WHERE name IS NOT NULL",
                    (thread.id,),
                )
            return [r[0] for r in rows]

    def allowed_rowids(self, threads: Sequence[Thread], filters: Filters) -> np.ndarray:
        where, args = self._filter_sql(threads, filters)
        with self._reading() as conn:
            rows = conn.execute(f"SELECT m.id FROM messages m WHERE {where} ORDER BY m.id", args)
            return np.fromiter((r[0] for r in rows), dtype=np.int64)

    # -- vectors -----------------------------------------------------------------

    def vectors(self, model_id: str, chashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        keys = list(dict.fromkeys(chashes))
        with self._reading() as conn:
            for chunk, marks in _batches(keys):
                for chash, vec in conn.execute(
                    f"SELECT chash, vec FROM vectors WHERE model = ? AND chash IN ({marks})",
                    [model_id, *chunk],
                ):
                    out[chash] = np.frombuffer(vec, dtype="<f4")
        return out

    def put_vectors(self, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        if not vectors:
            return
        with self.transaction():
            self._writer.executemany(
                # A stored vector is kept, unless it has another length (see thread_vectors).
                "INSERT INTO vectors (model, chash, dim, vec) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (model, chash) DO UPDATE SET dim = excluded.dim, vec = excluded.vec"
                " WHERE vectors.dim != excluded.dim",
                [(model_id, h, int(np.asarray(v).shape[-1]), _blob(v)) for h, v in vectors.items()],
            )

    def thread_vectors(
        self,
        thread: Thread,
        model_id: str,
        after_rowid: int = 0,
        limit: int | None = None,
        dim: int | None = None,
    ) -> tuple[np.ndarray, list[str], np.ndarray, list[Row]]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT m.id, s.key, v.vec FROM messages m"
                " JOIN sessions s ON s.id = m.session_id"
                " LEFT JOIN vectors v ON v.model = ? AND v.chash = m.chash"
                " WHERE m.thread_id = ? AND m.id > ? AND m.archived = 0 ORDER BY m.id"
                " LIMIT ?",
                (model_id, thread.id, after_rowid, -1 if limit is None else limit),
            ).fetchall()
        size = None if dim is None else 4 * dim

        def usable(vec: bytes | None) -> bool:
            return vec is not None and (size is None or len(vec) == size)

        have = [r for r in rows if usable(r[2])]
        missing_ids = [r[0] for r in rows if not usable(r[2])]
        if size is None and len({len(r[2]) for r in have}) > 1:
            raise EmbedderError(
                f"stored vectors of {model_id} have different lengths; "
                "run 'arbormem reembed' to embed them again"
            )
        ids = np.fromiter((r[0] for r in have), dtype=np.int64, count=len(have))
        sessions = [r[1] for r in have]
        if have:
            matrix = np.frombuffer(b"".join(r[2] for r in have), dtype="<f4").reshape(len(have), -1)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        missing = list(self.rows(missing_ids).values()) if missing_ids else []
        missing.sort(key=lambda row: row.rowid)
        return ids, sessions, matrix, missing

    def session_members(self, thread: Thread, sessions: Sequence[str]) -> dict[str, list[int]]:
        keys = list(dict.fromkeys(sessions))
        out: dict[str, list[int]] = {k: [] for k in keys}
        with self._reading() as conn:
            for chunk, marks in _batches(keys, 300):
                for key, rowid in conn.execute(
                    "SELECT s.key, m.id FROM sessions s JOIN messages m ON m.session_id = s.id"
                    f" WHERE s.thread_id = ? AND s.key IN ({marks}) AND m.archived = 0"
                    " ORDER BY m.idx",
                    [thread.id, *chunk],
                ):
                    out[key].append(int(rowid))
        return out

    def prune_vectors(self, keep_model: str, *also: str) -> int:
        kept = [keep_model, *also]
        marks = ", ".join("?" * len(kept))
        with self.transaction():
            cur = self._writer.execute(f"DELETE FROM vectors WHERE model NOT IN ({marks})", kept)
            return int(cur.rowcount)

    def vector_models(self) -> dict[str, int]:
        with self._reading() as conn:
            return {
                m: n for m, n in conn.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model")
            }

    # -- deletion -----------------------------------------------------------------

    def _delete_rowids(self, rowids: Sequence[int], thread_ids: set[int]) -> Deleted:
        """Delete messages by row number with their index rows; fix up what they touched."""
        c = self._writer
        result = Deleted()
        if not rowids:
            return result
        touched_sessions: set[int] = set()
        chashes: set[str] = set()
        for chunk, marks in _batches(rowids):
            for sid, chash in c.execute(
                f"SELECT session_id, chash FROM messages WHERE id IN ({marks})", chunk
            ):
                touched_sessions.add(sid)
                chashes.add(chash)
            for key in LEXICAL_KEYS:
                sizes = [
                    len(t.split())
                    for (t,) in c.execute(
                        f"SELECT c0 FROM {key}_fts_content WHERE id IN ({marks})", chunk
                    )
                ]
                self._bump_stats(key, -len(sizes), -sum(sizes))
                c.execute(f"DELETE FROM {key}_fts WHERE rowid IN ({marks})", chunk)
            result.messages += c.execute(
                f"DELETE FROM messages WHERE id IN ({marks})", chunk
            ).rowcount
        for sid in touched_sessions:
            c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
            agg = c.execute(
                "SELECT COUNT(*), MIN(ts), MAX(ts), MIN(idx) FROM messages WHERE session_id = ?",
                (sid,),
            ).fetchone()
            if agg[0] == 0:
                c.execute("DELETE FROM sessions WHERE id = ?", (sid,))
                result.sessions += 1
            else:
                c.execute(
                    "UPDATE sessions SET message_count = ?, started_at = ?, last_at = ?,"
                    " first_index = ? WHERE id = ?",
                    (agg[0], agg[1], agg[2], agg[3], sid),
                )
        remaining = [
            sid
            for sid in touched_sessions
            if c.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone()
        ]
        self._rebuild_windows(remaining)
        for chash in chashes:
            if not c.execute("SELECT 1 FROM messages WHERE chash = ? LIMIT 1", (chash,)).fetchone():
                c.execute("DELETE FROM vectors WHERE chash = ?", (chash,))
                result.chashes.append(chash)
        for tid in thread_ids:
            c.execute("UPDATE threads SET generation = generation + 1 WHERE id = ?", (tid,))
        return result

    def purge(self) -> list[str]:
        """Merge the full-text indexes, drop unused vectors (old topic summaries
        included) and checkpoint, so deleted terms leave the file."""
        with self.transaction():
            c = self._writer
            for table in ("turn_fts", "window_fts", "topic_fts", "segment_fts"):
                # Checked before the merge too: a store deep already (written by an
                # earlier version) must not take the merge that reaches the end.
                if fts_levels(c, table) <= FTS_LEVEL_LIMIT:
                    c.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
                levels = fts_levels(c, table)
                if levels > FTS_LEVEL_LIMIT:
                    log.info("%s: %s has %d levels: rebuilding it", self.path, table, levels)
                    c.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")
            unused = [
                r[0]
                for r in c.execute(
                    "SELECT DISTINCT v.chash FROM vectors v WHERE NOT EXISTS"
                    " (SELECT 1 FROM messages m WHERE m.chash = v.chash) AND NOT EXISTS"
                    " (SELECT 1 FROM tree_nodes n WHERE n.chash = v.chash)"
                )
            ]
            for chunk, marks in _batches(unused):
                c.execute(f"DELETE FROM vectors WHERE chash IN ({marks})", chunk)
        if not self._memory:
            # On the write connection, so under its lock: other threads' writes used it
            # meanwhile and failed to commit ("SQL statements in progress"). Readers of
            # an older snapshot hold a full checkpoint up; it waits for them briefly,
            # not the whole busy timeout (30 s, with every write of this process queued).
            with self._lock:
                if self._closed:
                    return unused
                self._writer.execute(f"PRAGMA busy_timeout = {PURGE_CHECKPOINT_WAIT_MS}")
                try:
                    self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.OperationalError:
                    pass  # readers are active; the next checkpoint will do it
                finally:
                    self._writer.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        return unused

    def delete_messages(self, message_ids: Sequence[str], thread: Thread | None = None) -> Deleted:
        with self.transaction():
            found: list[int] = []
            threads: set[int] = set()
            for uid in message_ids:
                if thread is None:
                    r = self._writer.execute(
                        "SELECT id, thread_id FROM messages WHERE uid = ?", (uid,)
                    ).fetchone()
                else:
                    r = self._writer.execute(
                        "SELECT id, thread_id FROM messages WHERE uid = ? AND thread_id = ?",
                        (uid, thread.id),
                    ).fetchone()
                if r:
                    found.append(r[0])
                    threads.add(r[1])
            return self._delete_rowids(found, threads)

    def delete_session(self, thread: Thread, session: str) -> Deleted:
        with self.transaction():
            rowids = [
                r[0]
                for r in self._writer.execute(
                    "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id"
                    " WHERE s.thread_id = ? AND s.key = ?",
                    (thread.id, session),
                )
            ]
            result = self._delete_rowids(rowids, {thread.id})
            self._writer.execute(
                "DELETE FROM session_vectors WHERE session_id IN"
                " (SELECT id FROM sessions WHERE thread_id = ? AND key = ?)",
                (thread.id, session),
            )
            self._writer.execute(
                "DELETE FROM session_state WHERE thread_id = ? AND session_key = ?",
                (thread.id, session),
            )
            left = self._writer.execute(
                "DELETE FROM sessions WHERE thread_id = ? AND key = ?", (thread.id, session)
            ).rowcount
            result.sessions += left
            return result

    def delete_thread(self, thread: Thread) -> Deleted:
        with self.transaction():
            c = self._writer
            rowids = [
                r[0] for r in c.execute("SELECT id FROM messages WHERE thread_id = ?", (thread.id,))
            ]
            result = self._delete_rowids(rowids, {thread.id})
            c.execute(
                "DELETE FROM session_vectors WHERE session_id IN"
                " (SELECT id FROM sessions WHERE thread_id = ?)",
                (thread.id,),
            )
            result.sessions += c.execute(
                "DELETE FROM sessions WHERE thread_id = ?", (thread.id,)
            ).rowcount
            self.delete_nodes(thread)
            c.execute("DELETE FROM tree_state WHERE thread_id = ?", (thread.id,))
            c.execute("DELETE FROM session_state WHERE thread_id = ?", (thread.id,))
            c.execute("DELETE FROM tree_log WHERE thread_id = ?", (thread.id,))
            result.threads = c.execute("DELETE FROM threads WHERE id = ?", (thread.id,)).rowcount
            return result

    # -- per-session working memory -------------------------------------------------------

    def session_state(self, thread: Thread, session: str) -> dict[str, Any]:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT state FROM session_state WHERE thread_id = ? AND session_key = ?",
                (thread.id, session),
            ).fetchone()
        return _load_json(row[0]) if row else {}

    def put_session_state(self, thread: Thread, session: str, state: Mapping[str, Any]) -> None:
        with self.transaction():
            # Only for a thread that still exists: a late background upkeep must not
            # leave a row that a new thread reusing the id would inherit.
            self._writer.execute(
                "INSERT OR REPLACE INTO session_state (thread_id, session_key, state, updated_at)"
                " SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM threads WHERE id = ?)",
                (
                    thread.id,
                    session,
                    json.dumps(dict(state), ensure_ascii=False),
                    format_timestamp(utcnow()),
                    thread.id,
                ),
            )

    # -- the topic tree -------------------------------------------------------------------

    _NODE_COLUMNS = (
        "id, parent_id, kind, seq, level, name, summary, keyphrases, first_index, last_index,"
        " first_at, last_at, message_count, child_count, frozen, archived, origin, chash"
    )

    @staticmethod
    def _node(r: Sequence[Any]) -> NodeRow:
        return NodeRow(
            id=r[0],
            parent_id=r[1],
            kind=r[2],
            seq=r[3],
            level=r[4],
            name=r[5],
            summary=r[6],
            keyphrases=json.loads(r[7]),
            first_index=r[8],
            last_index=r[9],
            first_at=parse_stored(r[10]),
            last_at=parse_stored(r[11]),
            message_count=r[12],
            child_count=r[13],
            frozen=bool(r[14]),
            archived=bool(r[15]),
            origin=r[16],
            chash=r[17],
        )

    def tree_state(self, thread: Thread) -> TreeState:
        with self._reading() as conn:
            r = conn.execute(
                "SELECT version, active_id, leaf_id, next_seq FROM tree_state WHERE thread_id = ?",
                (thread.id,),
            ).fetchone()
        return TreeState(*r) if r else TreeState()

    def tree_checked(self, thread: Thread) -> tuple[int, int | None]:
        with self._reading() as conn:
            r = conn.execute(
                "SELECT version, checked_version FROM tree_state WHERE thread_id = ?",
                (thread.id,),
            ).fetchone()
        return (int(r[0]), r[1]) if r else (0, None)

    def mark_tree_checked(self, thread: Thread, version: int) -> bool:
        with self.transaction():
            done = self._writer.execute(
                "UPDATE tree_state SET checked_version = ? WHERE thread_id = ? AND version = ?",
                (version, thread.id, version),
            ).rowcount
        return bool(done)

    def set_tree_state(self, thread: Thread, state: TreeState) -> TreeState:
        with self.transaction():
            c = self._writer
            r = c.execute(
                "SELECT version FROM tree_state WHERE thread_id = ?", (thread.id,)
            ).fetchone()
            if r is None:
                # A new tree's versions start from its thread's generation: a forgotten
                # thread's id comes back with the next new thread, and caches keyed by
                # thread id and tree version (here and in other processes) must not
                # take the new tree for the old one.
                r = c.execute(
                    "SELECT generation FROM threads WHERE id = ?", (thread.id,)
                ).fetchone()
            version = (int(r[0]) if r and r[0] else 0) + 1
            c.execute(
                "INSERT OR REPLACE INTO tree_state"
                " (thread_id, version, active_id, leaf_id, next_seq, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    thread.id,
                    version,
                    state.active_id,
                    state.leaf_id,
                    state.next_seq,
                    format_timestamp(utcnow()),
                ),
            )
        return TreeState(version, state.active_id, state.leaf_id, state.next_seq)

    def tree_nodes(
        self,
        thread: Thread,
        *,
        ids: Sequence[int] | None = None,
        parent: int | object | None = ...,
        kinds: Sequence[str] | None = None,
        frozen: bool | None = None,
    ) -> list[NodeRow]:
        # By id, the "+" keeps the planner from walking a thread_id index (every node of
        # the thread) instead of looking each id up.
        column = "thread_id" if ids is None else "+thread_id"
        sql = f"SELECT {self._NODE_COLUMNS} FROM tree_nodes WHERE {column} = ?"
        args: list[Any] = [thread.id]
        if parent is not ...:
            if parent is None:
                sql += " AND parent_id IS NULL"
            else:
                sql += " AND parent_id = ?"
                args.append(parent)
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        if frozen is not None:
            sql += " AND frozen = ?"
            args.append(int(frozen))
        out: list[NodeRow] = []
        with self._reading() as conn:
            if ids is None:
                out = [self._node(r) for r in conn.execute(sql + " ORDER BY seq", args)]
            else:
                wanted = list(dict.fromkeys(int(i) for i in ids))
                for chunk, marks in _batches(wanted):
                    q = sql + f" AND id IN ({marks})"
                    out.extend(self._node(r) for r in conn.execute(q, [*args, *chunk]))
                out.sort(key=lambda n: n.seq)
        return out

    def node_briefs(
        self,
        thread: Thread,
        kinds: Sequence[str] | None = None,
        ids: Sequence[int] | None = None,
    ) -> list[NodeBrief]:
        # By id, the "+" keeps the planner from walking a thread_id index instead of
        # looking each id up, and the lookup reads the covering index of the tree's
        # shape, not the table's pages of text (a third of a cold million-turn search's
        # slowest tenth went to these pages).
        sql = (
            "SELECT id, parent_id, kind, first_index, last_index, frozen, archived, chash"
            " FROM tree_nodes"
            + (
                " WHERE thread_id = ?"
                if ids is None
                else " INDEXED BY tree_briefs WHERE +thread_id = ?"
            )
        )
        args: list[Any] = [thread.id]
        if kinds is not None:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        make = NodeBrief._make
        with self._reading() as conn:
            if ids is None:
                return [make(r) for r in conn.execute(sql, args)]
            out: list[NodeBrief] = []
            for chunk, marks in _batches(list(dict.fromkeys(ids))):
                rows = conn.execute(sql + f" AND id IN ({marks})", [*args, *chunk])
                out.extend(make(r) for r in rows)
            return out

    def node_shapes(self, thread: Thread, stop: threading.Event | None = None) -> NodeShapes | None:
        # Column by column into typed arrays (8 bytes a number): a list of 800,000
        # NodeBriefs would first cost a quarter of a gigabyte. Read from the covering
        # index of the tree's shape: the table's rows, in kind order, are 14 times the
        # bytes, scattered.
        cols = [array("q") for _ in range(7)]
        kinds: dict[str, int] = {}
        with self._reading() as conn:
            cursor = conn.execute(
                "SELECT id, coalesce(parent_id, -1), kind, first_index, last_index, frozen,"
                " archived FROM tree_nodes INDEXED BY tree_briefs WHERE +thread_id = ?",
                (thread.id,),
            )
            while rows := cursor.fetchmany(4096):
                if stop is not None and stop.is_set():
                    return None
                columns = list(zip(*rows))
                columns[2] = tuple(kinds.setdefault(k, len(kinds)) for k in columns[2])
                for col, values in zip(cols, columns):
                    col.extend(values)
        ids, parent, kind, first, last, frozen, archived = (
            np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64) for c in cols
        )
        return NodeShapes(ids, parent, kind, list(kinds), first, last, frozen, archived)

    def put_nodes(self, thread: Thread, nodes: Sequence[NodeRow]) -> None:
        with self.transaction():
            c = self._writer
            for n in nodes:
                values = (
                    n.parent_id,
                    n.kind,
                    n.seq,
                    n.level,
                    n.name,
                    n.summary,
                    json.dumps(n.keyphrases, ensure_ascii=False),
                    n.first_index,
                    n.last_index,
                    format_timestamp(n.first_at),
                    format_timestamp(n.last_at),
                    n.message_count,
                    n.child_count,
                    int(n.frozen),
                    int(n.archived),
                    n.origin,
                    n.chash,
                )
                if n.id is None:
                    n.id = c.execute(
                        "INSERT INTO tree_nodes (thread_id, parent_id, kind, seq, level, name,"
                        " summary, keyphrases, first_index, last_index, first_at, last_at,"
                        " message_count, child_count, frozen, archived, origin, chash)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (thread.id, *values),
                    ).lastrowid
                else:
                    c.execute(
                        "UPDATE tree_nodes SET parent_id = ?, kind = ?, seq = ?, level = ?,"
                        " name = ?, summary = ?, keyphrases = ?, first_index = ?, last_index = ?,"
                        " first_at = ?, last_at = ?, message_count = ?, child_count = ?,"
                        " frozen = ?, archived = ?, origin = ?, chash = ?"
                        " WHERE id = ? AND thread_id = ?",
                        (*values, n.id, thread.id),
                    )

    def delete_nodes(self, thread: Thread, ids: Sequence[int] | None = None) -> int:
        with self.transaction():
            c = self._writer
            if ids is None:
                ids = [
                    r[0]
                    for r in c.execute(
                        "SELECT id FROM tree_nodes WHERE thread_id = ?", (thread.id,)
                    )
                ]
            removed = 0
            for chunk, marks in _batches(ids):
                for table in ("topic_fts", "segment_fts"):
                    c.execute(f"DELETE FROM {table} WHERE rowid IN ({marks})", chunk)
                c.execute(f"UPDATE messages SET leaf_id = NULL WHERE leaf_id IN ({marks})", chunk)
                removed += c.execute(
                    f"DELETE FROM tree_nodes WHERE +thread_id = ? AND id IN ({marks})",
                    [thread.id, *chunk],
                ).rowcount
            return removed

    def set_message_leaf(self, rowids: Sequence[int], leaf_id: int | None) -> None:
        with self.transaction():
            self._writer.executemany(
                "UPDATE messages SET leaf_id = ? WHERE id = ?", [(leaf_id, r) for r in rowids]
            )

    def set_archived(self, thread: Thread, leaf_ids: Sequence[int], archived: bool) -> int:
        with self.transaction():
            c = self._writer
            changed = 0
            for chunk, marks in _batches(leaf_ids):
                # Their sessions' vector sums change members: searches sum those
                # sessions from the vector index until their next append.
                c.execute(
                    "DELETE FROM session_vectors WHERE session_id IN (SELECT session_id"
                    f" FROM messages WHERE +thread_id = ? AND leaf_id IN ({marks}))",
                    [thread.id, *chunk],
                )
                c.execute(
                    f"UPDATE tree_nodes SET archived = ? WHERE +thread_id = ? AND id IN ({marks})",
                    [int(archived), thread.id, *chunk],
                )
                changed += c.execute(
                    f"UPDATE messages SET archived = ? WHERE +thread_id = ? AND leaf_id IN ({marks})",
                    [int(archived), thread.id, *chunk],
                ).rowcount
            # Their neighbours' window keys drop or regain their words.
            sessions = {
                int(r[0])
                for chunk, marks in _batches(leaf_ids)
                for r in c.execute(
                    "SELECT DISTINCT session_id FROM messages"
                    f" WHERE +thread_id = ? AND leaf_id IN ({marks})",
                    [thread.id, *chunk],
                )
            }
            self._rebuild_windows(sorted(sessions))
            # Cached vector indexes must drop or regain these rows.
            c.execute("UPDATE threads SET generation = generation + 1 WHERE id = ?", (thread.id,))
            return changed

    def leaf_messages(self, thread: Thread, leaf_ids: Sequence[int]) -> list[Row]:
        ids = list(dict.fromkeys(int(i) for i in leaf_ids))
        out: list[Row] = []
        with self._reading() as conn:
            for chunk, marks in _batches(ids):
                out += [
                    _row(r)
                    for r in conn.execute(
                        _ROW_SELECT + f" WHERE m.thread_id = ? AND m.leaf_id IN ({marks})",
                        [thread.id, *chunk],
                    ).fetchall()
                ]
        out.sort(key=lambda r: r.message.index)
        return out

    def archived_rowids(self, thread: Thread) -> set[int]:
        with self._reading() as conn:
            return {
                int(r[0])
                for r in conn.execute(
                    "SELECT rowid FROM messages WHERE thread_id = ? AND archived = 1", (thread.id,)
                )
            }

    def archived_leaves(self, thread: Thread, *, which: str = "whole") -> list[int]:
        having = {
            "whole": "MIN(archived) = 1",
            "partly": "MIN(archived) = 0 AND MAX(archived) = 1",
            "any": "MAX(archived) = 1",
        }[which]
        with self._reading() as conn:
            return [
                int(r[0])
                for r in conn.execute(
                    "SELECT leaf_id FROM messages WHERE thread_id = ? AND leaf_id IS NOT NULL"
                    f" GROUP BY leaf_id HAVING {having}",
                    (thread.id,),
                )
            ]

    def message_leaves(self, rowids: Sequence[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        ids = list(dict.fromkeys(int(r) for r in rowids))
        with self._reading() as conn:
            for chunk, marks in _batches(ids):
                for rowid, leaf in conn.execute(
                    f"SELECT id, leaf_id FROM messages WHERE id IN ({marks})"
                    " AND leaf_id IS NOT NULL",
                    chunk,
                ):
                    out[rowid] = leaf
        return out

    def index_nodes(self, key: str, docs: Mapping[int, str]) -> None:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        table = f"{key}_fts"
        with self.transaction():
            c = self._writer
            for node_id, terms in docs.items():
                c.execute(f"DELETE FROM {table} WHERE rowid = ?", (node_id,))
                if terms:
                    c.execute(f"INSERT INTO {table} (rowid, terms) VALUES (?, ?)", (node_id, terms))

    def parents(self, thread: Thread, ids: Sequence[int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        wanted = list(dict.fromkeys(int(i) for i in ids))
        with self._reading() as conn:
            for chunk, marks in _batches(wanted):
                # By primary key only: a thread filter in the WHERE clause makes SQLite
                # walk the thread's whole tree through the (thread, parent) index.
                for node, parent, owner in conn.execute(
                    "SELECT id, parent_id, thread_id FROM tree_nodes INDEXED BY tree_briefs"
                    f" WHERE id IN ({marks})",
                    chunk,
                ):
                    if owner == thread.id:
                        out[int(node)] = parent
        return out

    def rowids_between(self, thread: Thread, start: int, end: int, limit: int) -> list[int]:
        with self._reading() as conn:
            return [
                int(r[0])
                for r in conn.execute(
                    "SELECT id FROM messages WHERE thread_id = ? AND idx >= ? AND idx < ?"
                    " AND archived = 0 ORDER BY idx LIMIT ?",
                    (thread.id, start, end, limit),
                )
            ]

    def node_docs(self, key: str, ids: Sequence[int]) -> dict[int, str]:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        out: dict[int, str] = {}
        wanted = list(dict.fromkeys(int(i) for i in ids))
        with self._reading() as conn:
            for chunk, marks in _batches(wanted):
                for rowid, terms in conn.execute(
                    f"SELECT id, c0 FROM {key}_fts_content WHERE id IN ({marks})", chunk
                ):
                    out[int(rowid)] = terms
        return out

    def node_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        if not terms or not threads:
            return []
        table = f"{key}_fts"
        marks = ",".join("?" * len(threads))
        with self._reading() as conn:
            if self._only_threads(conn, threads):
                found = self._best_live(conn, table, terms, limit, "tree_nodes", after)
                if found is not None:
                    return found
            sql = (
                f"SELECT f.rowid, bm25({table}) AS r FROM {table} f"
                f" CROSS JOIN tree_nodes n ON n.id = f.rowid"
                f" WHERE {table} MATCH ? AND f.rowid > ? AND n.thread_id IN ({marks})"
                " AND n.archived = 0 ORDER BY r LIMIT ?"
            )
            args = [fts_query(terms), after, *[t.id for t in threads], limit]
            rows = conn.execute(sql, args).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0]

    def term_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        out = self.doc_frequencies("turn", terms)
        with self._reading() as conn:
            total = conn.execute("SELECT MAX(id) FROM messages").fetchone()[0] or 0
        return out, int(total)

    def check_tree(self, thread: Thread, max_children: int) -> list[tuple[int | None, str]]:
        t = thread.id
        checks = [
            (
                "SELECT n.id FROM tree_nodes n LEFT JOIN tree_nodes p ON p.id = n.parent_id"
                " WHERE n.thread_id = ? AND n.parent_id IS NOT NULL"
                " AND (p.id IS NULL OR p.thread_id != n.thread_id OR p.kind = 'leaf') LIMIT 5",
                (t,),
                "its parent does not exist in this thread or is a leaf",
            ),
            (
                "SELECT COALESCE(parent_id, 0) FROM tree_nodes WHERE thread_id = ?"
                " GROUP BY parent_id HAVING COUNT(*) > ? LIMIT 5",
                (t, max_children),
                f"has more than {max_children} children (width rule)",
            ),
            (
                "SELECT p.id FROM tree_nodes n JOIN tree_nodes p ON p.id = n.parent_id"
                " WHERE n.thread_id = ? AND (n.first_index < p.first_index"
                " OR n.last_index > p.last_index) LIMIT 5",
                (t,),
                "its index range does not cover its children's",
            ),
            (
                "SELECT id FROM tree_nodes WHERE thread_id = ? AND first_index > last_index LIMIT 5",
                (t,),
                "its index range is reversed",
            ),
            (
                "SELECT p.id FROM tree_nodes p LEFT JOIN (SELECT parent_id, COUNT(*) AS c"
                " FROM tree_nodes WHERE thread_id = ? GROUP BY parent_id) k ON k.parent_id = p.id"
                " WHERE p.thread_id = ? AND p.kind != 'leaf' AND COALESCE(k.c, 0) != p.child_count"
                " LIMIT 5",
                (t, t),
                "its child count disagrees with its children",
            ),
            (
                "SELECT m.leaf_id FROM messages m LEFT JOIN tree_nodes l ON l.id = m.leaf_id"
                " WHERE m.thread_id = ? AND m.leaf_id IS NOT NULL"
                " AND (l.id IS NULL OR l.kind != 'leaf' OR l.thread_id != m.thread_id"
                " OR m.idx < l.first_index OR m.idx > l.last_index) LIMIT 5",
                (t,),
                "a message points at it as its leaf but it is no leaf holding that message",
            ),
        ]
        problems: list[tuple[int | None, str]] = []
        with self._reading() as conn:
            has_tree = conn.execute(
                "SELECT 1 FROM tree_nodes WHERE thread_id = ? LIMIT 1", (t,)
            ).fetchone()
            if not has_tree:
                first = conn.execute(
                    "SELECT idx FROM messages WHERE thread_id = ? ORDER BY idx LIMIT 1", (t,)
                ).fetchone()
                return [] if first is None else [(None, "the thread has messages but no tree")]
            for sql, args, reason in checks:
                for (node_id,) in conn.execute(sql, args).fetchall():
                    problems.append((node_id or None, reason))
            orphan = conn.execute(
                "SELECT idx FROM messages WHERE thread_id = ? AND leaf_id IS NULL LIMIT 1", (t,)
            ).fetchone()
            if orphan:
                problems.append((None, f"message {orphan[0]} is not in the tree"))
        return problems

    def log_tree(self, thread: Thread, kind: str, stats: Mapping[str, Any], undo: list[Any]) -> int:
        with self.transaction():
            entry = self._writer.execute(
                "INSERT INTO tree_log (thread_id, kind, at, stats, undo) VALUES (?, ?, ?, ?, ?)",
                (
                    thread.id,
                    kind,
                    format_timestamp(utcnow()),
                    json.dumps(dict(stats)),
                    json.dumps(undo),
                ),
            ).lastrowid
        assert entry is not None
        return entry

    def tree_log(self, thread: Thread, entry_id: int | None = None) -> list[TreeLogEntry]:
        sql = "SELECT id, kind, at, stats, undo, undone_at FROM tree_log WHERE thread_id = ?"
        args: list[Any] = [thread.id]
        if entry_id is not None:
            sql += " AND id = ?"
            args.append(entry_id)
        with self._reading() as conn:
            rows = conn.execute(sql + " ORDER BY id DESC", args).fetchall()
        return [
            TreeLogEntry(
                r[0],
                r[1],
                parse_stored(r[2]),
                json.loads(r[3]),
                json.loads(r[4]),
                parse_stored(r[5]) if r[5] else None,
            )
            for r in rows
        ]

    def mark_undone(self, entry_id: int) -> None:
        with self.transaction():
            self._writer.execute(
                "UPDATE tree_log SET undone_at = ? WHERE id = ?",
                (format_timestamp(utcnow()), entry_id),
            )
