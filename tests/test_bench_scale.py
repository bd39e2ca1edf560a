"""Benchmarks at scale: ``bench scale`` and ``bench locomo --distractors``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from arbormem.bench.locomo import DISTRACTOR_SESSION_BASE, run, with_distractors
from arbormem.bench.scale import check_plotting, parse_size, plot
from arbormem.errors import ConfigError
from arbormem.ingest.formats import parse_locomo

from .conftest import run_cli, tiny_locomo, write_json

RUN_KEYS = {
    "turns",
    "ingest_turns_per_s",
    "query_ms_p50",
    "query_ms_p95",
    "peak_rss_mb",
    "db_mb",
    "first_query_s",
}


# -- bench scale -------------------------------------------------------------------------


def test_bench_scale_json_measures_a_real_store_in_subprocesses() -> None:
    out = run_cli("bench", "scale", "--turns", "2000", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result) == {"runs", "config"}
    (figures,) = result["runs"]
    assert set(figures) >= RUN_KEYS
    assert figures["turns"] == 2000
    assert figures["ingest_turns_per_s"] > 0
    assert 0 < figures["query_ms_p50"] <= figures["query_ms_p95"]
    assert figures["db_mb"] > 0 and figures["first_query_s"] > 0
    assert figures["add_many_calls"] == 2 and figures["sessions"] > 2  # batches of 1,000
    if sys.platform != "win32":
        assert figures["peak_rss_mb"] >= figures["baseline_rss_mb"] > 0
    config = result["config"]
    assert config["embedder"].startswith("wordllama")
    assert config["queries"] == 300 and config["k"] == 10
    for key in ("recall", "tree", "cpu_count", "python", "sqlite", "platform"):
        assert key in config


def test_bench_scale_can_store_one_session_per_call() -> None:
    out = run_cli("bench", "scale", "--turns", "300", "--queries", "5", "--batch", "0", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    (figures,) = result["runs"]
    assert figures["add_many_calls"] == figures["sessions"] > 1
    assert result["config"]["batches"].startswith("one add_many per generated session")


def test_benches_use_the_embedder_named_in_the_config_file(tmp_path: Path) -> None:
    # No --embedder and no variable: the config file decides, as it does for Memory.
    config = tmp_path / "config.toml"
    config.write_text('embedder = "hash:64"\n')
    env = {"ARBORMEM_CONFIG": str(config)}
    scale = run_cli("bench", "scale", "--turns", "200", "--queries", "3", "--json", env=env)
    assert scale.returncode == 0, scale.stderr
    assert json.loads(scale.stdout)["config"]["embedder"] == "hash/64"
    path = write_json(tmp_path / "conv.json", tiny_locomo())
    locomo = run_cli("bench", "locomo", str(path), "--systems", "dense", "--json", env=env)
    assert locomo.returncode == 0, locomo.stderr
    assert json.loads(locomo.stdout)["systems"]["dense"]["config"]["embedder"] == "hash/64"
    context = run_cli("bench", "context", "--messages", "50", "--queries", "2", "--json", env=env)
    assert context.returncode == 0, context.stderr
    assert json.loads(context.stdout)["config"]["embedder"] == "hash/64"


def test_sizes_read_like_people_write_them() -> None:
    assert [parse_size(s) for s in ("2000", "10_000", "10,000", "10k", "1M", "2.5k")] == [
        2000,
        10_000,
        10_000,
        10_000,
        1_000_000,
        2500,
    ]
    for bad in ("lots", "0", "-5"):
        with pytest.raises(ConfigError, match="--turns"):
            parse_size(bad)


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    runs = [
        {
            "turns": n,
            "ingest_turns_per_s": 3000.0 / (1 + i),
            "query_ms_p50": 10.0 * (i + 1),
            "query_ms_p95": 20.0 * (i + 1),
            "peak_rss_mb": 200.0 * (i + 1),
            "db_mb": 10.0 * 10**i,
            "first_query_s": 0.3 * (i + 1),
        }
        for i, n in enumerate((1000, 10_000, 100_000))
    ]
    config = {"embedder": "hash/256", "k": 10, "cpu_count": 2, "python": "3.11"}
    target = tmp_path / "scale.png"
    plot({"runs": runs, "config": config}, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigError, match=re.escape("pip install 'arbormem[plot]'")):
        check_plotting()


# -- bench locomo --distractors -------------------------------------------------------------


def test_distractors_join_the_timeline_without_touching_the_real_turns() -> None:
    (conv,) = parse_locomo(tiny_locomo(), "conv-x.json")
    noisy = with_distractors(conv, 200, seed=1)
    real = [t for t in noisy.turns if not t.metadata.get("distractor")]
    extra = [t for t in noisy.turns if t.metadata.get("distractor")]
    assert real == conv.turns and len(extra) == 200
    assert noisy.qa == conv.qa and noisy.session_dates == conv.session_dates
    stamps = [t.timestamp for t in noisy.turns]
    assert stamps == sorted(stamps)
    first, last = min(conv.session_dates.values()), max(conv.session_dates.values())
    assert all(first <= t.timestamp <= last for t in extra)
    # Spread over the span, not piled up at one end.
    middle = first + (last - first) / 2
    assert 50 < sum(t.timestamp < middle for t in extra) < 150
    # Every session, real or generated, is one contiguous run or a few: real ones exactly one.
    order = [t.session for t in noisy.turns]
    for number in conv.session_dates:
        positions = [i for i, s in enumerate(order) if s == number]
        assert positions == list(range(positions[0], positions[-1] + 1))
    assert all(t.session > DISTRACTOR_SESSION_BASE for t in extra)
    assert len({t.dia_id for t in noisy.turns}) == len(noisy.turns)
    names = re.compile(r"\b(Ana|Ben)\b", re.IGNORECASE)
    assert not [t for t in extra if t.speaker in ("Ana", "Ben") or names.search(t.content)]
    assert {t.metadata["role"] for t in extra} == {"user", "assistant"}
    assert with_distractors(conv, 200, seed=1) == noisy
    assert with_distractors(conv, 0) is conv


def test_bench_locomo_with_distractors_on_the_tiny_conversation(tmp_path: Path) -> None:
    path = write_json(tmp_path / "conv-x.json", tiny_locomo())
    env = {"ARBORMEM_EMBEDDER": "hash"}
    out = run_cli("bench", "locomo", str(path), "--distractors", "200", "--json", env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["dataset"]["distractors"] == 200
    assert result["dataset"]["turns"] == 6 and result["dataset"]["questions"] == 3
    systems = result["systems"]
    assert {"arbormem", "bm25", "dense", "window", "full"} <= set(systems)
    # The records extracted inside the timed ingest are counted (the pet, the race...);
    # a baseline that keeps no records says nothing.
    assert systems["arbormem"]["records_extracted"] >= 1
    assert "records_extracted" not in systems["full"]
    assert systems["full"]["budget_recall@1000"] == 1.0
    # The whole history now costs far more than the six real turns did.
    assert systems["full"]["context_tokens_mean"] > 2000
    table = run_cli(
        "bench", "locomo", str(path), "--systems", "bm25", "--distractors", "50", env=env
    )
    assert table.returncode == 0, table.stderr
    assert "50 distractor turns each" in table.stdout


def test_distractors_dilute_the_history_every_storing_system_searches(tmp_path: Path) -> None:
    path = write_json(tmp_path / "conv-x.json", tiny_locomo())
    clean = run([path], ["bm25", "window"], embedder="hash")
    noisy = run([path], ["bm25", "window"], embedder="hash", distractors=300)
    assert "distractors" not in clean["dataset"]
    assert noisy["systems"]["window"]["recall@20"] < clean["systems"]["window"]["recall@20"]
    # The real turns are still found among the generated ones by their own words.
    assert noisy["systems"]["bm25"]["recall@20"] == 1.0


def test_a_locomo_ingest_leaves_no_upkeep_running(tmp_path: Path) -> None:
    # Short sessions are stored as live exchanges, whose upkeep runs a moment later:
    # left running, it changed the rankings of the first timed questions.
    from arbormem import Memory
    from arbormem.bench.locomo import ingest_conversation
    from arbormem.embed import HashingEmbedder

    (conv,) = parse_locomo(tiny_locomo(), "conv-x.json")
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as mem:
        ingest_conversation(mem, conv)
        assert not mem.pending()  # nothing queued, nothing running
        # Records extraction belongs to the timed ingest: done when it returns.
        assert mem.records(current=False)  # and pending() above: nothing left to extract
        thread = mem.backend.thread(mem.scope.user, mem.scope.agent)
        assert thread is not None
        assert mem.backend.session_state(thread, "session_2")  # its upkeep ran


def test_latency_figures_are_over_the_same_questions_as_the_others() -> None:
    from arbormem.bench.metrics import Accumulator

    acc = Accumulator(budget=1000)
    for i in range(19):
        acc.add(4, ["D1:1"], {"D1:1"}, {"D1:1": "1"}, "x", ["x"], 1, ms=1.0 + i / 100)
    acc.add(5, ["D1:1"], {"D1:1"}, {"D1:1": "1"}, "x", ["x"], 1, ms=1000.0)  # adversarial
    out = acc.summary()
    assert out["questions"] == 19 and out["query_ms_p95"] < 2.0
    by_cat = out["by_category"]
    assert isinstance(by_cat, dict) and by_cat["4"]["query_ms_p50"] == pytest.approx(1.09)
    adversarial = out["adversarial"]
    assert isinstance(adversarial, dict) and adversarial["5"]["query_ms_p95"] == 1000.0
