"""An HNSW build on PostgreSQL gets the memory its graph needs: with pgvector's usual
1 GB, a million-vector thread's graph outgrew it and the build went on on disk."""

from __future__ import annotations

import re
import threading
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


def _thread_with_vectors(store: Any, emb: HashingEmbedder, n: int) -> Any:
    t = store.thread("u", "a", create=True)
    assert t is not None
    ms = _messages(n)
    vecs = dict(zip((m.chash for m in ms), emb.embed_many([m.content for m in ms])))
    store.append(t, ms, vecs, emb.model_id)
    return t


def _index_valid(store: Any, t: Any, emb: HashingEmbedder) -> bool | None:
    name = pg_vectors._index_name(t.id, emb.model_id, int(emb.dimensions))
    with store._reading() as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE c.relname = %s",
            (name,),
        ).fetchone()
    return None if row is None else bool(row[0])


def test_a_search_starts_the_build_and_is_exact_until_it_is_ready(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At a million turns the build takes minutes: a search must not wait for it.
    # The build is held here until the search has answered.
    release = threading.Event()
    build = pg_vectors.PostgresVectors._build_ann

    def held(self: Any, *args: Any, **kw: Any) -> bool:
        assert release.wait(60)
        return build(self, *args, **kw)

    monkeypatch.setattr(pg_vectors.PostgresVectors, "_build_ann", held)
    emb = HashingEmbedder(32)
    store = make_backend(request, "postgres", tmp_path, ann_threshold=50)
    try:
        t = _thread_with_vectors(store, emb, 120)
        query = emb.embed("kite river 17")
        ids, _ = store.nearest(t, emb, query, 5)
        # Answered by the exact search while the build waits: the five best by
        # inner product over every stored vector.
        rowids, _, mat, _ = store.thread_vectors(t, emb.model_id)
        sims = mat.astype("float64") @ query.astype("float64")
        best = sorted(range(len(rowids)), key=lambda i: (-sims[i], rowids[i]))[:5]
        assert list(ids) == [int(rowids[i]) for i in best]
        assert _index_valid(store, t, emb) is None
        workers = [w for w in threading.enumerate() if w.name == f"arbormem-hnsw-{t.id}"]
        assert len(workers) == 1
        release.set()
        workers[0].join(60)
        assert _index_valid(store, t, emb) is True
        assert store.prepare_nearest(t, emb).approximate
        assert list(store.nearest(t, emb, query, 5)[0])  # now through the index
    finally:
        release.set()
        store.close()


def test_closing_the_store_cancels_a_build_a_search_started(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The build's statement stands for one that runs for minutes (a server-side
    # sleep on the build's connection): closing cancels it and waits for its thread.
    started = threading.Event()

    def slow(self: Any, thread: Any, model: str, dim: int, *, rows: int) -> bool:
        with self._reading() as conn:
            self._building[(thread.id, model, dim)] = conn
            started.set()
            try:
                conn.execute("SELECT pg_sleep(600)")
            finally:
                self._building.pop((thread.id, model, dim), None)
        return True

    monkeypatch.setattr(pg_vectors.PostgresVectors, "_build_ann", slow)
    emb = HashingEmbedder(32)
    store = make_backend(request, "postgres", tmp_path, ann_threshold=50)
    t = _thread_with_vectors(store, emb, 120)
    store.nearest(t, emb, emb.embed("kite"), 5)
    assert started.wait(60)
    workers = [w for w in threading.enumerate() if w.name == f"arbormem-hnsw-{t.id}"]
    store.close()
    assert workers and not workers[0].is_alive()


def test_an_interrupted_build_is_dropped_and_built_again(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # A build cancelled or killed half way leaves an invalid index behind.
    emb = HashingEmbedder(32)
    store = make_backend(request, "postgres", tmp_path, ann_threshold=50)
    try:
        t = _thread_with_vectors(store, emb, 120)
        assert store.prepare_nearest(t, emb).approximate
        name = pg_vectors._index_name(t.id, emb.model_id, int(emb.dimensions))
        with store._reading() as conn:
            conn.execute(
                "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
                (f'"{store.schema}"."{name}"',),
            )
        store._ann.clear()
        assert _index_valid(store, t, emb) is False
        assert store.prepare_nearest(t, emb).approximate
        assert _index_valid(store, t, emb) is True
    finally:
        store.close()
