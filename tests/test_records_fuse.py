"""Composites without an LLM: records close in embedding space fuse, composites fuse
again one level up, and every composite drills down to its atomic records."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from arbormem.embed import HashingEmbedder
from arbormem.records.fuse import clusters, fuse, leaves
from arbormem.records.model import Record, record_id

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def record(text: str, n: int, *, confidence: float = 0.5, tags: tuple[str, ...] = ()) -> Record:
    return Record(
        id=record_id("u/a", text),
        kind="fact",
        text=text,
        subject="Sam",
        tags=tags,
        entities=("Sam", f"E{n}"),
        valid_from=T0 + timedelta(days=n),
        confidence=confidence,
    )


def test_clusters_are_connected_components_above_the_threshold() -> None:
    vectors = np.array(
        [[1, 0, 0], [0.95, 0.05, 0], [0, 1, 0], [0, 0.96, 0.04], [0, 0, 1]], dtype=np.float32
    )
    assert clusters(vectors, 0.9) == [[0, 1], [2, 3], [4]]
    assert clusters(vectors, 0.0) == [[0, 1, 2, 3, 4]]
    # single linkage: a chain joins ends that are not close themselves
    chain = np.array([[1, 0], [0.9, 0.44], [0.6, 0.8]], dtype=np.float32)
    assert clusters(chain, 0.85) == [[0, 1, 2]]


def test_fuse_builds_levels_with_a_representative_and_merged_entities() -> None:
    records = [
        record("Sam lives in Lyon.", 0, confidence=0.9, tags=("home",)),
        record("Sam moved to Lyon in May.", 1, tags=("home", "change")),
        record("Sam works at Acme.", 2, tags=("employer",)),
        record("Sam started at Acme in June.", 3, confidence=0.8, tags=("employer",)),
        record("Sam likes jazz.", 4),
    ]
    a, b = np.array([1.0, 0.0, 0.0]), np.array([0.8, 0.6, 0.0])
    vectors = np.array([a, a * 0.99 + 0.01, b, b, [0, 0, 1.0]], dtype=np.float32)
    built = fuse(records, vectors, threshold=0.95, levels=3)
    level1 = [c for c in built if c.level == 1]
    level2 = [c for c in built if c.level == 2]
    assert [sorted(c.members) for c in level1] == [
        sorted([records[0].id, records[1].id]),
        sorted([records[2].id, records[3].id]),
    ]
    assert level1[0].text == "Sam lives in Lyon."  # the most confident member speaks for it
    assert level1[0].tags == ("home", "change") and set(level1[0].entities) == {"Sam", "E0", "E1"}
    assert level1[0].first == T0 and level1[0].last == T0 + timedelta(days=1)
    # one level up the threshold relaxes: the home and job composites (cosine 0.8) stay
    # apart at 0.90, and join when it is low enough
    assert level2 == []
    built = fuse(records, vectors, threshold=0.85, levels=3)
    (top,) = [c for c in built if c.level == 2]
    by_id = {c.id: c for c in built}
    assert set(leaves(top.id, by_id)) == {r.id for r in records[:4]}
    assert records[4].id not in {m for c in built for m in c.members}


def test_fuse_is_deterministic_and_checks_its_input() -> None:
    records = [record(f"Sam fact number {n}.", n) for n in range(6)]
    vectors = HashingEmbedder(32).embed_batch([r.text for r in records])
    assert fuse(records, vectors, threshold=0.2) == fuse(records, vectors, threshold=0.2)
    assert fuse([], np.zeros((0, 4))) == []
    with pytest.raises(ValueError, match="6 records but 2 vectors"):
        fuse(records, vectors[:2])
