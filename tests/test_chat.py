"""``arbormem chat`` and ``arbormem bench chat``: a chat whose prompts come from memory.

The terminal is driven end to end in a pseudo-terminal (pexpect) against a
real OpenAI-protocol server on 127.0.0.1 (:mod:`tests.fake_openai`);
:class:`ChatSession` is tested against the same server.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arbormem import InputError, Memory
from arbormem.bench.chat import ScriptedChatLLM, scripted_reply, user_turns
from arbormem.chat import ChatSession
from arbormem.cli.chat import DOCS_URL
from arbormem.context.assemble import MESSAGE_OVERHEAD, REPLY_PRIMER
from arbormem.embed import HashingEmbedder
from arbormem.llm import LLMConfig, OpenAIChatClient
from arbormem.tokens import default_counter

from .conftest import run_cli
from .fake_openai import FakeOpenAI, Reply

pexpect = pytest.importorskip("pexpect")

ANSWER = "The Eiffel tower stands on the Champ de Mars in Paris, since 1889."
#: A failed turn prints exactly this line (the cause in the brackets).
ERROR_LINE = r"Error: no reply \([^\r\n]*{cause}[^\r\n]*\)\. Your message is saved; go on\."


@pytest.fixture(scope="module")
def running_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def server(running_server: FakeOpenAI) -> FakeOpenAI:
    running_server.reset()
    running_server.default = Reply(ANSWER)
    return running_server


@pytest.fixture
def llm(server: FakeOpenAI) -> Iterator[OpenAIChatClient]:
    client = OpenAIChatClient(
        LLMConfig(model="fake", base_url=server.base_url, timeout=5, max_retries=0)
    )
    yield client
    client.close()


@pytest.fixture
def mem(db_path: Path) -> Iterator[Memory]:
    """The memory runs offline; only the chat talks to the LLM."""
    with Memory(db_path, embedder=HashingEmbedder(64), llm=None) as memory:
        yield memory


def chat_env(db: Path, server: FakeOpenAI, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ARBORMEM_DB=str(db),
        ARBORMEM_EMBEDDER="hash",
        OPENAI_BASE_URL=server.base_url,
        ARBORMEM_LLM_MODEL="fake",
        ARBORMEM_LLM_MAX_RETRIES="0",
        ARBORMEM_LLM_TIMEOUT="1",
        **extra,
    )
    return env


def _at_a_terminal() -> None:
    # As at a real terminal, Ctrl-C interrupts: a test run started in the background
    # (`cmd &` ignores SIGINT) would otherwise pass the ignored signal on to the chat.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn_chat(db: Path, server: FakeOpenAI, *args: str) -> Any:
    return pexpect.spawn(
        sys.executable,
        ["-m", "arbormem", "chat", *args],
        env=chat_env(db, server),
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 250),
        preexec_fn=_at_a_terminal,
    )


def say(child: Any, line: str) -> None:
    """Type a line at the prompt (waits for the prompt first)."""
    child.expect_exact("you> ")
    child.sendline(line)


# --------------------------------------------------------------------------- the terminal


def test_chat_in_a_terminal(tmp_path: Path, server: FakeOpenAI) -> None:
    db = tmp_path / "chat.db"
    child = spawn_chat(db, server)
    child.expect("session session-1, conversation mode")

    say(child, "Where is the famous iron tower?")
    child.expect_exact("assistant> ")
    child.expect_exact(ANSWER)
    child.expect(r"tokens sent; the full history would be")

    say(child, "/tree")
    child.expect_exact("ROOT")
    say(child, "/search tower")
    child.expect(r"1\. \[[^\]]+\] session-1 \w+: .*tower")
    say(child, "/mode code")
    child.expect_exact("Mode: code. Session session-1 goes on")
    say(child, "/stats")
    child.expect(
        r"Prompt tokens sent: [\d,]+; with the full history: [\d,]+; (no saving|[\d.]+% saved)"
    )
    child.expect(r"chat: 1 call\(s\)")

    say(child, "Please forget this sentence about my bank PIN.")
    child.expect_exact(ANSWER)
    say(child, "/forget last")
    child.expect_exact("Forgot 2 message(s) for good: user: Please forget this sentence")

    # Three ways for the server to fail: each is one line, and the chat goes on.
    server.default = Reply(status=500)
    say(child, "first question the server fails")
    child.expect(ERROR_LINE.format(cause="HTTP 500"))
    server.default = Reply(raw="this is not an event stream")
    say(child, "second question the server garbles")
    child.expect(ERROR_LINE.format(cause="ended before the model finished"))
    server.default = Reply(ANSWER, delay=2)
    say(child, "third question the server is too slow for")
    child.expect(ERROR_LINE.format(cause="sent nothing for 1 s"))
    server.default = Reply("Back again, all good.")
    say(child, "are you back?")
    child.expect_exact("Back again, all good.")

    say(child, "/help")
    child.expect_exact("/forget MESSAGE_ID")
    say(child, "/quit")
    child.expect(r"6 turn\(s\)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    with Memory(db, embedder="hash", llm=None) as check:
        stored = [(m.role, m.content) for m in check.messages()]
        assert stored == [
            ("user", "Where is the famous iron tower?"),
            ("assistant", ANSWER),
            ("user", "first question the server fails"),
            ("user", "second question the server garbles"),
            ("user", "third question the server is too slow for"),
            ("user", "are you back?"),
            ("assistant", "Back again, all good."),
        ]
        first, reply = check.messages()[:2]
        assert first.session == reply.session == "session-1"
        assert first.timestamp <= reply.timestamp
        assert reply.metadata == {"model": "fake"}
        assert check.context("which mode?", session="session-1").mode == "code"
    streamed = [r["body"] for r in server.chat_requests() if r["body"].get("stream")]
    assert streamed and all(b["model"] == "fake" and b.get("max_tokens") for b in streamed)
    assert streamed[-1]["messages"][-1] == {"role": "user", "content": "are you back?"}


@pytest.mark.parametrize("leave", ["/exit", "ctrl-d", "ctrl-c"])
def test_leaving_the_chat_exits_cleanly(tmp_path: Path, server: FakeOpenAI, leave: str) -> None:
    child = spawn_chat(tmp_path / "chat.db", server, "--session", "evening", "--mode", "reasoning")
    child.expect("session evening, reasoning mode")
    say(child, "hello there")
    child.expect_exact(ANSWER)
    child.expect_exact("you> ")
    if leave == "ctrl-d":
        child.sendeof()
    elif leave == "ctrl-c":
        child.sendintr()
    else:
        child.sendline(leave)
    child.expect(r"1 turn\(s\)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    with Memory(tmp_path / "chat.db", embedder="hash", llm=None) as check:
        assert [m.session for m in check.messages()] == ["evening", "evening"]


def test_ctrl_c_during_a_reply_stops_it_and_keeps_the_message(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    server.default = Reply(ANSWER * 4, chunk_delay=0.2)
    child = spawn_chat(tmp_path / "chat.db", server)
    say(child, "tell me slowly")
    child.expect_exact("assistant> ")
    child.sendintr()
    child.expect_exact("(reply interrupted; your message is saved)")
    say(child, "/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    with Memory(tmp_path / "chat.db", embedder="hash", llm=None) as check:
        assert [(m.role, m.content) for m in check.messages()] == [("user", "tell me slowly")]


def test_no_llm_configured_prints_how_to_configure_one(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    result = run_cli("chat", env={"ARBORMEM_DB": str(db), "ARBORMEM_EMBEDDER": "hash"})
    # On stderr, with status 1: it used to print to stdout and exit 0, as if it had run.
    assert result.returncode == 1 and result.stdout == ""
    out = result.stderr
    for needle in (
        "ARBORMEM_LLM_MODEL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        ".env",
        "http://localhost:11434/v1",  # Ollama
        "gpt-4o-mini",  # OpenAI
        "Nothing was stored",
    ):
        assert needle in out
    assert not db.exists()
    # A pip-installed user has no docs folder: the pages are named by their address.
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    docs = re.search(r'^Documentation = "(.+)"$', pyproject, flags=re.M)
    assert docs
    assert f"{docs.group(1)}/chat.md" in out and f"{docs.group(1)}/llm.md" in out
    assert not re.search(r"(?<![/\w])docs/", out)
    assert docs.group(1) == DOCS_URL  # the address used where the metadata says none


def test_chat_with_piped_input_is_plain_text(tmp_path: Path, server: FakeOpenAI) -> None:
    result = run_cli(
        "chat",
        env=chat_env(tmp_path / "chat.db", server),
        input="what is the tower?\n//etc is a folder\n/stats\n",
    )
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert f"assistant> {ANSWER}" in result.stdout
    assert "Turns: 2," in result.stdout
    with Memory(tmp_path / "chat.db", embedder="hash", llm=None) as check:
        assert check.messages()[2].content == "/etc is a folder"


# --------------------------------------------------------------------------- ChatSession


def test_a_turn_streams_and_stores_the_exchange_in_one_call(
    mem: Memory, llm: OpenAIChatClient, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = ChatSession(mem, llm)
    calls = []
    real_add_many = mem.add_many

    def add_many(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("session"))
        return real_add_many(*args, **kwargs)

    monkeypatch.setattr(mem, "add_many", add_many)
    deltas: list[str] = []
    turn = chat.turn("Where is the tower?", on_delta=deltas.append)

    assert turn.ok and turn.reply == ANSWER
    assert len(deltas) > 1 and "".join(deltas) == ANSWER  # it streamed, in pieces
    assert calls == [chat.session]
    assert turn.user_message.content == "Where is the tower?"
    assert turn.assistant_message is not None and turn.assistant_message.content == ANSWER
    assert turn.user_message.timestamp <= turn.assistant_message.timestamp
    sent = server.chat_requests()[-1]["body"]
    assert sent["stream"] is True and sent["max_tokens"] > 0
    assert sent["messages"][-1] == {"role": "user", "content": "Where is the tower?"}


def test_stats_arithmetic(mem: Memory, llm: OpenAIChatClient) -> None:
    counter = default_counter()

    def cost(text: str) -> int:
        return counter.count(text) + MESSAGE_OVERHEAD

    # History from an earlier session counts too: it is what a full prompt would carry.
    mem.add_many(
        [
            {"role": "user", "content": "My sister Clara gets married in June."},
            {"role": "assistant", "content": "Congratulations to Clara!"},
        ],
        session="old",
    )
    chat = ChatSession(mem, llm, session="new")
    turns = [chat.turn(q) for q in ("How long should a speech be?", "And the toast?", "Thanks")]
    history = cost("My sister Clara gets married in June.") + cost("Congratulations to Clara!")
    for turn in turns:
        system = mem.context("x", session="new").section("system").text
        expected = REPLY_PRIMER + cost(system) + history + cost(turn.input)
        assert turn.full_history_tokens == expected
        history += cost(turn.input) + cost(turn.reply)

    stats = chat.stats()
    sent = sum(t.prompt_tokens for t in turns)
    full = sum(t.full_history_tokens for t in turns)
    assert (stats["turns"], stats["prompt_tokens"], stats["full_history_tokens"]) == (3, sent, full)
    assert stats["ratio"] == pytest.approx(sent / full)
    assert stats["saving_percent"] == round(100 * (1 - sent / full), 1)
    assert stats["last_turn"]["prompt_tokens"] == turns[-1].prompt_tokens
    assert stats["llm"]["features"]["chat"]["calls"] == 3
    assert stats["token_counter"] == counter.name
    shown = chat.command("/stats").text
    assert f"Prompt tokens sent: {sent:,}; with the full history: {full:,}; " in shown


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500),
        Reply("a long answer cut in the middle", cut_after=2),
        # Replies the store refuses: the user's message is kept all the same.
        Reply("Peanuts are \x00 fine"),
        Reply(content_value="x" * 1_100_000),
    ],
)
def test_a_failed_reply_keeps_the_message_and_the_chat_goes_on(
    mem: Memory, llm: OpenAIChatClient, server: FakeOpenAI, reply: Reply
) -> None:
    chat = ChatSession(mem, llm)
    server.queue(reply)
    failed = chat.turn("Remember that Leo is allergic to peanuts.")
    assert not failed.ok and failed.error and "\n" not in failed.error
    assert failed.assistant_message is None and failed.reply == ""
    assert [m.content for m in mem.messages()] == ["Remember that Leo is allergic to peanuts."]

    after = chat.turn("Is the cake safe?")
    assert after.ok and after.reply == ANSWER
    assert chat.stats()["failed_turns"] == 1 and chat.stats()["turns"] == 2
    assert len(mem.messages()) == 3


def test_input_the_store_refuses_is_refused_before_the_model_is_asked(
    db_path: Path, llm: OpenAIChatClient, server: FakeOpenAI
) -> None:
    with Memory(db_path, embedder=HashingEmbedder(64), llm=None, max_message_bytes=2000) as mem:
        chat = ChatSession(mem, llm)
        for bad in ("x" * 3000, "   "):
            with pytest.raises(InputError, match="content"):
                chat.turn(bad)
        # The model was never called (it used to answer, then nothing was stored).
        assert server.requests == [] and llm.usage.snapshot()["total"]["calls"] == 0
        assert chat.stats()["turns"] == 0 and mem.messages() == []
        assert chat.turn("A short question?").ok


def test_an_interrupted_reply_keeps_the_message(
    mem: Memory, llm: OpenAIChatClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = ChatSession(mem, llm)

    def interrupt(delta: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        chat.turn("A message typed before Ctrl-C", on_delta=interrupt)
    assert [m.role for m in mem.messages()] == ["user"]
    assert chat.stats()["failed_turns"] == 1

    # Even before anything was sent, while the context was being built.
    def context(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(mem, "context", context)
    with pytest.raises(KeyboardInterrupt):
        chat.turn("Ctrl-C came early")
    assert [m.content for m in mem.messages()][-1] == "Ctrl-C came early"
    assert chat.stats()["turns"] == 1
    assert "Forgot 1 message(s)" in chat.command("/forget last").text


def test_commands(mem: Memory, llm: OpenAIChatClient) -> None:
    chat = ChatSession(mem, llm, session="s1")
    assert chat.mode == "conversation"
    chat.turn("We chose white quartz for the kitchen counters.")
    chat.turn("The contractor quoted 14,800 euros.")

    assert "/search QUERY" in chat.command("/help").text
    assert chat.command("/quit").quit and chat.command("/exit").quit
    assert "Unknown command /nope" in chat.command("/nope").text
    assert chat.is_command("/tree") and not chat.is_command("//etc/hosts")
    assert chat.as_message("//etc/hosts") == "/etc/hosts"

    assert "ROOT" in chat.command("/tree").text
    found = chat.command("/search quartz counters").text
    assert found.startswith("1. [") and "quartz" in found
    assert chat.command("/search").text.startswith("Usage")

    assert "conversation" in chat.command("/mode").text
    assert "Unknown mode" in chat.command("/mode planning").text
    assert "Mode: code" in chat.command("/mode CODE").text
    assert chat.mode == "code" and chat.session == "s1"
    assert chat.turn("next step?").mode == "code"
    assert len(mem.messages(session="s1")) == 6  # switching kept the session

    assert "Forgot 2 message(s)" in chat.command("/forget last").text
    assert [m.content for m in mem.messages()][-1] == ANSWER
    assert len(mem.messages()) == 4
    target = mem.messages()[0]
    assert "Forgot 1 message(s)" in chat.command(f"/forget {target.id}").text
    assert "No message 'nope'" in chat.command("/forget nope").text
    # Forgetting shrinks the history the next turn is compared with.
    counter = default_counter()
    history = sum(counter.count(m.content) + MESSAGE_OVERHEAD for m in mem.messages())
    turn = chat.turn("What did the contractor quote?")
    system = mem.context("x", session="s1").section("system").text
    assert turn.full_history_tokens == (
        REPLY_PRIMER
        + counter.count(system)
        + MESSAGE_OVERHEAD
        + history
        + counter.count(turn.input)
        + MESSAGE_OVERHEAD
    )


def test_forget_last_reaches_back_into_a_resumed_session(
    mem: Memory, llm: OpenAIChatClient
) -> None:
    mem.add_many(
        [{"role": "user", "content": "old question"}, {"role": "assistant", "content": "old"}],
        session="s1",
    )
    chat = ChatSession(mem, llm, session="s1")
    assert "Forgot 2 message(s)" in chat.command("/forget last").text
    assert mem.messages() == []
    assert "Nothing to forget" in chat.command("/forget last").text


# --------------------------------------------------------------------------- the benchmark


def test_scripted_chat_changes_topics_and_comes_back() -> None:
    script = list(user_turns(200, seed=3))
    assert script == list(user_turns(200, seed=3))
    assert len(script) == 200 and script[0].kind == "new"
    assert sum(t.kind == "return" for t in script) >= 10
    returned = {t.topic for t in script if t.kind == "return"}
    assert len(returned) >= 4
    for text in ("What budget did I say we had?", "Short."):
        reply = scripted_reply(text)
        assert reply == scripted_reply(text) and 40 <= len(reply.split()) <= 260
    answer = "".join(ScriptedChatLLM().stream("How do I keep slugs away?"))
    assert answer == scripted_reply("How do I keep slugs away?")


def test_bench_chat_json(tmp_path: Path) -> None:
    result = run_cli("bench", "chat", "--turns", "30", "--json", env={"ARBORMEM_EMBEDDER": "hash"})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in (
        "turns",
        "budget",
        "embedder",
        "token_counter",
        "prompt_tokens",
        "full_history_tokens",
        "ratio",
        "saving_percent",
        "context_ms_p50",
        "context_ms_p95",
        "answers",
        "note",
        "checkpoints",
    ):
        assert key in data, key
    assert data["turns"] == 30 and data["messages_stored"] == 60
    assert data["answers"] == "scripted" and "not answer quality" in data["note"]
    assert data["ratio"] == pytest.approx(data["prompt_tokens"] / data["full_history_tokens"], 1e-3)
    assert 0 < data["context_ms_p50"] <= data["context_ms_p95"]


def test_bench_context_json() -> None:
    result = run_cli(
        "bench",
        "context",
        "--messages",
        "120",
        "--queries",
        "5",
        "--budget",
        "600",
        "--json",
        env={"ARBORMEM_EMBEDDER": "hash"},
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["messages"] == 120 and data["queries"] == 5 and data["budget"] == 600
    assert 0 < data["context_ms_p50"] <= data["context_ms_p95"] <= data["context_ms_max"]
    assert 0 < data["prompt_tokens_mean"] <= 600
    assert data["token_counter"]
