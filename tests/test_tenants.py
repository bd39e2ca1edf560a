"""Tenants partition a store: two tenants' "alice" are two people."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbormem import InputError, Memory, NotFound
from arbormem.embed import HashingEmbedder
from arbormem.store import open_store


def _open(db: Path, tenant: str) -> Memory:
    return Memory(db, embedder=HashingEmbedder(64), llm=None, user="alice", tenant=tenant)


def test_two_tenants_users_of_one_name_never_meet(db_path: Path) -> None:
    with _open(db_path, "acme") as acme, _open(db_path, "globex") as globex:
        secret = acme.add("My locker code is 4417.", speaker="Alice")
        globex.add("I like hiking in the Alps.", speaker="Alice")
        assert [h.id for h in acme.search("locker code")] == [secret.id]
        assert secret.id not in {h.id for h in globex.search("locker code 4417")}
        with pytest.raises(NotFound):
            globex.get(secret.id)
        assert [s.tenant for s in globex.scopes()] == ["globex"]
        assert len(acme.export(everything=True).document["threads"]) == 1
        assert "4417" not in str(globex.export(everything=True))
        globex.forget(user="alice")
        assert acme.get(secret.id).content == "My locker code is 4417."
        assert acme.get(secret.id).scope.tenant == "acme"


def test_the_default_tenant_is_a_tenant_of_its_own(db_path: Path) -> None:
    with _open(db_path, "") as plain, _open(db_path, "acme") as acme:
        plain.add("Plain store note.")
        acme.add("Tenant note.")
        assert [m.content for m in plain.messages()] == ["Plain store note."]
        assert [m.content for m in acme.messages()] == ["Tenant note."]


def test_an_import_lands_in_the_importing_tenant(tmp_path: Path) -> None:
    with _open(tmp_path / "a.db", "acme") as acme:
        acme.add("Exported once.")
        data = acme.export()
    with _open(tmp_path / "b.db", "globex") as globex:
        globex.import_(data)
        assert [m.content for m in globex.messages()] == ["Exported once."]
        assert globex.messages()[0].tenant == "globex"


def test_the_store_keys_threads_by_tenant(db_path: Path) -> None:
    store = open_store(db_path)
    try:
        a = store.thread("alice", "bot", create=True, tenant="acme")
        b = store.thread("alice", "bot", create=True, tenant="globex")
        assert a is not None and b is not None and a.id != b.id
        assert store.thread("alice", "bot") is None  # the default tenant has none
        assert [t.id for t in store.threads(tenant="acme")] == [a.id]
        assert {t.id for t in store.threads(tenant=None)} == {a.id, b.id}
    finally:
        store.close()


@pytest.mark.parametrize("bad", ["  ", 5, "a\x00b"])
def test_a_tenant_is_a_name(db_path: Path, bad: object) -> None:
    with pytest.raises(InputError) as err:
        Memory(db_path, embedder=HashingEmbedder(64), llm=None, tenant=bad)  # type: ignore[arg-type]
    assert err.value.field == "tenant"
