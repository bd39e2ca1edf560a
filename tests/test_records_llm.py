"""Records with an LLM, against a real HTTP server speaking the OpenAI protocol: good
answers become records; garbage, unknown kinds, foreign message ids, timeouts and
errors give the patterns' records for that batch, never a crash."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from arbormem.llm import LLMClient, LLMConfig, OpenAIChatClient
from arbormem.records.engine import RecordBook
from arbormem.records.extract import Context, Turn
from arbormem.records.llm_extract import LLM_FEATURE, llm_extract

from .fake_openai import FakeOpenAI, Reply

NOW = datetime(2024, 5, 15, 10, 0, tzinfo=timezone.utc)
CONTEXT = Context(speakers=("Sam", "Ana"), scope="sam/bot")
BATCH = [
    Turn("m1", "Big news, I moved to Lyon last week!", NOW, "Sam"),
    Turn("m2", "Congrats! Send me your new address.", NOW, "Ana"),
]


def answer(*records: dict[str, Any]) -> str:
    return json.dumps({"records": list(records)})


GOOD = {
    "kind": "fact",
    "text": "Sam lives in Lyon.",
    "subject": "Sam",
    "attribute": "home city",
    "value": "Lyon",
    "changed": True,
    "valid_from": "2024-05-06",
    "sources": ["m1"],
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as running:
        yield running


@pytest.fixture
def client(server: FakeOpenAI) -> Iterator[Callable[..., LLMClient]]:
    server.reset()
    made: list[LLMClient] = []

    def make(**settings: Any) -> LLMClient:
        config = LLMConfig(
            **{"model": "fake", "base_url": server.base_url, "max_retries": 0, **settings}
        )
        llm = OpenAIChatClient(config, sleep=lambda _s: None)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        llm.close()


def test_a_good_answer_becomes_records_with_canonical_attributes(
    server: FakeOpenAI, client: Callable[..., LLMClient]
) -> None:
    server.queue(Reply(f"Here you go:\n```json\n{answer(GOOD)}\n```"))
    llm = client()
    found = llm_extract(BATCH, CONTEXT, llm)
    assert found.source == "llm" and found.problem is None
    (record,) = [c.record for c in found.candidates]
    assert (record.attribute, record.value, record.subject) == ("home", "Lyon", "Sam")
    assert record.valid_from == datetime(2024, 5, 6, tzinfo=timezone.utc)
    assert "change" in record.tags and "llm" in record.tags and record.scope == "sam/bot"
    assert llm.usage.snapshot()["features"][LLM_FEATURE]["calls"] == 1
    # one call for the whole batch, with every message and its id in it
    (request,) = server.chat_requests()
    prompt = request["body"]["messages"][-1]["content"]
    assert "[m1]" in prompt and "[m2]" in prompt and "Sam" in prompt


def test_an_empty_list_is_a_valid_answer(
    server: FakeOpenAI, client: Callable[..., LLMClient]
) -> None:
    server.queue(Reply(answer()))
    found = llm_extract(BATCH, CONTEXT, client())
    assert found.source == "llm" and found.candidates == []


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (Reply("Sure! Sam moved, I think."), "not JSON"),
        (Reply(answer({**GOOD, "kind": "gossip"})), "kind"),
        (Reply(answer({**GOOD, "sources": ["m99"]})), "not a message of this batch"),
        (Reply(answer({**GOOD, "sources": []})), "sources"),
        (Reply(answer({**GOOD, "valid_from": "last week"})), "not an ISO date"),
        (Reply(answer({**GOOD, "attribute": None})), "a value needs an attribute"),
        (Reply(answer({**GOOD, "mood": "happy"})), "unknown keys"),
        (Reply(answer({**GOOD, "body": "1. pack"})), "only a procedure"),
        (Reply(json.dumps({"records": [GOOD], "notes": "x"})), "only a"),
        (Reply(json.dumps([GOOD])), "only a"),
        (Reply(None), "empty answer"),
        (Reply(status=500), ""),
        (Reply(status=429), ""),
        (Reply(raw="{not json at all"), ""),
    ],
)
def test_anything_wrong_gives_the_patterns_records_for_the_batch(
    server: FakeOpenAI, client: Callable[..., LLMClient], reply: Reply, problem: str
) -> None:
    server.queue(reply)
    found = llm_extract(BATCH, CONTEXT, client())
    assert found.source == "patterns"
    assert problem in (found.problem or "")
    assert [(c.record.attribute, c.record.value) for c in found.candidates] == [("home", "Lyon")]


def test_a_timeout_gives_the_patterns_records(
    server: FakeOpenAI, client: Callable[..., LLMClient]
) -> None:
    server.queue(Reply(answer(GOOD), delay=2.0))
    found = llm_extract(BATCH, CONTEXT, client(timeout=0.2))
    assert found.source == "patterns" and "Lyon" in found.candidates[0].record.text


def test_a_broken_client_does_not_lose_the_batch() -> None:
    class Broken(LLMClient):
        def _complete(self, request: Any) -> Any:
            raise ZeroDivisionError("bug")

        def complete_json(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            raise ZeroDivisionError("a client breaking its contract")

    found = llm_extract(BATCH, CONTEXT, Broken("broken"))
    assert found.source == "patterns" and found.candidates


def test_a_record_book_can_extract_with_the_llm(
    server: FakeOpenAI, client: Callable[..., LLMClient]
) -> None:
    book = RecordBook("sam/bot")
    procedure = {
        "kind": "procedure",
        "text": "How to renew a Lyon transit pass.",
        "subject": None,
        "attribute": None,
        "value": None,
        "sources": ["m2"],
        "intent": "renew a Lyon transit pass",
        "body": "1. Open the app\n2. Tap renew",
    }
    server.queue(Reply(answer(GOOD, procedure)))
    plans = book.add_exchange(BATCH, CONTEXT, llm=client())
    assert {p.action for p in plans} == {"add"}
    (kept,) = book.records(kind="procedure")
    assert kept.body == "1. Open the app\n2. Tap renew"  # Markdown kept as written
    assert [r.value for r in book.records(subject="Sam")] == ["Lyon"]
