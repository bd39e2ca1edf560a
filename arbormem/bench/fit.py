"""``arbormem bench fit``: fit the ranker's weights, and say what they are worth.

For every conversation the turns are ingested exactly as ``bench locomo``
does, and for every question the retriever's real candidates and features
are recorded with which candidates are evidence. Coordinate ascent then
fits the weights twice over:

* leave-one-conversation-out: fit on the others, score the one left out;
  the pooled figures estimate what the weights do on conversations they never
  saw (these are the figures to quote);
* on all conversations: the weights to ship.

It does this with the tree on and off, since each has its own weights, and
again for each with the deep embedder's vectors (see :mod:`arbormem.deep`)
when one is configured.

Several development sets (LoCoMo's LLM-written conversations, REALTALK's real
ones) are fitted together: each folder given is a set (a file belongs to its
folder's), every conversation of every set is held out in turn, the fit weighs
each set the same (:func:`arbormem.ranker.balanced_objective`), and every
figure is reported for each set side by side.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.bench.locomo import HEADLINE_CATEGORIES, ingest_conversation, load_paths, questions_of
from arbormem.config import UNSET
from arbormem.deep import resolve_deep
from arbormem.embed import CachedEmbedder, Embedder, get_embedder
from arbormem.memory import Memory
from arbormem.recall.features import FEATURES, TREE_FEATURES
from arbormem.recall.ranker import (
    DEEP_FLAT_WEIGHTS,
    DEEP_TREE_WEIGHTS,
    FLAT_WEIGHTS,
    TREE_WEIGHTS,
    Example,
    fit,
    metrics,
    weight_vector,
)


def examples(
    paths: Sequence[str | Path],
    tree: bool,
    embedder: Any = None,
    progress: Callable[[str], None] | None = None,
    deep: Embedder | None = None,
) -> list[Example]:
    """Every headline question's candidates and features, as recall computes them;
    with ``deep``, once the deep embedder has indexed the conversation."""
    out: list[Example] = []
    emb = get_embedder(embedder)
    conversations = [
        (set_name(path), source, conv) for path in paths for source, conv in load_paths([path])
    ]
    with tempfile.TemporaryDirectory(prefix="arbormem-fit-") as tmp:
        for n, (dataset, source, conv) in enumerate(conversations):
            if progress:
                progress(f"{Path(source).name}: features ({_mode(tree, deep is not None)})")
            with Memory(
                Path(tmp) / f"fit-{n}.db", embedder=emb, tree=tree, llm=None, deep_embedder=deep
            ) as mem:
                dia_of = ingest_conversation(mem, conv)
                mem.wait(indexed=True)  # the deep embedder's indexing, if any
                session_of = {t.dia_id: t.session for t in conv.turns}
                for q in questions_of(conv):
                    if q.category not in HEADLINE_CATEGORIES:
                        continue
                    found = mem.ranking_features(q.text)
                    X = found.matrix
                    dias = [dia_of[m.id] for m in found.messages]
                    out.append(
                        Example(
                            X=X,
                            relevant=np.asarray([d in q.evidence for d in dias], dtype=bool),
                            n_evidence=len(q.evidence),
                            session=np.asarray([session_of[d] for d in dias], dtype=np.int64),
                            group=f"{dataset}/{conv.sample_id}",
                            category=q.category,
                            dataset=dataset,
                        )
                    )
    return out


def set_name(path: str | Path) -> str:
    """The development set a path belongs to: a folder's name, or a file's folder's."""
    p = Path(path).resolve()
    return p.name if p.is_dir() else p.parent.name


def _mode(tree: bool, deep: bool) -> str:
    return ("deep_" if deep else "") + ("tree" if tree else "flat")


def run(
    paths: Sequence[str | Path],
    embedder: Any = None,
    progress: Callable[[str], None] | None = None,
    deep_embedder: Any = UNSET,
) -> dict[str, Any]:
    """Fit every pipeline: tree on and off, and each again with the deep embedder's
    vectors when there is one (``deep_embedder``: a spec, unset for the configured)."""
    result: dict[str, Any] = {"features": list(FEATURES)}
    emb = get_embedder(embedder)
    found = resolve_deep(deep_embedder, emb)
    # One cache across the pipelines: the tree off reads the vectors the tree on made.
    deep = CachedEmbedder(found) if found is not None else None
    shipped_sets = {
        "tree": TREE_WEIGHTS,
        "flat": FLAT_WEIGHTS,
        "deep_tree": DEEP_TREE_WEIGHTS,
        "deep_flat": DEEP_FLAT_WEIGHTS,
    }
    for with_deep in (False, True) if deep is not None else (False,):
        for tree in (True, False):
            mode = _mode(tree, with_deep)
            data = examples(paths, tree, emb, progress, deep if with_deep else None)
            result[mode] = _fitted(data, tree, shipped_sets[mode], mode, progress)
            if with_deep:
                result[mode]["deep_embedder"] = deep.model_id if deep is not None else None
    return result


def _fitted(
    data: Sequence[Example],
    tree: bool,
    shipped: Mapping[str, float],
    mode: str,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Leave-one-conversation-out and in-sample fits of one pipeline's examples."""
    movable = [f for f in FEATURES if tree or f not in TREE_FEATURES]
    # Every fit starts from the same untouched weights: starting the held-out fits
    # from the shipped ones (fitted on every file, the held-out one too) leaked it.
    neutral = {f: 1.0 if f in movable else 0.0 for f in FEATURES}
    groups = sorted({e.group for e in data})
    held: list[tuple[Example, np.ndarray]] = []
    for g in groups:
        if progress:
            progress(f"{mode}: fitting without {g}")
        w = fit([e for e in data if e.group != g], neutral, movable)
        held.extend((e, weight_vector(w)) for e in data if e.group == g)
    final = weight_vector(fit(data, neutral, movable, progress=progress))
    by_set: dict[str, Any] = {}
    for name in dict.fromkeys(e.dataset for e in data):
        mine = [e for e in data if e.dataset == name]
        by_set[name] = {
            "conversations": len({e.group for e in mine}),
            "questions": len(mine),
            "leave_one_out": _pooled([(e, w) for e, w in held if e.dataset == name]),
            "in_sample": _rounded(metrics(mine, final)),
            "shipped_weights_in_sample": _rounded(metrics(mine, weight_vector(shipped))),
            "by_category": by_category(mine, weight_vector(shipped)),
        }
    return {
        "questions": len(data),
        "leave_one_out": _pooled(held),
        "in_sample": _rounded(metrics(data, final)),
        "shipped_weights_in_sample": _rounded(metrics(data, weight_vector(shipped))),
        "by_category": by_category(data, weight_vector(shipped)),
        "by_set": by_set,
        "weights": {name: round(float(final[i]), 3) for i, name in enumerate(FEATURES)},
    }


def _rounded(figures: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in figures.items()}


def by_category(data: Sequence[Example], w: np.ndarray) -> dict[str, dict[str, float]]:
    """Per category: how many questions, what share of their evidence turns the
    candidate sources found (``candidate_recall``: what any weights could reach
    at best, as recall@10 when a question has at most ten evidence turns), and
    recall@10 and session hit@1 with the weights ``w``. The gap between the first
    and the second says whether ranking or finding candidates loses more."""
    out: dict[str, dict[str, float]] = {}
    for cat in sorted({e.category for e in data}):
        mine = [e for e in data if e.category == cat]
        found = sum(float(e.relevant.sum()) / e.n_evidence for e in mine) / len(mine)
        ranked = metrics(mine, w)
        out[str(cat)] = {
            "questions": len(mine),
            "candidate_recall": round(found, 4),
            "recall@10": round(ranked["recall@10"], 4),
            "session_hit@1": round(ranked["session_hit@1"], 4),
        }
    return out


def _pooled(pairs: Sequence[tuple[Example, np.ndarray]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for ex, w in pairs:
        for k, v in metrics([ex], w).items():
            totals[k] = totals.get(k, 0.0) + v
    return {k: round(v / max(len(pairs), 1), 4) for k, v in totals.items()}
