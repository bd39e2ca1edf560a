"""The embedder interface and the content-hash cache every embedder gets."""

from __future__ import annotations

import abc
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from arbormem.ids import content_hash


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class Embedder(abc.ABC):
    """Turns texts into L2-normalised float32 vectors.

    Subclasses implement :meth:`embed_batch` and set ``model_id`` (which names
    the model *and* anything that changes its vectors, such as the dimension)
    and ``dimensions``. Batching and single-text helpers come for free.
    """

    model_id: str
    dimensions: int
    #: Texts per call to :meth:`embed_batch`.
    batch_size: int = 256
    #: Characters of a text that reach :meth:`embed_batch` (None: all of them). For a
    #: model that reads a fixed number of tokens: it never sees the rest, and
    #: tokenising all of a 12 MB message only to drop it took memory in proportion.
    max_chars: int | None = None

    @abc.abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, in order, L2-normalised float32."""

    def embed(self, text: str) -> np.ndarray:
        """The vector of one text."""
        return np.asarray(self.embed_many([text])[0])

    def embed_many(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Vectors for any number of texts, in batches of ``batch_size``."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        most = self.max_chars
        parts = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            if most is not None:
                chunk = [t[:most] for t in chunk]
            parts.append(l2_normalize(self.embed_batch(chunk)))
            if progress is not None:
                progress(len(chunk))
        return np.vstack(parts)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} dim={self.dimensions}>"


class CachedEmbedder(Embedder):
    """Wraps an embedder with an in-memory LRU cache keyed by content hash.

    Repeated texts ("ok", "thanks", a query asked twice) are embedded once.
    :meth:`discard` drops entries so forgotten content leaves no trace here.
    """

    def __init__(self, inner: Embedder, max_entries: int = 20_000) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.batch_size = inner.batch_size
        self._max = max_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int:  # type: ignore[override]
        return self.inner.dimensions

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_many(texts)

    def embed_many(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        keys = [content_hash(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for key in keys:
                vec = self._cache.get(key)
                if vec is not None:
                    self._cache.move_to_end(key)
                    found[key] = vec
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key not in found and key not in missing:
                missing[key] = text
        if missing:
            fresh = self.inner.embed_many(list(missing.values()), progress=progress)
            with self._lock:
                for key, vec in zip(missing, fresh):
                    found[key] = vec
                    self._cache[key] = vec
                while len(self._cache) > self._max:
                    self._cache.popitem(last=False)
        if not keys:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.vstack([found[k] for k in keys]).astype(np.float32, copy=False)

    def discard(self, hashes: Iterable[str]) -> None:
        """Forget cached vectors for these content hashes."""
        with self._lock:
            for key in hashes:
                self._cache.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return f"<CachedEmbedder {self.inner!r}>"
