"""The LLM provider layer: every failure is an LLMError, nothing hangs, every call is counted.

The OpenAI client is tested against a real HTTP server on 127.0.0.1
(:mod:`tests.fake_openai`); the behaviour every client shares is tested over
both that client and the in-process :class:`ScriptedLLM`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arbormem.errors import ConfigError, LLMError
from arbormem.llm import (
    JSON_INSTRUCTION,
    MAX_RETRY_AFTER,
    LLMClient,
    LLMConfig,
    OpenAIChatClient,
    TokenUsage,
    UsageMeter,
    get_llm,
    parse_json_answer,
    resolve_llm_config,
)

from .fake_openai import FakeOpenAI, Reply, ScriptedLLM

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as running:
        yield running


@pytest.fixture
def fake(server: FakeOpenAI) -> FakeOpenAI:
    server.reset()
    return server


@pytest.fixture
def sleeps() -> list[float]:
    """The waits the client asked for, recorded instead of slept."""
    return []


@pytest.fixture
def make_client(fake: FakeOpenAI, sleeps: list[float]) -> Iterator[Callable[..., LLMClient]]:
    clients: list[LLMClient] = []

    def make(**settings: Any) -> LLMClient:
        config = LLMConfig(**{"model": "fake-model", "base_url": fake.base_url, **settings})
        client = OpenAIChatClient(config, sleep=sleeps.append)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture(params=["openai-http", "scripted"])
def answering(
    request: pytest.FixtureRequest, fake: FakeOpenAI, make_client: Callable[..., LLMClient]
) -> Callable[..., LLMClient]:
    """Each kind of client, set to give ``answers`` in order (None: an empty answer)."""

    def make(*answers: str | None) -> LLMClient:
        if request.param == "scripted":
            return ScriptedLLM(*answers)
        fake.queue(*(Reply(content=answer) for answer in answers))
        return make_client(max_retries=0)

    return make


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def feature_usage(llm: LLMClient, feature: str) -> dict[str, int]:
    return dict(llm.usage.snapshot()["features"][feature])


def topic(value: Any) -> str:
    """A validator as features write them: raises on a bad shape."""
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    name = value["topic"]
    if not isinstance(name, str) or not name:
        raise ValueError("'topic' must be a non-empty string")
    return name


# --------------------------------------------------------------------------- every client


def test_chat_returns_the_answer_and_counts_it(answering: Callable[..., LLMClient]) -> None:
    llm = answering("Leo is allergic to peanuts.")
    result = llm.chat("What is Leo allergic to?", feature="qa")
    assert result.text == "Leo is allergic to peanuts."
    assert result.model == llm.model
    usage = feature_usage(llm, "qa")
    assert usage["calls"] == 1 and usage["failures"] == 0
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0


def test_stream_deltas_concatenate_to_the_answer(answering: Callable[..., LLMClient]) -> None:
    text = "The Lisbon marathon is in October, so training starts in May."
    llm = answering(text)
    deltas = list(llm.stream([{"role": "user", "content": "When is the race?"}], feature="qa"))
    assert len(deltas) > 1
    assert "".join(deltas) == text
    usage = feature_usage(llm, "qa")
    assert usage["calls"] == 1 and usage["failures"] == 0 and usage["completion_tokens"] > 0


@pytest.mark.parametrize(
    "answer",
    [
        '{"topic": "bikes"}',
        '```json\n{"topic": "bikes"}\n```',
        'Sure! Here it is:\n```\n{"topic": "bikes"}\n```\nAnything else?',
        'The topic is clear. {"topic": "bikes"} I hope this helps.',
    ],
    ids=["bare", "json-fence", "plain-fence", "prose-around"],
)
def test_complete_json_finds_the_json(answering: Callable[..., LLMClient], answer: str) -> None:
    llm = answering(answer)
    assert llm.complete_json("Name the topic.", validate=topic, feature="topic_name") == "bikes"
    assert feature_usage(llm, "topic_name")["failures"] == 0


@pytest.mark.parametrize("answer", [None, "   \n"], ids=["none", "blank"])
def test_an_empty_answer_is_an_llm_error(
    answering: Callable[..., LLMClient], answer: str | None
) -> None:
    llm = answering(answer, answer, answer)
    with pytest.raises(LLMError, match="empty answer"):
        llm.chat("hello", feature="f")
    with pytest.raises(LLMError, match="empty answer"):
        list(llm.stream("hello", feature="f"))
    with pytest.raises(LLMError, match="empty answer"):
        llm.complete_json("hello", validate=topic, feature="f")
    assert feature_usage(llm, "f")["calls"] == 3
    assert feature_usage(llm, "f")["failures"] == 3


@pytest.mark.parametrize(
    "answer",
    [
        '{"topic": "bikes"',
        "I think the topic is bikes.",
        "{'topic': 'bikes'}",
        "[" * 50_000 + "]" * 50_000,  # deeper than Python's stack
    ],
)
def test_malformed_json_is_an_llm_error_naming_the_feature(
    answering: Callable[..., LLMClient], answer: str
) -> None:
    llm = answering(answer)
    with pytest.raises(LLMError, match=r"^topic_name: the model's answer is not JSON"):
        llm.complete_json("Name the topic.", validate=topic, feature="topic_name")
    usage = feature_usage(llm, "topic_name")
    assert (usage["calls"], usage["failures"], usage["retries"]) == (1, 1, 0)
    assert usage["completion_tokens"] > 0  # the tokens were spent all the same


@pytest.mark.parametrize(
    "answer", ['["bikes"]', '{"name": "bikes"}', '{"topic": ""}', '{"topic": 3}']
)
def test_a_wrong_shape_is_an_llm_error(answering: Callable[..., LLMClient], answer: str) -> None:
    llm = answering(answer)
    with pytest.raises(LLMError, match=r"^merge_veto: the model's JSON has the wrong shape"):
        llm.complete_json("Merge?", validate=topic, feature="merge_veto")
    assert feature_usage(llm, "merge_veto")["failures"] == 1


def test_complete_json_leaves_the_callers_messages_alone(
    answering: Callable[..., LLMClient],
) -> None:
    messages = [
        {"role": "system", "content": "You name topics."},
        {"role": "user", "content": "Leo, peanuts, a nut-free cake."},
    ]
    before = [dict(m) for m in messages]
    llm = answering('{"topic": "allergies"}')
    assert llm.complete_json(messages, validate=topic, feature="topic_name") == "allergies"
    assert messages == before


# --------------------------------------------------------------------------- the base class


def test_any_exception_from_a_client_becomes_an_llm_error() -> None:
    llm = ScriptedLLM(RuntimeError("boom"), RuntimeError("boom"), RuntimeError("boom"))
    with pytest.raises(LLMError, match="boom") as info:
        llm.chat("hi", feature="f")
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(LLMError, match="boom"):
        list(llm.stream("hi", feature="f"))
    with pytest.raises(LLMError, match="boom"):
        llm.complete_json("hi", validate=topic, feature="f")
    assert feature_usage(llm, "f")["failures"] == 3


def test_a_validator_bug_is_an_llm_error_too() -> None:
    def broken(value: Any) -> Any:
        return 1 / 0

    llm = ScriptedLLM('{"topic": "x"}')
    with pytest.raises(LLMError, match="ZeroDivisionError"):
        llm.complete_json("hi", validate=broken, feature="f")


@pytest.mark.parametrize(
    "messages",
    [[], [{"content": "no role"}], [{"role": "user", "content": None}], 42],
    ids=["empty", "no-role", "null-content", "not-messages"],
)
def test_unusable_messages_are_an_llm_error(messages: Any) -> None:
    llm = ScriptedLLM(default="never sent")
    with pytest.raises(LLMError, match="messages"):
        llm.chat(messages, feature="f")
    with pytest.raises(LLMError, match="messages"):
        llm.complete_json(messages, validate=topic, feature="f")
    assert llm.calls == []
    assert feature_usage(llm, "f")["failures"] == 2


def test_complete_json_asks_for_json_in_the_system_message() -> None:
    llm = ScriptedLLM('{"topic": "a"}', '{"topic": "b"}')
    llm.complete_json("Name it.", validate=topic, feature="f")
    llm.complete_json(
        [{"role": "system", "content": "You name topics."}, {"role": "user", "content": "x"}],
        validate=topic,
        feature="f",
    )
    first, second = llm.calls
    assert first[0] == {"role": "system", "content": JSON_INSTRUCTION}
    assert first[1] == {"role": "user", "content": "Name it."}
    assert second[0]["content"] == f"You name topics.\n\n{JSON_INSTRUCTION}"
    assert len(second) == 2


def test_a_subclass_needs_only_complete() -> None:
    assert LLMClient.__abstractmethods__ == frozenset({"_complete"})


# --------------------------------------------------------------------------- over HTTP


def test_the_request_carries_model_messages_and_options(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient]
) -> None:
    llm = make_client(temperature=0.2)
    llm.chat("hi", max_tokens=64, feature="f")
    llm.chat("hi", temperature=0.7, feature="f")
    list(llm.stream("hi", feature="f"))
    plain, warmer, streamed = (r["body"] for r in fake.chat_requests())
    assert plain["model"] == "fake-model"
    assert plain["messages"] == [{"role": "user", "content": "hi"}]
    assert plain["max_tokens"] == 64 and plain["temperature"] == 0.2
    assert "max_tokens" not in warmer and warmer["temperature"] == 0.7
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"include_usage": True}


def test_the_servers_token_counts_are_recorded(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient]
) -> None:
    fake.queue(
        Reply("a", prompt_tokens=120, completion_tokens=7),
        Reply("b c d e f", prompt_tokens=30, completion_tokens=9),
    )
    llm = make_client()
    assert llm.chat("hi", feature="summary").usage == TokenUsage(120, 7)
    assert "".join(llm.stream("hi", feature="tracker")) == "b c d e f"
    snapshot = llm.usage.snapshot()
    assert snapshot["features"]["summary"]["prompt_tokens"] == 120
    assert snapshot["features"]["tracker"]["completion_tokens"] == 9
    assert snapshot["total"] == {
        "calls": 2,
        "failures": 0,
        "retries": 0,
        "prompt_tokens": 150,
        "completion_tokens": 16,
        "estimated": 0,
    }


def test_missing_token_counts_are_estimated(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient]
) -> None:
    answer = "Pixel is a grey cat who naps with the dog."
    fake.queue(Reply(answer, send_usage=False), Reply(answer, send_usage=False))
    llm = make_client()
    result = llm.chat("Tell me about Pixel.", feature="f")
    assert result.usage.estimated and result.usage.completion_tokens > 5
    assert "".join(llm.stream("Tell me about Pixel.", feature="f")) == answer
    usage = feature_usage(llm, "f")
    assert usage["estimated"] == 2
    assert usage["completion_tokens"] == 2 * result.usage.completion_tokens


def test_an_answer_slower_than_the_timeout_is_an_llm_error(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient]
) -> None:
    fake.queue(Reply("late", delay=2.0))
    llm = make_client(timeout=0.5, max_retries=0)
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"sent nothing for 0\.5 s"):
        llm.chat("hi", feature="f")
    assert time.monotonic() - started < 1.5


def test_a_timeout_is_retried(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient], sleeps: list[float]
) -> None:
    fake.queue(Reply("late", delay=2.0), Reply("on time"))
    llm = make_client(timeout=0.5, max_retries=1, backoff=0.25)
    assert llm.chat("hi", feature="f").text == "on time"
    assert sleeps == [0.25]
    assert feature_usage(llm, "f")["retries"] == 1


def test_429_waits_for_retry_after_then_succeeds(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient], sleeps: list[float]
) -> None:
    fake.queue(Reply(status=429, headers={"Retry-After": "1"}), Reply("fine now"))
    llm = make_client()
    assert llm.chat("hi", feature="f").text == "fine now"
    assert len(fake.chat_requests()) == 2
    assert sleeps == [1.0]
    usage = feature_usage(llm, "f")
    assert (usage["calls"], usage["failures"], usage["retries"]) == (1, 0, 1)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"Retry-After": "3600"}, MAX_RETRY_AFTER),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"}, 0.0),
        ({"Retry-After": "whenever"}, 0.5),
        ({}, 0.5),
    ],
    ids=["capped", "milliseconds", "date-in-the-past", "unreadable", "absent"],
)
def test_the_wait_before_a_retry(
    fake: FakeOpenAI,
    make_client: Callable[..., LLMClient],
    sleeps: list[float],
    headers: dict[str, str],
    wait: float,
) -> None:
    fake.queue(Reply(status=503, headers=headers), Reply("ok"))
    make_client(backoff=0.5).chat("hi")
    assert sleeps == [wait]


def test_a_persistent_500_gives_up_after_max_retries_plus_one_attempts(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient], sleeps: list[float]
) -> None:
    fake.default = Reply(status=500)
    llm = make_client(max_retries=2, backoff=0.5)
    with pytest.raises(LLMError, match=r"HTTP 500: scripted 500 \(gave up after 3 attempts\)"):
        llm.chat("hi", feature="f")
    assert len(fake.chat_requests()) == 3
    assert sleeps == [0.5, 1.0]
    usage = feature_usage(llm, "f")
    assert (usage["calls"], usage["failures"], usage["retries"]) == (1, 1, 2)


@pytest.mark.parametrize(
    ("status", "hint"), [(400, "HTTP 400"), (401, "OPENAI_API_KEY"), (404, "model name")]
)
def test_client_errors_are_not_retried(
    fake: FakeOpenAI,
    make_client: Callable[..., LLMClient],
    sleeps: list[float],
    status: int,
    hint: str,
) -> None:
    fake.queue(Reply(status=status), Reply("never reached"))
    with pytest.raises(LLMError, match=hint):
        make_client().chat("hi")
    assert len(fake.chat_requests()) == 1 and sleeps == []


def test_connection_refused_is_an_llm_error(
    make_client: Callable[..., LLMClient], sleeps: list[float]
) -> None:
    llm = make_client(base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=1)
    with pytest.raises(LLMError, match=r"cannot reach .*OPENAI_BASE_URL"):
        llm.chat("hi", feature="f")
    with pytest.raises(LLMError, match="cannot reach"):
        list(llm.stream("hi", feature="f"))
    assert len(sleeps) == 2
    assert feature_usage(llm, "f")["failures"] == 2


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("<html>Bad gateway</html>", "not a chat completion"),
        ('{"object": "list", "data": []}', "no choices"),
    ],
)
def test_a_reply_that_is_not_a_completion_is_an_llm_error(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient], raw: str, problem: str
) -> None:
    fake.queue(Reply(raw=raw))
    with pytest.raises(LLMError, match=problem):
        make_client().chat("hi")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("value", [123, {"text": "hi"}, [{"type": "text", "text": 5}]])
def test_content_that_is_not_text_is_an_llm_error(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient], value: Any, stream: bool
) -> None:
    fake.queue(Reply(content_value=value))
    llm = make_client(max_retries=0)
    with pytest.raises(LLMError, match="not text"):
        if stream:
            list(llm.stream([{"role": "user", "content": "hi"}], feature="qa"))
        else:
            llm.chat("hi", feature="qa")
    assert feature_usage(llm, "qa")["failures"] == 1


@pytest.mark.parametrize("stream", [False, True])
def test_content_sent_as_text_parts_is_read(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient], stream: bool
) -> None:
    parts = [{"type": "text", "text": "Lisbon "}, {"type": "text", "text": "in October."}]
    fake.queue(Reply(content_value=parts))
    llm = make_client()
    if stream:
        text = "".join(llm.stream([{"role": "user", "content": "When?"}], feature="qa"))
    else:
        text = llm.chat("When?", feature="qa").text
    assert text == "Lisbon in October."


@pytest.mark.parametrize(
    ("param", "replacement"), [("max_tokens", "max_completion_tokens"), ("temperature", None)]
)
def test_a_rejected_parameter_is_adapted_once_and_remembered(
    fake: FakeOpenAI,
    make_client: Callable[..., LLMClient],
    sleeps: list[float],
    param: str,
    replacement: str | None,
) -> None:
    fake.queue(Reply(status=400, error_param=param), Reply("one"), Reply("two"))
    llm = make_client()
    assert llm.chat("hi", max_tokens=32, feature="f").text == "one"
    assert llm.chat("hi", max_tokens=32, feature="f").text == "two"
    rejected, *later = (r["body"] for r in fake.chat_requests())
    assert param in rejected
    assert len(later) == 2
    for body in later:
        assert param not in body
        if replacement:
            assert body[replacement] == 32
    assert sleeps == [] and feature_usage(llm, "f")["retries"] == 0


@pytest.mark.parametrize(
    ("reply", "timeout", "problem"),
    [
        (Reply("abcdefghijkl", cut_after=2), 5.0, "ended before the model finished"),
        (Reply("abcdefghijkl", error_after=2), 5.0, "scripted stream error"),
        (Reply("abcdefghijkl", chunk_delay=2.0), 0.5, r"sent nothing for 0\.5 s"),
    ],
    ids=["connection-dropped", "error-event", "stalled"],
)
def test_a_stream_failing_midway_is_an_llm_error(
    fake: FakeOpenAI,
    make_client: Callable[..., LLMClient],
    reply: Reply,
    timeout: float,
    problem: str,
) -> None:
    fake.queue(reply)
    llm = make_client(timeout=timeout)
    deltas: list[str] = []
    started = time.monotonic()
    with pytest.raises(LLMError, match=problem):
        for delta in llm.stream("hi", feature="f"):
            deltas.append(delta)
    assert time.monotonic() - started < 1.5  # well before the stalled server's next chunk
    assert deltas and "abcdefghijkl".startswith("".join(deltas))
    assert len(fake.chat_requests()) == 1  # text was already out: no retry
    assert feature_usage(llm, "f")["failures"] == 1


def test_a_stream_is_retried_until_it_starts(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient], sleeps: list[float]
) -> None:
    fake.queue(Reply(status=503), Reply("back again"))
    assert "".join(make_client().stream("hi")) == "back again"
    assert sleeps == [0.5]


def test_a_stream_the_caller_stops_reading_is_counted(
    fake: FakeOpenAI, make_client: Callable[..., LLMClient]
) -> None:
    fake.queue(Reply("a long answer nobody reads to the end"))
    llm = make_client()
    stream = llm.stream("hi", feature="f")
    assert next(stream)
    stream.close()
    usage = feature_usage(llm, "f")
    assert (usage["calls"], usage["failures"]) == (1, 0)
    assert usage["prompt_tokens"] > 0


# --------------------------------------------------------------------------- usage meter


def test_usage_is_kept_per_feature_and_in_total() -> None:
    meter = UsageMeter()
    first = ScriptedLLM("one", "two", model="a")
    second = ScriptedLLM("three", model="b")
    first.usage = second.usage = meter
    first.chat("x", feature="topic_name")
    first.chat("x", feature="summary")
    second.chat("x", feature="summary")
    snapshot = meter.snapshot()
    assert set(snapshot["features"]) == {"topic_name", "summary"}
    assert snapshot["features"]["summary"]["calls"] == 2
    assert snapshot["total"]["calls"] == 3
    total_tokens = sum(f["completion_tokens"] for f in snapshot["features"].values())
    assert snapshot["total"]["completion_tokens"] == total_tokens
    meter.reset()
    assert meter.snapshot()["total"]["calls"] == 0


def test_the_usage_meter_is_thread_safe() -> None:
    meter = UsageMeter()

    def hammer() -> None:
        for _ in range(2000):
            meter.record("f", calls=1, prompt_tokens=3)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert meter.snapshot()["total"]["calls"] == 16000
    assert meter.snapshot()["features"]["f"]["prompt_tokens"] == 48000


# --------------------------------------------------------------------------- JSON parsing


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2, 3]\n", [1, 2, 3]),
        ("true", True),
        ('```json\n{"a": [1, {"b": "}"}]}\n```', {"a": [1, {"b": "}"}]}),
        ('```JSON {"a": 1} ```', {"a": 1}),
        ('Here you go:\n```\n["x", "y"]\n```\nDone.', ["x", "y"]),
        ('The answer is {"a": {"b": 2}} as requested.', {"a": {"b": 2}}),
        (
            'Pick [1] or this: {"choice": "merge", "why": "same trip"}.',
            {"choice": "merge", "why": "same trip"},
        ),
        ('<think>maybe {"a": 0}?</think>\n{"a": 1}', {"a": 1}),
        ('```python\nx = 1\n```\n{"a": 1}', {"a": 1}),
    ],
)
def test_parse_json_answer_finds_the_value(text: str, value: Any) -> None:
    assert parse_json_answer(text) == value


@pytest.mark.parametrize(
    "text", ["", "   ", "<think>hmm</think>", "no json here", '{"a": 1', "[1, 2", "{'a': 1}"]
)
def test_parse_json_answer_refuses_what_is_not_json(text: str) -> None:
    with pytest.raises(LLMError):
        parse_json_answer(text)


# --------------------------------------------------------------------------- configuration


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty folder, with a config file location of our own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARBORMEM_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text("")
    return tmp_path


def test_no_model_anywhere_means_no_llm(in_tmp: Path) -> None:
    assert resolve_llm_config() is None
    assert get_llm(resolve_llm_config()) is None


def test_model_none_switches_the_llm_off_whatever_else_says(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARBORMEM_LLM_MODEL", "from-env")
    (in_tmp / "config.toml").write_text('[llm]\nmodel = "from-file"\n')
    assert resolve_llm_config(model=None) is None


def test_defaults(in_tmp: Path) -> None:
    assert resolve_llm_config("qwen2.5:7b") == LLMConfig(model="qwen2.5:7b")
    config = LLMConfig(model="m")
    assert (config.base_url, config.api_key, config.timeout, config.max_retries) == (
        None,
        None,
        30.0,
        2,
    )
    assert (config.backoff, config.temperature, config.context_window) == (0.5, 0.0, 8192)


def test_each_setting_comes_from_the_first_source_that_has_it(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_tmp / "config.toml").write_text(
        '[llm]\nmodel = "from-file"\nbase_url = "http://file/v1"\napi_key = "file-key"\n'
        "timeout = 7\ncontext_window = 4096\n"
    )
    config = resolve_llm_config()
    assert config == LLMConfig(
        "from-file", "http://file/v1", "file-key", timeout=7.0, context_window=4096
    )

    (in_tmp / ".env").write_text(
        "ARBORMEM_LLM_MODEL=from-dotenv\nOPENAI_API_KEY=dotenv-key\nARBORMEM_LLM_TIMEOUT=9\n"
    )
    config = resolve_llm_config()
    assert config is not None
    assert (config.model, config.api_key, config.timeout) == ("from-dotenv", "dotenv-key", 9.0)
    assert (config.base_url, config.context_window) == ("http://file/v1", 4096)

    monkeypatch.setenv("ARBORMEM_LLM_MODEL", "from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1")
    monkeypatch.setenv("ARBORMEM_LLM_CONTEXT_WINDOW", "32768")
    config = resolve_llm_config()
    assert config is not None
    assert (config.model, config.base_url, config.api_key) == (
        "from-env",
        "http://env/v1",
        "dotenv-key",
    )
    assert (config.timeout, config.context_window) == (9.0, 32768)

    config = resolve_llm_config("from-arg", api_key="arg-key", timeout=1.5)
    assert config is not None
    assert (config.model, config.api_key, config.timeout) == ("from-arg", "arg-key", 1.5)
    assert config.base_url == "http://env/v1"


def test_the_dotenv_file_is_read_but_never_exported(in_tmp: Path) -> None:
    (in_tmp / ".env").write_text("ARBORMEM_LLM_MODEL=from-dotenv\nOPENAI_API_KEY=secret\n")
    config = resolve_llm_config()
    assert config is not None and config.model == "from-dotenv"
    assert "ARBORMEM_LLM_MODEL" not in os.environ and "OPENAI_API_KEY" not in os.environ
    assert resolve_llm_config(env_file=None) is None
    other = in_tmp / "llm.env"
    other.write_text("ARBORMEM_LLM_MODEL=from-other\n")
    config = resolve_llm_config(env_file=other)
    assert config is not None and config.model == "from-other"


@pytest.mark.parametrize(
    ("where", "needle"),
    [
        ("argument", "timeout=-1"),
        ("env", "ARBORMEM_LLM_TIMEOUT"),
        ("dotenv", ".env"),
        ("file", "config.toml"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_its_source(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch, where: str, needle: str
) -> None:
    kwargs: dict[str, Any] = {"model": "m"}
    if where == "argument":
        kwargs["timeout"] = -1
    elif where == "env":
        monkeypatch.setenv("ARBORMEM_LLM_TIMEOUT", "soon")
    elif where == "dotenv":
        (in_tmp / ".env").write_text("ARBORMEM_LLM_TIMEOUT=0\n")
    else:
        (in_tmp / "config.toml").write_text("[llm]\ntimeout = -3\n")
    with pytest.raises(ConfigError, match=needle):
        resolve_llm_config(**kwargs)


def test_config_checks_its_values_and_hides_the_key() -> None:
    with pytest.raises(ConfigError, match="max_retries"):
        LLMConfig(model="m", max_retries=-1)
    with pytest.raises(ConfigError, match="model"):
        LLMConfig(model="")
    assert "sk-secret" not in repr(LLMConfig(model="m", api_key="sk-secret"))


def test_get_llm_builds_the_openai_client(in_tmp: Path) -> None:
    llm = get_llm(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", context_window=4096))
    assert isinstance(llm, OpenAIChatClient)
    assert (llm.model, llm.context_window) == ("m", 4096)
    assert "127.0.0.1:9" in llm.endpoint


def test_importing_the_module_does_not_import_openai() -> None:
    code = (
        "import sys, arbormem, arbormem.llm; print(sorted({'openai', 'dotenv'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
