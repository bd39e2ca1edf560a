"""What searches read of a thread, kept between searches while the thread is
unchanged.

On a database server every read is a round trip, and a search of a thread reads
much the next search reads again: a window of row ids, the vectors of turns it
ranks, sessions' sums and members. Each search starts by looking its thread up,
and that statement reads the thread's **stamp** with it (its change counter,
which every write of its messages raises, its generation, and its scope's count
of forgets): see ``PostgresMessages._thread_and_state``. A read kept under a
stamp is reused while the search under way found the same stamp, in any process
that wrote; a search that has no stamp (none read yet, or a commit of this
process since) reads the database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any

#: Entries kept per thread, at most; past it the thread's entries start again.
MAX_ENTRIES = 50_000
#: Entries kept in all, at most (a turn's vector is one: about 1.5 KB at 384
#: dimensions); past it every thread's start again.
MAX_TOTAL = 100_000
#: Threads whose reads are kept, at most; past it every thread's start again.
MAX_THREADS = 256

#: The entry of reads that name no thread, kept under the store's change mark.
STORE = -1

#: A read that found nothing, kept as such (None is a value some reads give).
ABSENT = object()


class KeptReads:
    """Reads per thread, valid for one stamp of the thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: thread id -> (stamp, key -> value)
        self._threads: dict[Hashable, tuple[Hashable, dict[Hashable, Any]]] = {}

    def _entries(self, thread_id: Hashable, stamp: Hashable) -> dict[Hashable, Any]:
        """The thread's entries under ``stamp`` (emptied when it had another)."""
        with self._lock:
            found = self._threads.get(thread_id)
            if found is None or found[0] != stamp:
                if found is None and len(self._threads) >= MAX_THREADS:
                    self._threads.clear()
                found = (stamp, {})
                self._threads[thread_id] = found
            return found[1]

    def get(
        self, thread_id: Hashable, stamp: Hashable | None, key: Hashable, read: Callable[[], Any]
    ) -> Any:
        """``read()``, kept under the thread's ``stamp`` (None: not kept)."""
        if stamp is None:
            return read()
        entries = self._entries(thread_id, stamp)
        value = entries.get(key, ABSENT)
        if value is ABSENT:
            value = read()
            self._put(thread_id, stamp, entries, {key: value})
        return value

    def get_many(
        self,
        thread_id: Hashable,
        stamp: Hashable | None,
        kind: Hashable,
        keys: Iterable[Hashable],
        read: Callable[[list[Any]], dict[Any, Any]],
        *,
        keep_missing: bool = True,
    ) -> dict[Any, Any]:
        """For each of ``keys``, the value ``read(missing keys)`` gives (a key it
        leaves out has none), kept under the thread's ``stamp`` entry by entry
        (``keep_missing``: also that a key has none)."""
        wanted = list(dict.fromkeys(keys))
        if stamp is None:
            return read(wanted)
        entries = self._entries(thread_id, stamp)
        out: dict[Any, Any] = {}
        missing: list[Any] = []
        for k in wanted:
            value = entries.get((kind, k), ABSENT)
            if value is ABSENT:
                missing.append(k)
            elif value is not None or not keep_missing:
                out[k] = value
        if missing:
            got = read(missing)
            out.update(got)
            fresh: dict[Hashable, Any] = {
                (kind, k): got.get(k) for k in missing if keep_missing or k in got
            }
            self._put(thread_id, stamp, entries, fresh)
        return out

    def found(
        self, thread_id: Hashable, stamp: Hashable, kind: Hashable, keys: Iterable[Hashable]
    ) -> dict[Any, Any]:
        """The values kept under the thread's ``stamp`` for those of ``keys`` that have one."""
        entries = self._entries(thread_id, stamp)
        out: dict[Any, Any] = {}
        for k in keys:
            value = entries.get((kind, k), ABSENT)
            if value is not ABSENT:
                out[k] = value
        return out

    def keep(
        self, thread_id: Hashable, stamp: Hashable, kind: Hashable, values: dict[Any, Any]
    ) -> None:
        """Keep ``values`` (key -> value) read under the thread's ``stamp``."""
        entries = self._entries(thread_id, stamp)
        fresh: dict[Hashable, Any] = {(kind, k): v for k, v in values.items()}
        self._put(thread_id, stamp, entries, fresh)

    def _put(
        self,
        thread_id: Hashable,
        stamp: Hashable,
        entries: dict[Hashable, Any],
        values: dict[Hashable, Any],
    ) -> None:
        with self._lock:
            found = self._threads.get(thread_id)
            # Another search moved the thread to a newer stamp meanwhile: not kept.
            if found is None or found[1] is not entries:
                return
            if len(entries) + len(values) > MAX_ENTRIES:
                entries.clear()
            if sum(len(e) for _, e in self._threads.values()) + len(values) > MAX_TOTAL:
                for _, e in self._threads.values():
                    e.clear()
            entries.update(values)

    def forget(self, thread_ids: Iterable[Hashable] | None = None) -> None:
        """Drop these threads' entries (None: every thread's)."""
        with self._lock:
            if thread_ids is None:
                self._threads.clear()
            else:
                for t in thread_ids:
                    self._threads.pop(t, None)
