"""``arbormem bench fit``: the ranker's fit, and where each category loses its evidence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from arbormem.bench.fit import by_category
from arbormem.recall.ranker import Example, metrics

from .conftest import run_cli, tiny_locomo, write_json


def test_fit_reports_each_category(tmp_path: Path) -> None:
    files = [write_json(tmp_path / f"conv-{n}.json", tiny_locomo(f"conv-{n}")) for n in ("a", "b")]
    done = run_cli("--embedder", "hash", "bench", "fit", *map(str, files), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for mode in ("tree", "flat"):
        r = result[mode]
        # Two copies of the file's three questions of categories 1, 3 and 4 (not 5).
        assert r["questions"] == 6
        assert set(r["by_category"]) == {"1", "3", "4"}
        for c in r["by_category"].values():
            assert c["questions"] == 2
            assert 0 <= c["recall@10"] <= c["candidate_recall"] <= 1
    text = run_cli("--embedder", "hash", "bench", "fit", str(files[0]))
    assert text.returncode == 0, text.stderr
    assert "category 4 (1 questions): candidates hold" in text.stdout


def test_fit_reports_each_set_side_by_side(tmp_path: Path) -> None:
    """Each folder is a set; every conversation of both is held out in turn."""
    for folder, names in (("written", ("a", "b")), ("real", ("c",))):
        (tmp_path / folder).mkdir()
        for n in names:
            write_json(tmp_path / folder / f"conv-{n}.json", tiny_locomo(f"conv-{n}"))
    paths = [str(tmp_path / "written"), str(tmp_path / "real")]
    done = run_cli("--embedder", "hash", "bench", "fit", *paths, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for mode in ("tree", "flat"):
        sets = result[mode]["by_set"]
        assert list(sets) == ["written", "real"]
        assert [sets[s]["conversations"] for s in sets] == [2, 1]
        assert [sets[s]["questions"] for s in sets] == [6, 3]
        for s in sets.values():
            assert set(s["leave_one_out"]) == {
                "recall@5",
                "recall@10",
                "recall@20",
                "ndcg@5",
                "session_hit@1",
            }
    text = run_cli("--embedder", "hash", "bench", "fit", *paths)
    assert text.returncode == 0, text.stderr
    header = next(line for line in text.stdout.splitlines() if "written" in line and "|" in line)
    assert header.index("written") < header.index("|") < header.index("real")
    assert "tree: 9 questions (written 6, real 3)" in text.stdout


def test_candidate_recall_counts_evidence_the_sources_missed() -> None:
    """Two evidence turns, one among the candidates: half, whatever the ranking."""
    ex = Example(
        X=np.asarray([[1.0], [0.0], [0.5]], dtype=np.float32),
        relevant=np.asarray([False, True, False]),
        n_evidence=2,
        session=np.asarray([0, 1, 0]),
        group="g",
        category=1,
    )
    got = by_category([ex], np.asarray([1.0], dtype=np.float32))["1"]
    assert got == {
        "questions": 1,
        "candidate_recall": 0.5,
        "recall@10": 0.5,
        "session_hit@1": 0.0,
    }


def test_stacked_metrics_rank_ties_in_candidate_order() -> None:
    """Scored all at once, questions rank as one at a time: equal scores keep the
    candidates' order, and a question with fewer than ten candidates is no trouble."""
    tied = Example(
        X=np.asarray([[1.0], [1.0], [1.0], [0.5]] * 4, dtype=np.float32),
        relevant=np.asarray([False] * 10 + [True] + [False] * 5),
        n_evidence=1,
        session=np.arange(16),
        group="g",
    )
    short = Example(
        X=np.asarray([[0.2], [0.9]], dtype=np.float32),
        relevant=np.asarray([True, False]),
        n_evidence=2,
        session=np.asarray([3, 3]),
        group="g",
    )
    w = np.asarray([1.0], dtype=np.float32)
    # The tied candidates rank 0, 1, 2, 4, 5, 6, 8, 9, 10, 12: the evidence (10) is 9th.
    assert metrics([tied], w) == {
        "recall@5": 0.0,
        "recall@10": 1.0,
        "recall@20": 1.0,
        "ndcg@5": 0.0,
        "session_hit@1": 0.0,
    }
    both = metrics([tied, short], w)
    assert both["recall@10"] == (1.0 + 0.5) / 2
    assert both["session_hit@1"] == 0.5  # the short one's first turn shares its session
