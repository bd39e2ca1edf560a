"""Forgotten text leaves the store's files, or forget says it has not yet.

Every check reads the raw bytes of the real files (database, write-ahead log,
shared memory, the folder of saved indexes) while other real processes hold
snapshots of the store or are killed half-way through a forget.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import InputError, NotFound
from arbormem.store import SQLiteBackend

from .conftest import run_cli

SECRET = "xqvzplumtok"

#: Holds a read snapshot of the store until told to let go (a line on stdin). With
#: ``until-gone``, it lets go by itself once the message with this content is deleted.
HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    path, mode = sys.argv[1], sys.argv[2]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT COUNT(*) FROM messages").fetchone()
    print("holding", flush=True)
    if mode == "until-gone":
        watch = sqlite3.connect(path, isolation_level=None)
        while watch.execute(
            "SELECT COUNT(*) FROM messages WHERE instr(content, ?)", (sys.argv[3],)
        ).fetchone()[0]:
            pass
    else:
        sys.stdin.readline()
    conn.execute("COMMIT")
    print("released", flush=True)
    sys.stdin.readline()
    """
)


def residues(db: Path, text: str = SECRET) -> dict[str, int]:
    """Occurrences of ``text`` in every file of the store (its saved indexes included)."""
    files = [p for p in db.parent.iterdir() if p.is_file() and p.name.startswith(db.name)]
    folder = db.with_name(db.name + ".ann")
    if folder.is_dir():
        files += [p for p in folder.iterdir() if p.is_file()]
    return {p.name: p.read_bytes().count(text.encode()) for p in files}


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.05)


@contextmanager
def holder(db: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "holding"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "released"


def fill(mem: Memory) -> str:
    mem.add_many([{"content": f"filler note {n} about lunch and the weather"} for n in range(150)])
    return mem.add(f"the vault code is {SECRET} and nobody may know it").id


def test_forget_says_when_another_process_keeps_the_text_on_disk(db_path: Path) -> None:
    """A reader of an older snapshot keeps the old pages in the files: the truncating
    checkpoint failed silently and forget returned with the text in the .db and -wal
    files. Now it says so, and purge() finishes once the reader is done."""
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        secret = fill(mem)
        with holder(db_path, "hold") as proc:
            result = mem.forget(secret, wait=0)
            assert result.messages == 1
            assert (result.purged, result.purge_pending) == (False, "readers")
            assert sum(residues(db_path).values()) > 0  # what the result owns up to
            release(proc)
            assert mem.purge(wait=30).to_dict() == {"purged": True, "purge_pending": None}
            assert sum(residues(db_path).values()) == 0, residues(db_path)
            assert not [h for h in mem.search(SECRET) if SECRET in h.message.content]


def test_forget_waits_for_a_reader_that_lets_go(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        secret = fill(mem)
        with holder(db_path, "until-gone", SECRET):
            # The reader lets go once it sees the message deleted, while forget waits.
            result = mem.forget(secret, wait=60)
            assert (result.purged, result.purge_pending) == (True, None)
            assert sum(residues(db_path).values()) == 0, residues(db_path)


def test_the_checkpoint_thread_finishes_a_purge_readers_held_up(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        secret = fill(mem)
        with holder(db_path, "hold") as proc:
            assert mem.forget(secret, wait=0).purge_pending == "readers"
            release(proc)
            # No call: the background checkpoints keep trying until the log is empty.
            wait_until(lambda: sum(residues(db_path).values()) == 0)


def _marker(n: int) -> str:
    """A word of its own for message ``n``, no part of any other marker."""
    return "zq" + "".join(chr(97 + (n // 26**k) % 26) for k in range(3)) + "vbw"


def test_no_forget_returns_purged_with_the_text_still_in_a_file(db_path: Path) -> None:
    """With no other process at all, a forget returned with the forgotten word in the
    -wal and .db files: its truncating checkpoint met another connection of the same
    process and gave up without a word. Stale copies of cells that a page rebuild left
    in unused space, which secure_delete does not reach, are removed by the rewrite."""
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        ids = []
        for s in range(20):
            got = mem.add_many(
                [
                    {"content": f"note {i} on the garden and the car {_marker(s * 40 + i)} end"}
                    for i in range(40)
                ],
                session=f"s{s}",
            )
            ids += [m.id for m in got]
        gone: list[str] = []
        for n in range(0, 800, 37):
            result = mem.forget(ids[n])
            assert result.purged, result
            gone.append(_marker(n))
            left = {m: sum(residues(db_path, m).values()) for m in gone}
            assert not any(left.values()), left


KILLED_IN_FORGET = textwrap.dedent(
    """
    import sys
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder
    from arbormem.store import SQLiteBackend
    from arbormem.store.sqlite.dense import VectorCache

    def killed_here(*args, **options):
        print("deleted", flush=True)
        sys.stdin.readline()  # the test kills the process here

    # The first steps after the deletion has committed: nothing of the purge is done.
    SQLiteBackend.purge = killed_here
    VectorCache.discard_files = killed_here
    mem = Memory(sys.argv[1], embedder=HashingEmbedder(32), llm=None)
    mem.forget(sys.argv[2])
    """
)


def _fts_residues(db: Path) -> int:
    """Occurrences of the secret in the full-text index's data and content tables."""
    conn = sqlite3.connect(db)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND (name LIKE '%fts_data' OR name LIKE '%fts_content')"
            )
        ]
        total = 0
        for table in tables:
            column = "block" if table.endswith("_data") else "c0"
            total += conn.execute(
                f"SELECT COUNT(*) FROM {table} WHERE instr(CAST({column} AS BLOB), ?)",
                (SECRET.encode(),),
            ).fetchone()[0]
        return int(total)
    finally:
        conn.close()


def test_a_forget_killed_before_its_purge_is_finished_on_the_next_open(db_path: Path) -> None:
    """SIGKILL between the delete and the purge left the forgotten terms in the
    full-text index for good: forget(id) again raised NotFound."""
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None, ann_threshold=1) as mem:
        secret = fill(mem)
        thread = mem.backend.thread("default", "default")
        assert thread is not None
        assert mem.prepare_search().saved  # an approximate index beside the store
    folder = db_path.with_name(db_path.name + ".ann")
    saved = {p.name for p in folder.iterdir() if p.name.startswith("thread-")}
    assert saved
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_IN_FORGET, str(db_path), secret],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "deleted"  # committed, not purged
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert _fts_residues(db_path) > 0  # the deleted terms are still in the index
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        finished = mem.backend.purged_on_open
        assert finished is not None and finished.threads == [thread.id]
        assert _fts_residues(db_path) == 0
        # The saved index held the forgotten message's vector: gone with it.
        assert not saved & {p.name for p in folder.iterdir()}
        with pytest.raises(NotFound):
            mem.forget(secret)
        assert mem.purge().to_dict() == {"purged": True, "purge_pending": None}
    assert sum(residues(db_path).values()) == 0, residues(db_path)
    store = SQLiteBackend(db_path)  # nothing left to finish
    assert store.purged_on_open is None
    store.close()


def test_the_next_forget_finishes_a_purge_a_crash_left(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        secret = fill(mem)
        other = mem.add("a note to forget later").id
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_IN_FORGET, str(db_path), secret],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "deleted"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # As if finishing it on open had failed (a full disk): the next forget does it.
    monkeypatch.setattr(SQLiteBackend, "_finish_interrupted_purges", lambda self: None)
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        assert _fts_residues(db_path) > 0
        assert mem.forget(other).purged
        assert _fts_residues(db_path) == 0
    assert sum(residues(db_path).values()) == 0, residues(db_path)


def test_purge_checks_its_arguments(memory: Memory) -> None:
    for bad in (-1, float("nan"), float("inf"), "2", True, None):
        with pytest.raises(InputError, match="wait"):
            memory.purge(wait=bad)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="wait"):
            memory.forget("x", wait=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="rewrite"):
        memory.purge(rewrite="yes")  # type: ignore[arg-type]


def test_the_cli_forgets_and_purges(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32), llm=None) as mem:
        secret = fill(mem)
    env = {"ARBORMEM_EMBEDDER": "hash:32"}
    done = run_cli("--db", str(db_path), "forget", secret, "--yes", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "messages": 1,
        "sessions": 0,
        "threads": 0,
        "purged": True,
        "purge_pending": None,
    }
    done = run_cli("--db", str(db_path), "purge", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"purged": True, "purge_pending": None}
    assert sum(residues(db_path).values()) == 0
