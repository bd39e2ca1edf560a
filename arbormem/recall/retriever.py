"""Recall: candidate turns from several indexes, ranked by a fitted linear model.

For a query the retriever

1. reads what the question says (:class:`arbormem.recall.features.Question`): its
   terms, the speakers it names, the dates it refers to, its type;
2. gathers candidates: the best turns by BM25 over each turn and over each
   turn's window (SQLite FTS5), the nearest vectors (cosine), and, when the
   question names dates, the best window matches inside those dates;
3. computes every feature of :mod:`arbormem.recall.features` for each candidate,
   the topic tree's among them when the tree is on;
4. scores each candidate with the weights of :mod:`arbormem.recall.ranker` and
   returns the best, each with the feature values that ranked it.

Candidate generation keeps the cost independent of the thread's length: the
features are computed for a few hundred turns, never for the whole thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import numpy as np

from arbormem.config import to_whole
from arbormem.deep import DeepVectors, DenseSource, StoreDense
from arbormem.embed.base import Embedder
from arbormem.errors import EmbedderError, InputError
from arbormem.jobs import Jobs
from arbormem.models import Hit
from arbormem.recall.facts import ThreadFacts
from arbormem.recall.features import (
    FEATURES,
    WINDOW,
    DocStats,
    Question,
    RowVectors,
    features,
)
from arbormem.recall.pool import CandidatePool
from arbormem.recall.ranker import (
    DEEP_FLAT_WEIGHTS,
    DEEP_TREE_WEIGHTS,
    FLAT_WEIGHTS,
    TREE_WEIGHTS,
    weight_vector,
)
from arbormem.recall.reads import Near, SearchReads
from arbormem.recall.rerank import Reranker, blend, checked_scores
from arbormem.recall.sources import Sources
from arbormem.recall.termstats import PRELOAD_FROM, TermStats
from arbormem.recall.updates import mark_updates
from arbormem.store.base import Backend
from arbormem.store.types import Filters, Row, Thread, ThreadState
from arbormem.timeexpr import TEMPLATE_YEAR, in_year
from arbormem.tree.recall import TreeRecall

#: A month named without a year is looked for in each year the thread covers, but
#: only in its latest this many (a stray date centuries back would add a span per year).
_MAX_YEARS = 30

#: Searched threads holding at least this many turns in all embed the query,
#: search the nearest vectors and read those turns' rows on a worker thread (when it
#: is free) while this one runs the store's searches: the embedder's work (a remote
#: embedder's round trip most of all) and the worker's disk reads overlap with SQLite's. On LoCoMo-sized stores the hand-off costs more than it
#: saves. The store's searches stay on the searching thread, whose connection maps
#: the file (see ``SQLiteBackend.map_for_search``): on worker connections without
#: the map, cold reads cost more than running side by side saved.
PARALLEL_FROM = 50_000

log = logging.getLogger(__name__)

_QUERY_DEPENDENT = np.asarray([name not in ("len", "first") for name in FEATURES])


@dataclass(frozen=True)
class RecallConfig:
    """Where candidates come from and how they are weighed."""

    #: Candidates from BM25 over turns, over windows, from cosine, and from the dates
    #: a question names. Chosen on the LoCoMo development files, with and without
    #: 10,000 distractor turns: pools twice as large found nothing more and cost
    #: a third more time (docs/benchmarks.md). The date candidates are shared among
    #: the spans a question's dates stand for ("in May" is a May in each year of
    #: the thread), so an old thread's pool does not grow with its years.
    turn_candidates: int = 30
    window_candidates: int = 40
    dense_candidates: int = 50
    date_candidates: int = 50
    #: Topics (with the tree on) whose turns all join the candidates.
    topic_candidates: int = 3
    #: Posting-list entries a full-text search may read (rare terms first; see
    #: ``Retriever._affordable``); small threads never reach it. With 100,000
    #: distractor turns per LoCoMo file, 5,000 and 10,000 gave the same recall@10
    #: (.790) and 2,500 lost .008; at a million turns BM25 scoring of the postings
    #: is the largest share of a search's time (docs/benchmarks.md).
    posting_budget: int = 5_000
    lexical: bool = True
    dense: bool = True
    #: Feature weights; None uses the fitted ones (tree or flat, as the store has).
    weights: Mapping[str, float] | None = None
    #: Days after a named date range still counted as inside it.
    date_lag_days: int = 7
    #: With a reranker (see :mod:`arbormem.recall.rerank`): how many of the best turns it
    #: reorders, and the share of its standardised score in the blend with the
    #: ranker's. The weight was chosen leave-one-conversation-out on the LoCoMo
    #: development files (every fold chose 0.5); the depth for its cost (about
    #: 25 ms a turn on two cores): 20 turns gained .005 recall@10 more at twice it.
    rerank_depth: int = 10
    rerank_weight: float = 0.5

    def __post_init__(self) -> None:
        try:
            depth = to_whole(self.rerank_depth)
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc), field="rerank_depth") from None
        if depth < 0:
            raise InputError("must be 0 or more (0: no reranking)", field="rerank_depth")
        weight = self.rerank_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)):
            raise InputError(f"must be a number, not {weight!r}", field="rerank_weight")
        if not 0.0 <= float(weight) <= 1.0:  # also refuses NaN
            raise InputError("must be from 0 to 1", field="rerank_weight")
        object.__setattr__(self, "rerank_depth", depth)
        object.__setattr__(self, "rerank_weight", float(weight))

    def to_dict(self) -> dict[str, Any]:
        # The reranking settings mean nothing without a reranker: whoever runs one
        # reports them with its model (see bench locomo's "reranker").
        skip = ("weights", "rerank_depth", "rerank_weight")
        out = {k: v for k, v in self.__dict__.items() if k not in skip}
        out["weights"] = dict(self.weights) if self.weights is not None else "fitted defaults"
        return out


class Retriever:
    """Runs the ranking for a scope."""

    def __init__(
        self,
        backend: Backend,
        embedder: Embedder,
        config: RecallConfig | None = None,
        tree: TreeRecall | None = None,
        reranker: Reranker | None = None,
        jobs: Jobs | None = None,
        deep: DeepVectors | None = None,
    ) -> None:
        self.backend = backend
        self.reranker = reranker
        #: The background embedder's vectors: the dense source once a thread has them.
        self.deep = deep
        self._rerank_failures: set[str] = set()
        self.embedder = embedder
        #: The store's own vectors, searched until the deep ones are ready.
        self.dense = StoreDense(backend, embedder)
        self.config = config or RecallConfig()
        self.tree = tree
        self.docs = DocStats()
        #: Rows and neighbourhoods read by searches, while the store is unchanged.
        self.reads = SearchReads(backend)
        #: The store-wide statistics' cache (see stats_for for a search's own).
        self.stats = TermStats(backend)
        self._stats_of: dict[object, TermStats] = {}
        #: Speakers, time spans and names of the threads searched (see facts.py); the
        #: background embedder brings them up to date once it has caught up.
        self.facts = ThreadFacts(backend)
        if deep is not None:
            deep.after_indexing(self.facts.prepare)
        #: Where the candidate sources run (see _gather).
        self.sources = Sources()
        #: Common terms' counts, and large threads' tree shapes and session sums, are
        #: read in the background once (see _warm_up); close() stops the loaders.
        self._terms_started = False
        #: Threads whose tree shapes were preloaded, and whose session sums are being
        #: preloaded (see _warm_up).
        self._shaped: set[int] = set()
        self._summing: set[int] = set()
        #: Where the preloads run (see :mod:`arbormem.jobs`); its ``stopping`` event
        #: cuts a preload short when the memory closes.
        self._own_jobs = jobs is None
        self.jobs = jobs if jobs is not None else Jobs()
        self._stopping = self.jobs.stopping

    def forget(self, thread: Thread) -> None:
        """Drop what was learnt about a thread (names, dates) after messages left it."""
        self.facts.forget(thread)

    def weights(self, config: RecallConfig | None = None, deep: bool = False) -> dict[str, float]:
        """The ranker's weights: the configuration's, else those fitted for this
        pipeline (tree or flat; dense features from the deep embedder or not)."""
        cfg = config or self.config
        if cfg.weights is not None:
            return dict(cfg.weights)
        if deep:
            return dict(DEEP_TREE_WEIGHTS if self.tree is not None else DEEP_FLAT_WEIGHTS)
        return dict(TREE_WEIGHTS if self.tree is not None else FLAT_WEIGHTS)

    def _question(
        self, threads: Sequence[Thread], states: Sequence[ThreadState], query: str
    ) -> Question:
        names: list[str] = []
        aliases: dict[str, str] = {}
        now: datetime | None = None
        for thread, state in zip(threads, states):
            facts = self.facts.of(thread, state)
            names.extend(facts.names)
            for alias, speaker in facts.alias_names.items():
                aliases.setdefault(alias, speaker)
            if facts.latest is not None and (now is None or facts.latest > now):
                now = facts.latest
        return Question.parse(query, names, now, aliases)

    def stats_for(self, threads: Sequence[Thread] | None) -> TermStats:
        """The cached statistics a search of these threads is ranked with (see
        :meth:`~arbormem.store.lexical.LexicalIndex.statistics`); None: the store's."""
        if threads is None:
            return self.stats
        source = self.backend.statistics(threads)
        if source is self.backend:
            return self.stats
        found = self._stats_of.get(source)
        if found is None:
            if len(self._stats_of) >= 256:  # many users searched: start again
                self._stats_of.clear()
            found = self._stats_of[source] = TermStats(source)
        return found

    def _affordable(
        self,
        key: str,
        terms: Sequence[str],
        budget: int,
        threads: Sequence[Thread] | None = None,
        stats: TermStats | None = None,
    ) -> tuple[list[str], float]:
        """The query terms worth a full-text search, rarest first, while their
        posting lists stay within ``budget`` entries in all; and the share of those
        entries the budget covers (below 1 only when the rarest term alone has more:
        the search then reads the newest rows that hold about ``budget`` of them).

        Frequent terms cost the most to search and weigh the least in BM25; they
        still count in every candidate's features.
        """
        if not terms:
            return [], 1.0
        df = (stats or self.stats_for(threads)).doc_frequencies(key, terms)
        ranked = sorted(terms, key=lambda t: df.get(t, 0))
        kept: list[str] = []
        spent = 0
        for term in ranked:
            if kept and spent + df.get(term, 0) > budget:
                break
            kept.append(term)
            spent += df.get(term, 0)
        return kept, min(1.0, budget / spent) if spent else 1.0

    def affordable_terms(
        self, key: str, terms: Sequence[str], threads: Sequence[Thread] | None = None
    ) -> list[str]:
        """The distinct terms a full-text search under ``key`` (of ``threads``) may look
        up within the posting budget (see :meth:`_affordable`), rarest first."""
        return self._affordable(
            key, list(dict.fromkeys(terms)), self.config.posting_budget, threads
        )[0]

    def _lifetime(self, threads: Sequence[Thread]) -> tuple[datetime, datetime] | None:
        """The first and last message times of the threads (known from their facts)."""
        first = [f.earliest for t in threads if (f := self.facts.known(t)) and f.earliest]
        last = [f.latest for t in threads if (f := self.facts.known(t)) and f.latest]
        return (min(first), max(last)) if first and last else None

    def _years(self, threads: Sequence[Thread]) -> range:
        """The calendar years the threads' messages span."""
        lived = self._lifetime(threads)
        if lived is None:
            return range(0)
        latest = lived[1].year
        return range(max(lived[0].year, latest - _MAX_YEARS + 1), latest + 1)

    def candidates(
        self,
        threads: Sequence[Thread],
        query: str,
        filters: Filters | None = None,
        config: RecallConfig | None = None,
        depth: int = 0,
        every_feature: bool = True,
    ) -> tuple[Question, list[int], np.ndarray, np.ndarray | None, dict[int, Row]]:
        """The question, the candidate rowids, their feature matrix, the query vector
        and the candidates' rows. ``arbormem bench fit`` trains on exactly this.

        ``depth`` is how many results the caller wants: the turn key contributes at
        least that many candidates, so a search for many hits can return them all.
        With ``every_feature=False`` features whose weight is zero may be left at 0.
        """
        with self.sources.searching() as alone:
            return self._candidates(threads, query, filters, config, depth, every_feature, alone)

    def _candidates(
        self,
        threads: Sequence[Thread],
        query: str,
        filters: Filters | None,
        config: RecallConfig | None,
        depth: int,
        every_feature: bool,
        alone: bool,
    ) -> tuple[Question, list[int], np.ndarray, np.ndarray | None, dict[int, Row]]:
        """:meth:`candidates`; ``alone``: no other search of this process was under way
        when it began (else its sources run one after the other, see _gather)."""
        cfg = config or self.config
        # Before anything is read: what is kept from earlier searches is checked first,
        # against the searched threads' own states.
        states = [self.backend.state(t) for t in threads]
        mark = self.reads.begin(threads, states)
        question = self._question(threads, states, query)
        # The deep vectors once every searched thread has them; the store's until then.
        deep = self.deep
        question.deep = bool(
            cfg.dense
            and deep is not None
            and all(deep.ready(t, st) for t, st in zip(threads, states))
        )
        embedder, vectors = (
            (deep.embedder, deep) if question.deep and deep else (self.embedder, self.dense)
        )
        budget = cfg.posting_budget
        # The statistics as this search reads them (each key's counted once).
        stats = self.stats_for(threads).for_search()
        self.backend.map_for_search()
        self._warm_up(threads, states, cfg)
        allowed = None
        if filters is not None and not filters.empty:
            allowed = self.backend.allowed_rowids(threads, filters)
        # The sources below read different indexes and need nothing from each other;
        # their candidates join in this order (see _gather for where each runs).
        jobs: dict[str, Callable[[], Any]] = {}
        affordable: dict[str, tuple[list[str], float]] = {}

        def afford(key: str) -> tuple[list[str], float]:
            # Each key's terms once: the dates search the windows' and the topics the
            # turns' (the statistics are this search's, so the answer is the same).
            if key not in affordable:
                affordable[key] = self._affordable(key, question.terms, budget, threads, stats)
            return affordable[key]

        if cfg.lexical and question.terms:
            turn_pool = max(cfg.turn_candidates, depth) if cfg.turn_candidates > 0 else 0
            last = max(st.max_rowid for st in states)
            for key, n in (("turn", turn_pool), ("window", cfg.window_candidates)):
                if n > 0:
                    terms, share = afford(key)
                    jobs[key] = partial(
                        self.backend.lexical_search,
                        threads,
                        key,
                        terms,
                        n,
                        filters,
                        after=_slice(last, share),
                    )
            spans: list[tuple[datetime, datetime]] = []
            if question.ranges and cfg.date_candidates > 0:
                years = self._years(threads)
                lived = self._lifetime(threads)
                # Only spans the threads' messages reach share the pool: "in May" in a
                # thread from November to February has one May to look in, not three.
                spans = [
                    s
                    for rng in question.ranges
                    for s in _spans(rng, cfg.date_lag_days, years)
                    if lived is None or (s[1] > lived[0] and s[0] <= lived[1])
                ]
            if spans:
                # Each span is a run of rows: its postings are few, whatever the terms.
                jobs["dates"] = partial(
                    self.backend.lexical_search_spans,
                    threads,
                    "window",
                    afford("window")[0],
                    -(-cfg.date_candidates // max(1, len(spans))),
                    spans,
                    filters,
                )
        if self.tree is not None and question.terms:
            # A topic's content holds each of its turns' terms: the turn key's posting
            # counts bound the cost of searching topics too.
            terms, share = afford("turn")
            jobs["topics"] = partial(self.tree.segment_hits, threads, terms, share=share)
        big = sum(st.next_index for st in states) >= PARALLEL_FROM
        if cfg.dense:
            jobs["dense"] = partial(
                self._dense,
                threads,
                question.dense_text or query,
                cfg.dense_candidates,
                allowed,
                prefetch=big,
                embedder=embedder,
                vectors=vectors,
            )
        # A transformer's query embedding takes milliseconds: the worker thread runs it
        # beside the full-text searches whatever the thread's size, and beside the
        # reading of their candidates (see recall/pool.py).
        aside = ("dense",) if big or question.deep else ()
        tree_on = self.tree is not None and bool(question.terms)
        # The topic trees as this search first reads them, for every later step.
        trees: dict[int, Any] = {}
        # Fitting (``every_feature``) needs them all; ranking skips what weighs nothing.
        weights = self.weights(cfg, deep=question.deep)
        pool = CandidatePool(
            self.reads,
            mark,
            threads,
            self.tree if tree_on else None,
            question.terms,
            coverage=True
            if every_feature
            else [f for f in ("cov_topic", "cov_sess") if weights.get(f)],
            vectors=vectors if cfg.dense else None,
            trees=trees,
            docs=self.docs,
        )

        lexical: list[int] | None = None

        def read_lexical(done: Mapping[str, Any], running: Callable[[], bool]) -> None:
            # While the worker embeds the query: the full-text candidates' rows and
            # neighbourhoods, then their topic signals and vectors if it still runs.
            nonlocal lexical
            pool.set_topics(done.get("topics", []))
            lexical = self._lexical_found(threads, done, allowed, cfg, trees)
            pool.add(lexical, more=running)

        done = self._gather(jobs, aside=aside, meanwhile=read_lexical, crowded=not alone)
        if lexical is None:  # nothing ran beside this thread, or it had finished
            pool.set_topics(done.get("topics", []))
            lexical = self._lexical_found(threads, done, allowed, cfg, trees)
        qvec: np.ndarray | None = None
        nearest: list[int] = []
        rows: dict[int, Row] = {}
        around: dict[int, Near] = {}
        if "dense" in done:
            qvec, nearest, rows, around = done["dense"]
        # In one step what was not read meanwhile: reading costs less so.
        pool.add([*lexical, *nearest], rows, around)
        if not pool.rowids:
            return question, [], np.zeros((0, len(FEATURES)), dtype=np.float32), qvec, {}
        vector_of, centroid_of = pool.row_vectors() if qvec is not None else (RowVectors(),) * 2
        X = features(
            stats,
            question,
            pool.candidates(),
            qvec,
            vector_of,
            centroid_of,
            pool.signals if tree_on else None,
            self.docs,
        )
        return question, pool.rowids, X, qvec, pool.rows

    def _lexical_found(
        self,
        threads: Sequence[Thread],
        done: Mapping[str, Any],
        allowed: np.ndarray | None,
        cfg: RecallConfig,
        trees: dict[int, Any] | None = None,
    ) -> list[int]:
        """The full-text and topic candidates of the sources' results ``done``, in
        order: turns, windows, dates, then the turns of the best topics (``trees``:
        the search's, see :meth:`TreeRecall.held`)."""
        found: dict[int, None] = {}
        for key in ("turn", "window"):
            for rowid, _ in done.get(key, []):
                found[rowid] = None
        for hits in done.get("dates", []):
            for rowid, _ in hits:
                found[rowid] = None
        if self.tree is not None and cfg.lexical and cfg.topic_candidates > 0:
            expanded = self.tree.expand(
                threads, done.get("topics", []), cfg.topic_candidates, held=trees
            )
            if allowed is not None:
                permitted = set(allowed.tolist())
                expanded = [r for r in expanded if r in permitted]
            for rowid in expanded:
                found[rowid] = None
        return list(found)

    def _dense(
        self,
        threads: Sequence[Thread],
        query: str,
        n: int,
        allowed: np.ndarray | None,
        prefetch: bool = False,
        embedder: Embedder | None = None,
        vectors: DenseSource | None = None,
    ) -> tuple[np.ndarray | None, list[int], dict[int, Row], dict[int, Near]]:
        """The query's vector, the ``n`` nearest turns of each thread, and with
        ``prefetch`` their rows and neighbourhoods (see :meth:`Backend.around`).

        In a large store this runs on the worker thread while the searching thread
        runs the full-text searches (see :meth:`_gather`): reading the nearest turns'
        rows there overlaps their cold reads with the searches', and the pages they
        bring into the cache serve the searching thread's reads too."""
        embedder = embedder or self.embedder
        vectors = vectors or self.dense
        try:
            qvec = embedder.embed(query)
            nearest: list[int] = []
            for thread in threads:
                ids, _ = vectors.nearest(thread, qvec, n, allowed)
                nearest.extend(ids.tolist())
        except EmbedderError as exc:
            # An embedding endpoint that is down (or vectors it cannot give): the
            # search goes on with the full-text and topic candidates alone.
            log.warning("dense search skipped: %s", exc)
            return None, [], {}, {}
        if not prefetch or not nearest:
            return qvec, nearest, {}, {}
        rows = self.backend.rows(nearest)
        kept = [r for r in nearest if r in rows]
        # Neighbourhoods as tuples, as SearchReads keeps them (see reads.Near).
        near: dict[int, Near] = {r: tuple(v) for r, v in self.backend.around(kept, WINDOW).items()}
        return qvec, nearest, {r: rows[r] for r in kept}, near

    def _warm_up(
        self, threads: Sequence[Thread], states: Sequence[ThreadState], config: RecallConfig
    ) -> None:
        """Start reading, on a background thread, what the first searches of a large
        store would otherwise read piecemeal from a cold disk: the counts
        of the store's common terms (see :meth:`TermStats.preload`) when it holds
        :data:`PRELOAD_FROM` turns, and for each searched thread of that many
        messages its tree's shapes (see :meth:`TreeRecall.preload`) and its session
        sums (see :meth:`~arbormem.store.vectors.VectorStore.preload_session_sums`; read again after a deletion
        drops them). Searches meanwhile read what they need. A store read through
        one connection (in memory) is not
        preloaded: the pass would hold every other read and write up, to save reads
        it never makes from disk."""
        if not self.backend.concurrent_reads():
            return
        large = [t for t, st in zip(threads, states) if st.next_index >= PRELOAD_FROM]
        shapes = [t for t in large if self.tree is not None and t.id not in self._shaped]
        # Sums again after a deletion dropped them (rare); shapes only once: a live
        # thread's tree changes with every exchange.
        sums = [
            t
            for t in large
            if config.dense
            and t.id not in self._summing
            and not self.backend.holds_session_sums(t, self.embedder)
        ]
        terms = (
            config.lexical
            and not self._terms_started
            and self.stats_for(threads).lexical_stats("turn")[0] >= PRELOAD_FROM
        )
        if not terms and not shapes and not sums:
            return
        with self.sources.lock:
            if self.sources.closed:
                return
            tasks: list[Callable[[], Any]] = []
            if terms and not self._terms_started:
                self._terms_started = True
                tasks.append(
                    partial(self.stats_for(threads).preload, ("turn", "window"), self._stopping)
                )
            for thread in shapes:
                if thread.id not in self._shaped:
                    self._shaped.add(thread.id)
                    assert self.tree is not None
                    tasks.append(partial(self.tree.preload, thread, self._stopping))
            for thread in sums:
                if thread.id not in self._summing:
                    self._summing.add(thread.id)
                    tasks.append(partial(self._preload_sums, thread))
            if not tasks:
                return
            self.jobs.submit("preload", partial(self._preload, tasks))

    def _preload_sums(self, thread: Thread) -> int:
        # A pass that fails is not tried again (the thread stays marked): the next
        # searches read the sums they need, as without a preload.
        n = self.backend.preload_session_sums(thread, self.embedder, self._stopping)
        self._summing.discard(thread.id)
        return n

    def _preload(self, tasks: Sequence[Callable[[], Any]]) -> None:
        for task in tasks:
            if self._stopping.is_set():
                return
            start = time.perf_counter()
            try:
                n = task()
            except Exception as exc:  # caches: searches read what they need themselves
                log.debug("not preloaded: %r", exc)
            else:
                log.debug("%d entries preloaded in %.1f s", n, time.perf_counter() - start)

    def _gather(
        self,
        jobs: Mapping[str, Callable[[], Any]],
        aside: Sequence[str] = (),
        meanwhile: Callable[[Mapping[str, Any], Callable[[], bool]], None] | None = None,
        crowded: bool = False,
    ) -> dict[str, Any]:
        """Run the candidate sources (see :meth:`Sources.gather`); those named in
        ``aside`` on the worker only when the store can read on other threads, and
        none there while other searches of this process are under way (``crowded``):
        the cores are busy with those, so running beside them shortens nothing, and
        the hand-off and the candidates read in two steps cost more CPU."""
        return self.sources.gather(
            jobs, aside, meanwhile, self.backend.concurrent_reads, crowded=crowded
        )

    def close(self) -> None:
        """Stop the worker threads; later searches run their sources one by one."""
        pool = self.sources.stop()
        if self._own_jobs:
            self.jobs.close()
        if pool is not None:
            pool.shutdown(wait=True)

    def rank(
        self,
        threads: Sequence[Thread],
        query: str,
        k: int,
        filters: Filters | None = None,
        config: RecallConfig | None = None,
    ) -> list[tuple[Row, float, dict[str, float]]]:
        """``(row, score, signals)`` for the best ``k`` turns, best first."""
        if not threads or k <= 0:
            return []
        question, rowids, X, _, rows = self.candidates(
            threads, query, filters, config, depth=k, every_feature=False
        )
        if not rowids:
            return []
        cfg = config or self.config
        w = weight_vector(self.weights(cfg, deep=question.deep))
        scores = X @ w
        # A turn must owe something to the query itself, not only to its length or place.
        evidence = X[:, _QUERY_DEPENDENT] @ w[_QUERY_DEPENDENT]
        order = np.argsort(-scores, kind="stable")
        depth = cfg.rerank_depth if self.reranker is not None else 0
        kept: list[int] = []
        for i in order.tolist():
            if len(kept) >= max(k, depth):
                break
            if scores[i] > 0 and evidence[i] > 0:
                kept.append(i)
        rerank: dict[int, float] = {}
        reported = {i: float(scores[i]) for i in kept}
        if depth > 1 and len(kept) > 1:
            head, rerank = self._rerank(query, kept[:depth], scores, rows, rowids, cfg)
            # The head's scores, handed out in its new order: a score still falls down
            # the list, so what packs a prompt by score (context()) follows the reranking.
            for i, value in zip(head, sorted((reported[i] for i in head), reverse=True)):
                reported[i] = value
            kept = head + kept[depth:]
        out: list[tuple[Row, float, dict[str, float]]] = []
        # The weighted features' values of the hits as floats, read in one step.
        weighted = [j for j in range(len(FEATURES)) if w[j]]
        names = [FEATURES[j] for j in weighted]
        values = X[np.ix_(kept[:k], weighted)].astype(np.float64)
        # Rounded as round(value, 4) does, all at once: a float32 times 10,000 is exact
        # in a float64, so rint rounds the value itself, half to even, and the quotient
        # is the float nearest to the decimal, which is what round returns.
        shown = np.round(values, 4).tolist()
        for i, row, held in zip(kept[:k], shown, (values != 0).tolist()):
            signals = {name: v for name, v, h in zip(names, row, held) if h}
            if i in rerank:
                signals["rerank"] = round(rerank[i], 4)
            out.append((self.reads.detached(rows[rowids[i]]), reported[i], signals))
        return out

    def _rerank(
        self,
        query: str,
        head: list[int],
        scores: np.ndarray,
        rows: Mapping[int, Row],
        rowids: Sequence[int],
        cfg: RecallConfig,
    ) -> tuple[list[int], dict[int, float]]:
        """The candidates ``head`` (indexes into ``rowids``) reordered by the blend of
        their ranker scores and the reranker's, with the reranker's score of each.
        A reranker that fails leaves the order as it was: search goes on without it."""
        assert self.reranker is not None
        passages = []
        for i in head:
            m = rows[rowids[i]].message
            passages.append(f"{m.speaker}: {m.content}" if m.speaker else m.content)
        try:
            judged = checked_scores(self.reranker, self.reranker.score(query, passages), len(head))
        except Exception as exc:  # a user's reranker may fail any way: never a lost search
            # Each distinct failure once as a warning (a model that cannot load fails
            # every search the same way), then quietly.
            said = str(exc)
            log.log(
                logging.DEBUG if said in self._rerank_failures else logging.WARNING,
                "reranking skipped: %s",
                said,
            )
            if len(self._rerank_failures) < 100:
                self._rerank_failures.add(said)
            return head, {}
        mixed = blend(scores[head], judged, cfg.rerank_weight)
        order = np.argsort(-mixed, kind="stable").tolist()
        return [head[j] for j in order], {i: float(v) for i, v in zip(head, judged)}

    def search(
        self,
        threads: Sequence[Thread],
        query: str,
        k: int = 10,
        filters: Filters | None = None,
        neighbors: int = 0,
    ) -> list[Hit]:
        """Ranked :class:`Hit` objects, each with its signals and optional neighbours."""
        hits = []
        for row, score, sig in self.rank(threads, query, k, filters):
            around: tuple = ()
            if neighbors > 0:
                around = tuple(
                    r.message for r in self.backend.neighbors(row.rowid, neighbors, neighbors)
                )
            hits.append(Hit(message=row.message, score=score, signals=sig, neighbors=around))
        return mark_updates(hits, query)


def _slice(last: int, share: float) -> int:
    """The row number after which the newest ``share`` of rows up to ``last`` lie
    (0: all of them). Row numbers grow with time, so a search confined to the rows
    after it reads about that share of each posting list."""
    return 0 if share >= 1.0 else int(last * (1.0 - share))


def _spans(rng: Any, lag_days: int, years: range) -> list[tuple[datetime, datetime]]:
    """Concrete [since, until) spans of a date range; a range with no year is tried
    in every year the thread covers."""
    start = rng.start
    try:
        end = rng.end + timedelta(days=lag_days + 1)
    except OverflowError:  # the last days of year 9999
        end = datetime.max.replace(tzinfo=rng.end.tzinfo)
    if rng.year_known:
        return [(start, end)]
    spans = []
    for year in years:
        try:
            # Both ends move by the same number of years: "before January 5" starts in
            # December of the template year's previous year.
            shift = year - TEMPLATE_YEAR
            spans.append((in_year(start, start.year + shift), in_year(end, end.year + shift)))
        except ValueError:  # past the calendar
            continue
    return spans
