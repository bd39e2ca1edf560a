"""The LangGraph store and tools on the real LangGraph and a real store file."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import GetOp, PutOp, SearchOp

from arbormem import Memory
from arbormem.integrations.langgraph import ArbormemStore, memory_tool_node

ROOT = Path(__file__).resolve().parents[1]


def test_put_get_search_delete(memory: Memory) -> None:
    store = ArbormemStore(memory)
    store.put(("alice", "memories"), "drink", {"text": "Alice drinks green tea", "n": 3})
    store.put(("alice", "memories"), "city", {"text": "Alice lives in Porto", "n": 7})
    store.put(("bob", "memories"), "drink", {"text": "Bob drinks black coffee", "n": 1})

    item = store.get(("alice", "memories"), "drink")
    assert item is not None
    assert item.value == {"text": "Alice drinks green tea", "n": 3}
    assert item.namespace == ("alice", "memories")
    assert store.get(("alice", "memories"), "missing") is None

    hits = store.search(("alice",), query="what does she drink?")
    assert hits[0].key == "drink"
    assert all(h.namespace[0] == "alice" for h in hits)  # bob's namespace is another scope
    assert hits[0].score is not None

    listed = store.search(("alice", "memories"))
    assert {i.key for i in listed} == {"drink", "city"}
    assert [i.key for i in store.search(("alice",), filter={"n": {"$gt": 5}})] == ["city"]
    assert [i.key for i in store.search(("alice",), filter={"n": 3})] == ["drink"]
    assert len(store.search((), limit=2)) == 2
    assert len(store.search((), limit=10, offset=2)) == 1

    # The items are arbormem messages of their scope: its own search finds them.
    assert "Alice lives in Porto" in [
        h.message.content for h in memory.search("Porto", user="alice", agent="memories")
    ]

    first = store.get(("alice", "memories"), "city")
    store.put(("alice", "memories"), "city", {"text": "Alice moved to Lisbon", "n": 8})
    updated = store.get(("alice", "memories"), "city")
    assert first is not None and updated is not None
    assert updated.value["text"] == "Alice moved to Lisbon"
    assert updated.created_at == first.created_at
    assert updated.updated_at >= first.updated_at
    # The replaced value is gone from recall, not merely hidden.
    assert "Alice lives in Porto" not in [
        h.message.content for h in memory.search("Porto", user="alice", agent="memories")
    ]

    store.delete(("alice", "memories"), "city")
    assert store.get(("alice", "memories"), "city") is None
    store.delete(("alice", "memories"), "city")  # deleting twice is harmless


def test_namespaces_batch_and_async(memory: Memory) -> None:
    store = ArbormemStore(memory)
    store.put(("alice", "memories", "food"), "a", {"text": "likes figs"})
    store.put(("alice", "memories", "work"), "b", {"text": "works nights"})
    store.put(("bob", "prefs"), "c", {"text": "no onions"}, index=False)
    assert store.list_namespaces() == [
        ("alice", "memories", "food"),
        ("alice", "memories", "work"),
        ("bob", "prefs"),
    ]
    assert store.list_namespaces(prefix=("alice",), max_depth=2) == [("alice", "memories")]
    assert store.list_namespaces(suffix=("work",)) == [("alice", "memories", "work")]
    assert store.list_namespaces(prefix=("*", "prefs")) == [("bob", "prefs")]
    # An item stored with index=False is kept but never a query hit.
    assert store.search(("bob",), query="onions") == []
    assert [i.key for i in store.search(("bob",))] == ["c"]

    # A batch applies its operations in order, one result each.
    results = store.batch(
        [
            PutOp(("carol", "m"), "k", {"text": "plays chess"}),
            GetOp(("carol", "m"), "k"),
            SearchOp(("carol",), None, 10, 0, "chess"),
        ]
    )
    assert results[0] is None
    assert results[1] is not None and results[1].value == {"text": "plays chess"}
    assert [i.key for i in results[2]] == ["k"]

    async def run() -> None:
        await store.aput(("dan", "m"), "k", {"text": "runs marathons"})
        got = await store.aget(("dan", "m"), "k")
        assert got is not None and got.value["text"] == "runs marathons"
        assert [i.key for i in await store.asearch(("dan",), query="marathon")] == ["k"]
        await store.adelete(("dan", "m"), "k")
        assert await store.aget(("dan", "m"), "k") is None

    asyncio.run(run())


def test_store_survives_reopening(db_path: Path) -> None:
    with Memory(db_path, embedder="hash") as mem:
        ArbormemStore(mem).put(("alice", "m"), "k", {"text": "kept"})
    with Memory(db_path, embedder="hash") as mem:
        item = ArbormemStore(mem).get(("alice", "m"), "k")
        assert item is not None and item.value == {"text": "kept"}


def _scripted_model(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    if last.type == "human":
        call = {"name": "remember", "args": {"fact": str(last.content)}, "id": "1"}
    elif str(last.content).startswith("remembered"):
        call = {"name": "search_memory", "args": {"query": "viola"}, "id": "2"}
    else:
        return {"messages": [AIMessage(f"found {last.content}")]}
    return {"messages": [AIMessage("", tool_calls=[call])]}


def test_a_graph_uses_the_tool_node_on_the_store(memory: Memory) -> None:
    graph = StateGraph(MessagesState)
    graph.add_node("model", _scripted_model)
    graph.add_node("tools", memory_tool_node(("{user_id}", "memories")))
    graph.add_edge(START, "model")
    graph.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    graph.add_edge("tools", "model")
    app = graph.compile(store=ArbormemStore(memory))
    result = app.invoke(
        {"messages": [("user", "Erin plays the viola.")]},
        {"configurable": {"user_id": "erin"}},
    )
    assert "Erin plays the viola." in result["messages"][-1].content
    # Stored in erin's scope, where arbormem's own search finds it.
    assert [h.message.content for h in memory.search("viola", user="erin", agent="memories")] == [
        "Erin plays the viola."
    ]
    assert memory.search("viola", user="default") == []

    async def arun() -> Any:
        return await app.ainvoke(
            {"messages": [("user", "Erin sings too.")]}, {"configurable": {"user_id": "erin"}}
        )

    assert "Erin sings too." in asyncio.run(arun())["messages"][-1].content


def test_example_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_store.py"), str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Alice drinks green tea." in done.stdout
