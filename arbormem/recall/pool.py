"""The candidate pool of one search, read in steps as its sources answer.

A search's candidates come from the full-text searches first and from the
nearest vectors once the query is embedded (on a worker thread, see
:class:`~arbormem.recall.retriever.Retriever`). :class:`CandidatePool` reads
what the features need of each candidate as it joins (its row and
neighbourhood, its topic signals, its vectors and its session's centroid),
so the full-text candidates are read while the query's embedding is still
under way. Every value is a candidate's own: reading in two steps or in one
gives the same features.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from arbormem.deep import DenseSource
from arbormem.recall.features import WINDOW, Candidates, DocStats, RowVectors
from arbormem.recall.reads import Near, SearchReads
from arbormem.store.types import Row, Thread
from arbormem.tree.recall import TreeRecall


class CandidatePool:
    """Candidate turns in the order they joined, with what their features need.

    ``tree`` (with the query's ``terms``): the topic signals are read for each
    candidate (see :meth:`TreeRecall.turn_signals`, ``coverage`` as there) from
    the topic ``segment_hits`` given to :meth:`set_topics`. ``vectors``: each
    candidate's vector, its neighbours' and its session's centroid are read
    from that source. ``trees``: the search's trees (see :meth:`TreeRecall.held`). ``docs``: where
    the neighbourhoods' shapes are kept between searches (see :meth:`DocStats.shape`)."""

    def __init__(
        self,
        reads: SearchReads,
        mark: object,
        threads: Sequence[Thread],
        tree: TreeRecall | None = None,
        terms: Sequence[str] = (),
        coverage: bool | Collection[str] = True,
        vectors: DenseSource | None = None,
        trees: dict[int, Any] | None = None,
        docs: DocStats | None = None,
    ) -> None:
        self.reads = reads
        self.mark = mark
        self.threads = list(threads)
        self.tree = tree if terms else None
        self.terms = list(terms)
        self.coverage = coverage
        self.vectors = vectors
        self.trees: dict[int, Any] = {} if trees is None else trees
        self.docs = docs or DocStats()
        self.segment_hits: list[tuple[int, float]] = []
        self._by_scope = {(t.user, t.agent): t for t in threads}
        #: Every row id offered, kept or not (see :meth:`add`).
        self._seen: set[int] = set()
        self.rowids: list[int] = []
        self.rows: dict[int, Row] = {}
        self.around: dict[int, Near] = {}
        self.thread_of: dict[int, Thread] = {}
        self.signals: dict[int, dict[str, float]] = {}
        #: The candidates whose topic signals were read, and how many of the first
        #: ones have their vectors read: each step reads in order (see add).
        self._signalled = self._vectored = 0
        self._vec_at: dict[int, int] = {}
        self._vec_blocks: list[np.ndarray] = []
        self._n_vecs = 0
        self._cent_slot: dict[tuple[int, str], int | None] = {}
        self._cent_at: dict[int, int] = {}
        self._cent_blocks: list[np.ndarray] = []

    def set_topics(self, segment_hits: Sequence[tuple[int, float]]) -> None:
        """The topics' scores the tree signals are read from (before any :meth:`add`)."""
        self.segment_hits = list(segment_hits)

    def add(
        self,
        rowids: Iterable[int],
        rows: Mapping[int, Row] | None = None,
        around: Mapping[int, Near] | None = None,
        more: Callable[[], bool] | None = None,
    ) -> None:
        """Join the row ids not yet offered, in order, with their rows and
        neighbourhoods (those not in ``rows`` and ``around`` are read), then read
        the topic signals and the vectors of every candidate that lacks them.
        ``more``: asked before each of those two steps, whether to take it (else
        a later call does).

        A row that no longer exists is dropped, and so is one of a scope not
        searched: a searched thread forgotten meanwhile can pass its row id to
        another scope's new thread (another process, between resolving the thread
        and reading rows), and such a row is never shown."""
        new = [r for r in dict.fromkeys(rowids) if r not in self._seen]
        self._seen.update(new)
        got = dict(rows or {})
        got.update(self.reads.rows(self.mark, [r for r in new if r not in got]))
        by_scope = self._by_scope
        kept: list[int] = []
        for r in new:
            row = got.get(r)
            if row is None:
                continue
            thread = by_scope.get((row.message.user, row.message.agent))
            if thread is None:
                continue
            kept.append(r)
            self.rows[r] = row
            self.thread_of[r] = thread
        if kept:
            self.rowids.extend(kept)
            near = {r: v for r, v in (around or {}).items() if r in self.thread_of}
            near.update(self.reads.around(self.mark, [r for r in kept if r not in near], WINDOW))
            self.around.update(near)
        # Each step reads the store (and the tree) once more: one left to the next call
        # costs less when that call comes at once.
        if self.tree is not None and self._signalled < len(self.rowids) and (more or _yes)():
            todo = self.rowids[self._signalled :]
            self.signals.update(
                self.tree.turn_signals(
                    self.threads,
                    self.terms,
                    todo,
                    self.segment_hits,
                    coverage=self.coverage,
                    held=self.trees,
                )
            )
            self._signalled = len(self.rowids)
        if self.vectors is not None and self._vectored < len(self.rowids) and (more or _yes)():
            self._read_vectors(self.rowids[self._vectored :])
            self._vectored = len(self.rowids)

    def _read_vectors(self, kept: Sequence[int]) -> None:
        """The vectors of the candidates ``kept`` and of their next neighbours (the
        turn just before and after), and their sessions' centroids."""
        assert self.vectors is not None
        rows, around, have = self.rows, self.around, self._vec_at
        alone = len(self.threads) == 1
        for thread in self.threads:
            # (Every candidate is of the one searched thread when there is one.)
            mine = kept if alone else [r for r in kept if self.thread_of[r].id == thread.id]
            if not mine:
                continue
            # Each candidate and the turns just before and after it, less what an
            # earlier step read (a row's vector is the same whichever step reads it).
            near: set[int] = set(mine)
            shape_of = self.docs.shape
            for r in mine:
                neighbourhood = around.get(r)
                if neighbourhood:
                    near.update(shape_of(r, rows[r].message.index, neighbourhood).near)
            wanted = sorted(near.difference(have))
            if wanted:
                ok, vecs = self.vectors.vectors_at(thread, np.asarray(wanted, dtype=np.int64))
                found = np.flatnonzero(ok)
                start = self._n_vecs
                have.update(
                    zip([wanted[i] for i in found.tolist()], range(start, start + len(found)))
                )
                self._n_vecs += len(found)
                self._vec_blocks.append(np.asarray(vecs)[found])
            slots = self._cent_slot
            sessions = sorted(
                {self.rows[r].message.session for r in mine}
                - {s for t, s in slots if t == thread.id}
            )
            if sessions:
                cents = self.vectors.session_centroids(thread, sessions)
                for s in sessions:
                    centroid = cents.get(s)
                    if centroid is None:
                        slots[(thread.id, s)] = None
                    else:
                        slots[(thread.id, s)] = len(self._cent_blocks)
                        self._cent_blocks.append(centroid)
            for r in mine:
                at = slots.get((thread.id, self.rows[r].message.session))
                if at is not None:
                    self._cent_at[r] = at

    def candidates(self) -> Candidates:
        """The candidates joined so far, as the features read them."""
        return Candidates(self.rowids, self.rows, self.thread_of, self.around)

    def row_vectors(self) -> tuple[RowVectors, RowVectors]:
        """The vectors read (by row id) and each candidate's session centroid (by the
        candidate's row id)."""
        vector_of = centroid_of = RowVectors()
        if self._n_vecs:
            vector_of = RowVectors(
                self._vec_at, np.concatenate(self._vec_blocks).astype(np.float32)
            )
        if self._cent_blocks:
            centroid_of = RowVectors(self._cent_at, np.stack(self._cent_blocks).astype(np.float32))
        return vector_of, centroid_of


def _yes() -> bool:
    return True
