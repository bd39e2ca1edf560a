"""PostgreSQL searches within date spans read only the postings of the spans' runs of
message ids when the searched threads were stored in time order (see
``PostgresLexical._span_runs``), and the ``window_ahead`` of schema 8 that widens
the window key's runs: the hits are those of one search per span, as the storage
capability's default makes them, whatever the runs cut.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import psycopg
import pytest

from arbormem.store import Backend, NewMessage, Thread, open_store
from arbormem.store.lexical import LexicalIndex
from arbormem.store.postgres import PostgresBackend
from arbormem.store.postgres import schema as pg_schema
from arbormem.store.types import Filters

from .pg_downgrades import TO_SCHEMA_7, downgrade
from .test_pg_windows_table import QUERIES, _answers, _history, _kept_history, _tables
from .test_postgres_ranking import T0, _message


def _spans(rng: random.Random, minutes: int) -> list[tuple[datetime, datetime]]:
    """A few spans over the history's minutes: short ones, long ones, overlapping."""
    out = []
    for _ in range(rng.randint(1, 3)):
        start = rng.randint(-5, minutes)
        out.append(
            (
                T0 + timedelta(minutes=start),
                T0 + timedelta(minutes=start + rng.choice([3, 8, 25, 60])),
            )
        )
    return out


def _pg(store: Backend) -> PostgresBackend:
    assert isinstance(store, PostgresBackend)
    return store


def _thread_column(url: str, column: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT max({column}) FROM arbormem.threads").fetchone()
    assert row is not None
    return int(row[0])


def _agree(got: list[tuple[int, float]], full: list[tuple[int, float]], limit: int) -> None:
    """``got`` (a span's hits, ``limit`` at most) are the best of ``full`` (the same
    search's hits with a larger limit) up to the last bits of the scores.

    A document's score sums its terms' scores in the order its postings reach the
    sum, which the statement's plan sets (a hash or a sort of the postings read):
    reading fewer postings can change the order, and so the last bit of a sum of
    three terms or more, and with it the order of two documents that tie."""
    assert len(got) == min(limit, len(full))
    scores = dict(full)
    assert len({i for i, _ in got}) == len(got)
    for (gid, gscore), (_, fscore) in zip(got, full):
        assert gscore == pytest.approx(fscore, rel=1e-12, abs=1e-12)
        assert scores[gid] == pytest.approx(gscore, rel=1e-12, abs=1e-12)
    if got:
        cut = got[-1][1]
        above = {i for i, s in full if s > cut + 1e-9 * max(1.0, abs(cut))}
        assert above <= {i for i, _ in got}


def _same_as_span_by_span(store: Backend, thread: Thread, seed: int) -> int:
    """Asserts every dated search gives the hits of one search per span (see
    :func:`_agree`); how many hits there were."""
    rng = random.Random(seed)
    minutes = len(store.messages(thread)) + 10
    found = 0
    for round_ in range(12):
        spans = _spans(rng, minutes)
        filters = Filters(roles=("user",)) if round_ % 3 == 0 else None
        for key in ("turn", "window"):
            for terms in QUERIES:
                limit = rng.choice([2, 5, 50])
                full = LexicalIndex.lexical_search_spans(
                    store, [thread], key, terms, limit + 30, spans, filters
                )
                got = store.lexical_search_spans([thread], key, terms, limit, spans, filters)
                for hits, expected in zip(got, full, strict=True):
                    _agree(hits, expected, limit)
                found += sum(len(hits) for hits in got)
    return found


@pytest.mark.parametrize("seed", [2, 7])
def test_runs_of_interleaved_sessions_give_the_hits_of_one_search_per_span(
    pg_url: str, seed: int
) -> None:
    # Four sessions interleaved, archives and forgets: a window's members lie
    # before its centre (window_reach) and after it (window_ahead), far apart in
    # ids when its session paused. Both widen the window key's runs.
    store = open_store(pg_url)
    try:
        thread = _history(store, seed)
        assert _thread_column(pg_url, "window_ahead") > 2  # a session resumed later
        runs = _pg(store)._span_runs([thread], "turn", [(T0, T0 + timedelta(minutes=20))])
        assert runs is not None and len(runs) == 1  # stored in time order: narrowed
        assert _same_as_span_by_span(store, thread, seed) > 100
    finally:
        store.close()


def test_a_span_run_is_its_first_and_last_message_by_time(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        thread = store.thread("u", "a", create=True)
        assert thread is not None
        rng = random.Random(4)
        rows = store.append(thread, [_message(rng, n, "s") for n in range(30)])
        ids = [r.rowid for r in rows]
        # Minutes 5 to 11 (until excluded) and 8 to 14 are one run, 20 to 22 another.
        spans = [
            (T0 + timedelta(minutes=5), T0 + timedelta(minutes=12)),
            (T0 + timedelta(minutes=20), T0 + timedelta(minutes=23)),
            (T0 + timedelta(minutes=8), T0 + timedelta(minutes=15)),
            (T0 + timedelta(days=5), T0 + timedelta(days=6)),  # nothing dated in it
        ]
        assert _pg(store)._span_runs([thread], "turn", spans) == [
            (ids[5], ids[14]),
            (ids[20], ids[22]),
        ]
        reach = _thread_column(pg_url, "window_reach")
        ahead = _thread_column(pg_url, "window_ahead")
        assert reach == ahead == 2  # one session: two neighbours each side
        assert _pg(store)._span_runs([thread], "window", spans[1:2]) == [(ids[18], ids[24])]
        assert _pg(store)._span_runs([thread], "turn", spans[3:]) == []
        assert store.lexical_search_spans([thread], "turn", ["kite"], 5, spans[3:]) == [[]]
    finally:
        store.close()


def test_a_thread_stored_out_of_time_order_reads_every_posting(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        thread = store.thread("u", "a", create=True)
        assert thread is not None
        rng = random.Random(6)
        first = [_message(rng, n, "s1") for n in range(40, 80)]
        later: list[NewMessage] = [_message(rng, n, "s2") for n in range(0, 40)]  # older
        store.append(thread, first)
        store.append(thread, later)
        assert _pg(store)._span_runs([thread], "window", [(T0, T0 + timedelta(minutes=9))]) is None
        assert _same_as_span_by_span(store, thread, 6) > 50
    finally:
        store.close()


@pytest.mark.parametrize("seed", [3, 8])
def test_a_store_of_schema_7_is_migrated_with_its_windows_reach_ahead(
    pg_url: str, seed: int
) -> None:
    before, tables = _kept_history(pg_url, seed)
    ahead = _thread_column(pg_url, "window_ahead")
    assert ahead > 0

    assert downgrade(pg_url, TO_SCHEMA_7) == 7
    with psycopg.connect(pg_url) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = 'arbormem' AND table_name = 'threads'"
        ).fetchall()
    assert ("window_ahead",) not in columns

    store = open_store(pg_url)  # migrated on opening
    try:
        with psycopg.connect(pg_url) as conn:
            conn.execute("SET search_path TO arbormem")
            assert pg_schema.current_version(conn) == pg_schema.LATEST
        # The lists stored give the reach the writes had kept.
        assert _thread_column(pg_url, "window_ahead") == ahead
        assert _tables(pg_url) == tables
        thread = store.thread("u", "a")
        assert thread is not None
        assert _answers(store, thread) == before
        assert _same_as_span_by_span(store, thread, seed) > 100
    finally:
        store.close()
