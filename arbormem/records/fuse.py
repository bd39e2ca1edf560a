"""Composite records: related records fused into a hierarchy, no LLM.

:func:`fuse` clusters records whose embeddings are close (cosine at or above a
threshold, single linkage: connected components of the similarity graph), and
makes each cluster of two or more a :class:`~arbormem.records.model.Composite`:
the text of its representative member (highest confidence, then most recent),
the union of its members' entities and tags, the span of their dates. The
composites are clustered again the same way, on the mean of their members'
vectors, into higher levels until nothing more fuses or ``levels`` is reached.

Everything here is a pure function of records and vectors; :func:`leaves`
drills down from a composite to the atomic records under it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from arbormem.records.model import Composite, Record

__all__ = ["DEFAULT_THRESHOLD", "clusters", "fuse", "leaves"]

#: Cosine at or above which two records (or composites) are related.
DEFAULT_THRESHOLD = 0.75
#: Each level up relaxes the threshold by this much: composites are broader than records.
LEVEL_STEP = 0.05
#: Rows compared at a time: bounds the memory the similarity matrix takes.
BLOCK = 1024


def _normalised(vectors: np.ndarray) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected one vector per row, got an array of shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def clusters(vectors: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> list[list[int]]:
    """Groups of row indices connected by cosine >= ``threshold`` (single linkage),
    each group sorted, groups in order of their first row. Singletons included."""
    matrix = _normalised(vectors)
    n = len(matrix)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for start in range(0, n, BLOCK):
        block = matrix[start : start + BLOCK] @ matrix.T
        rows, cols = np.nonzero(block >= threshold)
        for r, c in zip(rows.tolist(), cols.tolist()):
            i, j = start + r, c
            if i < j:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _composite_id(level: int, members: Sequence[str]) -> str:
    key = f"{level}\x1f" + "\x1f".join(sorted(members))
    return "cmp-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def _span(dates: Sequence[datetime | None]) -> tuple[datetime | None, datetime | None]:
    known = [d for d in dates if d is not None]
    return (min(known), max(known)) if known else (None, None)


def _union(groups: Sequence[Sequence[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for group in groups for item in group))


def _representative(records: Sequence[Record]) -> Record:
    def key(r: Record) -> tuple[float, float]:
        when = r.valid_from or r.updated_at or r.created_at
        return (r.confidence, when.timestamp() if when else float("-inf"))

    return max(records, key=key)


def fuse(
    records: Sequence[Record],
    vectors: np.ndarray,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    levels: int = 3,
    scope: str = "default/default",
) -> list[Composite]:
    """Composites over ``records`` (row ``i`` of ``vectors`` embeds ``records[i]``),
    level 1 first. Records that relate to nothing stay out of every composite."""
    if len(records) != len(vectors):
        raise ValueError(f"{len(records)} records but {len(vectors)} vectors")
    if not records:
        return []
    out: list[Composite] = []
    # level 1: clusters of records
    items_vectors = _normalised(vectors)
    current: list[Composite] = []
    current_vectors: list[np.ndarray] = []
    for group in clusters(items_vectors, threshold):
        if len(group) < 2:
            continue
        members = [records[i] for i in group]
        rep = _representative(members)
        first, last = _span([r.valid_from or r.created_at for r in members])
        composite = Composite(
            id=_composite_id(1, [r.id for r in members]),
            level=1,
            text=rep.text,
            members=tuple(r.id for r in members),
            entities=_union([r.entities for r in members]),
            tags=_union([r.tags for r in members]),
            first=first,
            last=last,
            scope=scope,
            extra={"representative": rep.id, "kinds": sorted({r.kind for r in members})},
        )
        current.append(composite)
        current_vectors.append(items_vectors[group].mean(axis=0))
    out.extend(current)
    # higher levels: clusters of composites, on the mean of their members' vectors
    level = 1
    while level < levels and len(current) >= 2:
        level += 1
        matrix = _normalised(np.vstack(current_vectors))
        nxt: list[Composite] = []
        nxt_vectors: list[np.ndarray] = []
        for group in clusters(matrix, threshold - LEVEL_STEP * (level - 1)):
            if len(group) < 2:
                continue
            children = [current[i] for i in group]
            top = max(
                children, key=lambda c: (len(c.members), c.last.timestamp() if c.last else 0.0)
            )
            first = min((c.first for c in children if c.first), default=None)
            last = max((c.last for c in children if c.last), default=None)
            composite = Composite(
                id=_composite_id(level, [c.id for c in children]),
                level=level,
                text=top.text,
                members=tuple(c.id for c in children),
                entities=_union([c.entities for c in children]),
                tags=_union([c.tags for c in children]),
                first=first,
                last=last,
                scope=scope,
                extra={"representative": top.id},
            )
            nxt.append(composite)
            nxt_vectors.append(matrix[group].mean(axis=0))
        if not nxt:
            break
        out.extend(nxt)
        current, current_vectors = nxt, nxt_vectors
    return out


def leaves(composite_id: str, composites: Mapping[str, Composite]) -> list[str]:
    """The record ids under a composite, through every level, in member order."""
    out: list[str] = []
    seen: set[str] = set()
    todo = [composite_id]
    while todo:
        cid = todo.pop(0)
        if cid in seen:
            continue
        seen.add(cid)
        composite = composites.get(cid)
        if composite is None:
            continue
        for member in composite.members:
            if member in composites:
                todo.append(member)
            elif member not in out:
                out.append(member)
    return out
