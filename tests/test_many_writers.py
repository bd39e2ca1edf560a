"""Several processes writing one SQLite store: a write waits up to ``lock_wait`` for
another's to end, and past it fails with an error that names the wait and the setting."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx2
import pytest

from arbormem import Memory, Settings, StoreError
from arbormem.embed import HashingEmbedder


def _hold_write_lock(db: Path) -> sqlite3.Connection:
    """Another process's write under way (a connection of this one is the same to SQLite)."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_the_wait_is_a_setting() -> None:
    assert Settings.resolve(lock_wait=2.5).lock_wait == 2.5
    with pytest.raises(Exception, match="lock_wait"):
        Settings.resolve(lock_wait=0)


def test_past_the_wait_the_error_names_it_and_the_setting(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    settings = Settings.resolve(db=str(db), lock_wait=0.2)
    with Memory(settings=settings, embedder=HashingEmbedder(64)) as mem:
        mem.add("before")
        other = _hold_write_lock(db)
        try:
            with pytest.raises(StoreError) as caught:
                mem.add("while locked")
        finally:
            other.rollback()
            other.close()
        assert "0.2 s" in str(caught.value)
        assert "ARBORMEM_LOCK_WAIT" in str(caught.value)
        mem.add("after")  # the lock gone, writes go on
        assert [m.content for m in mem.messages()] == ["before", "after"]


def test_the_server_answers_503_naming_the_setting(tmp_path: Path) -> None:
    from arbormem.server import Authenticator, KeyRing
    from arbormem.server.app import create_app
    from arbormem.server.live import live_server

    db = tmp_path / "short.db"
    ring = KeyRing(tmp_path / "k.json")
    key = ring.create("acme")
    settings = Settings.resolve(db=str(db), lock_wait=0.2)
    with Memory(settings=settings, embedder=HashingEmbedder(64)) as mem:
        mem.for_tenant("acme").add("made", user="u")
        with live_server(create_app(mem, Authenticator(ring=ring), mcp=False)) as url:
            other = _hold_write_lock(db)
            try:
                r = httpx2.post(
                    f"{url}/v1/messages",
                    json={"user": "u", "messages": [{"content": "x"}]},
                    headers={"Authorization": f"Bearer {key}"},
                )
            finally:
                other.rollback()
                other.close()
    assert r.status_code == 503
    assert r.json()["error"]["type"] == "store"
    assert "ARBORMEM_LOCK_WAIT" in r.json()["error"]["message"]
