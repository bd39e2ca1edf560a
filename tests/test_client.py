"""`arbormem.Client` and `AsyncClient` against a live server: Memory's names,
arguments and result types, and tenant isolation as a property of random operations."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbormem import (
    AsyncClient,
    Client,
    Context,
    Forgotten,
    Hits,
    InputError,
    Memory,
    Message,
    NotFound,
    RemoteError,
    Session,
    Stats,
)
from tests.serving import Served, serve

CLIENT_METHODS = [
    name for name in dir(Client) if not name.startswith("_") and callable(getattr(Client, name))
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("client")) as s:
        yield s


def test_every_client_method_is_memorys_with_the_same_arguments() -> None:
    for name in CLIENT_METHODS:
        if name in ("close",):
            continue
        assert hasattr(Memory, name), name
        ours = inspect.signature(getattr(Client, name)).parameters
        theirs = inspect.signature(getattr(Memory, name)).parameters
        for param in ours:
            assert param in theirs, f"Client.{name}({param}=) is not Memory.{name}'s"
        assert hasattr(AsyncClient, name), name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name


def test_the_client_returns_memorys_types(live: Served) -> None:
    with Client(live.url, api_key=live.acme, user="zoe") as mem:
        added = mem.add("Zoe's favourite colour is teal.", speaker="Zoe", metadata={"n": 1})
        assert isinstance(added, Message) and added.user == "zoe" and added.metadata == {"n": 1}
        mem.add_many([{"content": "She plays chess on Sundays."}], session="s2")
        hits = mem.search("favourite colour")
        assert isinstance(hits, Hits) and hits[0].message.id == added.id
        assert mem.get(added.id) == added
        assert [m.content for m in mem.messages(session="s2")] == ["She plays chess on Sundays."]
        assert all(isinstance(s, Session) for s in mem.sessions())
        assert isinstance(mem.stats(), Stats)
        assert isinstance(mem.context("what colour?"), Context)
        exported = mem.export()
        assert exported.messages == 2
        with pytest.raises(InputError) as bad:
            mem.search("x", k=0)
        assert bad.value.field == "k"
        gone = mem.forget(added.id)
        assert isinstance(gone, Forgotten) and gone.messages == 1
        with pytest.raises(NotFound):
            mem.get(added.id)
    with Client(live.url, api_key=live.acme_ro, user="zoe") as ro, pytest.raises(RemoteError) as e:
        ro.add("nope")
    assert e.value.status == 403
    with Client(live.url, api_key="wrong") as nobody, pytest.raises(RemoteError) as e:
        nobody.sessions()
    assert e.value.status == 401


def test_the_async_client_does_the_same(live: Served) -> None:
    async def main() -> None:
        async with AsyncClient(live.url, api_key=live.beta, user="yan") as mem:
            added = await mem.add("Yan keeps bees.")
            hits = await mem.search("bees")
            assert hits[0].message.id == added.id
            assert (await mem.forget(user="yan")).messages == 1

    asyncio.run(main())


# -- tenant isolation as a property ----------------------------------------------------------

USERS = ["alice", "bob"]
OPERATIONS = ["add", "search", "get_other", "forget_other", "list"]
OPERATIONS += ["remember", "records", "record_other", "forget_record_other"]
ops = st.lists(
    st.tuples(
        st.sampled_from(["acme", "beta"]),
        st.sampled_from(OPERATIONS),
        st.sampled_from(USERS),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops)
def test_no_operation_of_one_tenant_reaches_the_other(live: Served, operations: list) -> None:
    clients = {
        "acme": Client(live.url, api_key=live.acme),
        "beta": Client(live.url, api_key=live.beta),
    }
    owned: dict[str, dict[str, str]] = {"acme": {}, "beta": {}}  # id -> content
    facts: dict[str, dict[str, str]] = {"acme": {}, "beta": {}}  # record id -> text
    try:
        for tenant, op, user, n in operations:
            other = "beta" if tenant == "acme" else "acme"
            mem = clients[tenant]
            if op == "add":
                m = mem.add(f"{tenant} secret {n} about apples", user=user)
                owned[tenant][m.id] = m.content
            elif op == "search":
                for h in mem.search("secret apples", user=user, k=50):
                    assert h.message.content.startswith(tenant), h.message.content
            elif op == "list":
                for m in mem.messages(user=user):
                    assert m.content.startswith(tenant), m.content
            elif op == "remember":
                done = mem.remember(f"{tenant} fact {n} about apples", user=user)
                assert done.record is not None
                facts[tenant][done.record.id] = done.record.text
            elif op == "records":
                for r in mem.records(user=user, current=False):
                    assert r.text.startswith(tenant), r.text
                for hit in mem.search_records("fact about apples", user=user, current=False):
                    assert hit.record.text.startswith(tenant), hit.record.text
            elif op in ("record_other", "forget_record_other"):
                if facts[other]:
                    victim = sorted(facts[other])[n % len(facts[other])]
                    for who in USERS:
                        with pytest.raises(NotFound):
                            if op == "record_other":
                                mem.record_history(victim, user=who)
                            else:
                                mem.forget_record(victim, user=who)
            elif owned[other]:
                victim = sorted(owned[other])[n % len(owned[other])]
                for who in USERS:
                    with pytest.raises(NotFound):
                        if op == "get_other":
                            mem.get(victim, user=who)
                        else:
                            mem.forget(victim, user=who)
        # Nothing a tenant did removed or changed the other's messages.
        for tenant, ids in owned.items():
            for message_id, content in ids.items():
                found = [
                    m for u in USERS for m in clients[tenant].messages(user=u) if m.id == message_id
                ]
                assert [m.content for m in found] == [content]
        for tenant, records in facts.items():
            for record_id, text in records.items():
                kept = [
                    r.text
                    for u in USERS
                    for r in clients[tenant].records(user=u, current=False)
                    if r.id == record_id
                ]
                assert kept == [text]
    finally:
        for c in clients.values():
            for u in USERS:
                with contextlib.suppress(NotFound):  # a user never added
                    c.forget(user=u)
            c.close()
