"""Fit the topic boundary model of :mod:`arbormem.tree.segment` on gold dialogues.

``python -m arbormem.bench.segment_fit --train A.json B.json --check C.json``

Every ``--train`` file is split by position: its even-numbered dialogues fit
the model, its odd-numbered ones are held out; ``--check`` files are held out
whole. Fitting is a logistic regression (L2 penalty 1, Newton steps) on the
features of every message that the rules leave to the model, each measured
against its gold topic so far (the topic it would be in if every earlier
decision had been right). The threshold on continuity is then chosen by
replaying the dialogues online, as the tree decides, and keeping the value
with the lowest mean Pk over the fitting halves and their *joined* sets: the
same dialogues put end to end :data:`JOINED` at a time, each whole dialogue
one gold segment. Those stand in for data made of whole conversations put end
to end (task dialogues of changing domains), where a segmenter that splits at
every small turn of the subject fails; the development files hold no such
data. The output (JSON) holds the
weights, the threshold, and Pk, WindowDiff and boundary counts per file and
half at every threshold tried, so the spread between data sets shows.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from arbormem.bench.segment import (
    Dialogue,
    labels_from_segments,
    load_file,
    pk,
    window_k,
    windowdiff,
)
from arbormem.embed import get_embedder
from arbormem.tree.segment import (
    FEATURES,
    TopicState,
    boundary_probability,
    by_rule,
    feature_matrix,
    features,
)

THRESHOLDS = tuple(round(0.30 + 0.05 * i, 2) for i in range(11))
#: Dialogues put end to end in each joined set's dialogue.
JOINED = 4

Embedded = list[tuple[Dialogue, np.ndarray]]


def gold_starts(segments: Sequence[int]) -> set[int]:
    starts, position = set(), 0
    for size in segments[:-1]:
        position += size
        starts.add(position)
    return starts


def joined(dialogues: Embedded, size: int = JOINED) -> Embedded:
    """Consecutive dialogues put end to end, each one gold segment."""
    out = []
    for start in range(0, len(dialogues) - size + 1, size):
        group = dialogues[start : start + size]
        out.append(
            (
                Dialogue(
                    "+".join(d.dial_id for d, _ in group),
                    [u for d, _ in group for u in d.utterances],
                    [r for d, _ in group for r in d.roles],
                    [len(d.utterances) for d, _ in group],
                ),
                np.vstack([v for _, v in group]),
            )
        )
    return out


def training_rows(dialogues: Embedded) -> tuple[list[dict[str, float]], list[int]]:
    """Features and gold labels of every message the rules leave to the model."""
    rows, labels = [], []
    for dialogue, vecs in dialogues:
        starts = gold_starts(dialogue.segments)
        state = TopicState()
        for i, (text, vec) in enumerate(zip(dialogue.utterances, vecs)):
            if i:
                values = features(state, text, vec)
                if by_rule(state, text, values) is None:  # the model sees what rules leave
                    rows.append(values)
                    labels.append(int(i in starts))
            if i in starts:
                state.reset()
            state.add(text, vec)
    return rows, labels


def fit(rows: Sequence[Mapping[str, float]], labels: Sequence[int], l2: float = 1.0) -> np.ndarray:
    """Logistic regression weights, the bias last."""
    x = np.hstack([feature_matrix(rows), np.ones((len(rows), 1))])
    y = np.asarray(labels, dtype=np.float64)
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -50, 50)))
        penalty = l2 * np.r_[w[:-1], 0.0]
        grad = x.T @ (p - y) + penalty
        hess = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.diag(np.r_[np.ones(len(w) - 1), 0.0])
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w


def replay(
    dialogues: Embedded, weights: Mapping[str, float], bias: float, threshold: float
) -> dict[str, float]:
    """Online decisions as the tree makes them; Pk, WindowDiff and boundary counts."""
    pks, wds, predicted, gold = [], [], 0, 0
    for dialogue, vecs in dialogues:
        state = TopicState()
        hyp = [0] * len(dialogue.utterances)
        for i, (text, vec) in enumerate(zip(dialogue.utterances, vecs)):
            if i and _opens(state, text, vec, weights, bias, threshold):
                hyp[i - 1] = 1
                state.reset()
            state.add(text, vec)
        hyp[-1] = 1
        ref = labels_from_segments(dialogue.segments)
        k = window_k(dialogue.segments)
        pks.append(pk(ref, hyp, k))
        wds.append(windowdiff(ref, hyp, k))
        predicted += sum(hyp) - 1
        gold += len(dialogue.segments) - 1
    return {
        "pk": round(float(np.mean(pks)), 4),
        "windowdiff": round(float(np.mean(wds)), 4),
        "predicted": predicted,
        "gold": gold,
    }


def _opens(
    state: TopicState,
    text: str,
    vec: np.ndarray,
    weights: Mapping[str, float],
    bias: float,
    threshold: float,
) -> bool:
    values = features(state, text, vec)
    ruled = by_rule(state, text, values)
    if ruled is not None:
        return ruled
    p = boundary_probability(values, weights=weights, bias=bias)
    return 1 - p < threshold


def embed(paths: Sequence[str], embedder: str | None) -> dict[str, Embedded]:
    model = get_embedder(embedder)
    out = {}
    for path in paths:
        dialogues = load_file(path)
        vecs = model.embed_many([u for d in dialogues for u in d.utterances])
        pairs, start = [], 0
        for d in dialogues:
            pairs.append((d, vecs[start : start + len(d.utterances)]))
            start += len(d.utterances)
        out[path] = pairs
    return out


def run(train: Sequence[str], check: Sequence[str], embedder: str | None = None) -> dict[str, Any]:
    data = embed([*train, *check], embedder)
    fitting = {f"{p} (even)": data[p][0::2] for p in train}
    held = {f"{p} (odd)": data[p][1::2] for p in train} | {p: data[p] for p in check}
    # A file too small to join JOINED dialogues of a half has no joined set.
    junctions = {f"{p} (even, joined)": joined(data[p][0::2]) for p in train}
    junctions = {name: dialogues for name, dialogues in junctions.items() if dialogues}
    held |= {f"{p} (odd, joined)": joined(data[p][1::2]) for p in train}
    held = {name: dialogues for name, dialogues in held.items() if dialogues}
    rows: list[dict[str, float]] = []
    labels: list[int] = []
    for dialogues in fitting.values():
        r, y = training_rows(dialogues)
        rows += r
        labels += y
    w = fit(rows, labels)
    weights = {name: round(float(v), 2) for name, v in zip(FEATURES, w[:-1])}
    bias = round(float(w[-1]), 2)
    table: dict[str, dict[str, Any]] = {}
    for threshold in THRESHOLDS:
        table[str(threshold)] = {
            name: replay(dialogues, weights, bias, threshold)
            for name, dialogues in (fitting | junctions | held).items()
        }
    chosen = [*fitting, *junctions]
    best = min(THRESHOLDS, key=lambda t: np.mean([table[str(t)][name]["pk"] for name in chosen]))
    return {
        "weights": weights,
        "bias": bias,
        "split_threshold": best,
        "rows": len(rows),
        "boundaries": sum(labels),
        "by_threshold": table,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", nargs="+", required=True)
    parser.add_argument("--check", nargs="*", default=[])
    parser.add_argument("--embedder")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.train, args.check, args.embedder), indent=1))


if __name__ == "__main__":
    main()
