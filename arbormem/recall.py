"""Hybrid recall: lexical and dense signals fused into one ranking of turns.

For a query the retriever

1. gathers candidates from BM25 over each lexical key (the turn alone and the
   turn with its neighbours) and from cosine similarity over the thread's
   vectors;
2. gives every candidate the value of every signal (BM25 normalised by the
   best score of its key, cosine as is);
3. fuses them with fixed weights into one score, adds a share of the best
   score of the candidate's session, and ranks.

The weights live in :class:`RecallConfig`; ``arbormem bench locomo`` reports
the configuration it measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder
from arbormem.models import Hit
from arbormem.store.base import Backend, Filters, Row, Thread
from arbormem.text import analyze, query_terms, words
from arbormem.tree.recall import TreeRecall
from arbormem.vectors import VectorCache


@dataclass(frozen=True)
class RecallConfig:
    """Weights and sizes of the hybrid ranking."""

    #: Candidates taken from each signal before fusion.
    candidates: int = 100
    w_turn: float = 1.0
    w_window: float = 0.8
    w_dense: float = 0.6
    #: Share of the best fused score of the turn's session added to it.
    w_session: float = 0.3
    #: BM25 of the content of the turn's topic, and of its session's topic (tree signals).
    w_topic: float = 0.4
    w_session_doc: float = 0.2
    #: Signals to use (the benchmark's ``bm25`` and ``dense`` baselines switch some off).
    lexical: bool = True
    dense: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Retriever:
    """Runs the hybrid ranking for a scope."""

    def __init__(
        self,
        backend: Backend,
        embedder: Embedder,
        vectors: VectorCache,
        config: RecallConfig | None = None,
        tree: TreeRecall | None = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.vectors = vectors
        self.config = config or RecallConfig()
        self.tree = tree

    def rank(
        self,
        threads: Sequence[Thread],
        query: str,
        k: int,
        filters: Filters | None = None,
        config: RecallConfig | None = None,
    ) -> list[tuple[int, float, dict[str, float]]]:
        """``(rowid, score, signals)`` for the best ``k`` turns, best first."""
        cfg = config or self.config
        if not threads or k <= 0:
            return []
        n = max(cfg.candidates, k)
        signals: dict[int, dict[str, float]] = {}

        terms = query_terms(query)
        if cfg.lexical:
            for key, weight in (("turn", cfg.w_turn), ("window", cfg.w_window)):
                if weight <= 0 or not terms:
                    continue
                hits = self.backend.lexical_search(threads, key, terms, n, filters)
                if not hits:
                    continue
                top = hits[0][1]
                for rowid, score in hits:
                    signals.setdefault(rowid, {})[key] = score / top

        if cfg.dense and cfg.w_dense > 0:
            qvec = self.embedder.embed(query)
            allowed = None
            if filters is not None and not filters.empty:
                allowed = self.backend.allowed_rowids(threads, filters)
            for thread in threads:
                index = self.vectors.index(thread)
                ids, scores = index.search(qvec, n, allowed)
                for rowid, score in zip(ids.tolist(), scores.tolist()):
                    signals.setdefault(rowid, {})["dense"] = max(0.0, float(score))
                # Lexical candidates the dense top-n missed still get their cosine.
                others = np.asarray(
                    [r for r, s in signals.items() if "dense" not in s], dtype=np.int64
                )
                if others.size:
                    for rowid, score in zip(others.tolist(), index.scores(qvec, others).tolist()):
                        if score == score:  # not NaN: the row belongs to this thread
                            signals[rowid]["dense"] = max(0.0, float(score))

        if not signals:
            return []
        if self.tree is not None and cfg.lexical and (cfg.w_topic > 0 or cfg.w_session_doc > 0):
            for rowid, sig in self.tree.turn_signals(threads, terms, list(signals)).items():
                signals[rowid].update(sig)
        weights = {
            "turn": cfg.w_turn,
            "window": cfg.w_window,
            "dense": cfg.w_dense,
            "topic": cfg.w_topic,
            "session_doc": cfg.w_session_doc,
        }
        fused = {
            rowid: score
            for rowid, sig in signals.items()
            if (score := sum(weights[name] * value for name, value in sig.items())) > 0
        }
        if cfg.w_session > 0:
            self._add_session_prior(fused, signals, cfg.w_session)
        order = sorted(fused, key=lambda r: (-fused[r], r))[:k]
        return [(rowid, fused[rowid], signals[rowid]) for rowid in order]

    def _add_session_prior(
        self, fused: dict[int, float], signals: dict[int, dict[str, float]], weight: float
    ) -> None:
        rows = self.backend.rows(list(fused))
        best: dict[tuple[str, str, str], float] = {}
        for rowid, score in fused.items():
            m = rows[rowid].message
            key = (m.user, m.agent, m.session)
            best[key] = max(best.get(key, 0.0), score)
        for rowid in fused:
            m = rows[rowid].message
            prior = best[(m.user, m.agent, m.session)]
            signals[rowid]["session"] = prior
            fused[rowid] += weight * prior

    def search(
        self,
        threads: Sequence[Thread],
        query: str,
        k: int = 10,
        filters: Filters | None = None,
        neighbors: int = 0,
    ) -> list[Hit]:
        """Ranked :class:`Hit` objects, each with its signals and optional neighbours."""
        ranked = self.rank(threads, query, k, filters)
        rows = self.backend.rows([rowid for rowid, _, _ in ranked])
        hits = []
        for rowid, score, sig in ranked:
            row: Row = rows[rowid]
            around: tuple = ()
            if neighbors > 0:
                around = tuple(
                    r.message for r in self.backend.neighbors(rowid, neighbors, neighbors)
                )
            hits.append(Hit(message=row.message, score=score, signals=dict(sig), neighbors=around))
        return mark_updates(hits, query)


#: Words that announce a statement replaces an earlier one (matched before stop words go).
#: Deliberately narrow: "now" and "actually" are everywhere in chat and would
#: reorder ordinary results.
_UPDATE_MARKERS = frozenset(
    [
        "anymore",
        "longer",
        "changed",
        "instead",
        "update",
        "updated",
        "cleared",
        "switched",
        "outgrew",
        "stopped",
        "cancelled",
        "canceled",
    ]
)


def mark_updates(hits: list[Hit], query: str) -> list[Hit]:
    """Mark a hit that a later hit updates ("she can eat nuts now" after "she is
    allergic to nuts"), and make sure the update does not rank below it.

    Two hits are about the same thing when they share at least two of the
    query's terms; the later one updates the earlier when it also carries an
    update word ("anymore", "no longer", "changed", "instead", "cleared"...).
    The update is moved up only when its score is within a quarter of the
    earlier one's.
    """
    q = set(query_terms(query))
    if len(hits) < 2 or len(q) < 2:
        return hits
    terms = [set(analyze(h.message.content)) | set(analyze(h.message.speaker or "")) for h in hits]
    raw = [set(words(h.message.content)) for h in hits]
    order = list(range(len(hits)))
    marked = list(hits)
    for i in range(len(hits)):
        for j in range(len(hits)):
            if hits[j].message.index <= hits[i].message.index or marked[i].superseded_by:
                continue
            if len(terms[i] & terms[j] & q) < 2 or not (raw[j] & _UPDATE_MARKERS):
                continue
            marked[i] = replace(marked[i], superseded_by=hits[j].message.id)
            pos_i, pos_j = order.index(i), order.index(j)
            # The update goes right before what it updates, when the ranking had them
            # close anyway; a far weaker "update" is more likely a false alarm.
            if pos_j > pos_i and hits[j].score >= 0.75 * hits[i].score:
                order.insert(pos_i, order.pop(pos_j))
    return [marked[i] for i in order]
