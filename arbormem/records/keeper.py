"""Records kept in step with the log: extraction after every add, in the background.

A :class:`RecordKeeper` belongs to one :class:`~arbormem.engine.Engine`. After each
write the write pipeline calls :meth:`RecordKeeper.schedule`, which submits one
``records`` job for the thread on the engine's job runner (:mod:`arbormem.jobs`), so
``add`` does not wait for extraction; ``Memory.wait()`` flushes it. The job reads the
messages from the thread's extraction cursor on, in batches, extracts candidate
records (one LLM call per batch when an LLM is configured, the patterns of
:mod:`arbormem.records.extract` otherwise or when the call fails), and writes them
with the new cursor in one transaction: a crash leaves the records as they were
before the batch, and the messages are never touched.

A message forgotten while its batch was being read is not cited: the write checks
which of the batch's messages are still stored, in its transaction.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from arbormem.records import worker
from arbormem.records.extract import Candidate, Context, Turn
from arbormem.records.service import RecordService
from arbormem.records.worker import CONTEXT_TURNS, Exchange, run_batch
from arbormem.store.types import Row, Thread

if TYPE_CHECKING:
    from arbormem.engine import Engine

__all__ = ["BATCH", "BULK_BATCH", "CONTEXT_TURNS", "PATTERN_BATCH", "RecordKeeper"]

log = logging.getLogger("arbormem.records")

#: Messages read per batch when an LLM is configured (and sent to it in one call).
BATCH = 32
#: Messages sent to the helper process at a time when the patterns extract: they read
#: each turn on its own with the turns before it (see
#: :func:`arbormem.records.worker.extract_batch`), so a batch's size changes what it
#: costs, not what it finds.
PATTERN_BATCH = 1024
#: Most messages one batch reads, extracts (in pieces of :data:`PATTERN_BATCH`) and
#: writes in one transaction when the patterns extract. A batch takes every message
#: not read yet, up to this. Its write waits for the thread's lock, which a bulk load
#: holds for each ``add_many``: extraction gets about one write between two of them,
#: so a batch of 256 read a quarter of a 1,000-message ``add_many`` per turn of the
#: lock and fell behind in proportion (about 110 of 400 messages a second, the rest
#: waiting for ``close``). Taking the whole backlog keeps up with any ``add_many`` up
#: to this size (see "Record extraction behind an import" in docs/postgres.md).
BULK_BATCH = 8192
#: Seconds between the notes (logged at INFO) a closing memory gives while it waits
#: for extraction that fell behind.
NOTE_SECONDS = 10.0
#: Seconds without an add after which messages are no longer being written: a bulk
#: load adds a batch every few milliseconds (see :meth:`RecordKeeper.writing`).
QUIET_SECONDS = 0.25


class RecordKeeper:
    """Extraction of one engine's threads, kept up after every add (see the module docs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend = engine.backend
        self._lock = threading.Lock()
        #: Threads with a catch-up submitted and not yet started.
        self._due: set[int] = set()
        #: One lock per thread: two catch-ups of one thread never run at once.
        self._running: dict[int, threading.RLock] = {}
        #: When messages were last added (see :meth:`writing`).
        self._last_write = float("-inf")

    def service(self, thread: Thread) -> RecordService:
        """The records of ``thread``."""
        return RecordService(self.backend, thread)

    # -- scheduling ------------------------------------------------------------------

    def schedule(self, thread: Thread) -> None:
        """Catch ``thread``'s records up in the background (once, however many adds
        arrive before the job starts: it reads every message not read yet)."""
        if self.backend.read_only or self.engine.closed:
            return
        self._last_write = time.monotonic()
        with self._lock:
            if thread.id in self._due:
                return
            self._due.add(thread.id)
        self.engine.jobs.submit("records", partial(self.catch_up, thread))

    def expect(self, messages: int) -> None:
        """``messages`` are about to be written: start what extracting them will use
        (the patterns' helper process, see :mod:`arbormem.records.worker`) while they
        are, not after."""
        if self.engine.llm is None and not self.backend.read_only and not self.engine.closed:
            worker.start_for(messages)

    def catch_up(self, thread: Thread) -> int:
        """Extract records from every message of ``thread`` past its cursor; the number
        of messages read."""
        with self._lock:
            self._due.discard(thread.id)
            running = self._running.setdefault(thread.id, threading.RLock())
        read = 0
        limit = BATCH if self.engine.llm is not None else BULK_BATCH
        started = time.monotonic()
        noted = started
        with running:
            while True:
                cursor = self.backend.records_cursor(thread)
                rows = self.backend.messages(thread, start=cursor, limit=limit)
                if not rows:
                    return read
                if not self._batch(thread, cursor, rows):
                    return read  # the thread was forgotten meanwhile
                read += len(rows)
                if len(rows) == limit:
                    # Behind (a full batch): say how far, for Memory.pending(), and
                    # while the memory closes, in the log now and then.
                    newest = self.backend.messages(thread, last=1)
                    end = rows[-1].message.index + 1
                    total = newest[-1].message.index + 1 if newest else end
                    self.engine.jobs.progress(end, total)
                    now = time.monotonic()
                    if self.engine.jobs.stopping.is_set() and now - noted >= NOTE_SECONDS:
                        noted = now
                        log.info(
                            "records: closing waits for extraction of %s/%s: %d of %d"
                            " messages read (%.0f a second)",
                            thread.user,
                            thread.agent,
                            end,
                            total,
                            read / max(now - started, 1e-9),
                        )

    def rebuild(self, thread: Thread, start: int, end: int | None) -> int:
        """Extract the records of messages ``[start, end)`` again: they leave every
        record's sources (a record left with none goes), then extraction reads on from
        ``start`` (later messages only merge into what they gave before). The number
        of messages read."""
        with self._lock:
            running = self._running.setdefault(thread.id, threading.RLock())
        with running:
            with self.engine.write_lock, self.backend.transaction():
                ids = [r.message.id for r in self.backend.messages(thread, start=start, end=end)]
                if ids:
                    self.backend.forget_record_sources(thread, ids)
                cursor = self.backend.records_cursor(thread)
                self.backend.set_records_cursor(thread, min(start, cursor))
            return self.catch_up(thread)

    # -- one batch -------------------------------------------------------------------

    def _batch(self, thread: Thread, cursor: int, rows: Sequence[Row]) -> bool:
        """Extract from ``rows`` and write the records with the new cursor; False when
        the thread is no longer stored."""
        service = self.service(thread)
        before = (
            [r.message for r in self.backend.messages(thread, end=cursor, last=CONTEXT_TURNS)]
            if cursor > 0
            else []
        )
        turns = [_turn(r) for r in rows]
        recent = [
            Turn(m.id, m.content, m.timestamp, m.speaker, m.role)
            for m in before
            if m.role in ("user", "assistant")
        ]
        context = Context(
            speakers=tuple(self.backend.speakers(thread)[:8]),
            scope=service.scope,
            recent=tuple(recent),
        )
        end = rows[-1].message.index + 1
        exchanges = self._extract(turns, recent, context, self.writing)
        # The store's transaction alone, not the engine's write lock: a caller holding a
        # transaction of its own while it adds (the write lock then inside it) would
        # otherwise wait for this job while it waits for the caller. Writers are
        # serialised by the transaction, so what is checked here holds while writing.
        with self.backend.transaction():
            now = self.backend.thread(thread.user, thread.agent, tenant=thread.tenant)
            if now is None or now.id != thread.id:  # forgotten (and perhaps begun again)
                return False
            # Read first: on a store that locks threads (PostgreSQL), the first read
            # naming the thread takes its lock, which orders this write after any
            # forgetting of its messages.
            self.backend.records_cursor(thread)
            # Messages forgotten since they were read are not cited; only those a
            # candidate cites are looked up (a few in a hundred), not the whole batch,
            # while the thread is held.
            position = {r.message.id: r.rowid for r in rows}
            cited_rows = {
                position[source]
                for _, _, candidates in exchanges
                for c in candidates
                for source in c.record.sources
                if source in position
            }
            kept = (
                {r.message.id for r in self.backend.rows(sorted(cited_rows)).values()}
                if cited_rows
                else set()
            )
            for exchange, exchange_context, candidates in exchanges:
                cited = _cited(candidates, kept)
                if cited:
                    service.add_exchange(exchange, exchange_context, candidates=cited)
            self.backend.set_records_cursor(thread, max(end, cursor))
        return True

    def writing(self) -> bool:
        """Whether messages are being written: one was added less than
        :data:`QUIET_SECONDS` ago."""
        return time.monotonic() - self._last_write < QUIET_SECONDS

    def _extract(
        self,
        turns: Sequence[Turn],
        recent: Sequence[Turn],
        context: Context,
        writing: Callable[[], bool] | None = None,
    ) -> list[Exchange]:
        """Candidates for the batch: one exchange per turn with the patterns (as
        ``bench updates`` reads them), or the whole batch in one LLM call."""
        llm = self.engine.llm
        if llm is not None:
            from arbormem.records.llm_extract import llm_extract

            try:
                found = llm_extract(turns, context, llm).candidates
            except Exception as exc:  # the fallback itself failed: keep the messages moving
                log.warning("records: extraction failed for a batch, skipped: %s", exc)
                found = []
            return [(list(turns), context, found)]
        exchanges: list[Exchange] = []
        before = list(recent)
        for start in range(0, len(turns), max(1, PATTERN_BATCH)):
            piece = turns[start : start + max(1, PATTERN_BATCH)]
            exchanges += run_batch(piece, before[-CONTEXT_TURNS:], context, writing=writing)
            # The next piece's first turns are read with this piece's last ones, as
            # one batch would have read them.
            before += [t for t in piece if t.role in ("user", "assistant")]
            before = before[-CONTEXT_TURNS:]
        return exchanges


def _turn(row: Row) -> Turn:
    m = row.message
    return Turn(m.id, m.content, m.timestamp, m.speaker, m.role)


def _cited(candidates: Sequence[Candidate], kept: set[str]) -> list[Candidate]:
    """The candidates with their sources still stored (an explicit record, citing
    none, stays); one whose every source went is dropped."""
    out = []
    for c in candidates:
        sources = tuple(s for s in c.record.sources if s in kept)
        if c.record.sources and not sources:
            continue
        out.append(
            c
            if sources == c.record.sources
            else replace(c, record=replace(c.record, sources=sources))
        )
    return out
