"""RecordBook, the reference implementation of what a store will hold: exchanges in,
current records first out, history and "as of" on demand, forgetting and export."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from arbormem.errors import InputError, NotFound
from arbormem.records import engine as engine_module
from arbormem.records.engine import RecordBook, as_of_from_query
from arbormem.records.extract import Context, Turn

T0 = datetime(2024, 1, 8, 9, 0, tzinfo=timezone.utc)
PAIR = Context(speakers=("Sam", "Ana"))


def feed(book: RecordBook, *lines: tuple[int, str, str]) -> None:
    for n, (days, speaker, text) in enumerate(lines):
        book.add_exchange([Turn(f"m{n}", text, T0 + timedelta(days=days), speaker)], PAIR)


def moved_book() -> RecordBook:
    book = RecordBook("sam/bot")
    feed(
        book,
        (0, "Sam", "I live in Paris, near the canal."),
        (1, "Ana", "My number is 555 123 4567."),
        (2, "Ana", "My cousin Leo lives in Madrid."),
        (60, "Sam", "Big news: I moved to Lyon last week!"),
        (61, "Ana", "Wow! The weather in Paris was awful anyway."),
        (90, "Ana", "My new number is 555 999 0000."),
    )
    return book


def test_search_puts_the_current_value_first_even_when_the_old_one_shares_more_words() -> None:
    book = moved_book()
    (hit,) = book.search("Which city does Sam live in now? Still Paris?", 1)
    assert hit.record.value == "Lyon"
    assert hit.signals["subject"] == 1.0 and hit.signals["attribute"] == 1.0
    everything = book.search("Where does Sam live?", 5, current=False)
    values = [h.record.value for h in everything if h.record.subject == "Sam"]
    assert values[:2] == ["Lyon", "Paris"]  # the closed value is still there, after
    (phone,) = book.search("What is Ana's phone number?", 1)
    assert phone.record.value == "555 999 0000"


def test_someone_else_named_in_the_question_ranks_below_the_person_asked_about() -> None:
    book = moved_book()
    hits = book.search("Where does Leo live?", 2)
    assert hits[0].record.subject == "Leo" and hits[0].record.value == "Madrid"


def test_as_of_answers_with_what_held_then() -> None:
    book = moved_book()
    (then,) = book.search(
        "Where did Sam live in February 2024?", 1, as_of=datetime(2024, 2, 15, tzinfo=timezone.utc)
    )
    assert then.record.value == "Paris"
    assert as_of_from_query("Where did Sam live in February 2024?") == datetime(
        2024, 2, 15, tzinfo=timezone.utc
    )
    assert as_of_from_query("Where does Sam live?") is None
    held = book.records(
        subject="Sam", attribute="home", as_of=datetime(2024, 3, 30, tzinfo=timezone.utc)
    )
    assert [r.value for r in held] == ["Lyon"]


def test_history_reads_every_value_oldest_first() -> None:
    book = moved_book()
    (lyon,) = book.records(subject="Sam", attribute="home")
    history = book.history(lyon.id)
    assert [r.value for r in history] == ["Paris", "Lyon"]
    assert history[0].superseded_by == lyon.id and lyon.supersedes == history[0].id
    with pytest.raises(NotFound):
        book.history("rec-nope")


def test_the_speaker_is_who_i_is_in_a_question() -> None:
    book = moved_book()
    (hit,) = book.search("Where do I live now?", 1, speaker="Sam")
    assert hit.record.value == "Lyon"


def test_remember_stores_a_structured_fact_without_extraction() -> None:
    book = RecordBook()
    plan = book.remember(
        "Sam's badge number is 4471.",
        subject="Sam",
        attribute="badge number",
        value="4471",
        sources=("import-1",),
    )
    assert plan.action == "add"
    plan = book.remember(
        "Sam's badge number is 5580.",
        subject="Sam",
        attribute="badge number",
        value="5580",
        when=datetime(2030, 1, 1, tzinfo=timezone.utc),
    )
    assert plan.action == "supersede"
    assert [r.value for r in book.records(subject="Sam")] == ["5580"]
    with pytest.raises(InputError, match="attribute and a subject"):
        book.remember("Sam's badge is 1.", attribute="badge", value="1")
    with pytest.raises(InputError, match="unknown record kind"):
        book.remember("Sam is nice.", kind="opinion")


def test_forgetting_a_message_removes_it_from_records_and_drops_orphans() -> None:
    book = RecordBook()
    feed(
        book,
        (0, "Sam", "I live in Paris."),
        (3, "Sam", "Yes, I live in Paris."),
        (4, "Ana", "I live in Oslo."),
    )
    (paris,) = book.records(subject="Sam")
    assert paris.sources == ("m0", "m1")
    assert book.forget_source("m0") == []
    assert book.records(subject="Sam")[0].sources == ("m1",)
    oslo = book.records(subject="Ana")[0]
    book.fuse({paris.id: [1.0, 0.0], oslo.id: [0.99, 0.1]}, threshold=0.9)
    assert len(book.composites) == 1
    gone = book.forget_source("m2")
    assert gone == [oslo.id]
    assert book.records(subject="Ana") == [] and book.composites == {}


def test_an_exchange_is_one_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    book = moved_book()
    before = book.to_dict()
    real = engine_module.resolve
    calls = {"n": 0}

    def flaky(candidate, view):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk on fire")
        return real(candidate, view)

    monkeypatch.setattr(engine_module, "resolve", flaky)
    with pytest.raises(RuntimeError):
        book.add_exchange(
            [
                Turn(
                    "m9",
                    "I moved to Oslo. My number is 555 000 1111.",
                    T0 + timedelta(days=99),
                    "Sam",
                )
            ],
            PAIR,
        )
    assert book.to_dict() == before


def test_export_and_import_are_lossless_and_refuse_bad_data() -> None:
    book = moved_book()
    first = book.records(current=False)[0]
    book.fuse({r.id: [1.0, 0.0] for r in book.records()}, threshold=0.5)
    book.touch([first.id])
    data = json.loads(json.dumps(book.to_dict()))
    again = RecordBook.from_dict(data)
    assert again.to_dict() == book.to_dict()
    assert again.get(first.id).recall_count == 1  # type: ignore[union-attr]
    data["records"][2]["kind"] = "gossip"
    with pytest.raises(InputError) as exc:
        RecordBook.from_dict(data, source="export.json")
    assert "export.json" in str(exc.value) and "records[2].kind" in str(exc.value)
    with pytest.raises(InputError, match="format"):
        RecordBook.from_dict({"format": 99, "records": []})


def test_search_can_count_recalls_and_filter_kinds() -> None:
    book = moved_book()
    hits = book.search("Where does Sam live?", 1, touch=True)
    assert hits[0].record.recall_count == 1
    assert book.search("Where does Sam live?", 3, kinds=["event"]) == []
    assert book.search("anything", 0) == []
