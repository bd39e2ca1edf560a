"""A per-thread index of the live images' captions, in memory, for ``search_images``.

Image search asks a narrower question than turn search: which of a few thousand
captions best match the query. The turn ranker's machinery (windows, dates, topics,
a dozen features) costs tens of milliseconds on a large thread; this answers in a
few, from the same two signals: BM25 over the caption messages' index terms (the
analysis the lexical index uses) and the cosine of their stored vectors, fused by
reciprocal rank; with a CLIP model configured (:mod:`arbormem.images.clip`), a third
signal, the cosine of the query with the picture itself, joins them. The index
follows the store: rows appended since it was built are added to it, and a forget
or an expiry (which changes the thread's generation) rebuilds it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from arbormem.embed import Embedder
from arbormem.images.clip import ClipEmbedder
from arbormem.store import Backend, Thread
from arbormem.store.images import ImageRow
from arbormem.text import analyze_message, query_terms

#: BM25 parameters (those of the lexical index) and the reciprocal-rank constant.
K1, B = 1.2, 0.75
RRF_K = 60
#: Candidates each signal contributes before fusion.
POOL = 100

log = logging.getLogger("arbormem.images")


@dataclass
class _Entry:
    generation: int = -1
    #: The highest caption-message row number indexed.
    upto: int = 0
    image_ids: list[str] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    postings: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)
    vectors: list[np.ndarray] = field(default_factory=list)
    matrix: np.ndarray | None = None
    length_array: np.ndarray | None = None
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: CLIP vectors of the pictures (None: no bytes, or the model failed on them).
    clip_vectors: list[np.ndarray | None] = field(default_factory=list)
    clip_matrix: np.ndarray | None = None
    clip_rows: np.ndarray | None = None


class CaptionIndex:
    """BM25 and cosine over the captions of each thread's live images."""

    def __init__(
        self, backend: Backend, embedder: Embedder, clip: ClipEmbedder | None = None
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.clip = clip
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()

    def _entry(self, thread: Thread) -> _Entry:
        state = self.backend.state(thread)
        with self._lock:
            entry = self._entries.get(thread.id)
            if entry is None or entry.generation != state.generation:
                entry = _Entry(generation=state.generation)
                self._entries[thread.id] = entry
            if state.max_rowid > entry.upto:
                self._extend(thread, entry, state.max_rowid)
        return entry

    def _extend(self, thread: Thread, entry: _Entry, upto: int) -> None:
        rows = [
            r
            for r in self.backend.images([thread], expired=False)
            if r.caption_rowid is not None and r.caption_rowid > entry.upto
        ]
        rows.sort(key=lambda r: r.caption_rowid or 0)
        entry.upto = upto
        if not rows:
            return
        rowids = np.asarray([r.caption_rowid for r in rows], dtype=np.int64)
        messages = self.backend.rows(rowids.tolist())
        kept = [(r, messages[int(i)]) for r, i in zip(rows, rowids) if int(i) in messages]
        if not kept:
            return
        mask, matrix = self.backend.vectors_at(
            thread, self.embedder, np.asarray([m.rowid for _, m in kept], dtype=np.int64)
        )
        if not mask.all():
            missing = np.flatnonzero(~mask)
            fresh = self.embedder.embed_batch([kept[i][1].message.text for i in missing])
            matrix = matrix.copy()
            matrix[missing] = fresh
        pictures = self._pictures([image for image, _ in kept])
        for (image, row), vec, picture in zip(kept, matrix, pictures):
            entry.clip_vectors.append(picture)
            n = len(entry.image_ids)
            entry.image_ids.append(image.id)
            entry.message_ids.append(row.message.id)
            terms = analyze_message(row.message.content, row.message.speaker)
            entry.lengths.append(len(terms))
            counts: dict[str, int] = {}
            for t in terms:
                counts[t] = counts.get(t, 0) + 1
            for t, c in counts.items():
                docs, tfs = entry.postings.setdefault(t, ([], []))
                docs.append(n)
                tfs.append(c)
            entry.vectors.append(np.asarray(vec, dtype=np.float32))
        entry.matrix = None
        entry.length_array = None
        entry.arrays.clear()
        entry.clip_matrix = entry.clip_rows = None

    def _pictures(self, images: Sequence[ImageRow]) -> list[np.ndarray | None]:
        """The CLIP vectors of these images: stored ones, else computed from their
        bytes now (and stored); None for an image without bytes, or all None without
        a CLIP model. A model that fails leaves those images to the captions."""
        clip = self.clip
        if clip is None:
            return [None] * len(images)
        digests = sorted({i.digest for i in images if i.size})
        found = self.backend.vectors(clip.model_id, digests) if digests else {}
        missing = [d for d in digests if d not in found]
        if missing:
            datas = {d: self.backend.blob(d) for d in missing}
            todo = [d for d in missing if datas[d] is not None]
            try:
                fresh = clip.embed_images([datas[d] or b"" for d in todo])
            except Exception as exc:  # a bad model or picture: captions still answer
                log.warning("CLIP could not embed %d images: %s", len(todo), exc)
                fresh = None
            if fresh is not None and len(fresh) == len(todo):
                made = dict(zip(todo, fresh))
                found.update(made)
                if made and not self.backend.read_only:
                    self.backend.put_vectors(clip.model_id, made)
        return [found.get(i.digest) if i.size else None for i in images]

    def _query_picture(self, query: str) -> np.ndarray | None:
        """The query in the pictures' space, or None (no CLIP model, or it failed:
        the captions answer alone)."""
        if self.clip is None:
            return None
        try:
            return self.clip.embed_text(query)
        except Exception as exc:  # the model's own errors
            log.warning("CLIP could not embed the query: %s", exc)
            return None

    def search(self, threads: Sequence[Thread], query: str, k: int) -> list[tuple[str, str, float]]:
        """``(image id, caption message id, score)`` of the best ``k`` images."""
        terms = query_terms(query)
        qvec = np.asarray(self.embedder.embed(query), dtype=np.float32)
        qclip = self._query_picture(query)
        scored: list[tuple[float, int, str, str]] = []
        for thread in threads:
            entry = self._entry(thread)
            with self._lock:
                if not entry.image_ids:
                    continue
                fused = self._fuse(entry, terms, qvec, qclip)
                scored.extend((s, i, entry.image_ids[i], entry.message_ids[i]) for i, s in fused)
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [(image_id, mid, score) for score, _, image_id, mid in scored[:k]]

    def _fuse(
        self, entry: _Entry, terms: list[str], qvec: np.ndarray, qclip: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        n = len(entry.image_ids)
        if entry.matrix is None or entry.length_array is None:
            entry.matrix = np.vstack(entry.vectors)
            entry.length_array = np.asarray(entry.lengths, dtype=np.float32)
        fused: dict[int, float] = {}
        # einsum, not `@`: a matrix-vector product through OpenBLAS wakes its worker
        # threads, which on a busy machine waited 20 ms (p50) for a product einsum
        # computes in 0.5 ms on the calling thread (10,000 x 256).
        cosines = np.einsum("ij,j->i", entry.matrix, qvec)
        for rank, i in enumerate(_top(cosines, POOL)):
            fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        lengths = entry.length_array
        avg = float(lengths.mean()) or 1.0
        bm25 = np.zeros(n, dtype=np.float32)
        hit = False
        for t in terms:
            posting = entry.postings.get(t)
            if posting is None:
                continue
            arrays = entry.arrays.get(t)
            if arrays is None:
                arrays = (np.asarray(posting[0]), np.asarray(posting[1], dtype=np.float32))
                entry.arrays[t] = arrays
            docs, tfs = arrays
            idf = np.log(1.0 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
            bm25[docs] += idf * tfs * (K1 + 1) / (tfs + K1 * (1 - B + B * lengths[docs] / avg))
            hit = True
        if hit:
            for rank, i in enumerate(_top(bm25, POOL)):
                if bm25[i] <= 0:
                    break
                fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        if qclip is not None:
            if entry.clip_rows is None:
                present = [(i, v) for i, v in enumerate(entry.clip_vectors) if v is not None]
                entry.clip_rows = np.asarray([i for i, _ in present], dtype=np.int64)
                entry.clip_matrix = np.vstack([v for _, v in present]) if present else None
            if entry.clip_matrix is not None and len(qclip) == entry.clip_matrix.shape[1]:
                pictures = np.einsum("ij,j->i", entry.clip_matrix, qclip)
                for rank, j in enumerate(_top(pictures, POOL)):
                    i = int(entry.clip_rows[j])
                    fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        return list(fused.items())


def _top(scores: np.ndarray, n: int) -> list[int]:
    """Indexes of the ``n`` highest scores, highest first (ties by index)."""
    if len(scores) > n:
        part = np.argpartition(-scores, n - 1)[:n]
        part.sort()  # ties by index, as a stable sort of the whole array gives
    else:
        part = np.arange(len(scores))
    order = np.argsort(-scores[part], kind="stable")
    return part[order].tolist()
