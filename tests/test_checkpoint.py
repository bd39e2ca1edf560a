"""Checkpoints on their own thread: the log stays bounded, nothing is lost, and
SQLite's own checkpoints take over when the thread cannot run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from arbormem.store import SQLiteBackend
from arbormem.store.sqlite.checkpoint import Checkpointer
from arbormem.store.sqlite.driver import sqlite3

from .test_store_contract import msg


def _log_pages(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        # A checkpoint that copies nothing still reports the pages in the log.
        return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        conn.close()


def _append(store: SQLiteBackend, n: int, start: int = 0) -> None:
    t = store.thread("u", "a", create=True)
    assert t
    for i in range(start, start + n):
        store.append(t, [msg(f"entry number {i} about kites and rivers " * 8, "s", i)])


def test_the_log_stays_bounded_and_every_commit_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SQLiteBackend(path)
    assert store._checkpointer is not None
    store._checkpointer.limit = 400 * 4096
    store._writer.execute("PRAGMA journal_size_limit = 0")
    _append(store, 400)
    # Without checkpoints 400 commits leave well over a thousand pages in the log.
    assert _log_pages(path) < 400 + 200
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 400
    reader.close()
    store.close()
    assert not [t for t in threading.enumerate() if t.name == "arbormem-checkpoint"]
    again = SQLiteBackend(path)
    t = again.thread("u", "a")
    assert t and again.count(t) == 400
    again.close()


def test_the_writer_checkpoints_itself_when_the_thread_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.db"
    store = SQLiteBackend(path)

    def refuse() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    store._checkpointer = Checkpointer(refuse, str(path) + "-wal", limit=200 * 4096)
    _append(store, 3)
    # The thread fails at once; the next write hands checkpoints back to SQLite.
    store._checkpointer._thread.join(5)  # type: ignore[union-attr]
    _append(store, 400, start=3)
    assert store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert _log_pages(path) < 1000 + 150
    store.close()


def test_an_in_memory_store_has_no_checkpoint_thread() -> None:
    store = SQLiteBackend(":memory:")
    assert store._checkpointer is None
    _append(store, 5)
    store.close()
