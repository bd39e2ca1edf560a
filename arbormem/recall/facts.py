"""What a search learns from a thread's messages before it reads the question.

A question is read against facts of the threads it searches: who speaks in them
(a name in the question is a speaker), when they start and end (what "last
month" means), and the names people call each other by (see
:mod:`arbormem.aliases`). :class:`ThreadFacts` keeps them per thread, read once
and then only for the messages added since.

Reading a thread first seen scans its latest messages, tens of milliseconds
for a few hundred. :meth:`ThreadFacts.prepare` does that ahead of the first
search, on the background embedder's thread once it has caught up with new
messages (see :meth:`arbormem.deep.DeepVectors.after_indexing`), so a search
after a burst of writes finds the facts current.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from arbormem.aliases import Aliases
from arbormem.store.base import Backend
from arbormem.store.types import Thread, ThreadState

#: A thread first read is read for the names its speakers call each other by over
#: its latest this many messages, then as it grows.
ALIAS_READ = 20_000


@dataclass
class Facts:
    """One thread's facts, as of its state ``upto`` (its largest row id) and
    ``generation`` (moved when messages leave it)."""

    upto: int = -1
    names: list[str] = field(default_factory=list)
    #: What the speakers call each other, read up to position ``read_to``.
    aliases: Aliases = field(default_factory=Aliases)
    read_to: int = 0
    latest: datetime | None = None
    earliest: datetime | None = None
    generation: int = -1
    #: ``aliases.names()`` as of ``upto``: every search reads them, and working them
    #: out of the counts took a tenth of a millisecond each time.
    alias_names: dict[str, str] = field(default_factory=dict)


class ThreadFacts:
    """The facts of every thread searched so far, each brought up to date on use."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._facts: dict[int, Facts] = {}
        # One reader of a thread at a time: a background read and a search must not
        # both count the same new messages into its aliases.
        self._locks: dict[int, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def of(self, thread: Thread, state: ThreadState) -> Facts:
        """The thread's facts as of ``state``, reading only what was added since the
        last look (all of them again after messages left the thread)."""
        with self._locks_lock:
            lock = self._locks.setdefault(thread.id, threading.Lock())
        with lock:
            facts = self._facts.get(thread.id)
            if facts is None or facts.generation != state.generation:
                facts = Facts(generation=state.generation)
                self._facts[thread.id] = facts
            if facts.upto != state.max_rowid:
                try:
                    self._catch_up(thread, state, facts)
                except BaseException:
                    # Half-read counts would be counted again: start afresh next time.
                    del self._facts[thread.id]
                    raise
            return facts

    def known(self, thread: Thread) -> Facts | None:
        """The facts last read of the thread, without reading the store."""
        return self._facts.get(thread.id)

    def prepare(self, thread: Thread) -> None:
        """Bring the thread's facts up to date now, ahead of its next search."""
        self.of(thread, self.backend.state(thread))

    def forget(self, thread: Thread) -> None:
        """Drop what was learnt about the thread (messages left it)."""
        self._facts.pop(thread.id, None)

    def _catch_up(self, thread: Thread, state: ThreadState, facts: Facts) -> None:
        # Only what was added since: a million-message thread is not rescanned.
        new = self.backend.speakers(thread, after_rowid=max(facts.upto, 0))
        facts.names = sorted(set(facts.names) | set(new))
        # By time, not position: older history may be stored after newer.
        span = self.backend.time_span(thread)
        facts.earliest, facts.latest = span if span else (None, None)
        self._read_aliases(thread, state, facts)
        facts.alias_names = facts.aliases.names()
        facts.upto = state.max_rowid

    def _read_aliases(self, thread: Thread, state: ThreadState, facts: Facts) -> None:
        """Count the vocatives of the messages added since the last look (of a long
        thread first seen, only its latest :data:`ALIAS_READ` messages)."""
        start = max(facts.read_to, state.next_index - ALIAS_READ)
        while start < state.next_index:
            rowids = self.backend.rowids_between(thread, start, state.next_index, 5_000)
            if not rowids:
                break
            rows = self.backend.rows(rowids)
            ordered = [rows[r].message for r in rowids if r in rows]
            facts.aliases.read((m.speaker, m.content) for m in ordered)
            start = max(m.index for m in ordered) + 1 if ordered else state.next_index
        facts.read_to = state.next_index
