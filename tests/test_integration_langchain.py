"""The LangChain chat message history on the real langchain-core and a real store file."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from arbormem import Memory
from arbormem.integrations.langchain import ArbormemChatMessageHistory

ROOT = Path(__file__).resolve().parents[1]


def test_history_round_trips_and_clears(db_path: Path) -> None:
    sent = [
        SystemMessage("Be brief."),
        HumanMessage("I adopted a greyhound named Pip."),
        AIMessage(
            "Lovely!",
            tool_calls=[{"name": "remember", "args": {"fact": "dog Pip"}, "id": "t1"}],
        ),
        ToolMessage("stored", tool_call_id="t1"),
    ]
    with Memory(db_path, embedder="hash") as mem:
        history = ArbormemChatMessageHistory(mem, "chat-1", user="alice")
        assert history.messages == []
        history.add_messages(sent)
        asyncio.run(history.aadd_messages([HumanMessage("And a cat.")]))
    with Memory(db_path, embedder="hash") as mem:
        history = ArbormemChatMessageHistory(mem, "chat-1", user="alice")
        assert history.messages == [*sent, HumanMessage("And a cat.")]
        assert [m.role for m in mem.messages(session="chat-1", user="alice")] == [
            "system",
            "user",
            "assistant",
            "tool",
            "user",
        ]
        assert mem.search("greyhound", user="alice")[0].message.content.startswith("I adopted")
        assert ArbormemChatMessageHistory(mem, "chat-1", user="bob").messages == []
        history.clear()
        assert history.messages == []
        history.clear()  # an empty history clears without error


def test_messages_added_elsewhere_join_the_history(memory: Memory) -> None:
    memory.add("hello from the CLI", session="s")
    memory.add("hi back", role="assistant", session="s")
    history = ArbormemChatMessageHistory(memory, "s")
    assert history.messages == [HumanMessage("hello from the CLI"), AIMessage("hi back")]


def test_example_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_history.py"), str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['My cat is called Miso.', 'Hello Miso!']",
        "My cat is called Miso.",
    ]
