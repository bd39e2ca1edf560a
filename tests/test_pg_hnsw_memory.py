"""An HNSW build on PostgreSQL gets the memory its graph needs: with pgvector's usual
1 GB, a million-vector thread's graph outgrew it and the build went on on disk."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from arbormem.embed import HashingEmbedder
from arbormem.store.postgres import vectors as pg_vectors

from .backends import make_backend
from .test_store_dense import _messages


def test_build_memory_grows_with_the_thread_within_its_bounds() -> None:
    small = pg_vectors.build_memory(1_000, 256)
    assert small == pg_vectors.BUILD_MEMORY_MIN  # pgvector's usual 1 GB below that
    million = pg_vectors.build_memory(1_000_000, 256)
    # Room for every vector and its neighbour lists, with some to spare.
    assert million >= 1_000_000 * (4 * 256 + pg_vectors.HNSW_BYTES_PER_VECTOR)
    assert million > pg_vectors.BUILD_MEMORY_MIN
    assert pg_vectors.build_memory(2_000_000, 256) > million
    assert pg_vectors.build_memory(50_000_000, 384) == pg_vectors.BUILD_MEMORY_MAX
    assert pg_vectors.build_memory(0, 0) == pg_vectors.BUILD_MEMORY_MIN


def test_the_build_asks_the_server_for_the_memory_sized_to_the_thread(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Per-vector bookkeeping inflated so that 120 vectors need more than the floor:
    # what the server is told must follow the thread's size, not a constant.
    monkeypatch.setattr(pg_vectors, "HNSW_BYTES_PER_VECTOR", 10_000_000)
    said: list[str] = []
    execute = psycopg.Connection.execute

    def spy(self: psycopg.Connection[Any], query: Any, *args: Any, **kw: Any) -> Any:
        said.append(str(query))
        return execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.Connection, "execute", spy)
    emb = HashingEmbedder(32)
    store = make_backend(request, "postgres", tmp_path, ann_threshold=50)
    try:
        t = store.thread("u", "a", create=True)
        assert t is not None
        ms = _messages(120)
        vecs = dict(zip((m.chash for m in ms), emb.embed_many([m.content for m in ms])))
        store.append(t, ms, vecs, emb.model_id)
        said.clear()
        assert store.prepare_nearest(t, emb).approximate
    finally:
        store.close()
    sizes = [
        int(m.group(1))
        for s in said
        if (m := re.fullmatch(r"SET maintenance_work_mem = '(\d+)MB'", s.strip()))
    ]
    want = -(-pg_vectors.build_memory(120, 32) // 2**20)
    assert want > pg_vectors.BUILD_MEMORY_MIN // 2**20
    assert sizes == [want]
    assert any("CREATE INDEX CONCURRENTLY" in s for s in said)
