"""Document frequencies for BM25, kept between searches.

SQLite's FTS5 stores no document frequency per term: ``fts5vocab`` counts a
term's documents by reading its whole posting list, and a pair's count is a
phrase query. In a large store a common term costs milliseconds each time, so
a search would pay for its question's words over and over.

:class:`TermStats` reads each frequency once and remembers it with the state of
the store then (the key's document count and mean length, and the store's
change mark). While that state is unchanged the value is exact. In a store of
:data:`SCALED_FROM` documents or more, a count read before the store grew is
scaled by the growth (a term's share of the documents drifts slowly) until the
store has doubled; otherwise any change reads it again, so small stores always
get exact figures. BM25 only weighs terms with these counts, so the drift of a
large store moves no result that a fresh count would not.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Sequence

from arbormem.store.lexical import TermStatistics

#: Pairs are counted in windows: they share the window key's document count.
PAIR = "pair"
#: Below this many documents a count is cheap: it is read again whenever the
#: store changed, so small stores always get exact figures.
SCALED_FROM = 10_000


#: From this many documents under a key, a search's first look-ups of common terms
#: cost the most of its time with a cold page cache (each reads a posting list of
#: thousands of entries): :meth:`TermStats.preload` counts them all in one pass.
PRELOAD_FROM = 100_000
#: Terms in fewer documents than this are cheap to count one by one, when asked.
PRELOAD_MIN_DOCS = 100


class TermStats:
    """Cached document frequencies per lexical key, and the keys' statistics."""

    def __init__(self, backend: TermStatistics, max_terms: int = 200_000) -> None:
        """``backend``: the store, or the part of it a search is ranked against (see
        :meth:`~arbormem.store.lexical.LexicalIndex.statistics`)."""
        self.backend = backend
        self.max_terms = max_terms
        #: (key, term) -> (document frequency, documents under the key when read, and
        #: what identified the store's state then: see ``_get``).
        self._df: dict[tuple[str, str], tuple[int, int, object]] = {}

    def for_search(self) -> TermStats:
        """These statistics as one search reads them: the keys' document counts and
        mean lengths, and the store's change mark, are read once (a search asks for
        them a dozen times); the frequencies are the ones kept here."""
        view = copy.copy(self)  # the same cache of frequencies
        view.backend = _ReadOnce(self.backend)
        return view

    def lexical_stats(self, key: str) -> tuple[int, float]:
        """Documents under a key and their mean length (one row: not cached)."""
        return self.backend.lexical_stats(key)

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        """How many documents under ``key`` hold each term."""
        return self._get(
            key, key, terms, lambda missing: self.backend.doc_frequencies(key, missing)
        )

    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        """How many windows hold each ``first_second`` pair side by side."""
        return self._get(PAIR, "window", pairs, self.backend.pair_frequencies)

    def preload(self, keys: Iterable[str], stop: threading.Event | None = None) -> int:
        """Count every term in :data:`PRELOAD_MIN_DOCS` documents or more under each
        key in one pass over its index, and remember the counts as :meth:`_get`
        would have. Returns how many were remembered (0 when ``stop`` was set first,
        or the cache has no room for them)."""
        remembered = 0
        for key in keys:
            read = self.backend.frequent_terms(key, PRELOAD_MIN_DOCS, stop)
            if read is None:
                return remembered
            counts, docs, mean, mark = read
            if len(counts) + len(self._df) > self.max_terms:
                return remembered  # it would be cleared before it was used
            state = (docs, mean, mark)
            for term, df in counts.items():
                self._df.setdefault((key, term), (df, docs, state))
            remembered += len(counts)
        return remembered

    def _get(
        self,
        key: str,
        counted_in: str,
        terms: Sequence[str],
        read: Callable[[list[str]], dict[str, int]],
    ) -> dict[str, int]:
        if not terms:
            return {}
        n_now, avgdl = self.backend.lexical_stats(counted_in)
        # The key's size and length and the store's change mark: any write that can
        # change a count changes one of them.
        state = (n_now, avgdl, self.backend.change_mark())
        entries: dict[str, tuple[int, int, object]] = {}
        missing = []
        for term in dict.fromkeys(terms):
            cached = self._df.get((key, term))
            if cached is not None and (
                cached[2] == state or SCALED_FROM <= cached[1] < n_now <= 2 * cached[1]
            ):
                entries[term] = cached
            else:
                missing.append(term)
        if missing:
            if len(self._df) + len(missing) > self.max_terms:
                self._df.clear()
            found = read(missing)
            for term in missing:
                entries[term] = self._df[(key, term)] = (found.get(term, 0), n_now, state)
        out: dict[str, int] = {}
        for term, (df, n_then, then) in entries.items():
            out[term] = df if then == state or not n_then else round(df * n_now / n_then)
        return out


class _ReadOnce:
    """A :class:`TermStatistics` that reads each key's statistics and the change
    mark once (see :meth:`TermStats.for_search`)."""

    def __init__(self, source: TermStatistics) -> None:
        self.source = source
        self._stats: dict[str, tuple[int, float]] = {}
        self._mark: tuple[int, int] | None = None

    def lexical_stats(self, key: str) -> tuple[int, float]:
        found = self._stats.get(key)
        if found is None:
            found = self._stats[key] = self.source.lexical_stats(key)
        return found

    def change_mark(self) -> tuple[int, int]:
        if self._mark is None:
            self._mark = self.source.change_mark()
        return self._mark

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        return self.source.doc_frequencies(key, terms)

    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        return self.source.pair_frequencies(pairs)

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        return self.source.frequent_terms(key, min_docs, stop)
