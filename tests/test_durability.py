"""A message whose add() returned survives the process being killed right after."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.store import SQLiteBackend

WRITER = textwrap.dedent(
    """
    import sys
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder

    mem = Memory(sys.argv[1], embedder=HashingEmbedder(16))
    for i in range(int(sys.argv[2])):
        m = mem.add(f"durable message {i}")
        print(m.id, flush=True)
    print("DONE", flush=True)
    sys.stdin.read()  # wait to be killed, with the store still open
    """
)


def test_messages_survive_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "durable.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "25"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged = []
    for line in proc.stdout:
        if line.strip() == "DONE":
            break
        acknowledged.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert len(acknowledged) == 25
    with Memory(db, embedder=HashingEmbedder(16)) as mem:
        for message_id in acknowledged:
            assert mem.get(message_id).content.startswith("durable message")
        assert len(mem.search("durable message", k=50)) == 25


def test_kill_in_the_middle_of_a_stream_keeps_every_acknowledged_message(tmp_path: Path) -> None:
    db = tmp_path / "stream.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "100000"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged = []
    for line in proc.stdout:
        acknowledged.append(line.strip())
        if len(acknowledged) == 40:
            os.kill(proc.pid, signal.SIGKILL)  # the writer is mid-stream here
            break
    proc.wait(timeout=30)
    with Memory(db, embedder=HashingEmbedder(16)) as mem:
        stored = {m.id for m in mem.messages()}
        assert set(acknowledged) <= stored


LIVE_SCRIPT = """
import os, sys
from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.store import SQLiteBackend
mem = Memory(sys.argv[1], embedder=HashingEmbedder(32))
mem.engine.working.interval = 60.0  # the upkeep is still waiting when the script ends
for i in range(3):
    mem.add_many([{"role": "user", "content": f"question {i} about kites"},
                  {"role": "assistant", "content": f"answer {i} about kites"}], session="s1")
if sys.argv[2] == "die":
    os._exit(0)  # no close, no exit handlers: as if killed
"""


def _windows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM window_fts_content").fetchone()[0])
    finally:
        conn.close()


def test_a_script_that_never_closes_still_gets_its_window_keys(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    done = subprocess.run(
        [sys.executable, "-c", LIVE_SCRIPT, str(path), "exit"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert _windows(path) == 6  # closed at exit: the upkeep wrote the newest two


def test_window_keys_a_killed_process_left_unwritten_are_mended_by_the_next_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "killed.db"
    done = subprocess.run(
        [sys.executable, "-c", LIVE_SCRIPT, str(path), "die"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert _windows(path) == 4  # the newest two were left to the upkeep that never ran
    with Memory(path, embedder=HashingEmbedder(32)) as mem:
        mem.add("a new note", session="s2")
    assert _windows(path) == 7


def test_one_searching_thread_maps_the_file_and_the_writer_does_not(tmp_path: Path) -> None:
    # Reads through the map bring a missing page in with its neighbours; writes go
    # through the log, as without a map. Each mapping counts in resident memory, so
    # one reader connection at a time maps: the first searching thread's, until it
    # ends. Other reads (background upkeep, a second searcher meanwhile) stay plain.
    import gc
    import threading

    store = SQLiteBackend(tmp_path / "m.db")

    def mapped(search: bool) -> int:
        if search:
            store.map_for_search()
        with store._reading() as conn:
            return int(conn.execute("PRAGMA mmap_size").fetchone()[0])

    def on_a_thread(search: bool) -> int:
        out: list[int] = []
        worker = threading.Thread(target=lambda: out.append(mapped(search)))
        worker.start()
        worker.join()
        return out[0]

    try:
        assert store._writer.execute("PRAGMA mmap_size").fetchone()[0] == 0
        assert mapped(search=False) == 0  # a read that is not a search
        assert on_a_thread(search=True) > 0  # maps; its connection goes with its thread
        gc.collect()
        assert mapped(search=True) > 0  # this thread's connection takes the map over
        assert on_a_thread(search=True) == 0  # while it holds it, others read plainly
        assert mapped(search=True) > 0
        # A holder that ended while something still holds its Thread object (a list
        # of workers, an executor) leaves the map to the next searcher.
        out: list[int] = []
        kept = [threading.Thread(target=lambda: out.append(mapped(True))) for _ in range(2)]
        store._drop(store._local.conn)  # this thread lets go of the map
        store._local.conn = None
        kept[0].start()
        kept[0].join()
        kept[1].start()
        kept[1].join()
        assert out[0] > 0 and out[1] > 0
    finally:
        store.close()


def test_a_new_store_has_16_kb_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    for path, size in ((tmp_path / "new.db", 16384), (old, 4096)):
        with Memory(path, embedder=HashingEmbedder(64)) as mem:
            mem.add("the spare key is under the blue flowerpot")
        with Memory(path, embedder=HashingEmbedder(64)) as mem:
            assert mem.backend._writer.execute("PRAGMA page_size").fetchone()[0] == size
            assert mem.search("spare key")[0].message.content.startswith("the spare key")


@contextmanager
def _watching_writes(mem: Memory, watch: Callable[[str], object]) -> Iterator[None]:
    """Show ``watch`` every statement the store's write connection runs meanwhile."""
    backend = mem.backend
    real = backend._writer  # type: ignore[attr-defined]

    class Watching:
        def execute(self, sql: str, *args: object) -> object:
            watch(sql)
            return real.execute(sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

    backend._writer = Watching()  # type: ignore[attr-defined]
    try:
        yield
    finally:
        backend._writer = real  # type: ignore[attr-defined]


def _levels(mem: Memory) -> dict[str, int]:
    from arbormem.store.sqlite.common import fts_levels

    conn = mem.backend._writer  # type: ignore[attr-defined]
    return {t: fts_levels(conn, t) for t in ("turn_fts", "window_fts", "topic_fts", "segment_fts")}


def test_forgetting_keeps_the_full_text_indexes_shallow(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each forget merges the full-text indexes ('optimize'). SQLite 3.40 puts each
    merge one level above the last, and 2,000 levels make an index unreadable for
    good: past the limit an index is rebuilt, which starts it at one level again."""
    monkeypatch.setattr("arbormem.store.sqlite.messages.FTS_LEVEL_LIMIT", 20)
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add_many([{"content": f"note {n} about apples and pears"} for n in range(300)])
        deepest = 0
        for n in range(40):
            mem.forget(mem.add(f"a passing remark {n} about apples").id)
            deepest = max(deepest, *_levels(mem).values())
        assert deepest <= 20
        assert len(mem.search("apples pears", k=500)) == 300
        assert not any("remark" in h.message.content for h in mem.search("passing remark"))


def test_an_index_already_too_deep_is_rebuilt_not_merged(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A store written before the limit existed may be a merge away from the end."""
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add_many([{"content": f"note {n} about apples and pears"} for n in range(300)])
        for n in range(15):
            mem.forget(mem.add(f"a passing remark {n} about apples").id)
        deep = {t for t, n in _levels(mem).items() if n > 20}
        assert "turn_fts" in deep
        monkeypatch.setattr("arbormem.store.sqlite.messages.FTS_LEVEL_LIMIT", 20)
        merged: list[str] = []
        with _watching_writes(
            mem, lambda sql: "'optimize'" in sql and merged.append(sql.split()[2])
        ):
            mem.forget(mem.add("one more remark").id)
        assert not deep & set(merged)
        assert all(n <= 20 for n in _levels(mem).values())


def test_a_thousand_forgets_leave_the_store_readable(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The real thing, on whatever SQLite this Python has: on 3.40 the 1,000th
    add-and-forget failed ("database disk image is malformed") and the store could
    not be searched again."""
    # Rewriting the file after each forget leaves the indexes' levels as they are, and
    # would add a fifth to this test's minutes.
    monkeypatch.setattr("arbormem.store.sqlite.messages.REWRITE_LIMIT_BYTES", 0)
    db = tmp_path / "m.db"
    with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add_many([{"content": f"note {n} about apples and pears"} for n in range(300)])
        for n in range(1_050):
            mem.forget(mem.add(f"a passing remark {n} about apples").id)
    with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
        assert len(mem.search("apples pears", k=500)) == 300
        conn = sqlite3.connect(db)
        for table in ("turn_fts", "window_fts", "topic_fts", "segment_fts"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
        conn.close()


def test_the_checkpoint_after_a_forget_holds_the_write_lock(tmp_path: Path) -> None:
    """It ran on the write connection without the lock, so another thread's write
    (a reorganisation, session upkeep) committing meanwhile failed with "SQL
    statements in progress" (a few times in 20 s of the two racing)."""
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as mem:
        lock = mem.backend._lock  # type: ignore[attr-defined]
        seen: list[bool] = []
        mem.add("something to forget")
        with _watching_writes(
            mem, lambda sql: "wal_checkpoint" in sql and seen.append(lock._is_owned())
        ):
            mem.forget(mem.messages()[0].id)
        assert seen and all(seen)  # a try that met another checkpoint is made again
