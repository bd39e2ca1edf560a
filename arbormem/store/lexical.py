"""The lexical capability: BM25 over analysed terms, and the term statistics the
ranker reads.

Each message is indexed under two keys (:data:`~arbormem.store.types.LEXICAL_KEYS`):
the turn alone, and the turn with its neighbours in the session (its *window*);
tree nodes are indexed under :data:`~arbormem.store.types.NODE_KEYS`. Documents are
the space-joined terms of :func:`arbormem.text.analyze`, so every back-end matches
the same stems.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from arbormem.store.core import StoreCore
from arbormem.store.types import (
    Filters,
    Thread,
)


class TermStatistics(Protocol):
    """Where BM25's figures for a search come from (see :meth:`LexicalIndex.statistics`):
    the same methods as the store's, over the documents a search is ranked against."""

    def lexical_stats(self, key: str) -> tuple[int, float]: ...

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]: ...

    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]: ...

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None: ...

    def change_mark(self) -> tuple[int, int]: ...


class LexicalIndex(StoreCore):
    """Full-text search and term statistics over messages, windows and tree nodes."""

    def statistics(self, threads: Sequence[Thread]) -> TermStatistics:
        """The statistics a search of these threads is ranked with, by
        :meth:`lexical_search` and by the ranker's own BM25: the whole store's (this
        default, and SQLite's), or a back-end's narrower domain (PostgreSQL keeps
        them per user of a tenant). Equal objects share a cache of their counts."""
        return self

    @abc.abstractmethod
    def write_tail_windows(self, thread: Thread, session: str) -> int:
        """Write the window keys a ``defer_tail`` append left out of a session;
        returns how many."""

    @abc.abstractmethod
    def lexical_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        filters: Filters | None = None,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        """BM25 over one lexical key: ``(rowid, score)`` pairs, best first, scores > 0;
        only rows numbered above ``after``."""

    def lexical_search_spans(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        spans: Sequence[tuple[datetime, datetime]],
        filters: Filters | None = None,
    ) -> list[list[tuple[int, float]]]:
        """:meth:`lexical_search` inside each ``[since, until)`` span, one list per
        span. A span narrows the filters' own dates, never widens them. Back-ends
        may answer all spans in one pass; this default searches span by span."""
        base = filters or Filters()
        out: list[list[tuple[int, float]]] = []
        for since, until in spans:
            lo = max(since, base.since) if base.since is not None else since
            hi = min(until, base.until) if base.until is not None else until
            narrowed = replace(base, since=lo, until=hi)
            out.append(self.lexical_search(threads, key, terms, limit, narrowed) if lo < hi else [])
        return out

    @abc.abstractmethod
    def lexical_stats(self, key: str) -> tuple[int, float]:
        """Number of documents under a lexical key and their mean length in terms."""

    @abc.abstractmethod
    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        """How many documents under ``key`` contain each term."""

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        """Every term in at least ``min_docs`` documents under ``key`` with its
        document count, read in one pass, with the key's document count, mean length
        and :meth:`change_mark` as of that pass; None when ``stop`` was set before
        it ended, or when the backend cannot list its terms (this default)."""
        return None

    @abc.abstractmethod
    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        """How many window documents hold each pair's two terms side by side.

        A pair is written ``first_second`` (see :func:`arbormem.text.pairs`).
        """

    @abc.abstractmethod
    def around(self, rowids: Sequence[int], radius: int) -> dict[int, list[tuple[int, int, str]]]:
        """For each message, the messages of its session within ``radius`` positions
        (itself included): ``(rowid, index, analysed terms)`` in order."""

    @abc.abstractmethod
    def index_nodes(self, key: str, docs: Mapping[int, str]) -> None:
        """Replace the lexical documents (analysed terms) of nodes under ``key``; the
        store's :meth:`~arbormem.store.core.StoreCore.change_mark` moves (searches keep
        what they read of the documents under it)."""

    @abc.abstractmethod
    def node_docs(self, key: str, ids: Sequence[int]) -> dict[int, str]:
        """The stored lexical documents (analysed terms) of nodes under ``key``."""

    @abc.abstractmethod
    def node_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        """BM25 over node documents: ``(node id, score)``, best first; only nodes
        numbered above ``after``."""

    @abc.abstractmethod
    def term_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Document frequency of each term over all messages, and the message count."""

    @abc.abstractmethod
    def archived_matches(
        self,
        threads: Sequence[Thread],
        terms: Sequence[str],
        filters: Filters | None = None,
        limit: int = 10,
    ) -> tuple[list[str], int]:
        """The soft-archived messages of these threads, within ``filters``, whose
        indexed terms include any of ``terms`` (analysed as a query's are): the ids
        of the best ``limit`` (most of the terms first, newest first among equals)
        and how many there are in all. Search leaves archived messages out; this
        says which would have matched."""
