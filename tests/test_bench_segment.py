"""``arbormem bench segment``: the segmentation figures and the files they read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbormem.bench.segment import (
    Dialogue,
    Score,
    join_dialogues,
    labels_from_segments,
    load_file,
    pk,
    run,
    texttiling_labels,
    window_k,
    windowdiff,
)
from arbormem.bench.taskdial import DOMAINS, generate
from arbormem.errors import InputError

from .conftest import run_cli, write_json

SEGMENTATION_DIR = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "segmentation"


def test_labels_mark_the_last_utterance_of_each_segment() -> None:
    assert labels_from_segments([3, 1, 2]) == [0, 0, 1, 1, 0, 1]


def test_k_is_half_the_mean_segment_length_at_least_two() -> None:
    assert window_k([10, 10]) == 5
    assert window_k([1, 1, 1, 1]) == 2
    assert window_k([1]) == 1  # never past the dialogue


def test_pk_and_windowdiff_on_hand_counted_windows() -> None:
    ref = [0, 0, 1, 0, 0, 1]  # segments [3, 3]
    # Windows of 2: [0,1] [1,2] [2,3] [3,4] [4,5]; ref ends inside: F T T F T.
    assert pk(ref, ref, 2) == 0.0
    none = [0, 0, 0, 0, 0, 1]  # F F F F T: two windows wrong of five
    assert pk(ref, none, 2) == pytest.approx(2 / 5)
    late = [0, 0, 0, 1, 0, 1]  # F F T T T: windows 1 and 3 wrong
    assert pk(ref, late, 2) == pytest.approx(2 / 5)
    double = [0, 1, 1, 0, 0, 1]  # counts 1 2 1 0 1 against ref's 0 1 1 0 1
    assert windowdiff(ref, double, 2) == pytest.approx(2 / 5)
    assert pk(ref, double, 2) == pytest.approx(1 / 5)  # Pk only asks "any end inside?"


def test_score_counts_inner_boundaries_only() -> None:
    score = Score()
    score.add([0, 1, 0, 1], [0, 1, 1, 1], 2)  # one right, one extra; the final end ignored
    figures = score.summary()
    assert (figures["boundaries_predicted"], figures["boundaries_gold"]) == (2, 1)
    assert figures["precision"] == 0.5 and figures["recall"] == 1.0
    assert figures["f1"] == pytest.approx(2 / 3, abs=1e-4)


def test_causal_texttiling_splits_a_change_of_vocabulary() -> None:
    garden = [
        "tomato seedlings need repotting in bigger pots",
        "repotting tomato seedlings helps their roots",
        "tomato roots like deep pots with compost",
        "compost and deep pots for the tomato seedlings",
    ]
    car = [
        "the car engine rattles when cold",
        "a rattling car engine may need oil",
        "engine oil for the car when the rattle starts",
    ]
    dialogue = Dialogue("d", garden + car, ["user", "assistant"] * 3 + ["user"], [4, 3])
    labels = texttiling_labels(dialogue)
    assert labels[3] == 1  # the garden segment ends where the car starts
    assert labels[-1] == 1
    # Causal: what comes later cannot move an earlier decision.
    shorter = Dialogue("d", garden + car[:1], ["user"] * 5, [4, 1])
    assert texttiling_labels(shorter)[:4] == labels[:4]


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"x": 1}, "must be a JSON list"),
        ([{"utterances": ["a", ""], "segments": [2]}], "'[0].utterances'"),
        ([{"utterances": ["a", "b"], "segments": [1]}], "'[0].segments'"),
        ([{"utterances": ["a", "b"], "segments": [2, 0]}], "'[0].segments'"),
        ([{"utterances": ["a"], "segments": [1], "roles": ["agent"]}], "'[0].roles'"),
        ([], "holds no dialogue"),
    ],
)
def test_bad_files_name_the_dialogue_and_field(tmp_path: Path, value: object, named: str) -> None:
    path = write_json(tmp_path / "bad.json", value)
    with pytest.raises(InputError, match=r"bad\.json") as info:
        load_file(path)
    assert named in str(info.value)


def test_roles_alternate_when_absent(tmp_path: Path) -> None:
    path = write_json(tmp_path / "d.json", [{"utterances": ["a", "b", "c"], "segments": [3]}])
    assert load_file(path)[0].roles == ["user", "assistant", "user"]


def test_cli_reports_every_system_per_file(tmp_path: Path) -> None:
    dialogues = [
        {
            "dial_id": "trip-then-car",
            "utterances": [
                "We are planning a trip to Lisbon in May with my sister.",
                "Lisbon in May is lovely; how many days will you stay there?",
                "Five days, and we want to see Sintra and eat seafood in Alfama.",
                "Take the early train to Sintra and book the seafood place ahead.",
                "My car engine rattles loudly every morning when it is cold.",
                "A rattling engine on cold mornings often means low oil pressure.",
                "The mechanic said the engine oil was nearly empty and dirty.",
                "Then change the oil and the filter, and check the level weekly.",
            ],
            "segments": [4, 4],
        }
    ]
    path = write_json(tmp_path / "tiny.json", dialogues)
    env = {"ARBORMEM_EMBEDDER": "hash"}
    done = run_cli("bench", "segment", str(path), "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    figures = result["files"][str(path)]
    assert (figures["dialogues"], figures["utterances"]) == (1, 8)
    assert set(figures["systems"]) == {"arbormem", "no_boundary", "texttiling"}
    for s in figures["systems"].values():
        assert 0.0 <= s["pk"] <= 1.0 and 0.0 <= s["windowdiff"] <= 1.0
        assert s["boundaries_gold"] == 1
    assert figures["systems"]["no_boundary"]["boundaries_predicted"] == 0
    assert "k" in result["conventions"] and result["config"]["llm"] is None
    table = run_cli("bench", "segment", str(path), env=env)
    assert table.returncode == 0 and "WD" in table.stdout and "encoding" in table.stdout
    bad = run_cli("bench", "segment", str(write_json(tmp_path / "b.json", [])), env=env)
    assert bad.returncode == 1 and "holds no dialogue" in bad.stderr


def test_joined_dialogues_make_each_dialogue_one_segment() -> None:
    a = Dialogue("a", ["x", "y", "z"], ["user", "assistant", "user"], [1, 2])
    b = Dialogue("b", ["u", "v"], ["user", "assistant"], [2])
    (joined,) = join_dialogues([a, b, a], 2)  # the third, alone, is left out
    assert joined.dial_id == "a+b" and joined.segments == [3, 2]
    assert joined.utterances == ["x", "y", "z", "u", "v"]
    assert joined.roles == ["user", "assistant", "user", "user", "assistant"]


def test_task_dialogues_are_seeded_and_change_domain_at_every_segment() -> None:
    dialogues = generate(40, seed=5)
    assert dialogues == generate(40, seed=5) and dialogues != generate(40, seed=6)
    for d in dialogues:
        assert 3 <= len(d["segments"]) <= 6 and sum(d["segments"]) == len(d["utterances"])
        assert all(a != b for a, b in zip(d["domains"], d["domains"][1:]))
        assert set(d["domains"]) <= set(DOMAINS) and "roles" not in d
    texts = [u for d in dialogues for u in d["utterances"]]
    assert len(set(texts)) > 0.5 * len(texts)  # slot values and phrasings vary
    bare = [u for d in generate(40, seed=5, cues=0) for u in d["utterances"]]
    assert not any("goodbye" in u.lower() or "anything else" in u.lower() for u in bare)
    assert any("goodbye" in u.lower() for u in texts)


def test_cli_scores_generated_and_joined_dialogues(tmp_path: Path) -> None:
    path = write_json(tmp_path / "tasks.json", generate(4, seed=1))
    env = {"ARBORMEM_EMBEDDER": "hash"}
    done = run_cli(
        "bench",
        "segment",
        str(path),
        "--join",
        "2",
        "--tasks",
        "3",
        "--seed",
        "2",
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)["files"]
    joined = files[f"{path} (joined 2 at a time)"]
    assert joined["dialogues"] == 2 and joined["systems"]["no_boundary"]["boundaries_gold"] == 2
    (tasks,) = [v for k, v in files.items() if k.startswith("task dialogues")]
    gold = sum(len(d["segments"]) - 1 for d in generate(3, seed=2))
    assert tasks["dialogues"] == 3 and tasks["systems"]["arbormem"]["boundaries_gold"] == gold
    empty = run_cli("bench", "segment", env=env)
    assert empty.returncode != 0 and "--tasks" in empty.stderr


@pytest.mark.skipif(not SEGMENTATION_DIR.is_dir(), reason="segmentation data not in ../shared")
def test_the_development_files_load() -> None:
    for name in ("tiage-train.json", "tiage-dev.json", "superdialseg-validation.json"):
        dialogues = load_file(SEGMENTATION_DIR / name)
        assert dialogues and all(sum(d.segments) == len(d.utterances) for d in dialogues)


def test_the_hand_written_task_dialogues_split_better_than_never() -> None:
    # Held out: written in other words than the generator's, never tuned on (see
    # docs/benchmarks.md). This only guards that the tree keeps beating "no boundary".
    path = Path(__file__).parent / "data" / "segment_tasks_handwritten.json"
    dialogues = load_file(path)
    assert len(dialogues) == 10 and sum(len(d.segments) for d in dialogues) == 33
    systems = run([path])["files"][str(path)]["systems"]
    assert systems["arbormem"]["pk"] < systems["no_boundary"]["pk"]
