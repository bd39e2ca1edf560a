"""Retrieval metrics exactly as ``BENCHMARK.md`` defines them.

Every function scores one question; :class:`Accumulator` averages them and
keeps the per-category breakdown.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

RECALL_KS = (1, 5, 10, 20)


def dedupe(ranking: Iterable[str]) -> list[str]:
    """Turn ids in order of first appearance (duplicates count once)."""
    return list(dict.fromkeys(ranking))


def recall_at(ranking: Sequence[str], evidence: set[str], k: int) -> float:
    return len(evidence.intersection(ranking[:k])) / len(evidence)


def ndcg_at(ranking: Sequence[str], evidence: set[str], k: int = 5) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, t in enumerate(ranking[:k]) if t in evidence)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(evidence), k)))
    return dcg / ideal


def session_hit_at_1(
    ranking: Sequence[str], evidence: set[str], session_of: dict[str, str]
) -> float:
    """1 when the first session to appear in the ranking holds an evidence turn."""
    if not ranking:
        return 0.0
    first = session_of[ranking[0]]
    return 1.0 if any(session_of.get(e) == first for e in evidence) else 0.0


def budget_recall(context: str, evidence_texts: Sequence[str]) -> float:
    """Share of evidence turns whose text appears verbatim in the context."""
    return sum(1 for t in evidence_texts if t in context) / len(evidence_texts)


@dataclass
class QuestionScore:
    category: int
    values: dict[str, float]
    #: How long the question's search took.
    ms: float = 0.0


@dataclass
class Accumulator:
    """Collects per-question figures for one system and averages them."""

    budget: int
    scores: list[QuestionScore] = field(default_factory=list)
    ingest_turns: int = 0
    ingest_seconds: float = 0.0
    #: From the start of each ingest until its background indexing (the deep vectors,
    #: see arbormem.deep) was done: 0 when there was none.
    index_seconds: float = 0.0
    #: Typed records the system held once each ingest was timed (None: it keeps none).
    records: int | None = None

    def add(
        self,
        category: int,
        ranking: Sequence[str],
        evidence: set[str],
        session_of: dict[str, str],
        context: str,
        evidence_texts: Sequence[str],
        context_tokens: int,
        ms: float,
        extra_contexts: dict[str, str] | None = None,
    ) -> None:
        ranking = dedupe(ranking)
        values = {f"recall@{k}": recall_at(ranking, evidence, k) for k in RECALL_KS}
        values["ndcg@5"] = ndcg_at(ranking, evidence, 5)
        values["session_hit@1"] = session_hit_at_1(ranking, evidence, session_of)
        values[f"budget_recall@{self.budget}"] = budget_recall(context, evidence_texts)
        values["context_tokens_mean"] = float(context_tokens)
        for name, text in (extra_contexts or {}).items():
            values[f"budget_recall_{name}@{self.budget}"] = budget_recall(text, evidence_texts)
        self.scores.append(QuestionScore(category, values, ms))

    @staticmethod
    def _mean(scores: Sequence[QuestionScore]) -> dict[str, float]:
        if not scores:
            return {}
        keys = scores[0].values.keys()
        means = {k: round(float(np.mean([s.values[k] for s in scores])), 4) for k in keys}
        # Latency like every other figure: over the same questions.
        ms = np.asarray([s.ms for s in scores], dtype=float)
        means["query_ms_p50"] = round(float(np.percentile(ms, 50)), 3)
        means["query_ms_p95"] = round(float(np.percentile(ms, 95)), 3)
        return means

    def summary(self, headline_categories: Sequence[int] = (1, 2, 3, 4)) -> dict[str, object]:
        head = [s for s in self.scores if s.category in headline_categories]
        out: dict[str, object] = dict(self._mean(head))
        out.setdefault("query_ms_p50", 0.0)
        out.setdefault("query_ms_p95", 0.0)
        out["ingest_turns_per_s"] = (
            round(self.ingest_turns / self.ingest_seconds, 1) if self.ingest_seconds > 0 else None
        )
        if self.records is not None:
            out["records_extracted"] = self.records
        if self.index_seconds > 0:
            out["full_index_seconds"] = round(self.index_seconds, 1)
            out["full_index_turns_per_s"] = round(self.ingest_turns / self.index_seconds, 1)
        by_cat: dict[int, list[QuestionScore]] = defaultdict(list)
        for s in self.scores:
            by_cat[s.category].append(s)
        out["by_category"] = {
            str(c): {**self._mean(v), "questions": len(v)}
            for c, v in sorted(by_cat.items())
            if c in headline_categories
        }
        extra = {c: v for c, v in by_cat.items() if c not in headline_categories}
        if extra:
            out["adversarial"] = {
                str(c): {**self._mean(v), "questions": len(v)} for c, v in sorted(extra.items())
            }
        out["questions"] = len(head)
        return out
