"""The OpenAI-compatible memory proxy, driven by the real openai client, forwarding
to the fake OpenAI server: memory in the prompt, the exchange stored, streams passed
through, and the endpoint's failures answered cleanly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from arbormem.server.state import ProxyConfig
from tests.fake_openai import FakeOpenAI, Reply
from tests.serving import Served, serve


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def served(tmp_path: Path, fake: FakeOpenAI) -> Iterator[Served]:
    with serve(tmp_path, proxy=ProxyConfig(base_url=fake.base_url, model="m", timeout=1.0)) as s:
        yield s


def _client(s: Served, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key=key, max_retries=0, timeout=30)


def test_recalled_memory_reaches_the_model_and_the_exchange_is_stored(
    served: Served, fake: FakeOpenAI
) -> None:
    served.memory.for_tenant("acme").add("I am allergic to peanuts.", user="alice")
    fake.queue(Reply("Then skip the satay."))
    answer = _client(served, served.acme).chat.completions.create(
        model="m",
        user="alice",
        messages=[
            {"role": "system", "content": "You are a cook."},
            {"role": "user", "content": "What am I allergic to?"},
        ],
    )
    assert answer.choices[0].message.content == "Then skip the satay."
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert sent[0]["role"] == "system"
    assert "peanuts" in sent[0]["content"] and "You are a cook." in sent[0]["content"]
    assert [m["role"] for m in sent[1:]] == ["user"]  # the caller's own system went in it
    stored = served.memory.for_tenant("acme").messages(user="alice")
    assert [m.content for m in stored][-2:] == ["What am I allergic to?", "Then skip the satay."]
    assert served.memory.for_tenant("beta").messages(user="alice") == []


def test_a_stream_passes_through_and_is_stored_once_complete(
    served: Served, fake: FakeOpenAI
) -> None:
    fake.queue(Reply("Streaming back an answer"))
    stream = _client(served, served.beta).chat.completions.create(
        model="m", user="bob", stream=True, messages=[{"role": "user", "content": "hello?"}]
    )
    pieces = [
        c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 1
    assert "".join(pieces) == "Streaming back an answer"
    stored = served.memory.for_tenant("beta").messages(user="bob")
    assert [m.content for m in stored] == ["hello?", "Streaming back an answer"]


@pytest.mark.parametrize(
    ("reply", "error", "status"),
    [
        (Reply(status=429), openai.RateLimitError, 429),
        (Reply(status=500), openai.InternalServerError, 500),
        (Reply(delay=3.0), openai.APIStatusError, 504),  # past the proxy's 1 s timeout
    ],
)
def test_endpoint_failures_become_clean_statuses_and_store_nothing(
    served: Served, fake: FakeOpenAI, reply: Reply, error: type[Exception], status: int
) -> None:
    for stream in (False, True):
        fake.queue(reply)
        with pytest.raises(error) as caught:
            result = _client(served, served.acme).chat.completions.create(
                model="m", user="carol", stream=stream, messages=[{"role": "user", "content": "hi"}]
            )
            if stream:
                list(result)  # type: ignore[arg-type]
        assert getattr(caught.value, "status_code", None) == status
    assert served.memory.for_tenant("acme").messages(user="carol") == []


def test_a_stream_that_breaks_is_reported_in_band_and_not_stored(
    served: Served, fake: FakeOpenAI
) -> None:
    fake.queue(Reply("a long answer that breaks", error_after=2))
    stream = _client(served, served.acme).chat.completions.create(
        model="m", user="dave", stream=True, messages=[{"role": "user", "content": "go"}]
    )
    with pytest.raises(openai.APIError):
        list(stream)
    assert served.memory.for_tenant("acme").messages(user="dave") == []


def test_read_only_keys_and_bad_requests_are_refused(served: Served) -> None:
    with pytest.raises(openai.PermissionDeniedError):
        _client(served, served.acme_ro).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.UnprocessableEntityError):
        _client(served, served.acme).chat.completions.create(
            model="m", messages=[{"role": "assistant", "content": "no user turn"}]
        )
