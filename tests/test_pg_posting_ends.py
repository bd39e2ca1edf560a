"""The ``ends`` flag of schema 7's turn postings (a message's terms end with the
posting's term), which the pair counts are led by, and the migration that adds
it to a store of schema 6.

A store of schema 6 is made from one of schema 7 by dropping the flag and its
key; reopened, it is migrated: every posting is flagged as the writes flag it,
and every pair count, search and statistic is the same as before.
"""

from __future__ import annotations

import random
from pathlib import Path

import psycopg
import pytest

from arbormem.store import SQLiteBackend, open_store
from arbormem.store.postgres import schema as pg_schema
from arbormem.text import analyze, pairs

from .pg_downgrades import TO_SCHEMA_6, downgrade
from .test_pg_windows_table import _answers, _kept_history, _tables
from .test_postgres_ranking import _append_turns


def _long_word(seed: int) -> str:
    """A word of 260 letters: its term is over 200 bytes, so keyed by a digest."""
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(260))


@pytest.mark.parametrize("seed", [3, 8])
def test_a_store_of_schema_6_is_migrated_and_counts_the_same(pg_url: str, seed: int) -> None:
    before, tables = _kept_history(pg_url, seed)
    # One flagged posting per message with terms (its last term's), and only those.
    with psycopg.connect(pg_url) as conn:
        flagged = conn.execute(
            "SELECT count(*) FILTER (WHERE ends), count(DISTINCT doc) FROM arbormem.turn_postings"
        ).fetchone()
    assert flagged is not None and flagged[0] == flagged[1] > 50

    assert downgrade(pg_url, TO_SCHEMA_6) == 6

    store = open_store(pg_url)  # migrated on opening
    try:
        with psycopg.connect(pg_url) as conn:
            conn.execute("SET search_path TO arbormem")
            assert pg_schema.current_version(conn) == pg_schema.LATEST
        assert _tables(pg_url) == tables
        again = store.thread("u", "a")
        assert again is not None
        assert _answers(store, again) == before
    finally:
        store.close()


def test_a_message_ending_with_a_long_term_counts_its_pairs(tmp_path: Path, pg_url: str) -> None:
    # A term over 200 bytes is keyed by a digest; the migration, which cannot make
    # one in SQL, flags every keyed posting of a message ending with such a term.
    long_a, long_b = _long_word(1), _long_word(2)
    texts = [
        f"walk the dog {long_a}",
        f"{long_b} kite river",
        f"{long_a} {long_b} lake",
        f"tea {long_b} {long_a}",
        "river walk",
    ]
    lite = SQLiteBackend(tmp_path / "ref.db")
    pg = open_store(pg_url)
    try:
        _append_turns((lite, pg), texts, per_session=len(texts))
        wanted = sorted(set(pairs(analyze(" ".join(texts)))))
        counts = lite.pair_frequencies(wanted)
        assert pg.pair_frequencies(wanted) == counts
        assert counts[f"{analyze(long_a)[0]}_{analyze(long_b)[0]}"] > 0  # inside and across
    finally:
        pg.close()
    assert downgrade(pg_url, TO_SCHEMA_6) == 6
    pg = open_store(pg_url)
    try:
        assert pg.pair_frequencies(wanted) == counts
    finally:
        pg.close()
        lite.close()
