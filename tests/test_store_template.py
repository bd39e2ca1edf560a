"""New store files copied from the schema image (arbormem.store.sqlite.template): the
same store the migrations build, never over an existing file, and the migrations
as before wherever the copy cannot be made."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import arbormem.store.sqlite.connection as connection
from arbormem.store import SQLiteBackend
from arbormem.store.sqlite import template
from arbormem.store.sqlite.driver import sqlite3
from arbormem.timeutil import format_timestamp, utcnow


def describe(path: Path) -> dict[str, Any]:
    """Everything a store holds but the times its migrations were applied."""
    conn = sqlite3.connect(str(path))
    try:
        out: dict[str, Any] = {
            "schema": sorted(
                conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
                key=repr,
            ),
            "pragmas": [
                conn.execute(f"PRAGMA {name}").fetchone()
                for name in ("page_size", "journal_mode", "encoding", "user_version")
            ],
        }
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = "version, description" if table == "schema_migrations" else "*"
            out[table] = sorted(
                conn.execute(f"SELECT {columns} FROM '{table}'").fetchall(), key=repr
            )
        return out
    finally:
        conn.close()


def migrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    """A new store built the old way: every migration run on the file."""
    with monkeypatch.context() as patch:
        patch.setattr(connection, "create_from_template", lambda path: False)
        SQLiteBackend(tmp_path / name).close()
    return tmp_path / name


def test_a_copied_store_is_the_store_the_migrations_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = format_timestamp(utcnow())
    assert template.create_from_template(str(tmp_path / "copied.db"))
    SQLiteBackend(tmp_path / "copied.db").close()
    assert describe(tmp_path / "copied.db") == describe(
        migrated(tmp_path, monkeypatch, "migrated.db")
    )
    conn = sqlite3.connect(str(tmp_path / "copied.db"))
    stamps = {row[0] for row in conn.execute("SELECT applied_at FROM schema_migrations")}
    conn.close()
    assert len(stamps) == 1 and min(stamps) >= before  # dated when the copy was made


def test_an_existing_file_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "there.db"
    path.write_bytes(b"")
    assert not template.create_from_template(str(path))
    assert path.read_bytes() == b""
    store = SQLiteBackend(path)  # an empty file is migrated as before
    store.close()
    assert describe(path)["schema"]


def test_stores_created_at_once_by_several_threads_are_one_store(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_and_write(i: int) -> None:
        try:
            start.wait()
            store = SQLiteBackend(path)
            thread = store.thread(f"u{i}", "a", create=True)
            assert thread is not None
            store.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=open_and_write, args=(i,)) for i in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    store = SQLiteBackend(path)
    assert sorted(t.user for t in store.threads(tenant=None)) == [f"u{i}" for i in range(6)]
    store.close()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".new")]  # nothing left over


def test_without_hard_links_the_new_file_is_migrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(source: str, target: str) -> None:
        raise OSError("links are not supported here")

    monkeypatch.setattr(template.os, "link", refuse)
    path = tmp_path / "plain.db"
    assert not template.create_from_template(str(path))
    assert not path.exists() and not os.listdir(tmp_path)
    SQLiteBackend(path).close()
    monkeypatch.undo()
    assert describe(path) == describe(migrated(tmp_path, monkeypatch, "migrated.db"))
