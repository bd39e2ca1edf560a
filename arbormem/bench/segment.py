"""``arbormem bench segment``: the topic tree as an online dialogue segmenter.

Data: dialogue-segmentation files in the common JSON layout, a list of
``{"dial_id", "utterances": [...], "roles"?: [...], "segments": [sizes]}``
(roles alternate ``user``/``assistant`` from the first utterance when absent;
``segments`` are the sizes of consecutive gold topic segments).

Each dialogue goes into a fresh in-memory store, one utterance per
:meth:`Memory.add`, as one session, with the default configuration and no
LLM: every decision is made when its utterance arrives and never revised.
A boundary falls wherever two consecutive utterances sit in different
innermost topics of the tree (width-control groups are not topics).

Figures, as ``BENCHMARK.md`` defines them (lower is better for Pk and WD):

* **Pk** and **WindowDiff** per dialogue, averaged over dialogues, with
  ``k = max(2, round(mean gold segment length / 2))`` for each dialogue (never
  more than its length), boundaries encoded as 1 on the last utterance of each
  segment (the final utterance always carries one, in gold and prediction);
* **F1** of boundaries, micro-averaged over the file: a predicted boundary
  (between utterances ``i`` and ``i + 1``) is right only where gold has one;
* predicted and gold boundary counts.

Two baselines run on the same dialogues: ``no_boundary`` (one segment per
dialogue) and ``texttiling``, a causal TextTiling that sees only the left
context (see :func:`texttiling_labels`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path
from typing import Any

from arbormem.embed import Embedder, get_embedder
from arbormem.embed.base import CachedEmbedder
from arbormem.errors import InputError
from arbormem.ingest.formats import parse_json, read_bytes_as_text
from arbormem.memory import Memory
from arbormem.text import analyze
from arbormem.tree.config import TreeConfig
from arbormem.tree.view import TopicNode

SYSTEMS = ("arbormem", "no_boundary", "texttiling")
ROLES = ("user", "assistant")
#: Dialogues are stamped this far apart: no silence is long enough to split a topic.
UTTERANCE_GAP = timedelta(seconds=30)
START = datetime(2024, 1, 1, tzinfo=timezone.utc)
#: Causal TextTiling: utterances in the block left of each gap.
TILING_BLOCK = 3

CONVENTIONS = {
    "pk_windowdiff": "per dialogue, averaged over dialogues; lower is better",
    "k": "max(2, round(mean gold segment length / 2)) per dialogue, at most its length",
    "encoding": "1 on the last utterance of each segment (the final utterance included)",
    "f1": "boundaries between consecutive utterances, exact position, micro over the file",
    "arbormem": "one fresh in-memory store per dialogue, one Memory.add per utterance, "
    "one session, default tree, no LLM; a boundary where consecutive utterances sit in "
    "different innermost topics",
    "texttiling": f"causal: cosine of word counts of the {TILING_BLOCK} utterances before "
    "each gap with the utterance after it; depth below the left peak; boundary when the "
    "depth exceeds mean - std/2 of the depths so far",
}


@dataclass(frozen=True)
class Dialogue:
    dial_id: str
    utterances: list[str]
    roles: list[str]
    segments: list[int]


def load_file(path: str | Path) -> list[Dialogue]:
    """The dialogues of one file, checked (bad input names the dialogue and field)."""
    source = str(path)
    data = parse_json(read_bytes_as_text(Path(path)), source)
    if not isinstance(data, list):
        raise InputError(
            "must be a JSON list of dialogues",
            source=source,
            hint='each {"dial_id", "utterances": [...], "segments": [sizes]}',
        )
    out = []
    for i, item in enumerate(data):
        where = f"[{i}]"
        if not isinstance(item, dict):
            raise InputError("must be an object", source=source, field=where)
        utterances = item.get("utterances")
        if (
            not isinstance(utterances, list)
            or not utterances
            or not all(isinstance(u, str) and u.strip() for u in utterances)
        ):
            raise InputError(
                "must be a non-empty list of non-blank strings",
                source=source,
                field=f"{where}.utterances",
            )
        n = len(utterances)
        roles = item.get("roles")
        if roles is None:
            roles = [ROLES[j % 2] for j in range(n)]
        elif not isinstance(roles, list) or len(roles) != n or any(r not in ROLES for r in roles):
            raise InputError(
                f"must list 'user' or 'assistant' for each of the {n} utterances",
                source=source,
                field=f"{where}.roles",
                hint="leave it out for alternating roles",
            )
        segments = item.get("segments")
        if (
            not isinstance(segments, list)
            or not segments
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in segments)
            or sum(segments) != n
        ):
            raise InputError(
                f"must be positive segment sizes summing to the {n} utterances",
                source=source,
                field=f"{where}.segments",
            )
        dial_id = item.get("dial_id", str(i))
        out.append(Dialogue(str(dial_id), list(utterances), list(roles), list(segments)))
    if not out:
        raise InputError("holds no dialogue", source=source)
    return out


# -- metrics -------------------------------------------------------------------------------


def labels_from_segments(segments: Sequence[int]) -> list[int]:
    """1 on the last utterance of each segment, 0 elsewhere."""
    out: list[int] = []
    for size in segments:
        out.extend([0] * (size - 1) + [1])
    return out


def window_k(segments: Sequence[int]) -> int:
    """Half the mean gold segment length, rounded, at least 2, at most the dialogue."""
    n = sum(segments)
    return min(n, max(2, round(n / len(segments) / 2)))


def pk(ref: Sequence[int], hyp: Sequence[int], k: int) -> float:
    """Share of windows of ``k`` utterances where reference and hypothesis disagree
    on whether a segment ends inside."""
    windows = len(ref) - k + 1
    wrong = sum((1 in ref[i : i + k]) != (1 in hyp[i : i + k]) for i in range(windows))
    return wrong / windows


def windowdiff(ref: Sequence[int], hyp: Sequence[int], k: int) -> float:
    """Share of windows of ``k`` utterances whose counts of segment ends differ."""
    windows = len(ref) - k + 1
    wrong = sum(sum(ref[i : i + k]) != sum(hyp[i : i + k]) for i in range(windows))
    return wrong / windows


@dataclass
class Score:
    """Running figures of one system over one file."""

    pk_sum: float = 0.0
    wd_sum: float = 0.0
    dialogues: int = 0
    true_pos: int = 0
    predicted: int = 0
    gold: int = 0
    seconds: float = 0.0
    utterances: int = 0

    def add(self, ref: Sequence[int], hyp: Sequence[int], k: int) -> None:
        self.pk_sum += pk(ref, hyp, k)
        self.wd_sum += windowdiff(ref, hyp, k)
        self.dialogues += 1
        self.utterances += len(ref)
        inner_ref, inner_hyp = ref[:-1], hyp[:-1]  # the final utterance always ends one
        self.true_pos += sum(r and h for r, h in zip(inner_ref, inner_hyp))
        self.predicted += sum(inner_hyp)
        self.gold += sum(inner_ref)

    def summary(self) -> dict[str, Any]:
        precision = self.true_pos / self.predicted if self.predicted else 0.0
        recall = self.true_pos / self.gold if self.gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {
            "pk": round(self.pk_sum / self.dialogues, 4),
            "windowdiff": round(self.wd_sum / self.dialogues, 4),
            "f1": round(f1, 4),
            "precision": round(precision, 4),
            "recall": round(recall, 4),
            "boundaries_predicted": self.predicted,
            "boundaries_gold": self.gold,
            "utterances_per_s": round(self.utterances / self.seconds, 1) if self.seconds else None,
        }


# -- systems -------------------------------------------------------------------------------


def no_boundary_labels(dialogue: Dialogue) -> list[int]:
    n = len(dialogue.utterances)
    return [0] * (n - 1) + [1]


def texttiling_labels(dialogue: Dialogue, block: int = TILING_BLOCK) -> list[int]:
    """Causal TextTiling: at each gap, the cosine between the word counts of the
    ``block`` utterances before it and of the utterance after it; its depth below
    the highest score since the last boundary; a boundary when the depth clears
    ``mean - std / 2`` of every depth so far (Hearst's liberal cut-off)."""
    terms = [analyze(u) for u in dialogue.utterances]
    n = len(terms)
    labels = [0] * n
    labels[-1] = 1
    depths: list[float] = []
    peak = 0.0
    start = 0  # first utterance of the current segment
    for i in range(1, n):
        left: dict[str, int] = {}
        for t in (t for u in terms[max(start, i - block) : i] for t in u):
            left[t] = left.get(t, 0) + 1
        right: dict[str, int] = {}
        for t in terms[i]:
            right[t] = right.get(t, 0) + 1
        dot = sum(c * right.get(t, 0) for t, c in left.items())
        norm = math.sqrt(sum(c * c for c in left.values()) * sum(c * c for c in right.values()))
        score = dot / norm if norm else 0.0
        peak = max(peak, score)
        depth = peak - score
        depths.append(depth)
        if len(depths) < 3 or i - start < 2:
            continue
        mean = sum(depths) / len(depths)
        std = math.sqrt(sum((d - mean) ** 2 for d in depths) / len(depths))
        if depth > 0 and depth > mean - std / 2:
            labels[i - 1] = 1
            start, peak = i, 0.0
    return labels


def innermost_topics(root: TopicNode, n: int) -> list[int]:
    """For each message position, the id of the innermost topic holding it."""
    owner = [-1] * n

    def walk(node: TopicNode, topic: int) -> None:
        if node.kind == "topic":
            topic = node.id
        if node.kind == "leaf":
            for m in node.messages:
                if 0 <= m.index < n:
                    owner[m.index] = topic
            return
        for child in node.children:
            walk(child, topic)

    walk(root, -1)
    return owner


def arbormem_labels(
    dialogue: Dialogue, embedder: Embedder, tree: TreeConfig | None = None
) -> list[int]:
    """Feed the dialogue through ``Memory.add`` and read the boundaries off its tree."""
    with Memory(
        ":memory:",
        user="bench",
        agent="segment",
        embedder=embedder,
        llm=None,
        reranker=None,
        tree=tree if tree is not None else True,
    ) as mem:
        for i, (text, role) in enumerate(zip(dialogue.utterances, dialogue.roles)):
            mem.add(text, role=role, session="dialogue", timestamp=START + i * UTTERANCE_GAP)
        owner = innermost_topics(mem.tree(), len(dialogue.utterances))
    labels = [int(a != b) for a, b in pairwise(owner)]
    return [*labels, 1]


# -- the run -------------------------------------------------------------------------------


def run(
    paths: Sequence[str | Path],
    *,
    embedder: str | Embedder | None = None,
    tree: TreeConfig | None = None,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Score arbormem and both baselines on every file; one entry per file."""
    files = [(str(p), load_file(p)) for p in paths]
    inner = get_embedder(embedder)
    cached = inner if isinstance(inner, CachedEmbedder) else CachedEmbedder(inner, 200_000)
    out: dict[str, Any] = {
        "files": {},
        "conventions": CONVENTIONS,
        "config": {
            "embedder": cached.model_id,
            "tree": (tree or TreeConfig()).to_dict(),
            "llm": None,
        },
    }
    for source, dialogues in files:
        dialogues = dialogues[:limit] if limit else dialogues
        # One batch for the whole file: add() then finds every vector in the cache.
        cached.embed_many([u for d in dialogues for u in d.utterances])
        scores = {name: Score() for name in SYSTEMS}
        systems: dict[str, Callable[[Dialogue], list[int]]] = {
            "arbormem": lambda d: arbormem_labels(d, cached, tree),
            "no_boundary": no_boundary_labels,
            "texttiling": texttiling_labels,
        }
        for j, dialogue in enumerate(dialogues):
            ref = labels_from_segments(dialogue.segments)
            k = window_k(dialogue.segments)
            for name, label in systems.items():
                began = time.perf_counter()
                hyp = label(dialogue)
                scores[name].seconds += time.perf_counter() - began
                scores[name].add(ref, hyp, k)
            if progress is not None and (j + 1) % 100 == 0:
                progress(f"{source}: {j + 1}/{len(dialogues)} dialogues")
        out["files"][source] = {
            "dialogues": len(dialogues),
            "utterances": sum(len(d.utterances) for d in dialogues),
            "systems": {name: s.summary() for name, s in scores.items()},
        }
    return out


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2)
