"""Arrays written in PostgreSQL's text form (arbormem.store.postgres.adapt) read back
as the values they were made of, whatever the strings hold."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from arbormem.store.postgres.adapt import bool_array, int_array, text_array, time_array

psycopg = pytest.importorskip("psycopg")

AWKWARD = [
    "plain",
    "",
    "NULL",
    "null",
    'a "quoted" word',
    "back\\slash",
    "ends with \\",
    '\\"',
    "comma, and {braces}",
    "  spaces around  ",
    "tab\tand\nnewline",
    "ünïcödé ✓ 漢字",
    "{}",
    '"',
]


def _read(url: str, literal: str, cast: str) -> Any:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT %s::{cast}", (literal,)).fetchone()[0]


def test_strings_read_back_as_written(pg_url: str) -> None:
    assert _read(pg_url, text_array(AWKWARD), "text[]") == AWKWARD
    with_nulls = [None, *AWKWARD, None]
    assert _read(pg_url, text_array(with_nulls), "text[]") == with_nulls
    assert _read(pg_url, text_array([]), "text[]") == []
    assert _read(pg_url, text_array(["only"]), "text[]") == ["only"]


def test_numbers_flags_and_times_read_back_as_written(pg_url: str) -> None:
    ints = [0, -1, 2**62, None, 7]
    assert _read(pg_url, int_array(ints), "int8[]") == ints
    assert _read(pg_url, int_array([]), "int8[]") == []
    assert _read(pg_url, bool_array([True, False, True]), "bool[]") == [True, False, True]
    t0 = datetime(2025, 3, 30, 1, 59, 59, 123456, tzinfo=timezone.utc)
    times = [t0, None, t0.astimezone(timezone(timedelta(hours=-7, minutes=-30)))]
    read = _read(pg_url, time_array(times), "timestamptz[]")
    assert [None if t is None else t.timestamp() for t in read] == [
        None if t is None else t.timestamp() for t in times
    ]
