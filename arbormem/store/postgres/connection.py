"""Connections to the PostgreSQL database: a pool, transactions, per-thread locks,
read-only stores, change marks and closing.

* A store holds a pool of connections (:mod:`psycopg_pool`). A write transaction
  takes one for its duration (its reads on the same Python thread go through it
  and see its own writes); every other read takes one for one statement, in
  autocommit mode, so searches never wait for writers.
* Writes to a thread are serialised across processes by an advisory lock keyed
  by the thread, taken by the first statement of a transaction that touches the
  thread (read or write) and released by its commit or rollback. So what a
  transaction reads of a thread after that is what the thread is, as under
  SQLite's single writer: appends, tree upkeep and record fusion of one thread
  never interleave, and positions and ids grow in commit order.
* ``synchronous="OFF"`` turns ``synchronous_commit`` off for the store's
  sessions (a crash of the server may lose the last commits); any other value
  keeps PostgreSQL's durable default.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from arbormem.errors import ConfigError, SchemaError, StoreError
from arbormem.store.core import StoreCore
from arbormem.store.postgres.common import scope_of, tenant_of
from arbormem.store.postgres.kept import KeptReads
from arbormem.store.postgres.schema import (
    LATEST,
    current_version,
    foreign,
    migrate,
    refuse_newer,
)
from arbormem.store.types import Thread

log = logging.getLogger("arbormem.store.postgres")

#: Vectors per thread past which dense search uses an HNSW index.
ANN_THRESHOLD = 50_000
#: Connections a store's pool may open (``?pool_size=N`` in the URL).
POOL_SIZE = 10
#: The schema arbormem's tables live in (``?schema=NAME`` in the URL).
DEFAULT_SCHEMA = "arbormem"
#: The lock classes of advisory locks, a thread's id times this plus the class.
LOCK_CLASSES = 4
WRITE_LOCK = 0
ANN_LOCK = 1
#: Query parameters of the URL that are arbormem's, not libpq's.
OUR_PARAMETERS = ("pool_size", "schema")
#: How long what a search read of the store's state is reused by the same search
#: (and a search that starts within it), in seconds: see ``_cached``. A search
#: takes tens of milliseconds; a call outside one (a change mark read just after a
#: search) rarely falls within this, and another process's write is seen this late
#: at most.
SEARCH_READS_SECONDS = 0.25


def advisory_key(thread_id: int, kind: int) -> int:
    """The advisory lock key of a thread (a bigint; thread ids never repeat)."""
    return (thread_id * LOCK_CLASSES + kind) & 0x7FFF_FFFF_FFFF_FFFF


def _commit_sql(threads: Iterable[int]) -> str:
    """The statement that ends a write transaction: it raises the change counter of
    every thread whose lock it held first, in the same round trip. Whatever the
    transaction wrote of a thread (messages, tree, vectors, state), the thread's
    stamp then moves, and reads other processes keep of it are read again (see
    :mod:`.kept`)."""
    ids = sorted({int(t) for t in threads})
    if not ids:
        return "COMMIT"
    listed = ", ".join(str(i) for i in ids)
    return f"UPDATE threads SET changes = changes + 1 WHERE id IN ({listed}); COMMIT"


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and ``Memory.path``."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = urllib.parse.quote(parts.username or "", safe="")
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The libpq connection URL and arbormem's own parameters taken out of it."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise ConfigError(f"not a PostgreSQL URL: {redact(url)}")
    kept: list[tuple[str, str]] = []
    ours: dict[str, str] = {}
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key in OUR_PARAMETERS:
            ours[key] = value
        else:
            kept.append((key, value))
    libpq = urllib.parse.urlunsplit(
        parts._replace(scheme="postgresql", query=urllib.parse.urlencode(kept))
    )
    return libpq, ours


@dataclass
class _Transaction:
    """The write transaction a Python thread holds. Its ``BEGIN`` goes with its
    first statement (see :attr:`conn` and ``_lock_threads``): one round trip less."""

    raw: Any
    depth: int = 1
    #: Whether BEGIN was sent.
    begun: bool = False
    #: Threads written without their lock (see _commit_sql).
    dirty: set[int] = field(default_factory=set)
    #: Threads whose advisory lock this transaction holds.
    locked: set[int] = field(default_factory=set)
    #: Of those, the threads it locked to read them, or to write only what no search
    #: keeps a read of (typed records, which carry a stamp of their own).
    quiet: set[int] = field(default_factory=set)
    #: Threads it locked to write anything else: their change counters move at the
    #: commit (see _commit_sql), as do those locked without saying (not quiet).
    loud: set[int] = field(default_factory=set)
    #: Work to do once it commits (see _on_commit).
    after: list[Callable[[], None]] = field(default_factory=list)
    #: Writes put off until just before the commit (see _before_commit), in order.
    before: list[Callable[[], None]] = field(default_factory=list)
    #: Topic and segment documents indexed by this transaction and not written yet:
    #: (key, node id) -> document (see PostgresLexical.index_nodes).
    node_docs: dict[tuple[str, int], str] = field(default_factory=dict)
    #: The typed records of each thread this transaction changed, as it left them
    #: (see PostgresRecords._change): its lock held, nobody else changes them.
    records: dict[int, Any] = field(default_factory=dict)
    #: Writes held back until the transaction's next statement (see
    #: PostgresTree.put_nodes): the rows of the tree nodes it made (id -> row) and
    #: of those it changed, and the leaves it placed messages in (row id -> leaf).
    new_nodes: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    changed_nodes: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    placed: dict[int, int] = field(default_factory=dict)
    #: Sends the held writes on the connection (the store's, see _send_held).
    send_held: Callable[[_Transaction], None] | None = None
    #: The leaf of each message this transaction read since it last wrote anything
    #: (see PostgresMessages.messages): tree upkeep reads a topic's messages, then
    #: asks which leaf holds each, and that was a round trip of its own.
    leaves_seen: dict[int, int | None] = field(default_factory=dict)

    @property
    def holding(self) -> bool:
        """Whether writes are held back, not sent yet."""
        return bool(self.new_nodes or self.changed_nodes or self.placed)

    @property
    def conn(self) -> Any:
        """The transaction's connection, its BEGIN sent and the writes it held back
        sent before whatever statement comes next (which may read them)."""
        if not self.begun:
            self.raw.execute("BEGIN")
            self.begun = True
        if self.send_held is not None and self.holding:
            self.send_held(self)
        return self.raw


def _quiet(tx: _Transaction) -> bool:
    """Whether a committed transaction changed nothing a search reads and keeps: it
    sent nothing, or it only read the threads it locked and wrote their typed
    records. Such a commit of this process leaves what the search under way (or
    the next) read before it usable (see PostgresConnection._commits)."""
    if not tx.begun:
        return True
    return not tx.dirty and not tx.loud and bool(tx.locked) and tx.locked <= tx.quiet


class PostgresConnection(StoreCore):
    """The pool, transactions and lifecycle every PostgreSQL capability uses."""

    name = "postgres"

    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "NORMAL",
        read_only: bool | None = None,
        ann_threshold: int = ANN_THRESHOLD,
        pool_size: int | None = None,
        schema: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        """``url``: ``postgresql://user[:password]@host[:port]/database``, with
        libpq's parameters and arbormem's ``pool_size`` (connections, default
        10) and ``schema`` (default ``arbormem``). ``read_only``: True opens for
        reading only; None writes unless the server is a standby; False requires
        writes. ``ann_threshold``: vectors per thread past which dense search uses
        an HNSW index."""
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise ConfigError(
                "a postgresql:// store needs the postgres extra: pip install 'arbormem[postgres]'"
            ) from exc
        self._psycopg = psycopg
        libpq, ours = split_url(url)
        self.url = url
        #: What the store is called in messages (the URL, its password hidden).
        self.path = redact(url)
        self._conninfo = libpq
        self.schema = schema or ours.get("schema") or DEFAULT_SCHEMA
        if not self.schema.replace("_", "").isalnum() or self.schema[0].isdigit():
            raise ConfigError(
                f"schema {self.schema!r}: use letters, digits and underscores, not first a digit"
            )
        size = pool_size if pool_size is not None else ours.get("pool_size", POOL_SIZE)
        try:
            self._pool_size = int(size)
            if self._pool_size < 2:
                raise ValueError
        except (TypeError, ValueError):
            raise ConfigError(
                f"pool_size={size!r} in {self.path}: a whole number of connections, at least 2"
            ) from None
        self._ann_threshold = int(ann_threshold)
        self._synchronous = str(synchronous).upper()
        if self._synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self._timeout = timeout
        self._local = threading.local()
        self._closed = False
        self._lock = threading.RLock()
        self.read_only = bool(read_only)
        self._why_read_only = "it was opened read-only"
        self._extension_schema = "public"
        #: What the search under way has read (see _cached): (start, values).
        self._search_reads: tuple[float, dict[Any, Any]] | None = None
        #: Commits of this process so far that may have changed what searches read
        #: (see _quiet): what was read before one is not reused.
        self._commits = 0
        #: What searches read of each thread, kept while it is unchanged.
        self._kept = KeptReads()
        #: How many hits the last window and segment searches asked for: what a
        #: search of the turns guesses the next ones will (see PostgresLexical).
        self._ahead_limits: dict[str, int] = {}
        self._prepare(read_only)
        self._pool = psycopg_pool.ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
            configure=self._configure,
            timeout=timeout,
            name=f"arbormem {self.schema}",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to {self.path}: {exc}") from exc

    # -- opening -----------------------------------------------------------------------

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=max(1, int(self._timeout))
            )
        except self._psycopg.Error as exc:
            raise StoreError(f"cannot connect to {self.path}: {exc}".strip()) from exc

    def _prepare(self, read_only: bool | None) -> None:
        """Check the database, migrate it (unless read-only) and learn where
        pgvector lives, on a connection of its own."""
        psycopg = self._psycopg
        conn = self._connect()
        try:
            if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                if read_only is False:
                    raise StoreError(f"{self.path} is a standby server: it cannot be written")
                if not self.read_only:
                    self.read_only = True
                    self._why_read_only = "the server is a standby (a read replica)"
            if not self.read_only:
                self._create_schema(conn)
            row = conn.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n"
                " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
            ).fetchone()
            if row is None:
                raise StoreError(
                    f"{self.path} has no pgvector extension: CREATE EXTENSION vector"
                    " (as a user allowed to)"
                )
            self._extension_schema = str(row[0])
            conn.execute(f'SET search_path = "{self.schema}", "{self._extension_schema}"')
            if foreign(conn):
                raise StoreError(
                    f"schema {self.schema!r} of {self.path} holds another program's tables"
                    " (none of them arbormem's); give arbormem a schema of its own"
                    " (?schema=NAME in the URL)"
                )
            if self.read_only:
                version = current_version(conn)
                refuse_newer(version, self.path)
                if version != LATEST:
                    raise StoreError(
                        f"{self.path} (schema {self.schema!r}) has schema version {version} and"
                        f" this arbormem reads {LATEST}: open it once with write access"
                        + (" to upgrade it" if version else " to create it")
                    )
            else:
                migrate(conn, self.path)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        finally:
            conn.close()

    def _create_schema(self, conn: Any) -> None:
        psycopg = self._psycopg
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x61726D6D,))
                installed = conn.execute(
                    "SELECT 1 FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()
                if not installed:
                    conn.execute("SET LOCAL search_path = public")
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StoreError(
                f"cannot create arbormem's tables in {self.path}: {exc}".strip()
            ) from exc
        except SchemaError:
            raise

    def _configure(self, conn: Any) -> None:
        """Set up a new pooled connection: our schema, UTC, durability, vector I/O."""
        from arbormem.store.postgres.adapt import register_vector

        conn.execute(
            f'SET search_path = "{self.schema}", "{self._extension_schema}";'
            " SET TimeZone = 'UTC';"
            f" SET synchronous_commit = {'off' if self._synchronous == 'OFF' else 'on'};"
            " SET hnsw.ef_search = 160"
        )
        if self.read_only:
            conn.execute("SET default_transaction_read_only = on")
        register_vector(conn)

    # -- reading and writing -----------------------------------------------------------

    def _tx(self) -> _Transaction | None:
        tx: _Transaction | None = getattr(self._local, "tx", None)
        return tx

    def _owns_transaction(self) -> bool:
        return self._tx() is not None

    def concurrent_reads(self) -> bool:
        # Other threads read through other connections, which cannot see this
        # thread's uncommitted writes.
        return not self._owns_transaction()

    def _lock_threads(
        self, tx: _Transaction, threads: Iterable[Thread], *, quiet: bool = False
    ) -> None:
        wanted = {t.id for t in threads}
        if not quiet:
            tx.loud.update(wanted)
        todo = sorted(wanted - tx.locked)
        if not todo:
            return
        # Every lock (in id order) and the BEGIN not sent yet, in one round trip.
        locks = "; ".join(f"SELECT pg_advisory_xact_lock({advisory_key(t, 0)})" for t in todo)
        tx.raw.execute(locks if tx.begun else f"BEGIN; {locks}")
        tx.begun = True
        tx.locked.update(todo)
        if quiet:
            tx.quiet.update(todo)

    @contextmanager
    def _reading(self, *threads: Thread) -> Iterator[Any]:
        """A connection to read with: this thread's transaction's (locking the
        threads named first), else a pooled one for the duration."""
        tx = self._tx()
        if tx is not None:
            if threads:
                # A read changes nothing: the lock alone does not move the threads'
                # change counters (a write of them does, see _writing).
                self._lock_threads(tx, threads, quiet=True)
            try:
                yield tx.conn
            except self._psycopg.Error as exc:
                raise StoreError(f"{self.path}: a read failed: {exc}") from exc
            return
        if self._closed:
            raise StoreError(f"{self.path} is closed")
        try:
            with self._pool.connection(timeout=self._timeout) as conn:
                yield conn
        except self._psycopg.OperationalError as exc:
            # A server restart breaks every pooled connection: have them checked, so
            # the next read gets a live one.
            self._pool.check()
            raise StoreError(f"{self.path}: a read failed: {exc}") from exc
        except self._psycopg.Error as exc:
            raise StoreError(f"{self.path}: a read failed: {exc}") from exc
        except Exception as exc:
            if type(exc).__name__ == "PoolTimeout":
                raise StoreError(
                    f"{self.path}: no connection free within {self._timeout:g} s"
                    f" (pool_size={self._pool_size})"
                ) from exc
            raise

    @contextmanager
    def _writing(self, *threads: Thread, quiet: bool = False) -> Iterator[Any]:
        """The write transaction's connection, with the threads' locks held.
        ``quiet``: what it writes of them is nothing a search keeps a read of (see
        :mod:`.kept`), so their change counters need not move for it."""
        with self.transaction():
            tx = self._tx()
            assert tx is not None
            if threads:
                self._lock_threads(tx, threads, quiet=quiet)
            yield tx.conn

    def map_for_search(self) -> None:
        # A search begins: what it reads of the store's state (a thread's state, the
        # statistics, the change marks) is read once for the whole search. The search
        # looked its thread up just before, and that statement read the thread's
        # state with it (see _stash): the search starts from those values.
        stash: tuple[int, float, dict[Any, Any]] | None = getattr(self._local, "stash", None)
        self._local.stash = None
        now = time.monotonic()
        if (
            stash is not None
            and stash[0] == self._commits
            and now - stash[1] <= SEARCH_READS_SECONDS
        ):
            self._search_reads = (stash[1], dict(stash[2]))
        else:
            self._search_reads = (now, {})

    def _stash(self, commits: int, start: float, values: dict[Any, Any]) -> None:
        """Keep values read outside a search (under _cached's keys), by a statement
        begun at ``start`` after ``commits`` commits of this process, for the search
        this Python thread may begin next: see map_for_search."""
        if self._owns_transaction():
            return
        self._local.stash = (commits, start, values)

    def _cached(self, key: Any, read: Callable[[], Any]) -> Any:
        """``read()``, or what it gave earlier in the search under way. A search reads
        the same state several times (each source, each feature); on a database
        server each read is a round trip. Reused for at most
        :data:`SEARCH_READS_SECONDS` after the search began, never inside a write
        transaction, and forgotten at every commit of this process; another
        process's write may thus be seen up to that long after it committed by the
        statistics and states a search reads (the rows it finds are always read)."""
        if self._owns_transaction():
            return read()
        reads = self._search_reads
        if reads is None or time.monotonic() - reads[0] > SEARCH_READS_SECONDS:
            # Not in a search (yet): what this Python thread's lookup of its thread
            # read a moment ago, if anything (a search reads its threads' states
            # before it begins).
            stashed = self._stashed(key)
            return read() if stashed is None else stashed
        values = reads[1]
        if key not in values:
            values[key] = read()
        return values[key]

    def _stashed(self, key: Any) -> Any:
        """What this Python thread's last thread lookup read under ``key`` (None:
        nothing, or too long ago, or before a commit of this process)."""
        stash: tuple[int, float, dict[Any, Any]] | None = getattr(self._local, "stash", None)
        if (
            stash is None
            or stash[0] != self._commits
            or time.monotonic() - stash[1] > SEARCH_READS_SECONDS
        ):
            return None
        return stash[2].get(key)

    def _peek(self, key: Any) -> Any:
        """What the search under way read under ``key`` (None: nothing yet)."""
        reads = self._search_reads
        if (
            reads is None
            or self._owns_transaction()
            or time.monotonic() - reads[0] > SEARCH_READS_SECONDS
        ):
            return None
        return reads[1].get(key)

    def _remember(self, key: Any, value: Any) -> None:
        """Keep a value read for the search under way (see _cached)."""
        reads = self._search_reads
        if (
            reads is not None
            and not self._owns_transaction()
            and time.monotonic() - reads[0] <= SEARCH_READS_SECONDS
        ):
            reads[1][key] = value

    def _thread_stamp(self, thread: Thread) -> tuple[int, int, int] | None:
        """The thread's stamp as the search under way read it (None: unknown), under
        which :attr:`_kept` keeps reads of it."""
        found: tuple[int, int, int] | None = self._peek(("stamp", thread.id))
        return found

    def _store_stamp(self) -> tuple[int, int] | None:
        """The store's change mark as the search under way read it (None: unknown),
        under which :attr:`_kept` keeps reads that name no thread."""
        found: tuple[int, int] | None = self._peek(("mark", None))
        return found

    def writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path} cannot be changed: {self._why_read_only}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.writable()
        tx = self._tx()
        if tx is not None:
            tx.leaves_seen.clear()  # a write may move messages between leaves
            tx.depth += 1
            try:
                yield
            finally:
                tx.depth -= 1
            return
        if self._closed:
            raise StoreError(f"{self.path} is closed")
        psycopg = self._psycopg
        try:
            conn = self._pool.getconn(timeout=self._timeout)
        except Exception as exc:
            raise StoreError(f"{self.path}: cannot start a write: {exc}") from exc
        tx = _Transaction(conn, send_held=self._send_held)
        self._local.tx = tx
        committed = False
        try:
            try:
                yield
                for work in tx.before:
                    work()
                if tx.begun or tx.holding:
                    # tx.conn sends the held writes first: they say which threads
                    # they changed.
                    ending = tx.conn
                    ending.execute(_commit_sql((tx.locked - tx.quiet) | tx.loud | tx.dirty))
                committed = True
            except psycopg.Error as exc:
                self._rollback(conn)
                if isinstance(exc, psycopg.OperationalError):
                    self._pool.check()
                raise StoreError(f"{self.path}: the write failed: {exc}") from exc
            except BaseException:
                self._rollback(conn)
                raise
        finally:
            self._local.tx = None
            self._pool.putconn(conn)
            if not (committed and _quiet(tx)):
                self._commits += 1
                self._search_reads = None
        if committed:
            for work in tx.after:
                try:
                    work()
                except Exception as exc:  # caches: the write itself has landed
                    log.warning("%s: a cache was not kept in step with a write: %s", self.path, exc)

    def _wrote(self, thread_ids: Iterable[int]) -> None:
        """Say that the write transaction under way changed these threads (whose
        locks it may not hold): its commit raises their change counters."""
        tx = self._tx()
        if tx is not None:
            tx.dirty.update(int(t) for t in thread_ids)

    def _rollback(self, conn: Any) -> None:
        try:
            if not conn.closed:
                conn.execute("ROLLBACK")
        except self._psycopg.Error:
            pass  # a broken connection: the server rolled back already

    def _send_held(self, tx: _Transaction) -> None:
        """Send the writes ``tx`` held back (see _Transaction.new_nodes); the tree
        capability holds them. A no-op here."""

    def _queue_held(self, tx: _Transaction) -> Callable[[], None]:
        """Queue the writes ``tx`` held back on its connection, in pipeline mode;
        returns what to do once they are through. The tree capability holds them."""
        return lambda: None

    def _read_rows(
        self, thread: Thread, sql: str, args: Any, *, write: bool = False
    ) -> list[tuple[Any, ...]]:
        """The rows of one read of ``thread`` (``write``: of a statement that writes
        it, in the write transaction under way): in a write transaction holding
        writes back, those writes and the statement go in one round trip (a
        pipeline), not two."""
        tx = self._tx()
        if tx is None or not tx.holding:
            with self._writing(thread) if write else self._reading(thread) as conn:
                return list(conn.execute(sql, args).fetchall())
        self._lock_threads(tx, [thread], quiet=not write)
        conn = tx.raw
        try:
            with conn.pipeline():
                done = self._queue_held(tx)
                cur = conn.execute(sql, args)
            rows = list(cur.fetchall())
        except self._psycopg.Error as exc:
            raise StoreError(f"{self.path}: a read failed: {exc}") from exc
        done()
        return rows

    def _settle_node_docs(self) -> None:
        """Write the node documents this Python thread's transaction put off (see
        PostgresLexical.index_nodes): called before a read or a delete that must
        see them. A no-op here."""

    def _before_commit(self, work: Callable[[], None]) -> None:
        """Run ``work`` inside the write transaction under way, just before it
        commits (it must be idempotent: a write that has to land sooner runs it
        too)."""
        tx = self._tx()
        assert tx is not None, "_before_commit outside a transaction"
        if work not in tx.before:
            tx.before.append(work)

    def _on_commit(self, work: Callable[[], None]) -> None:
        """Run ``work`` once the write transaction under way commits (at once when
        there is none); never when it rolls back."""
        tx = self._tx()
        if tx is not None:
            tx.after.append(work)
        else:
            work()

    # -- lifecycle ---------------------------------------------------------------------

    def _closing(self) -> None:
        """Called first by :meth:`close`: capabilities with caches drop them here."""

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closing()
            self._closed = True
        self._pool.close(timeout=self._timeout)

    # -- change marks ------------------------------------------------------------------

    def change_mark(self) -> tuple[int, int]:
        # Every thread's change counter and every scope's count of deleted threads:
        # the first only grows while no thread is deleted, the second grows then.
        def read() -> tuple[int, int]:
            with self._reading() as conn:
                row = conn.execute(
                    "SELECT (SELECT coalesce(sum(changes), 0) FROM threads),"
                    " (SELECT coalesce(sum(ticks), 0) FROM scopes)"
                ).fetchone()
            return int(row[0]), int(row[1])

        return tuple(self._cached(("mark", None), read))

    def scope_mark(self, scopes: Sequence[int]) -> tuple[int, int]:
        """:meth:`change_mark` for these scopes' documents: its cost grows with their
        threads, not with the store's."""
        wanted = sorted(scopes)

        def read() -> tuple[int, int]:
            with self._reading() as conn:
                row = conn.execute(
                    "SELECT (SELECT coalesce(sum(changes), 0) FROM threads"
                    " WHERE scope_id = ANY(%(s)s)),"
                    " (SELECT coalesce(sum(ticks), 0) FROM scopes WHERE scope_id = ANY(%(s)s))",
                    {"s": wanted},
                ).fetchone()
            return int(row[0]), int(row[1])

        return tuple(self._cached(("mark", tuple(wanted)), read))

    def _rows_changed(self, threads: Iterable[Thread], *, forgotten: bool) -> None:
        """Called after a commit that took rows out of these threads: capabilities
        that cache something of them drop it here."""
        self._kept.forget(t.id for t in threads)

    @staticmethod
    def _keys(thread: Thread) -> dict[str, Any]:
        return {"s": scope_of(thread), "t": thread.id, "tenant": tenant_of(thread)}
