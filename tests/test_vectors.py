"""Dense indexes: exact below the threshold, approximate above, saved and restored."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.store.sqlite.dense import AnnIndex, ExactIndex

from .conftest import UNDO_SCHEMA_FROM_13

TOPICS = [
    "garden tomatoes compost",
    "car engine brakes",
    "lisbon trip hotel",
    "guitar chords",
    "python code bug",
    "marathon training",
    "baking bread",
    "chess openings",
]


def fill(mem: Memory, n: int) -> None:
    mem.add_many(
        [
            {
                "content": f"note {i} about {TOPICS[i % len(TOPICS)]} number {i % 13}",
                "session": f"s{i // 20}",
            }
            for i in range(n)
        ]
    )


def test_ann_matches_exact_on_the_same_vectors() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3000, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = np.arange(10, 3010, dtype=np.int64)
    exact, ann = ExactIndex(32), AnnIndex(32)
    exact.add(ids, x)
    ann.add(ids, x)
    overlap = 0
    for q in x[:50]:
        e, _ = exact.search(q, 20)
        a, scores = ann.search(q, 20)
        overlap += len(set(e.tolist()) & set(a.tolist()))
        assert np.all(np.diff(scores) <= 1e-3)
    assert overlap / (50 * 20) > 0.95
    found, vecs = ann.get(np.asarray([10, 99999]))
    assert found.tolist() == [True, False] and np.allclose(vecs[0], x[0], atol=1e-2)
    allowed = ids[100:140]
    got, _ = ann.search(x[120], 5, allowed)
    assert got[0] == ids[120] and set(got.tolist()) <= set(allowed.tolist())
    ann.remove(np.asarray([ids[0]]))
    assert len(ann) == 2999


def meta_file(db: Path) -> Path:
    """The saved description of the index of a store's only thread."""
    (found,) = Path(f"{db}.ann").glob("thread-*.json")
    return found


def saved_index(db: Path) -> Path:
    """The index file the saved description of a store's only thread names."""
    meta = meta_file(db)
    return meta.parent / json.loads(meta.read_text())["file"]


def test_large_threads_switch_to_a_saved_approximate_index(tmp_path: Path) -> None:
    db = tmp_path / "ann.db"
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        fill(mem, 300)
        hits = mem.search("lisbon trip hotel", k=5)
        thread = mem.backend.thread("default", "default")
        assert isinstance(mem.backend.dense_cache(mem.embedder).index(thread), AnnIndex)
        assert all("lisbon" in h.message.content for h in hits)
    assert saved_index(db).exists()
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        thread = mem.backend.thread("default", "default")
        entry_index = mem.backend.dense_cache(mem.embedder).index(thread)
        assert isinstance(entry_index, AnnIndex) and len(entry_index) == 300
        mem.add("one more note about chess openings", session="s99")
        assert len(mem.backend.dense_cache(mem.embedder).index(thread)) == 301
        assert "chess" in mem.search("chess openings", k=1)[0].message.content
    # The reopened index was a read-only map until the add; the copy it became is saved.
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        thread = mem.backend.thread("default", "default")
        assert len(mem.backend.dense_cache(mem.embedder).index(thread)) == 301
        assert "chess" in mem.search("chess openings", k=1)[0].message.content


def test_a_stale_or_damaged_saved_index_is_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "stale.db"
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        fill(mem, 200)
        mem.search("guitar", k=3)
    saved_index(db).write_bytes(b"not an index")
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        assert "guitar" in mem.search("guitar chords", k=1)[0].message.content
        assert (
            len(
                mem.backend.dense_cache(mem.embedder).index(
                    mem.backend.thread("default", "default")
                )
            )
            == 200
        )


def test_a_saved_index_of_another_store_at_the_same_path_is_not_used(tmp_path: Path) -> None:
    db = tmp_path / "again.db"
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        fill(mem, 200)
        mem.search("guitar", k=3)
    assert saved_index(db).exists()
    for suffix in ("", "-wal", "-shm"):  # the store goes; its index folder stays
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        mem.add_many([{"content": f"other note {i} about sailing boats"} for i in range(200)])
        top = mem.search("sailing boats", k=1)
        assert top and "sailing" in top[0].message.content
        index = mem.backend.dense_cache(mem.embedder).index(
            mem.backend.thread("default", "default")
        )
        rows = mem.backend.rows([1])
        found, vec = index.get(np.asarray([1]))
        expected = mem.embedder.embed(rows[1].message.text)
        # The new store's text, not the old one's (int8 storage: equal up to rounding).
        assert found[0] and float(vec[0] @ expected) > 0.999


def test_forgetting_deletes_the_saved_index(tmp_path: Path) -> None:
    db = tmp_path / "forget.db"
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        fill(mem, 200)
        hit = mem.search("baking bread", k=1)[0]
    folder = Path(f"{db}.ann")
    assert saved_index(db).exists()
    with Memory(db, embedder=HashingEmbedder(64), ann_threshold=100, tree=False, llm=None) as mem:
        mem.forget(hit.message.id)
        assert not list(folder.glob("thread-*"))
        assert hit.message.id not in [h.message.id for h in mem.search("baking bread", k=50)]


def test_stored_session_sums_give_the_centroids_the_index_gives(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "c.db"
    with Memory(path, embedder=HashingEmbedder(64)) as mem:
        fill(mem, 100)  # five sessions, in one batch
        fill(mem, 30)  # more for s0 and s1, in a second
        thread = mem._thread(mem._scope(None, None))
        assert thread is not None
        keys = [f"s{i}" for i in range(5)]
        stored = mem.backend.session_vector_sums(thread, keys, mem.embedder.model_id)
        assert sorted(stored) == keys
        kept = mem.backend.dense_cache(mem.embedder).session_centroids(thread, keys)
        mem.backend.dense_cache(mem.embedder).invalidate(thread)
        mem.backend.session_vector_sums = lambda *a: {}  # type: ignore[method-assign]
        summed = mem.backend.dense_cache(mem.embedder).session_centroids(thread, keys)
        assert all(np.allclose(kept[k], summed[k], atol=1e-5) for k in keys)
    # A store from before the sums gets them on upgrade, but not for a session with a
    # message that has no vector.
    conn = sqlite3.connect(path)
    conn.executescript(UNDO_SCHEMA_FROM_13)
    conn.executescript(
        """
        DROP TABLE session_vectors;
        DELETE FROM vectors WHERE chash = (SELECT m.chash FROM messages m
            JOIN sessions s ON s.id = m.session_id WHERE s.key = 's4' LIMIT 1);
        ALTER TABLE threads DROP COLUMN time_ordered;
        DELETE FROM schema_migrations WHERE version >= 11;
        """
    )
    conn.close()
    with Memory(path, embedder=HashingEmbedder(64)) as mem:
        upgraded = mem.backend.session_vector_sums(thread, keys, mem.embedder.model_id)
        assert sorted(upgraded) == keys[:4]
        assert all(np.allclose(upgraded[k], stored[k], atol=1e-4) for k in keys[:4])


def test_a_saved_index_out_of_step_with_its_description_is_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "step.db"
    settings = {"embedder": HashingEmbedder(64), "ann_threshold": 100, "tree": False, "llm": None}
    with Memory(db, **settings) as mem:  # type: ignore[arg-type]
        fill(mem, 200)
        mem.search("guitar", k=3)
    described = meta_file(db)
    old_meta = described.read_text()
    with Memory(db, **settings) as mem:  # type: ignore[arg-type]
        mem.add_many([{"content": f"late note {i} about violins"} for i in range(50)])
        mem.search("violins", k=3)
    # The index of the second save with the description of the first (the index is
    # ahead of it: catching up used to add the same keys again and fail every search).
    newer = json.loads(described.read_text())
    described.write_text(json.dumps({**json.loads(old_meta), "file": newer["file"]}))
    with Memory(db, **settings) as mem:  # type: ignore[arg-type]
        assert "violins" in mem.search("late note violins", k=1)[0].message.content
        assert (
            len(
                mem.backend.dense_cache(mem.embedder).index(
                    mem.backend.thread("default", "default")
                )
            )
            == 250
        )
    for damage in (b"\0" * 100, None):  # appended bytes; a description that is no object
        if damage is None:
            described.write_text("[1, 2]")
        else:
            with saved_index(db).open("ab") as f:
                f.write(damage)
        with Memory(db, **settings) as mem:  # type: ignore[arg-type]
            assert "guitar" in mem.search("guitar chords", k=1)[0].message.content


DAMAGED_INDEX_SEARCH = """
import sys
from arbormem import Memory
from arbormem.embed import HashingEmbedder
with Memory(sys.argv[1], embedder=HashingEmbedder(64), ann_threshold=100, tree=False,
            llm=None) as mem:
    print(mem.search("guitar chords", k=1)[0].message.content)
"""


def test_damaged_bytes_inside_a_saved_index_are_caught_before_it_is_searched(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    db = tmp_path / "bytes.db"
    settings = {"embedder": HashingEmbedder(64), "ann_threshold": 100, "tree": False, "llm": None}
    with Memory(db, **settings) as mem:  # type: ignore[arg-type]
        fill(mem, 2_000)
        mem.prepare_search()
    index = saved_index(db)
    data = bytearray(index.read_bytes())
    # Same size and count: 8 KB of the graph's links overwritten. usearch followed
    # them out of bounds: the process died (SIGSEGV) or every search raised.
    at = len(data) * 7 // 10
    data[at : at + 8192] = np.random.default_rng(7).integers(0, 256, 8192, np.uint8).tobytes()
    index.write_bytes(bytes(data))
    # In a child process, so a crash fails the test instead of killing the run.
    out = subprocess.run(
        [sys.executable, "-c", DAMAGED_INDEX_SEARCH, str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "guitar" in out.stdout
    assert "damaged" in out.stderr  # the warning says why it was rebuilt


def test_each_save_writes_its_own_file(tmp_path: Path) -> None:
    db = tmp_path / "own.db"
    settings = {"embedder": HashingEmbedder(64), "ann_threshold": 100, "tree": False, "llm": None}
    with Memory(db, **settings) as mem:  # type: ignore[arg-type]
        fill(mem, 200)
        mem.search("guitar", k=3)
    first = saved_index(db)
    with Memory(db, **settings) as mem:  # type: ignore[arg-type]
        mem.add("one more about the cello")
        mem.search("cello", k=1)
    second = saved_index(db)
    # Two processes saving at once no longer write into one file.
    assert second != first and second.exists()


def test_exact_search_while_another_thread_adds() -> None:
    index = ExactIndex(16)
    rng = np.random.default_rng(0)
    index.add(np.arange(1, 2001), rng.normal(size=(2000, 16)))
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        next_id = 5000
        while not stop.is_set():
            index.add(np.arange(next_id, next_id + 7), rng.normal(size=(7, 16)))
            next_id += 7

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        allowed = np.arange(1, 3000, 2)
        for _ in range(300):
            ids, _ = index.search(rng.normal(size=16), 5, allowed)
            assert set(ids.tolist()) <= set(allowed.tolist())
    except BaseException as exc:
        errors.append(exc)
    finally:
        stop.set()
        thread.join()
    assert errors == []


def test_preloaded_session_sums_stay_current_as_the_thread_changes(tmp_path: Path) -> None:
    from arbormem.store.sqlite.dense import VectorCache

    with Memory(tmp_path / "p.db", embedder=HashingEmbedder(64), llm=None) as mem:
        fill(mem, 100)  # five sessions
        thread = mem._thread(mem._scope(None, None))
        assert thread is not None
        keys = [f"s{i}" for i in range(6)] + ["later"]
        asked: list[list[str]] = []
        read = mem.backend.session_vector_sums

        def spy(t, sessions, model):  # type: ignore[no-untyped-def]
            asked.append(list(sessions))
            return read(t, sessions, model)

        def check() -> None:
            fresh = VectorCache(mem.backend, mem.embedder).session_centroids(thread, keys)
            asked.clear()
            got = mem.backend.dense_cache(mem.embedder).session_centroids(thread, keys)
            assert sorted(got) == sorted(fresh)
            assert all(np.allclose(got[k], fresh[k], atol=1e-5) for k in fresh)

        assert mem.backend.dense_cache(mem.embedder).preload_sums(thread) == 5
        mem.backend.session_vector_sums = spy  # type: ignore[method-assign]
        check()
        assert asked == [["s5", "later"]]  # only the sessions the store had no sum for
        fill(mem, 30)  # more turns for s0 and s1: their sums are read again
        check()
        assert sorted(asked[0]) == ["later", "s0", "s1", "s5"]
        mem.add("a new session begins", session="later")
        check()
        assert sorted(asked[0]) == ["later", "s0", "s1", "s5"]
        assert "later" in mem.backend.dense_cache(mem.embedder).session_centroids(thread, ["later"])
        # A deletion drops the preload, made here or by another process.
        with Memory(tmp_path / "p.db", embedder=HashingEmbedder(64), llm=None) as other:
            other.forget(other.messages(session="s2")[0].id)
        check()
        assert thread.id not in mem.backend.dense_cache(mem.embedder)._sums
        stop = threading.Event()
        stop.set()
        assert mem.backend.dense_cache(mem.embedder).preload_sums(thread, stop) == 0


def test_a_large_threads_sums_are_preloaded_again_after_a_deletion_drops_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import arbormem.recall.retriever as recall

    monkeypatch.setattr(recall, "PRELOAD_FROM", 50)
    path = tmp_path / "r.db"

    def wait(mem: Memory, thread) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 30
        while (
            not mem.backend.dense_cache(mem.embedder).holds_sums(thread)
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        return mem.backend.dense_cache(mem.embedder).holds_sums(thread)

    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        fill(mem, 60)
        thread = mem._thread(mem._scope(None, None))
        assert thread is not None
        mem.search("baking bread")
        assert wait(mem, thread)
        with Memory(path, embedder=HashingEmbedder(64), llm=None) as other:
            other.forget(other.messages(session="s1")[0].id)
        mem.search("baking bread")  # finds them stale and drops them
        assert not mem.backend.dense_cache(mem.embedder).holds_sums(thread)
        mem.search("baking bread")  # and starts reading them again
        assert wait(mem, thread)
        # A back-end that keeps no sums is asked once, not on every search.
        monkeypatch.setattr(mem.backend, "every_session_vector_sum", lambda *a, **k: None)
        mem.backend.dense_cache(mem.embedder).invalidate(thread)
        assert mem.backend.dense_cache(mem.embedder).preload_sums(
            thread
        ) == 0 and mem.backend.dense_cache(mem.embedder).holds_sums(thread)


def test_onnxruntime_can_load_after_the_approximate_index() -> None:
    """Importing onnxruntime after usearch crashed the process; the approximate
    index loads onnxruntime first when it is installed (the reranker and bge-small
    need it later)."""
    import importlib.util

    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed")
    script = (
        "import numpy as np\n"
        "from arbormem.store.sqlite.dense import AnnIndex\n"
        "index = AnnIndex(8)\n"
        "index.add(np.arange(1, 11), np.eye(10, 8, dtype=np.float32) + 0.1)\n"
        "import onnxruntime\n"
        "print('alive')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "alive"
