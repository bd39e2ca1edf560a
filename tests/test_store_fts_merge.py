"""FTS5 upkeep of a store being written (SQLiteLexical.merge_full_text): the
full-text tables keep few segments, searches answer exactly as before a merge,
the in-memory copies survive it, and it never waits for another process's write."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from arbormem.store.sqlite import SQLiteBackend, lexical
from tests.test_store_postings import TEXTS, add

TABLES = ("turn_fts", "window_fts")


def segments(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT COUNT(DISTINCT segid) FROM {table}_idx").fetchone()[0])
    finally:
        conn.close()


def write_one_by_one(store: SQLiteBackend, count: int) -> None:
    """``count`` write transactions, each adding one turn to one of three threads."""
    for i in range(count):
        add(store, [f"{TEXTS[i % len(TEXTS)]} word{i}"], 1000 + i, user=f"u{i % 3}")


def test_writes_leave_few_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "MERGE_EVERY", 1)
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    write_one_by_one(store, 40)
    # FTS5 alone keeps up to three segments per level of size (10 here).
    for table in TABLES:
        assert segments(path, table) <= 2, table
    store.close()


def test_a_merge_changes_no_answer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    write_one_by_one(store, 30)
    threads = [store.thread(f"u{i}", "a") for i in range(2)]
    assert all(t is not None for t in threads)
    searched = [t for t in threads if t is not None]
    queries = [["kite"], ["kite", "repair"], ["boat", "garden", "word7"], ["absent"]]
    before = {
        (key, i): store.lexical_search(searched, key, terms, 5)
        for key in ("turn", "window")
        for i, terms in enumerate(queries)
    }
    counts = {t: segments(path, t) for t in TABLES}
    assert store.merge_full_text(10_000)
    for table in TABLES:
        assert segments(path, table) < counts[table]
    after = {
        (key, i): store.lexical_search(searched, key, terms, 5)
        for key in ("turn", "window")
        for i, terms in enumerate(queries)
    }
    assert after == before
    store.close()


def test_the_in_memory_copy_outlives_a_merge(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS, 0)
    for i in range(8):
        add(store, [f"kite repair {i}"], 100 + i)
    store.lexical_search([thread], "turn", ["kite"], 3)
    assert store._held is not None
    copy = store._held._copies["turn_fts"]
    assert store.merge_full_text(10_000)
    got = store.lexical_search([thread], "turn", ["kite"], 3)
    # Only the structure moved: the copy's arrays are kept, not read again nor copied.
    now = store._held._copies["turn_fts"]
    assert now is not copy and now.postings is copy.postings
    assert got == store.lexical_search([thread], "turn", ["kite"], 3)
    store.close()


def test_upkeep_never_waits_for_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    # A write would wait an hour for the lock (past the test's time limit): upkeep
    # gives up at once.
    store = SQLiteBackend(path, timeout=3600)
    write_one_by_one(store, 6)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    merged: list[bool] = []
    try:
        upkeep = threading.Thread(
            target=lambda: merged.append(store.merge_full_text(100)), daemon=True
        )
        upkeep.start()
        # (Had it waited for the lock, it would still be waiting: SQLite's wait cannot
        # be interrupted, so it runs on a thread of its own.)
        upkeep.join(60)
        assert merged == [False]
    finally:
        other.execute("ROLLBACK")
        other.close()
    # The writer's wait for the lock is the store's again, and the merge runs later.
    waits = store._writer.execute("PRAGMA busy_timeout").fetchone()[0]
    assert waits == int(store._timeout * 1000)
    assert store.merge_full_text(100) is True
    store.close()
