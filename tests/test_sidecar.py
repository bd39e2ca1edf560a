"""The folder of saved indexes beside a store: what crashes leave there is swept on
open, and never a file another process is writing or about to read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.store.sidecar import GRACE_SECONDS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no flock: nothing is swept")

#: Saves the thread's approximate index and stops between writing the index file and
#: publishing its description (the test kills it there, or lets it go on).
SAVER = textwrap.dedent(
    """
    import sys
    import arbormem.store.sqlite.dense as vectors
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder

    real = vectors.AnnIndex.save
    def stopped_here(self, path):
        real(self, path)
        print("written", path.name, flush=True)
        sys.stdin.readline()
    vectors.AnnIndex.save = stopped_here

    mem = Memory(sys.argv[1], embedder=HashingEmbedder(32), llm=None, ann_threshold=1)
    mem.add(f"one more note number {sys.argv[2]} about the weather")
    print("saved" if mem.prepare_search().saved else "not saved", flush=True)
    mem.close()
    """
)


def _store(db: Path) -> Path:
    with Memory(db, embedder=HashingEmbedder(32), llm=None, ann_threshold=1) as mem:
        mem.add_many([{"content": f"note {n} on the garden and the car"} for n in range(60)])
        assert mem.prepare_search().saved
    return db.with_name(db.name + ".ann")


def _age(path: Path) -> None:
    """Make a file look as old as a crash a while ago (no waiting for the grace period)."""
    past = time.time() - GRACE_SECONDS - 30
    os.utime(path, (past, past))


def _saver(db: Path, n: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(db), str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc


def _search_works(db: Path) -> None:
    with Memory(db, embedder=HashingEmbedder(32), llm=None, ann_threshold=1) as mem:
        assert mem.search("garden car", k=3)


def test_files_of_crashed_saves_are_swept_on_open(db_path: Path) -> None:
    """Processes killed between writing an index and publishing it left one file each,
    for good (9 files, 263 MB beside one live index)."""
    folder = _store(db_path)
    live = {p.name for p in folder.iterdir()}
    orphans = []
    for n in range(3):
        proc = _saver(db_path, n)
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[0] == "written"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        orphans.append(folder / line[1])
    for path in orphans:
        assert path.exists()
        _age(path)
    # Leftovers of saves cut short elsewhere, and files of a thread that is gone.
    leftovers = [
        folder / "thread-1.json.0123456789ab.tmp",
        folder / "topics-1.0123456789ab.tmp.npz",
        folder / "thread-42.json",
        folder / "thread-42-00000000beef.usearch",
        folder / "topics-42.npz",
    ]
    for path in leftovers:
        path.write_bytes(b"{}" if path.suffix == ".json" else b"\0" * 64)
        _age(path)
    (folder / "notes.txt").write_text("not ours: kept")
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None, ann_threshold=1):
        pass
    left = {p.name for p in folder.iterdir()}
    assert not {p.name for p in orphans + leftovers} & left
    assert live <= left  # the live description and the index it names
    assert "notes.txt" in left
    _search_works(db_path)


def test_a_young_orphan_is_kept_for_processes_without_the_lock(db_path: Path) -> None:
    folder = _store(db_path)
    proc = _saver(db_path, 0)
    assert proc.stdout is not None
    name = proc.stdout.readline().split()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None):
        pass
    assert (folder / name).exists()  # younger than the grace period


def test_a_file_another_process_is_about_to_publish_is_never_swept(db_path: Path) -> None:
    folder = _store(db_path)
    proc = _saver(db_path, 0)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        name = proc.stdout.readline().split()[1]
        written = folder / name
        _age(written)  # old enough to be swept, were it not locked
        with Memory(db_path, embedder=HashingEmbedder(32), llm=None, ann_threshold=1):
            pass
        assert written.exists()
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "saved"
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait(timeout=30)
    thread_json = next(folder.glob("thread-*.json"))
    assert json.loads(thread_json.read_text())["file"] == name  # published, and in use
    _search_works(db_path)
    assert written.exists()


def test_a_description_of_an_earlier_generation_goes_with_its_index(db_path: Path) -> None:
    """Rows were forgotten since it was saved (by a process that died before it deleted
    the files): it may hold their vectors, and no one can use it."""
    folder = _store(db_path)
    description = next(folder.glob("thread-*.json"))
    meta = json.loads(description.read_text())
    meta["generation"] -= 1
    description.write_text(json.dumps(meta))
    index = folder / meta["file"]
    _age(index)
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None):
        pass
    assert not description.exists() and not index.exists()
    _search_works(db_path)
