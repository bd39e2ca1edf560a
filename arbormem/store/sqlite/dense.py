"""Dense search for the SQLite back-end: per-thread vector indexes in memory, kept
in step with the file.

:class:`ExactIndex` is a float32 matrix of unit vectors searched by one matrix
product: exact, and fast up to a few hundred thousand rows. Every index speaks
the small :class:`VectorIndex` interface so an approximate one can take over
for large threads without the callers noticing.

:class:`VectorCache` owns one index per thread, loads it lazily on first
search, appends rows as they are written, reloads when another process
deleted rows, and embeds rows that have no vector for the current model yet
(after the embedder changed, or after an embedding call failed).
"""

from __future__ import annotations

import abc
import functools
import hashlib
import importlib.util
import json
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.store.sidecar import Sidecar
from arbormem.store.types import Thread, ThreadState

if TYPE_CHECKING:
    from arbormem.store.sqlite import SQLiteBackend

if TYPE_CHECKING:
    from usearch.index import Index

log = logging.getLogger(__name__)


class VectorIndex(abc.ABC):
    """Vectors keyed by int64 row ids (ascending as they are added)."""

    dim: int

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Append rows; ids are larger than any already present."""

    @abc.abstractmethod
    def remove(self, ids: np.ndarray) -> None:
        """Drop rows (unknown ids are ignored)."""

    @abc.abstractmethod
    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k ``(ids, cosine scores)``, best first, optionally within ``allowed`` ids."""

    @abc.abstractmethod
    def scores(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Cosine of the query with each given id (NaN for unknown ids)."""

    @abc.abstractmethod
    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(found mask, vectors)`` for the given ids (zero rows where not found)."""


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """Run a method of an :class:`ExactIndex` under the index's lock."""

    @functools.wraps(method)
    def wrapper(self: ExactIndex, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(F, wrapper)


class ExactIndex(VectorIndex):
    """Brute-force cosine over a growable float32 matrix."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        # A search reads the ids and the matrix together while a write may grow, fill
        # or reorder them: one at a time (a search took a mask one row longer than its
        # scores while an add ran).
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return self._n

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self._n]

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: self._n]

    @_locked
    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        need = self._n + len(ids)
        if need > len(self._ids):
            capacity = max(need, int(len(self._ids) * 1.5) + 1024)
            grown_ids = np.zeros(capacity, dtype=np.int64)
            grown_ids[: self._n] = self._ids[: self._n]
            grown = np.zeros((capacity, self.dim), dtype=np.float32)
            grown[: self._n] = self._matrix[: self._n]
            self._ids, self._matrix = grown_ids, grown
        self._ids[self._n : need] = ids
        self._matrix[self._n : need] = vectors
        self._n = need
        if self._n > len(ids) and self._ids[self._n - len(ids) - 1] > ids[0]:
            order = np.argsort(self._ids[: self._n], kind="stable")
            self._ids[: self._n] = self._ids[: self._n][order]
            self._matrix[: self._n] = self._matrix[: self._n][order]

    @_locked
    def remove(self, ids: np.ndarray) -> None:
        keep = ~np.isin(self.ids, np.asarray(ids, dtype=np.int64))
        n = int(keep.sum())
        self._ids[:n] = self.ids[keep]
        self._matrix[:n] = self.matrix[keep]
        self._n = n

    @_locked
    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if self._n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self.matrix @ np.asarray(query, dtype=np.float32)
        ids = self.ids
        if allowed is not None:
            mask = np.isin(ids, allowed)
            ids, scores = ids[mask], scores[mask]
            if ids.size == 0:
                return ids, scores
        k = min(k, ids.size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return ids[top], scores[top]

    @_locked
    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, dtype=np.int64)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        if self._n == 0 or ids.size == 0:
            return np.zeros(len(ids), dtype=bool), out
        pos = np.clip(np.searchsorted(self.ids, ids), 0, self._n - 1)
        found = self.ids[pos] == ids
        out[found] = self.matrix[pos[found]]
        return found, out

    @_locked
    def scores(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        out = np.full(ids.shape, np.nan, dtype=np.float32)
        if self._n == 0 or ids.size == 0:
            return out
        pos = np.searchsorted(self.ids, ids)
        pos = np.clip(pos, 0, self._n - 1)
        found = self.ids[pos] == ids
        if found.any():
            out[found] = self.matrix[pos[found]] @ np.asarray(query, dtype=np.float32)
        return out


def _usearch_index() -> type[Index]:
    """usearch's ``Index`` class, loaded after onnxruntime when that is installed:
    the other way round, importing onnxruntime (for the reranker or the bge-small
    embedder) crashed the process (usearch 2.26, onnxruntime 1.32)."""
    if "onnxruntime" not in sys.modules and importlib.util.find_spec("onnxruntime"):
        try:
            import onnxruntime  # noqa: F401
        except Exception as exc:  # a broken install: only its own users fail
            log.debug("onnxruntime not loaded first: %r", exc)
    from usearch.index import Index

    return Index


class AnnIndex(VectorIndex):
    """Approximate nearest neighbours (usearch HNSW, int8 storage, cosine).

    Takes over from :class:`ExactIndex` when a thread outgrows
    ``ANN_THRESHOLD`` vectors; searches in about a millisecond whatever the
    size, and is saved beside the database so reopening does not rebuild it.
    """

    def __init__(self, dim: int) -> None:
        Index = _usearch_index()
        self.dim = dim
        self._index = Index(
            ndim=dim,
            metric="cos",
            dtype="i8",
            connectivity=16,
            expansion_add=64,
            expansion_search=160,
        )

    #: True while the index is a read-only memory map of a saved file.
    _viewed = False

    def __len__(self) -> int:
        return len(self._index)

    def _writable(self) -> None:
        """Copy a memory-mapped index into memory before changing it."""
        if self._viewed:
            copy = self._index.copy()
            copy.expansion_search = self._index.expansion_search  # type: ignore[misc]
            self._index, self._viewed = copy, False

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.uint64)
        if ids.size:
            self._writable()
            self._index.add(
                ids, np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim), threads=0
            )

    def remove(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.uint64)
        present = ids[self._index.contains(ids)] if ids.size else ids
        if present.size:
            self._writable()
            self._index.remove(present)

    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, dtype=np.uint64)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        if not ids.size:
            return np.zeros(0, dtype=bool), out
        found = np.asarray(self._index.contains(ids), dtype=bool)
        if found.any():
            got = np.asarray(self._index.get(ids[found], dtype="f32"), dtype=np.float32)
            # Stored as int8, each component is rounded: back to unit length, so dot
            # products with the query stay cosines.
            out[found] = l2_normalize(got.reshape(-1, self.dim))
        return found, out

    def scores(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        found, vecs = self.get(ids)
        out = np.full(len(found), np.nan, dtype=np.float32)
        out[found] = vecs[found] @ np.asarray(query, dtype=np.float32)
        return out

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if len(self) == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        if allowed is not None and len(allowed) <= 20_000:
            # A narrow filter: exact cosine over the allowed rows is cheaper and complete.
            found, vecs = self.get(allowed)
            ids = np.asarray(allowed, dtype=np.int64)[found]
            scores = vecs[found] @ q
            top = np.argsort(-scores, kind="stable")[:k]
            return ids[top], scores[top]
        want = k if allowed is None else k * 8
        matches = self._index.search(q, min(want, len(self)))
        ids = np.asarray(matches.keys, dtype=np.int64)
        scores = 1.0 - np.asarray(matches.distances, dtype=np.float32)
        if allowed is not None:
            keep = np.isin(ids, allowed)
            ids, scores = ids[keep], scores[keep]
        return ids[:k], scores[:k]

    def save(self, path: Path) -> None:
        self._index.save(str(path))

    @classmethod
    def load(cls, path: Path, dim: int) -> AnnIndex:
        """Open a saved index. It is memory-mapped, so searching can start at once
        (reading a million-vector index into memory took seconds); the first
        change copies it into memory."""
        restored = _usearch_index().restore(str(path), view=True)
        if restored is None or restored.ndim != dim:
            raise ValueError(f"{path} is not an index of {dim}-d vectors")
        # The type stub misses the setter.
        restored.expansion_search = 160  # type: ignore[misc]
        index = cls.__new__(cls)
        index.dim = dim
        index._index = restored
        index._viewed = True
        return index

    @classmethod
    def from_exact(cls, exact: ExactIndex) -> AnnIndex:
        index = cls(exact.dim)
        for start in range(0, len(exact), 50_000):
            index.add(exact.ids[start : start + 50_000], exact.matrix[start : start + 50_000])
        return index


#: Threads with more vectors than this search an approximate index.
ANN_THRESHOLD = 50_000


def _digest(path: Path) -> str:
    """The SHA-256 of a file (about 0.5 s for a million-vector index here)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class _SessionSums:
    """A thread's stored session sums as of a state of the thread (see preload_sums)."""

    generation: int
    #: The thread's next position when read: sessions written from it on are read again.
    upto: int
    rows: dict[str, int]
    matrix: np.ndarray


class _Entry:
    __slots__ = ("dirty", "generation", "index", "upto")

    def __init__(self, index: VectorIndex, generation: int, upto: int) -> None:
        self.index = index
        self.generation = generation
        self.upto = upto
        #: Vectors added since the index was last saved.
        self.dirty = 0


def _meta_file(folder: Path, thread: Thread) -> Path:
    return folder / f"thread-{thread.id}.json"


def _index_files(folder: Path, thread: Thread) -> list[Path]:
    """Every index file of the thread in the folder (saved, left over, or of the
    layout before the JSON named its file)."""
    if not folder.exists():
        return []
    named = list(folder.glob(f"thread-{thread.id}-*.usearch"))
    legacy = folder / f"thread-{thread.id}.usearch"
    return [*named, legacy] if legacy.exists() else named


class VectorCache:
    """One vector index per thread, lazily loaded and kept in step with writes.

    With a ``folder``, approximate indexes are saved there (one file per
    thread, with a small JSON file saying which model, generation and rows it
    holds) and restored on the next open; a stale or damaged file is rebuilt.

    With ``follow=False`` the cache never reads or embeds on its own: an index
    holds what :meth:`extend` gave it (a background embedder, see
    :mod:`arbormem.deep`), and searches use it as it stands.
    """

    def __init__(
        self,
        backend: SQLiteBackend,
        embedder: Embedder,
        folder: Path | None = None,
        ann_threshold: int = ANN_THRESHOLD,
        follow: bool = True,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.folder = folder
        #: The folder's lock and sweep, shared with other processes (see arbormem.store.sidecar).
        self.files = Sidecar(folder)
        self.ann_threshold = ann_threshold
        self.follow = follow
        self._entries: dict[int, _Entry] = {}
        self._centroids: dict[tuple[int, str], tuple[tuple[int, int, int], np.ndarray]] = {}
        #: Each thread's session members read by searches, valid for one change mark
        #: of the store (which moves with every message added, forgotten or archived).
        self._members: dict[int, tuple[object, dict[str, list[int]]]] = {}
        #: Every stored session sum of a thread, read in one pass (see preload_sums).
        self._sums: dict[int, _SessionSums] = {}
        self._sums_lock = threading.Lock()
        self._lock = threading.RLock()

    # -- persistence -----------------------------------------------------------------

    def _meta_file(self, thread: Thread) -> Path | None:
        return None if self.folder is None else _meta_file(self.folder, thread)

    def _index_files(self, thread: Thread) -> list[Path]:
        return [] if self.folder is None else _index_files(self.folder, thread)

    def _restore(self, thread: Thread, state: ThreadState) -> _Entry | None:
        meta_file = self._meta_file(thread)
        if meta_file is None or not meta_file.exists():
            return None
        # Between reading the description and opening the file it names, no other
        # process may sweep that file away.
        with self.files.shared():
            return self._restore_locked(thread, state, meta_file)

    def _restore_locked(self, thread: Thread, state: ThreadState, meta_file: Path) -> _Entry | None:
        try:
            meta = json.loads(meta_file.read_text())
            if not isinstance(meta, dict):
                raise ValueError("the description is not a JSON object")
            # The JSON names its index file (the layout before did not: one fixed name).
            path = meta_file.with_name(str(meta.get("file") or f"thread-{thread.id}.usearch"))
            if path.parent != meta_file.parent:
                raise ValueError(f"the description names a file elsewhere: {path}")
            if (
                meta.get("model") != self.embedder.model_id
                or meta.get("generation") != state.generation
                or int(meta.get("upto", 0)) > state.max_rowid
                or meta.get("anchor") != self._anchor(int(meta.get("upto", 0)))
            ):
                return None
            if "bytes" in meta and path.stat().st_size != int(meta["bytes"]):
                raise ValueError(f"{path.name} is not the size its description gives")
            # Damaged bytes inside the graph crash the process in usearch (SIGSEGV on
            # the first search, and on every reopen): the file must be the one saved.
            # Descriptions written before the checksum have none and are trusted.
            if "sha256" in meta and _digest(path) != meta["sha256"]:
                raise ValueError(f"{path.name} is damaged: its checksum is not the one saved")
            index = AnnIndex.load(path, self.embedder.dimensions)
            if "count" in meta and len(index) != int(meta["count"]):
                raise ValueError(f"{path.name} holds {len(index)} vectors, not {meta['count']}")
        except (OSError, ValueError, TypeError, RuntimeError) as exc:
            log.warning("vector index of thread %s unusable, rebuilding it: %s", thread.id, exc)
            return None
        return _Entry(index, state.generation, int(meta["upto"]))

    def _anchor(self, rowid: int) -> str | None:
        """The public id of the message at a row number: ties a saved index to this
        store's content, not just to its counts (a store deleted and made again at
        the same path has other ids)."""
        found = self.backend.rows([rowid]) if rowid > 0 else {}
        return found[rowid].message.id if rowid in found else None

    def _save(self, thread: Thread, entry: _Entry) -> None:
        meta_file = self._meta_file(thread)
        if meta_file is None or not isinstance(entry.index, AnnIndex) or self.backend.read_only:
            return
        if self.backend.state(thread).generation != entry.generation:
            # Messages left the thread since this index was built (perhaps through another
            # process): it may hold their vectors, and must not reach the disk.
            entry.dirty = 0
            return
        # Each save writes a file of its own, and replacing the JSON that names it is
        # the one step that publishes it: two processes saving at once used to write
        # into the same file, and an index out of step with its JSON crashed searches.
        # Under the folder's shared lock: no sweep takes the file before it is named.
        with self.files.shared():
            path = meta_file.with_name(f"thread-{thread.id}-{uuid.uuid4().hex[:12]}.usearch")
            entry.index.save(path)
            meta = {
                "model": self.embedder.model_id,
                "generation": entry.generation,
                "upto": entry.upto,
                "anchor": self._anchor(entry.upto),
                "count": len(entry.index),
                "file": path.name,
                "bytes": path.stat().st_size,
                "sha256": _digest(path),
            }
            tmp = meta_file.with_name(f"{meta_file.name}.{uuid.uuid4().hex[:12]}.tmp")
            tmp.write_text(json.dumps(meta))
            tmp.replace(meta_file)
        entry.dirty = 0
        # The files earlier saves wrote (maps of them stay valid once deleted).
        self.files.sweep(None, thread.id)

    def discard_files(self, thread: Thread) -> None:
        """Delete a thread's saved index: it may hold vectors of forgotten messages."""
        if self.folder is not None:
            self.discard_thread_files(self.folder, thread)

    @staticmethod
    def discard_thread_files(folder: Path, thread: Thread) -> None:
        """Delete the index a process saved for a thread in ``folder``, if any."""
        _meta_file(folder, thread).unlink(missing_ok=True)
        for path in _index_files(folder, thread):
            path.unlink(missing_ok=True)

    def save(self) -> None:
        """Save approximate indexes that changed (on close)."""
        with self._lock:
            for thread_id, entry in self._entries.items():
                if entry.dirty and isinstance(entry.index, AnnIndex):
                    self._save(Thread(thread_id, "", ""), entry)

    # -- keeping in step -------------------------------------------------------------------

    def _entry(self, thread: Thread, state: ThreadState | None = None) -> _Entry:
        state = state or self.backend.state(thread)
        with self._lock:
            entry = self._entries.get(thread.id)
            if entry is None or entry.generation != state.generation:
                entry = self._restore(thread, state) or _Entry(
                    ExactIndex(self.embedder.dimensions), state.generation, 0
                )
                self._entries[thread.id] = entry
            if entry.upto < state.max_rowid and self.follow:
                self._catch_up(thread, entry, state.max_rowid)
            return entry

    def covered(self, thread: Thread, state: ThreadState | None = None) -> int:
        """The row number up to which the thread's index holds every live row (with
        ``follow=False``: what :meth:`extend` brought it to)."""
        return self._entry(thread, state).upto

    def extend(
        self, thread: Thread, after: int, rowids: Sequence[int], vectors: np.ndarray, upto: int
    ) -> bool:
        """Add the rows of the thread after row ``after`` up to row ``upto`` (those of
        them that are live: ``rowids``, ascending, with their ``vectors``), when the
        index holds every row up to ``after`` and the thread has not lost rows since.
        Returns whether it did; otherwise nothing changes."""
        with self._lock:
            state = self.backend.state(thread)
            entry = self._entry(thread, state)
            if entry.upto != after or entry.generation != state.generation:
                return False
            if len(rowids):
                self._add(thread, entry, np.asarray(rowids, dtype=np.int64), vectors)
            entry.upto = upto
            if entry.dirty >= 100_000:
                self._save(thread, entry)
            return True

    def prepare(self, thread: Thread) -> tuple[VectorIndex, bool]:
        """Bring the thread's index up to date (building the approximate index once
        the thread is past the threshold) and save it beside the database, so the
        next search here or in another process starts at once. Returns the index
        and whether it is saved; a save that fails (a full disk, a read-only
        folder) is logged and costs only a rebuild in the next process."""
        with self._lock:
            entry = self._entry(thread)
            if entry.dirty and isinstance(entry.index, AnnIndex):
                try:
                    self._save(thread, entry)
                except Exception as exc:  # a cache: the messages are safe in the store
                    log.warning("could not save the vector index of thread %s: %s", thread.id, exc)
            saved = not (entry.dirty and isinstance(entry.index, AnnIndex))
            return entry.index, saved

    def index(self, thread: Thread, state: ThreadState | None = None) -> VectorIndex:
        """The thread's index, brought up to date with the store first."""
        return self._entry(thread, state).index

    def _add(self, thread: Thread, entry: _Entry, ids: np.ndarray, vectors: np.ndarray) -> None:
        entry.index.add(ids, vectors)
        entry.dirty += len(ids)
        if isinstance(entry.index, ExactIndex) and len(entry.index) > self.ann_threshold:
            log.info(
                "thread %s has %d vectors: switching to an approximate index",
                thread.id,
                len(entry.index),
            )
            entry.index = AnnIndex.from_exact(entry.index)
            entry.dirty = len(entry.index)

    def _catch_up(self, thread: Thread, entry: _Entry, upto: int) -> None:
        model = self.embedder.model_id
        while entry.upto < upto:
            ids, _, matrix, missing = self.backend.thread_vectors(
                thread, model, after_rowid=entry.upto, limit=50_000, dim=self.embedder.dimensions
            )
            if len(ids):
                self._add(thread, entry, ids, matrix)
            if missing:
                # Rows stored without a vector of this model: embed them now, keep them.
                log.info(
                    "embedding %d messages with %s for thread %s", len(missing), model, thread.id
                )
                vectors = self.embedder.embed_many([row.message.text for row in missing])
                if not self.backend.read_only:  # else kept for this process alone
                    self.backend.put_vectors(model, {r.chash: v for r, v in zip(missing, vectors)})
                self._add(
                    thread, entry, np.asarray([r.rowid for r in missing], dtype=np.int64), vectors
                )
            seen = [int(ids[-1])] if len(ids) else []
            seen += [r.rowid for r in missing]
            # Nothing left after upto (archived or vanished rows): the index is current.
            entry.upto = max(seen) if seen else upto
        if entry.dirty >= 100_000:
            self._save(thread, entry)

    def appended(self, thread: Thread, rowids: Sequence[int], vectors: np.ndarray) -> None:
        """Rows this process just wrote: extend the index without a store round trip."""
        with self._lock:
            entry = self._entries.get(thread.id)
            if entry is None or not len(rowids) or min(rowids) <= entry.upto:
                return
            state = self.backend.state(thread)
            if state.generation != entry.generation or state.max_rowid != max(rowids):
                return  # someone else wrote too; the next search catches up
            if entry.upto != min(rowids) - 1 and entry.upto < min(rowids) - 1:
                # Rows in between (from before this process looked) are read on next use.
                return
            self._add(thread, entry, np.asarray(rowids, dtype=np.int64), vectors)
            entry.upto = max(rowids)

    def preload_sums(self, thread: Thread, stop: threading.Event | None = None) -> int:
        """Read every session sum the store keeps for the thread in one pass, for the
        session centroids of later searches; returns how many (0 when ``stop`` was
        set, or the store keeps none). A thread of a million turns has about 30,000
        sessions; a search asks for about 70 of them, each a read of its own, which
        with a cold page cache cost a twentieth of the search.

        They stay valid as the thread grows: the sums of the sessions written to
        since are read again when asked for. A deletion or archiving drops them."""
        state = self.backend.state(thread)  # before the sums: a write between is caught
        read = self.backend.every_session_vector_sum(
            thread, self.embedder.model_id, self.embedder.dimensions, stop
        )
        if read is None:
            if stop is not None and stop.is_set():
                return 0
            # The back-end keeps no sums: remember that, so searches do not ask again.
            read = [], np.zeros((0, self.embedder.dimensions), dtype=np.float32)
        keys, matrix = read
        with self._sums_lock:
            self._sums[thread.id] = _SessionSums(
                state.generation, state.next_index, {k: i for i, k in enumerate(keys)}, matrix
            )
        return len(keys)

    def holds_sums(self, thread: Thread) -> bool:
        """Whether the thread's session sums are preloaded (and not found stale yet)."""
        return thread.id in self._sums

    def _preloaded_sums(
        self, thread: Thread, sessions: Sequence[str], state: ThreadState
    ) -> dict[str, np.ndarray]:
        """The preloaded sums of these sessions that are still current at ``state``."""
        with self._sums_lock:
            pre = self._sums.get(thread.id)
            if pre is None:
                return {}
            if state.generation != pre.generation:
                del self._sums[thread.id]
                return {}
            if state.next_index != pre.upto:
                # Appended since (a deletion would have changed the generation).
                for key in self.backend.sessions_written_from(thread, pre.upto):
                    pre.rows.pop(key, None)
                pre.upto = state.next_index
            return {k: pre.matrix[i] for k in sessions if (i := pre.rows.get(k)) is not None}

    def session_centroids(self, thread: Thread, sessions: Sequence[str]) -> dict[str, np.ndarray]:
        """Unit-length mean vector of each session (those that have vectors)."""
        # The thread's state once for the index, the sums and the members.
        state = self.backend.state(thread)
        index = self.index(thread, state)
        out: dict[str, np.ndarray] = {}
        # Sums the store keeps (one row a session; preloaded, or read now), then the
        # others from the index.
        sums = self._preloaded_sums(thread, sessions, state)
        unread = [s for s in sessions if s not in sums]
        if unread:
            sums.update(self.backend.session_vector_sums(thread, unread, self.embedder.model_id))
        for key, total in sums.items():
            if len(total) != self.embedder.dimensions:
                continue  # summed from vectors of another length: computed from the index
            norm = float(np.linalg.norm(total))
            out[key] = total / norm if norm else total
        rest = [s for s in sessions if s not in out]
        if not rest:
            return out
        todo: list[tuple[str, list[int]]] = []
        # The index's size is part of a centroid's stamp: vectors of the background
        # embedder arrive after their messages, without moving the change mark.
        size = len(index)
        for key, rowids in self._session_members(thread, rest, state).items():
            if not rowids:
                continue
            cached = self._centroids.get((thread.id, key))
            if cached is not None and cached[0] == (len(rowids), rowids[-1], size):
                out[key] = cached[1]
            else:
                todo.append((key, rowids))
        if not todo:
            return out
        # One read of the index for every session to compute: per-session reads cost
        # more than the sums at a million turns (70 sessions a search).
        found, vecs = index.get(np.asarray([r for _, rowids in todo for r in rowids], np.int64))
        start = 0
        for key, rowids in todo:
            end = start + len(rowids)
            mine = found[start:end]
            if mine.any():
                total = vecs[start:end][mine].sum(axis=0)
                norm = float(np.linalg.norm(total))
                centroid = total / norm if norm else total
                if len(self._centroids) > 100_000:
                    self._centroids.clear()
                self._centroids[(thread.id, key)] = ((len(rowids), rowids[-1], size), centroid)
                out[key] = centroid
            start = end
        return out

    def _session_members(
        self, thread: Thread, sessions: Sequence[str], st: ThreadState
    ) -> dict[str, list[int]]:
        """:meth:`session_members` of the store, kept while the thread's state holds:
        a search read every member of its candidates' sessions each time (a
        millisecond or two a query on a long conversation) to learn that nothing had
        changed. The thread's own state, not the store's change mark: another user's
        add (on a server, many a second) leaves this thread's sessions as they were.
        ``st``: the thread's state, read before anything else of it."""
        mark = (st.generation, st.max_rowid, st.next_index)
        with self._lock:
            kept = self._members.get(thread.id)
            known = kept[1] if kept is not None and kept[0] == mark else {}
            missing = [s for s in dict.fromkeys(sessions) if s not in known]
        if missing:
            read = self.backend.session_members(thread, missing)
            with self._lock:
                kept = self._members.get(thread.id)
                if kept is None or kept[0] != mark:
                    kept = (mark, {})
                    if len(self._members) > 1_000:
                        self._members.clear()
                    self._members[thread.id] = kept
                if sum(len(v) for v in kept[1].values()) < 1_000_000:
                    kept[1].update(read)
            known = {**known, **read}
        return {s: known[s] for s in dict.fromkeys(sessions)}

    def invalidate(self, thread: Thread | None = None) -> None:
        """Drop cached indexes (one thread's, or all)."""
        with self._sums_lock:
            if thread is None:
                self._sums.clear()
            else:
                self._sums.pop(thread.id, None)
        with self._lock:
            if thread is None:
                self._entries.clear()
                self._centroids.clear()
                self._members.clear()
            else:
                self._entries.pop(thread.id, None)
                self._members.pop(thread.id, None)
                self._centroids = {k: v for k, v in self._centroids.items() if k[0] != thread.id}
