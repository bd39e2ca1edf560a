"""Every storage back-end, for the contract tests: ``backend`` gives each test a
fresh store of each kind (an SQLite file, SQLite in memory, a PostgreSQL database
of its own on the test server, see tests/pg_fixtures.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arbormem.store import Backend, SQLiteBackend, open_store

#: Back-ends made from a temporary folder; PostgreSQL is made from the test server.
BACKENDS: dict[str, Callable[..., Backend]] = {
    "sqlite-file": lambda tmp, **options: SQLiteBackend(tmp / "store.db", **options),
    "sqlite-memory": lambda tmp, **options: SQLiteBackend(":memory:", **options),
}
KINDS = [*sorted(BACKENDS), "postgres"]


def make_backend(request: pytest.FixtureRequest, kind: str, tmp: Path, **options: Any) -> Backend:
    """A new store of ``kind`` (PostgreSQL: on a database of the test's own)."""
    if kind == "postgres":
        return open_store(request.getfixturevalue("pg_url"), **options)
    return BACKENDS[kind](tmp, **options)


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    store = make_backend(request, request.param, tmp_path)
    yield store
    store.close()
