"""``arbormem bench updates``: the changed-facts benchmark, its generator, the
hand-written conversations (each must be answered right, one by one) and the
extractor's output on a real LoCoMo conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbormem.bench.updates import (
    Conversation,
    build_book,
    evaluate,
    extract_locomo,
    generate,
    load_conversations,
)
from arbormem.errors import InputError

from .conftest import run_cli, write_json

DATA = Path(__file__).resolve().parent / "data"
HAND_WRITTEN = load_conversations(DATA / "updates_handwritten.json")
HELD_OUT = load_conversations(DATA / "updates_heldout.json") + load_conversations(
    DATA / "updates_heldout2.json"
)


@pytest.mark.parametrize("conv", HAND_WRITTEN + HELD_OUT, ids=lambda c: c.id)
def test_every_hand_written_conversation_is_answered(conv: Conversation) -> None:
    misses: list[dict[str, object]] = []
    result = evaluate([conv], misses=misses)
    assert misses == [], misses
    assert result["questions"]["current"] >= 1


def test_there_are_enough_hand_written_conversations_of_each_kind() -> None:
    assert len(HAND_WRITTEN) >= 12
    attributes = {q.attribute for conv in HAND_WRITTEN for q in conv.questions}
    assert {"home", "employer", "phone", "diet", "allergy", "schedule"} <= attributes


def test_the_generator_is_seeded_and_varied() -> None:
    a, b = generate(3, seed=7), generate(3, seed=7)
    assert [m.text for c in a for m in c.messages] == [m.text for c in b for m in c.messages]
    assert [q.text for c in a for q in c.questions] == [q.text for c in b for q in c.questions]
    other = generate(3, seed=8)
    assert [m.text for c in a for m in c.messages] != [m.text for c in other for m in c.messages]
    conv = a[0]
    assert any(q.as_of is not None for q in conv.questions)
    assert any(q.as_of is None for q in conv.questions)
    # the as-of moments fall inside the conversation's span or before its first value
    last = conv.messages[-1].timestamp
    assert all(q.as_of is None or q.as_of < last for q in conv.questions)


def test_a_small_generated_run_meets_the_bar() -> None:
    result = evaluate(generate(12, seed=3))
    assert result["current_accuracy@1"] >= 0.95
    assert result["as_of_accuracy"] >= 0.90


def test_a_stale_value_is_not_an_answer() -> None:
    # the same conversation, with the move left out: the old city must not count
    (conv,) = [c for c in HAND_WRITTEN if c.id == "moved-city"]
    stale = Conversation(
        conv.id,
        conv.speakers,
        [m for m in conv.messages if "Glasgow" not in m.text],
        conv.questions,
    )
    result = evaluate([stale])
    assert result["current_accuracy@1"] == 0.0
    book = build_book(stale)
    assert [r.value for r in book.records(subject="Maya", attribute="home")] == ["Leeds"]


def test_bad_conversation_files_name_the_field(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "bad.json", {"conversations": [{"speakers": ["A"], "messages": [{"text": 3}]}]}
    )
    with pytest.raises(InputError) as exc:
        load_conversations(path)
    assert "bad.json" in str(exc.value) and "messages[0]" in str(exc.value)
    with pytest.raises(InputError, match="conversations"):
        load_conversations(write_json(tmp_path / "empty.json", {"talks": []}))


def test_the_command_prints_json_for_generated_and_hand_written_sets() -> None:
    result = run_cli(
        "bench", "updates", "-n", "2", "--file", str(DATA / "updates_handwritten.json"), "--json"
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["generated"]["conversations"] == 2
    hand = out[str(DATA / "updates_handwritten.json")]
    assert hand["current_accuracy@1"] == 1.0 and hand["context_holds_current@300"] is None
    assert set(hand["by_attribute"]) >= {"home", "phone"}


def test_extraction_on_a_locomo_conversation_is_precise(locomo_dir: Path) -> None:
    result = extract_locomo([locomo_dir / "conv-26.json"], keep=True)
    assert result["turns"] == 419 and result["records"] >= 10
    subjects = {r["subject"] for r in result["listed"]}
    assert subjects <= {"Caroline", "Melanie", None}, subjects
    texts = [r["text"] for r in result["listed"]]
    # no reactions, comparisons or pieces of clauses taken for preferences
    assert not any(
        t.endswith(("likes is.", "likes that painting.", "likes therapy.")) for t in texts
    )
    assert any("support group on 7 May 2023" in t for t in texts)


def test_records_kept_in_a_sqlite_store_give_the_same_figures() -> None:
    from arbormem.bench.updates import scratch_store

    conversations = generate(6, seed=5)
    misses_memory: list[dict[str, object]] = []
    misses_store: list[dict[str, object]] = []
    in_memory = evaluate(conversations, misses=misses_memory)
    with scratch_store() as store:
        stored = evaluate(conversations, misses=misses_store, store=store)
        assert len(store.threads()) == len(conversations)
    assert (in_memory["engine"], stored["engine"]) == ("in-memory record book", "sqlite store")
    timing = ("records_messages_per_s", "engine")
    assert {k: v for k, v in stored.items() if k not in timing} == {
        k: v for k, v in in_memory.items() if k not in timing
    }
    assert misses_store == misses_memory


def test_the_store_flag_and_the_cost_of_writing_records(tmp_path: Path) -> None:
    from arbormem.bench.updates import extract_locomo

    from .conftest import tiny_locomo

    path = write_json(tmp_path / "conv.json", tiny_locomo())
    cost = extract_locomo([path], store=True)
    assert cost["store"]["exchanges_with_candidates"] >= 1
    for mode in ("transaction_per_exchange", "transaction_per_conversation"):
        assert cost["store"][mode]["same_as_in_memory"] is True
    assert cost["records"] >= 1
    # --ingest timed the extractor beside Memory's own extraction; bench locomo times
    # the real path, and the retired flag says so instead of a figure of neither.
    retired = run_cli("bench", "updates", "-n", "0", "--locomo", str(path), "--ingest")
    assert retired.returncode != 0 and "bench locomo" in retired.stderr
    done = run_cli("bench", "updates", "-n", "2", "--seed", "4", "--store", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["generated"]["engine"] == "sqlite store"
