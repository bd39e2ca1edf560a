"""Typed records over the server: the REST routes, the client methods and the MCP
tools, on a real uvicorn, confined to the key's tenant, refused to read-only keys."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from arbormem import AsyncClient, Client, InputError, NotFound, RemoteError
from arbormem.records.model import Record
from arbormem.records.service import RecordHit
from arbormem.results import RecordsForgotten, Remembered
from tests.serving import Served, serve


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve(tmp_path) as s:
        yield s


def _http(s: Served, key: str) -> httpx2.Client:
    return httpx2.Client(base_url=s.url, headers=s.headers(key), timeout=30)


def _move(http: httpx2.Client, user: str, city: str, when: str | None = None) -> Any:
    body = {"user": user, "text": f"Sam lives in {city}.", "subject": "Sam"}
    body.update(attribute="home", value=city)
    if when:
        body["when"] = when
    r = http.post("/v1/records", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_records_over_rest_list_search_history_and_forget(served: Served) -> None:
    with _http(served, served.acme) as http:
        paris = _move(http, "sam", "Paris", "2024-01-05T00:00:00Z")
        assert paris["action"] == "added"
        lyon = _move(http, "sam", "Lyon", "2024-04-22T00:00:00Z")
        assert lyon["action"] == "superseded"
        assert lyon["closed"] == [paris["record"]["id"]]

        now = http.get("/v1/records", params={"user": "sam"}).json()["records"]
        assert [r["text"] for r in now] == ["Sam lives in Lyon."]
        every = http.get("/v1/records", params={"user": "sam", "current": "false"}).json()
        assert {r["text"] for r in every["records"]} == {
            "Sam lives in Paris.",
            "Sam lives in Lyon.",
        }
        then = http.get("/v1/records", params={"user": "sam", "as_of": "2024-02-01T00:00:00Z"})
        assert [r["value"] for r in then.json()["records"]] == ["Paris"]
        assert http.get("/v1/records", params={"user": "sam", "kind": "event"}).json() == {
            "records": []
        }

        hits = http.post(
            "/v1/records/search", json={"user": "sam", "query": "where does Sam live?"}
        )
        assert hits.status_code == 200
        top = hits.json()["hits"][0]
        assert top["text"] == "Sam lives in Lyon." and top["score"] > 0 and top["signals"]

        lyon_id = lyon["record"]["id"]
        history = http.get(f"/v1/records/{lyon_id}/history", params={"user": "sam"}).json()
        assert [r["value"] for r in history["records"]] == ["Paris", "Lyon"]
        assert history["records"][0]["superseded_by"] == lyon_id

        gone = http.delete(f"/v1/records/{lyon_id}", params={"user": "sam"})
        assert gone.status_code == 200 and gone.json()["records"] == [lyon_id]
        # What it had closed holds again.
        again = http.get("/v1/records", params={"user": "sam"}).json()["records"]
        assert [r["value"] for r in again] == ["Paris"]
        missing = http.delete(f"/v1/records/{lyon_id}", params={"user": "sam"})
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"


def test_record_errors_have_the_house_shape(served: Served) -> None:
    with _http(served, served.acme) as http:
        bad_kind = http.post("/v1/records", json={"user": "sam", "text": "x", "kind": "rumour"})
        assert bad_kind.status_code == 422
        assert bad_kind.json()["error"]["field"] == "kind"
        assert "fact" in bad_kind.json()["error"]["hint"]
        bad_time = http.get("/v1/records", params={"user": "sam", "as_of": "someday"})
        assert bad_time.status_code == 422 and bad_time.json()["error"]["field"] == "as_of"
        typo = http.post("/v1/records/search", json={"user": "sam", "query": "x", "kinds": "fact"})
        assert typo.status_code == 422 and typo.json()["error"]["field"] == "kinds"
        nobody = http.get("/v1/records/rec-0000/history", params={"user": "sam"})
        assert nobody.status_code == 404 and "rec-0000" in nobody.json()["error"]["message"]


def test_records_stay_in_their_tenant_and_read_only_keys_cannot_write(served: Served) -> None:
    with _http(served, served.acme) as acme, _http(served, served.beta) as beta:
        secret = _move(acme, "alice", "Oslo")["record"]["id"]
        _move(beta, "alice", "Quito")
        # beta's alice is another person: she sees her own record only.
        assert [
            r["value"] for r in beta.get("/v1/records", params={"user": "alice"}).json()["records"]
        ] == ["Quito"]
        found = beta.post("/v1/records/search", json={"user": "alice", "query": "Sam Oslo home"})
        assert "Oslo" not in found.text
        assert (
            beta.get(f"/v1/records/{secret}/history", params={"user": "alice"}).status_code == 404
        )
        assert beta.delete(f"/v1/records/{secret}", params={"user": "alice"}).status_code == 404
        assert [
            r["id"] for r in acme.get("/v1/records", params={"user": "alice"}).json()["records"]
        ] == [secret]

    with _http(served, served.acme_ro) as ro:
        refused = ro.post("/v1/records", json={"user": "alice", "text": "Alice is a pilot."})
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "forbidden"
        assert ro.delete(f"/v1/records/{secret}", params={"user": "alice"}).status_code == 403
        # Reading is allowed, in the key's own tenant.
        listed = ro.get("/v1/records", params={"user": "alice"}).json()["records"]
        assert [r["id"] for r in listed] == [secret]
    assert [r.value for r in served.memory.for_tenant("acme").records(user="alice")] == ["Oslo"]


def test_the_clients_have_memorys_records_methods_and_types(served: Served) -> None:
    with Client(served.url, api_key=served.acme, user="sam") as mem:
        first = mem.remember(
            "Sam works at Acme.",
            subject="Sam",
            attribute="employer",
            value="Acme",
            when="2023-03-01T00:00:00Z",
            tags=["work"],
        )
        assert isinstance(first, Remembered) and isinstance(first.record, Record)
        moved = mem.remember(
            "Sam works at Globex.", subject="Sam", attribute="employer", value="Globex"
        )
        assert moved.action == "superseded" and moved.closed == (first.record.id,)
        listed = mem.records()
        assert [r.value for r in listed] == ["Globex"] and listed[0] == moved.record
        assert {r.value for r in mem.records(current=False)} == {"Acme", "Globex"}
        hits = mem.search_records("where does Sam work?")
        assert isinstance(hits[0], RecordHit) and hits[0].record.value == "Globex"
        history = mem.record_history(moved.record.id)
        assert [r.value for r in history] == ["Acme", "Globex"]
        gone = mem.forget_record(moved.record.id)
        assert isinstance(gone, RecordsForgotten) and gone.records == (moved.record.id,)
        with pytest.raises(NotFound):
            mem.record_history(moved.record.id)
        with pytest.raises(InputError) as bad:
            mem.remember("x", kind="rumour")
        assert bad.value.field == "kind"
    with Client(served.url, api_key=served.acme_ro, user="sam") as ro:
        with pytest.raises(RemoteError) as refused:
            ro.remember("Sam likes jazz.")
        assert refused.value.status == 403
        assert [r.value for r in ro.records()] == ["Acme"]

    async def main() -> None:
        async with AsyncClient(served.url, api_key=served.beta, user="sam") as amem:
            done = await amem.remember("Sam is vegetarian.", kind="preference")
            assert done.record is not None
            assert [r.text for r in await amem.records()] == ["Sam is vegetarian."]
            assert (await amem.search_records("vegetarian"))[0].record.id == done.record.id
            assert (await amem.forget_record(done.record.id)).records == (done.record.id,)

    asyncio.run(main())


async def _mcp(s: Served, key: str, fn: Any) -> Any:
    async with (
        httpx2.AsyncClient(headers=s.headers(key), timeout=30) as http,
        streamable_http_client(f"{s.url}/mcp", http_client=http) as (r, w),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        return await fn(session)


def test_record_tools_over_mcp_with_hints_tenants_and_read_only_keys(served: Served) -> None:
    async def call(session: ClientSession, tool: str, **args: Any) -> Any:
        result = await session.call_tool(tool, args)
        assert not result.is_error, result.content
        return result.structured_content

    async def acme(session: ClientSession) -> Any:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        hints = {n: tools[n].annotations for n in ("remember", "search_records", "record_history")}
        assert hints["search_records"].read_only_hint and hints["record_history"].read_only_hint
        assert hints["remember"].read_only_hint is False
        assert hints["remember"].destructive_hint is False
        assert tools["forget_record"].annotations.destructive_hint is True
        assert "scope" not in tools["remember"].input_schema.get("required", [])
        old = await call(
            session,
            "remember",
            text="Ana lives in Porto.",
            subject="Ana",
            attribute="home",
            value="Porto",
            when="2022-06-01T00:00:00Z",
        )
        new = await call(
            session,
            "remember",
            text="Ana lives in Braga.",
            subject="Ana",
            attribute="home",
            value="Braga",
            scope="ana",
        )
        assert old["action"] == "added"  # the server's default scope, not ana's
        found = await call(session, "search_records", query="where does Ana live?", scope="ana")
        history = await call(session, "record_history", id=new["record"]["id"], scope="ana")
        return found, history, new

    found, history, new = asyncio.run(_mcp(served, served.acme, acme))
    assert [r["value"] for r in found["records"]] == ["Braga"] and found["records"][0]["current"]
    assert [r["value"] for r in history["records"]] == ["Braga"]

    async def beta(session: ClientSession) -> Any:
        mine = await call(session, "search_records", query="where does Ana live?", scope="ana")
        other = await session.call_tool(
            "record_history", {"id": new["record"]["id"], "scope": "ana"}
        )
        return mine, other

    mine, other = asyncio.run(_mcp(served, served.beta, beta))
    assert mine["records"] == [] and other.is_error and new["record"]["id"] in other.content[0].text

    async def read_only(session: ClientSession) -> Any:
        refused = await session.call_tool("remember", {"text": "Ana is a nurse.", "scope": "ana"})
        forget = await session.call_tool(
            "forget_record", {"id": new["record"]["id"], "scope": "ana"}
        )
        seen = await call(session, "search_records", query="Ana home", scope="ana")
        return refused, forget, seen

    refused, forget, seen = asyncio.run(_mcp(served, served.acme_ro, read_only))
    assert refused.is_error and "read-only" in refused.content[0].text
    assert forget.is_error and "read-only" in forget.content[0].text
    assert [r["value"] for r in seen["records"]] == ["Braga"]
    kept = served.memory.for_tenant("acme").records(user="ana")
    assert [r.text for r in kept] == ["Ana lives in Braga."]


def test_search_with_records_over_rest_and_the_clients(served: Served) -> None:
    with Client(served.url, api_key=served.acme, user="sam") as mem:
        said = mem.add("I moved to Lyon last month, the flat is near the river.", speaker="Sam")
        plain = mem.search("where does Sam live?", k=5)
        both = mem.search("where does Sam live?", k=5, records=True)
        assert [h.id for h in both] == [h.id for h in plain]  # the same turns
        assert plain.records == [] and both.records
        assert isinstance(both.records[0], RecordHit)
        assert said.id in both.records[0].message_ids
        # A record hit says which turns it stands for, as it does in the library.
        assert both.records[0].record.sources == (said.id,)
    with _http(served, served.acme) as http:
        body = {"user": "sam", "query": "where does Sam live?", "records": True}
        answer = http.post("/v1/search", json=body).json()
        assert answer["records"][0]["message_ids"] == [said.id]
        assert http.post("/v1/search", json={**body, "records": False}).json()["records"] == []
        bad = http.post("/v1/search", json={**body, "records": "yes"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "records"

    async def main() -> None:
        async with AsyncClient(served.url, api_key=served.acme, user="sam") as amem:
            found = await amem.search("where does Sam live?", records=True)
            assert found.records[0].message_ids == [said.id]

    asyncio.run(main())
