"""Skills: procedures found by what they do; with an LLM the question is replaced by a
draft answer (HyDE) before it is embedded, without one the question itself is used."""

from __future__ import annotations

from datetime import datetime, timezone

from arbormem.embed import HashingEmbedder
from arbormem.errors import LLMError
from arbormem.records.engine import RecordBook
from arbormem.records.skills import HYDE_FEATURE, hypothetical_answer

from .fake_openai import ScriptedLLM

T = datetime(2024, 5, 1, tzinfo=timezone.utc)


def book_with_procedures() -> RecordBook:
    book = RecordBook()
    book.remember(
        "How to connect the office printer.",
        kind="procedure",
        intent="connect the office printer",
        body="1. Open Settings, Devices\n2. Add printer HP-4th-floor\n3. Install the driver",
        when=T,
        sources=("m1",),
    )
    book.remember(
        "How to renew a parking permit.",
        kind="procedure",
        intent="renew a parking permit",
        body="1. Log in to the council site\n2. Pay the fee\n3. Print the permit",
        when=T,
        sources=("m2",),
    )
    return book


def test_without_an_llm_the_question_is_embedded_and_uses_are_counted() -> None:
    book = book_with_procedures()
    (hit,) = book.search_procedures("renew my parking permit", HashingEmbedder(256), k=1)
    assert hit.record.intent == "renew a parking permit"
    assert hit.record.recall_count == 1
    assert (
        book.search_procedures("renew my parking permit", HashingEmbedder(256), k=1)[
            0
        ].record.recall_count
        == 2
    )


def test_with_an_llm_a_draft_answer_finds_steps_the_question_shares_no_words_with() -> None:
    book = book_with_procedures()
    vague = "my laptop cannot find the machine upstairs"
    # the question alone shares no word with the printer steps: it finds the wrong one
    (alone,) = book_with_procedures().search_procedures(vague, HashingEmbedder(256), k=1)
    assert alone.record.intent == "renew a parking permit"
    draft = "Connect to the printer: 1. Open Settings, Devices 2. Add printer 3. Install the driver"
    llm = ScriptedLLM(draft)
    (hit,) = book.search_procedures(vague, HashingEmbedder(256), llm=llm, k=1)
    assert hit.record.intent == "connect the office printer"
    assert llm.usage.snapshot()["features"][HYDE_FEATURE]["calls"] == 1


def test_a_failed_draft_falls_back_to_the_question() -> None:
    assert hypothetical_answer("renew permit", ScriptedLLM(LLMError("down"))) == "renew permit"
    assert hypothetical_answer("renew permit", None) == "renew permit"
    assert hypothetical_answer("renew permit", ScriptedLLM("1. Pay")) == "renew permit\n1. Pay"
