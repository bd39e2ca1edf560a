"""The linear ranker over :mod:`arbormem.recall.features`, and how its weights are fitted.

A candidate's score is the dot product of its feature row with a weight per
feature. There are two weight sets: one for stores with the topic tree (which
supplies ``bm_topic`` and ``bm_sess``) and one for stores without ("flat").

The shipped weights were fitted by ``arbormem bench fit`` on the five LoCoMo
development conversations (coordinate ascent on recall and session hit), and
the same command reports what the fit is worth on unseen conversations by
fitting leave-one-conversation-out: the figures to trust are those.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arbormem.recall.features import FEATURES

#: Fitted with the tree on by ``arbormem bench fit`` on the five LoCoMo development
#: conversations (over several rounds, each from the last round's weights). Fitted
#: leave-one-conversation-out from an untouched start, the procedure gives recall@10
#: 0.808 and session hit@1 0.762 on conversations it did not see.
TREE_WEIGHTS: Mapping[str, float] = {
    "bm_t": 1.0,
    "bm_w": 1.5,
    "bm_prev": 0.85,
    "bm_next": 0.1,
    "sess_max": 0.0,
    "cov_t": 0.0,
    "cov_w": 0.5,
    "de_t": 0.5,
    "de_w": 2.0,
    "de_s": 1.0,
    "spk": 2.2,
    "temp": 3.0,
    "when_time": 0.75,
    "num_count": 2.0,
    "cap_who": 1.5,
    "first": 0.25,
    "len": 1.0,
    "bm_pair": 1.0,
    "bm_topic": 0.3,
    "bm_sess": 0.6,
    "cov_topic": 0.0,
    "cov_sess": 0.0,
}
#: Fitted the same way with the tree off (leave-one-out recall@10 0.813,
#: session hit@1 0.746).
FLAT_WEIGHTS: Mapping[str, float] = {
    "bm_t": 1.0,
    "bm_w": 2.0,
    "bm_prev": 0.85,
    "bm_next": 0.25,
    "sess_max": 0.5,
    "cov_t": 0.25,
    "cov_w": 0.25,
    "de_t": 0.75,
    "de_w": 2.0,
    "de_s": 0.75,
    "spk": 2.2,
    "temp": 3.0,
    "when_time": 0.75,
    "num_count": 1.5,
    "cap_who": 1.5,
    "first": 0.25,
    "len": 1.0,
    "bm_pair": 0.75,
    "bm_topic": 0.0,
    "bm_sess": 0.0,
    "cov_topic": 0.0,
    "cov_sess": 0.0,
}


#: The weights when the dense features come from the deep embedder (bge-small,
#: see :mod:`arbormem.deep`), fitted by ``arbormem bench fit`` from the untouched
#: start on all ten development conversations (LoCoMo and REALTALK, the two sets
#: weighing the same). Leave-one-conversation-out, with the tree on: LoCoMo
#: recall@10 0.822 and session hit@1 0.780, REALTALK 0.694 and 0.743.
DEEP_TREE_WEIGHTS: Mapping[str, float] = {
    "bm_t": 1.0,
    "bm_w": 0.1,
    "bm_prev": 0.0,
    "bm_next": 0.1,
    "sess_max": 0.5,
    "cov_t": 1.0,
    "cov_w": 1.0,
    "de_t": 4.0,
    "de_w": 4.0,
    "de_s": 0.25,
    "spk": 3.0,
    "temp": 4.0,
    "when_time": 1.0,
    "num_count": 1.0,
    "cap_who": 0.5,
    "first": 0.75,
    "len": 0.75,
    "bm_pair": 1.0,
    "bm_topic": 0.75,
    "bm_sess": 0.1,
    "cov_topic": 0.0,
    "cov_sess": 0.5,
}
#: The same with the tree off (leave-one-out LoCoMo 0.828 / 0.767, REALTALK 0.697 / 0.729).
DEEP_FLAT_WEIGHTS: Mapping[str, float] = {
    "bm_t": 2.0,
    "bm_w": 0.25,
    "bm_prev": 0.25,
    "bm_next": 0.1,
    "sess_max": 1.0,
    "cov_t": 0.0,
    "cov_w": 0.75,
    "de_t": 4.0,
    "de_w": 3.0,
    "de_s": 2.0,
    "spk": 3.0,
    "temp": 4.0,
    "when_time": 1.0,
    "num_count": 1.0,
    "cap_who": 1.0,
    "first": 0.25,
    "len": 0.75,
    "bm_pair": 1.0,
    "bm_topic": 0.0,
    "bm_sess": 0.0,
    "cov_topic": 0.0,
    "cov_sess": 0.0,
}


def weight_vector(weights: Mapping[str, float]) -> np.ndarray:
    return np.asarray([float(weights.get(name, 0.0)) for name in FEATURES], dtype=np.float32)


# -- fitting ---------------------------------------------------------------------------------


@dataclass
class Example:
    """One training question: its candidates' features and which are evidence."""

    X: np.ndarray
    relevant: np.ndarray  # bool per candidate
    n_evidence: int  # evidence turns in all (some may not be candidates)
    session: np.ndarray  # session index per candidate (for session hit@1)
    group: str  # the conversation, for leave-one-out
    category: int = 0  # the question's LoCoMo category (0 when unknown)
    dataset: str = ""  # the development set the conversation belongs to


class Stacked:
    """Examples padded into one array, so a weight vector is scored over all of them
    at once (fitting scores thousands of weight vectors)."""

    def __init__(self, examples: Sequence[Example]) -> None:
        n = len(examples)
        # At least twenty columns: the top twenty is read off every row (padding ranks
        # last and is never relevant).
        width = max([len(ex.X) for ex in examples] + [20])
        self.n = n
        dims = examples[0].X.shape[1] if n and examples[0].X.ndim == 2 else len(FEATURES)
        #: One (questions x candidates) matrix per feature.
        self.columns = np.zeros((dims, n, width), dtype=np.float32)
        self.valid = np.zeros((n, width), dtype=bool)
        self.relevant = np.zeros((n, width), dtype=bool)
        self.session = np.full((n, width), -1, dtype=np.int64)
        self.n_evidence = np.asarray([max(ex.n_evidence, 1) for ex in examples], dtype=np.float64)
        for i, ex in enumerate(examples):
            k = len(ex.X)
            if k:
                self.columns[:, i, :k] = ex.X.T
                self.valid[i, :k] = True
                self.relevant[i, :k] = ex.relevant
                self.session[i, :k] = ex.session
        self.discounts = 1.0 / np.log2(np.arange(2, 7))
        self.ideal = np.asarray(
            [self.discounts[: min(ex.n_evidence, 5)].sum() or 1.0 for ex in examples]
        )

    def scores(self, w: np.ndarray) -> np.ndarray:
        """Every candidate's score under the weights ``w``."""
        flat = self.columns.reshape(len(self.columns), -1)
        return (np.asarray(w, dtype=np.float32) @ flat).reshape(self.n, -1)

    def metrics(self, w: np.ndarray) -> dict[str, float]:
        """recall@5/@10/@20, nDCG@5 and session hit@1 of the weights ``w``."""
        return self.metrics_of(self.scores(w))

    def metrics_of(self, scores: np.ndarray) -> dict[str, float]:
        """The figures of :meth:`metrics` for given candidate scores."""
        if not self.n:
            return {
                "recall@5": 0.0,
                "recall@10": 0.0,
                "recall@20": 0.0,
                "ndcg@5": 0.0,
                "session_hit@1": 0.0,
            }
        # Stable, as ranking is: equal scores keep the candidates' order.
        order = np.argsort(-np.where(self.valid, scores, -np.inf), axis=1, kind="stable")[:, :20]
        rows = np.arange(self.n)[:, None]
        rel = self.relevant[rows, order] & self.valid[rows, order]
        r5 = rel[:, :5].sum(axis=1) / self.n_evidence
        r10 = rel[:, :10].sum(axis=1) / self.n_evidence
        r20 = rel.sum(axis=1) / self.n_evidence
        ndcg = (rel[:, :5] * self.discounts).sum(axis=1) / self.ideal
        first = self.session[np.arange(self.n), order[:, 0]]
        hit = (self.relevant & (self.session == first[:, None])).any(axis=1)
        hit &= self.valid[np.arange(self.n), order[:, 0]]
        return {
            "recall@5": float(r5.mean()),
            "recall@10": float(r10.mean()),
            "recall@20": float(r20.mean()),
            "ndcg@5": float(ndcg.mean()),
            "session_hit@1": float(hit.mean()),
        }


def metrics(examples: Sequence[Example], w: np.ndarray) -> dict[str, float]:
    """recall@5/@10/@20, nDCG@5 and session hit@1 of a weight vector over examples."""
    return Stacked(examples).metrics(w)


def objective(m: Mapping[str, float]) -> float:
    return m["recall@5"] + m["recall@10"] + m["ndcg@5"] + m["session_hit@1"]


def balanced_objective(examples: Sequence[Example], w: np.ndarray) -> float:
    """The mean of :func:`objective` over the examples' development sets, each set
    weighing the same whatever its number of questions: weights fitted on LLM-written
    and real conversations together should serve both, not the larger one."""
    return _balanced(_by_set(examples), w)


def _by_set(examples: Sequence[Example]) -> list[Stacked]:
    sets: dict[str, list[Example]] = {}
    for ex in examples:
        sets.setdefault(ex.dataset, []).append(ex)
    return [Stacked(part) for part in sets.values()]


def _balanced(stacks: Sequence[Stacked], w: np.ndarray) -> float:
    return sum(objective(s.metrics(w)) for s in stacks) / max(len(stacks), 1)


GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


def fit(
    examples: Sequence[Example],
    start: Mapping[str, float],
    features: Sequence[str] = FEATURES,
    passes: int = 3,
    progress: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Coordinate ascent: one feature at a time, the grid value that helps most
    (by :func:`balanced_objective`)."""
    w = weight_vector(start)
    stacks = _by_set(examples)
    best = _balanced(stacks, w)
    movable = [FEATURES.index(f) for f in features]
    for p in range(passes):
        improved = False
        for j in movable:
            keep = w[j]
            # Only weight j changes: each set's scores without it, then plus each value.
            rest = [(s, s.scores(w) - keep * s.columns[j]) for s in stacks]
            for value in GRID:
                if value == keep:
                    continue
                score = sum(objective(s.metrics_of(r + value * s.columns[j])) for s, r in rest)
                score /= max(len(stacks), 1)
                if score > best + 1e-9:
                    best, keep, improved = score, value, True
            w[j] = keep
        if progress:
            progress(f"pass {p + 1}: objective {best:.4f}")
        if not improved:
            break
    return {name: float(w[i]) for i, name in enumerate(FEATURES)}
