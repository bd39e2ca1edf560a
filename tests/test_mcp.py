"""The MCP server through the official SDK client: over stdio (a real subprocess),
over streamable HTTP (a live server, with keys), and three stdio servers writing
one store at once."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from tests.serving import serve

TOOLS = {"add_memory", "search_memories", "get_context", "view_topic", "get_messages"}
TOOLS |= {"delete_memory", "remember", "search_records", "record_history", "forget_record"}


def _stdio(db: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "arbormem", "--db", str(db), "--embedder", "hash", *extra, "mcp"],
    )


async def _call(session: ClientSession, tool: str, **args: Any) -> Any:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


def test_stdio_tools_with_hints_and_an_optional_scope(tmp_path: Path) -> None:
    db = tmp_path / "m.db"

    async def main() -> None:
        async with stdio_client(_stdio(db)) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == TOOLS
            assert tools["search_memories"].annotations.read_only_hint is True
            assert tools["delete_memory"].annotations.destructive_hint is True
            assert tools["delete_memory"].annotations.idempotent_hint is True
            assert tools["add_memory"].annotations.read_only_hint is False
            assert "scope" not in tools["search_memories"].input_schema.get("required", [])

            added = await _call(s, "add_memory", content="My bike is a green Brompton.")
            await _call(s, "add_memory", content="Bob's car is red.", scope="bob/garage")
            hits = (await _call(s, "search_memories", query="bike"))["hits"]
            assert hits[0]["id"] == added["id"]
            assert "Bob" not in " ".join(h["content"] for h in hits)  # another scope
            bob = (await _call(s, "search_memories", query="car", scope="bob/garage"))["hits"]
            assert bob[0]["content"] == "Bob's car is red."
            got = await _call(s, "get_messages", ids=[added["id"]])
            assert got["messages"][0]["content"] == "My bike is a green Brompton."
            ctx = await _call(s, "get_context", query="what bike do I have?")
            assert "Brompton" in ctx["text"]
            root = await _call(s, "view_topic")
            assert root["kind"] == "root"
            gone = await _call(s, "delete_memory", id=added["id"])
            assert gone["deleted"] == 1
            again = await s.call_tool("delete_memory", {"id": added["id"]})
            assert again.is_error
            assert added["id"] in again.content[0].text  # a reason the agent can read
            bad = await s.call_tool("search_memories", {"query": "x", "scope": "/nobody"})
            assert bad.is_error and "scope" in bad.content[0].text

    asyncio.run(main())
    with Memory(db, embedder=HashingEmbedder(64), read_only=True) as mem:
        assert [m.content for m in mem.messages()] == []
        assert [m.content for m in mem.messages(user="bob", agent="garage")] == [
            "Bob's car is red."
        ]


def test_three_stdio_servers_write_one_store_at_once(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    Memory(db, embedder=HashingEmbedder(64)).close()  # made once, as a first client would
    per_process = 25

    async def writer(n: int) -> list[str]:
        ids = []
        async with stdio_client(_stdio(db)) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for i in range(per_process):
                ids.append((await _call(s, "add_memory", content=f"writer {n} note {i}"))["id"])
        return ids

    async def main() -> list[list[str]]:
        return await asyncio.gather(*(writer(n) for n in range(3)))

    acknowledged = [i for ids in asyncio.run(main()) for i in ids]
    with Memory(db, embedder=HashingEmbedder(64), read_only=True) as mem:
        stored = {m.id: m.content for m in mem.messages()}
    assert len(acknowledged) == 3 * per_process
    assert set(acknowledged) <= set(stored)
    assert sorted(stored.values()) == sorted(
        f"writer {n} note {i}" for n in range(3) for i in range(per_process)
    )


def test_http_mcp_uses_the_same_keys_and_tenants(tmp_path: Path) -> None:
    with serve(tmp_path) as s:

        async def session_for(key: str | None, fn: Any) -> Any:
            async with (
                httpx2.AsyncClient(headers=s.headers(key), timeout=30) as http,
                streamable_http_client(f"{s.url}/mcp", http_client=http) as (r, w),
                ClientSession(r, w) as session,
            ):
                await session.initialize()
                return await fn(session)

        async def add_and_find(session: ClientSession) -> Any:
            await _call(session, "add_memory", content="acme alice likes oolong", scope="alice")
            return await _call(session, "search_memories", query="oolong", scope="alice")

        async def find(session: ClientSession) -> Any:
            return await _call(session, "search_memories", query="oolong", scope="alice")

        async def try_add(session: ClientSession) -> Any:
            return await session.call_tool("add_memory", {"content": "x", "scope": "alice"})

        found = asyncio.run(session_for(s.acme, add_and_find))
        assert found["hits"][0]["content"] == "acme alice likes oolong"
        assert asyncio.run(session_for(s.beta, find))["hits"] == []  # beta's alice
        assert asyncio.run(session_for(s.acme_ro, find))["hits"]  # acme's, read-only
        refused = asyncio.run(session_for(s.acme_ro, try_add))
        assert refused.is_error and "read-only" in refused.content[0].text
        r = httpx2.post(f"{s.url}/mcp", json={}, headers={"Accept": "application/json"})
        assert r.status_code == 401
        assert s.memory.for_tenant("acme").messages(user="alice")[0].content.endswith("oolong")


@pytest.mark.parametrize("key", [None, "amk_00000000_wrong"])
def test_http_mcp_refuses_without_a_valid_key(tmp_path: Path, key: str | None) -> None:
    with serve(tmp_path) as s:
        r = httpx2.post(
            f"{s.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**s.headers(key), "Accept": "application/json, text/event-stream"},
        )
        assert r.status_code == 401
