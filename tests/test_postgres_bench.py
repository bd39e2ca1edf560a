"""The benchmarks on PostgreSQL: ``--db postgresql://...`` makes each run's stores on
that server (and drops them), names the store in the configuration, and gives the
same recall as SQLite on the same data."""

from __future__ import annotations

import json
from pathlib import Path

from arbormem.store.postgres.admin import store_exists, with_schema

from .conftest import run_cli, tiny_locomo, write_json

HASH = {"ARBORMEM_EMBEDDER": "hash"}


def _schemas(url: str) -> list[str]:
    """The database's schemas other than PostgreSQL's own."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%'"
            " AND nspname NOT IN ('public', 'information_schema') ORDER BY 1"
        ).fetchall()
    return [r[0] for r in rows]


def test_bench_locomo_on_postgres_ranks_as_on_sqlite(pg_url: str, tmp_path: Path) -> None:
    path = write_json(tmp_path / "conv-x.json", tiny_locomo())
    args = ("bench", "locomo", str(path), "--systems", "arbormem,bm25", "--distractors", "150")
    on_sqlite = run_cli(*args, "--json", env=HASH)
    on_postgres = run_cli("--db", pg_url, *args, "--json", env=HASH)
    assert on_sqlite.returncode == 0, on_sqlite.stderr
    assert on_postgres.returncode == 0, on_postgres.stderr
    lite, pg = json.loads(on_sqlite.stdout), json.loads(on_postgres.stdout)
    assert lite["systems"]["arbormem"]["config"]["store"].startswith("sqlite")
    assert pg["systems"]["arbormem"]["config"]["store"].startswith("postgres (")
    for system in ("arbormem", "bm25"):
        for figure in ("recall@1", "recall@5", "recall@10", "session_hit@1"):
            assert pg["systems"][system][figure] == lite["systems"][system][figure], figure
    assert _schemas(pg_url) == []  # the per-conversation stores are gone again


def test_bench_scale_on_postgres_builds_measures_and_drops_its_store(pg_url: str) -> None:
    out = run_cli(
        "--db", pg_url, "bench", "scale", "--turns", "400", "--queries", "5", "--json", env=HASH
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    (figures,) = result["runs"]
    assert figures["turns"] == 400 and figures["ingest_turns_per_s"] > 0
    assert figures["db_mb"] > 0 and figures["first_query_s"] > 0
    assert result["config"]["store"].startswith("postgres (")
    assert not store_exists(with_schema(pg_url, "scale_400")) and _schemas(pg_url) == []


def test_bench_scale_refuses_a_store_file(tmp_path: Path) -> None:
    out = run_cli("--db", str(tmp_path / "mine.db"), "bench", "scale", "--turns", "10")
    assert out.returncode != 0
    assert "--db" in out.stderr and "postgresql://" in out.stderr
    assert not (tmp_path / "mine.db").exists()
