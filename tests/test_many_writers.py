"""Several processes writing one SQLite store: a write waits up to ``lock_wait`` for
another's to end, and past it fails with an error that names the wait and the setting."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import httpx2
import pytest

from arbormem import Memory, Settings, StoreError
from arbormem.embed import HashingEmbedder
from arbormem.store import SQLiteBackend

from .test_store_contract import msg


def _hold_write_lock(db: Path) -> sqlite3.Connection:
    """Another process's write under way (a connection of this one is the same to SQLite)."""
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
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


def test_a_waiting_write_tries_again_and_goes_in_once_the_lock_is_free(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = SQLiteBackend(db, timeout=30)
    thread = store.thread("u", "a", create=True)
    assert thread
    statements: list[str] = []
    store._writer.set_trace_callback(statements.append)
    other = _hold_write_lock(db)
    freed = threading.Event()

    def free() -> None:
        other.rollback()
        other.close()
        freed.set()

    timer = threading.Timer(0.3, free)
    timer.start()
    try:
        store.append(thread, [msg("written once the other write ended", "s", 0)])
    finally:
        timer.join()
        store._writer.set_trace_callback(None)
    assert freed.is_set()
    assert [r.message.content for r in store.messages(thread)] == [
        "written once the other write ended"
    ]
    # Its own short tries, not SQLite's sleeping wait (which would begin only once),
    # and SQLite's wait is back for the writer's other statements.
    assert statements.count("BEGIN IMMEDIATE") > 2
    assert store._writer.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    store.close()


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
