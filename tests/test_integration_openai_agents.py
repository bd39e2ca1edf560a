"""The OpenAI Agents SDK adapter on the real SDK, the real store and the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    set_tracing_disabled,
)
from agents.memory import Session, SessionSettings
from openai import AsyncOpenAI

from arbormem import AsyncMemory, Memory
from arbormem.integrations.openai_agents import ArbormemSession, memory_tools
from tests.fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[1]

set_tracing_disabled(True)


def tool_call(name: str, arguments: dict[str, object], call_id: str = "call_1") -> Reply:
    """A chat completion that asks for one tool call, as the OpenAI API sends it."""
    body = {
        "id": "chatcmpl-tool",
        "object": "chat.completion",
        "created": 1764200000,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }
    return Reply(raw=json.dumps(body))


def test_session_follows_the_protocol(memory: Memory) -> None:
    session = ArbormemSession(memory, "chat-1")
    assert isinstance(session, Session)

    async def run() -> None:
        assert await session.get_items() == []
        items = [
            {"role": "user", "content": "I moved to Lisbon in May."},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Noted: Lisbon.", "annotations": []}],
            },
            {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
        ]
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.get_items(limit=2) == items[2:]
        assert await session.pop_item() == items[-1]
        assert await session.get_items() == items[:3]
        await session.clear_session()
        assert await session.get_items() == []
        await session.clear_session()  # clearing an empty session is fine

    asyncio.run(run())
    assert memory.messages(session="chat-1") == []


def test_session_items_are_recalled_and_survive_reopening(db_path: Path) -> None:
    with Memory(db_path, embedder="hash") as mem:
        asyncio.run(
            ArbormemSession(mem, "s1", user="alice").add_items(
                [{"role": "user", "content": "My sister Ana plays the cello."}]
            )
        )
        assert memory_text(mem.search("cello", user="alice")) == ["My sister Ana plays the cello."]
    with Memory(db_path, embedder="hash") as mem:
        session = ArbormemSession(
            mem, "s1", user="alice", session_settings=SessionSettings(limit=5)
        )
        items = asyncio.run(session.get_items())
        assert items == [{"role": "user", "content": "My sister Ana plays the cello."}]
        # Another user's view of the same session name is empty: scopes never mix.
        assert asyncio.run(ArbormemSession(mem, "s1", user="bob").get_items()) == []


def memory_text(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.message.content for h in hits]


def test_an_agent_run_uses_the_tools_and_the_session(db_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.queue(
            tool_call("search_memory", {"query": "drink"}),
            Reply("You like green tea."),
            tool_call("remember", {"fact": "Alice is learning Portuguese."}, "call_2"),
            Reply("I will remember that."),
        )
        model = OpenAIChatCompletionsModel(
            model="fake", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="fake")
        )

        async def run() -> None:
            async with AsyncMemory(db_path, embedder="hash", user="alice") as mem:
                await mem.add("I always drink green tea in the morning.", session="old")
                agent = Agent(name="helper", tools=memory_tools(mem), model=model)
                session = ArbormemSession(mem, "chat-1")
                first = await Runner.run(agent, "What do I like to drink?", session=session)
                assert first.final_output == "You like green tea."
                second = await Runner.run(agent, "I am learning Portuguese.", session=session)
                assert second.final_output == "I will remember that."
                hits = await mem.search("Portuguese")
                assert "Alice is learning Portuguese." in [h.message.content for h in hits]

        asyncio.run(run())
        requests = fake.chat_requests()
        # The tool answered from the store: the model saw the stored sentence.
        tool_messages = [m for m in requests[1]["body"]["messages"] if m["role"] == "tool"]
        assert "green tea in the morning" in tool_messages[0]["content"]
        # The second run read the first run's history back from the session.
        roles = [m["role"] for m in requests[2]["body"]["messages"]]
        assert roles[:4] == ["user", "assistant", "tool", "assistant"]
    with Memory(db_path, embedder="hash", user="alice") as mem:
        stored = mem.messages(session="chat-1")
        assert [m.role for m in stored][:4] == ["user", "assistant", "tool", "assistant"]
        assert stored[0].content == "What do I like to drink?"


def test_example_runs_offline(tmp_path: Path) -> None:
    db = tmp_path / "example.db"
    with Memory(db, user="alice") as mem:
        mem.add("I drink rooibos every evening.")
    with FakeOpenAI() as fake:
        fake.queue(
            tool_call("search_memory", {"query": "drink"}), Reply("Rooibos, in the evening.")
        )
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "fake"}
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "openai_agents_memory.py"), str(db)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Rooibos, in the evening."
        tool_messages = [
            m for m in fake.chat_requests()[1]["body"]["messages"] if m["role"] == "tool"
        ]
        assert "rooibos" in tool_messages[0]["content"]
