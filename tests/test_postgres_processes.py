"""Several processes on one PostgreSQL database: writes to one thread from three
processes at once lose, double and misplace nothing (positions, the topic tree,
the lexical statistics), each process's caches follow the others' writes, and a
server process killed in the middle of writes loses no acknowledged message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.store import NewMessage, SQLiteBackend, open_store
from arbormem.text import analyze, analyze_message

from .pg_server import PgServer

WRITER = textwrap.dedent(
    """
    import sys, time
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder

    url, name, count, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    mem = Memory(url, user="team", agent="bot", embedder=HashingEmbedder(16), llm=None)
    while time.time() < start:  # all writers begin together
        time.sleep(0.005)
    for i in range(count):
        if i % 3 == 2:  # a live exchange: its windows are finished by the upkeep
            out = mem.add_many([
                {"role": "user", "content": f"{name} asks about the kite number {i}"},
                {"role": "assistant", "content": f"{name} answers about lake {i}"},
            ])
            print(*(m.id for m in out), flush=True)
        else:
            print(mem.add(f"{name} says hello from writer {name} turn {i}").id, flush=True)
    mem.close()
    print("DONE", flush=True)
    """
)


def _run_writers(url: str, names: list[str], count: int) -> dict[str, list[str]]:
    start = time.time() + 3  # after every interpreter has started
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", WRITER, url, name, str(count), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    }
    acknowledged: dict[str, list[str]] = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        lines = out.split()
        assert lines[-1] == "DONE"
        acknowledged[name] = lines[:-1]
    return acknowledged


def test_three_processes_writing_one_thread_lose_double_and_misplace_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    acknowledged = _run_writers(pg_url, ["ann", "bob", "cy"], 18)
    every = [uid for ids in acknowledged.values() for uid in ids]
    assert len(every) == 3 * (12 + 2 * 6)
    store = open_store(pg_url)
    try:
        thread = store.thread("team", "bot")
        assert thread is not None
        rows = store.messages(thread)
        # No message lost, none stored twice, positions gap-free in storage order.
        assert sorted(r.message.id for r in rows) == sorted(every)
        assert [r.message.index for r in rows] == list(range(len(every)))
        assert store.state(thread).next_index == len(every)
        # Each writer's messages are in the order it wrote them.
        for ids in acknowledged.values():
            positions = [next(r.message.index for r in rows if r.message.id == i) for i in ids]
            assert positions == sorted(positions)
        # One tree: every message in exactly one leaf, no node twice, counts agree.
        assert store.check_tree(thread, 100) == []
        leaves = store.message_leaves([r.rowid for r in rows])
        assert len(leaves) == len(rows)
        # The statistics kept by three writers are those of the same messages stored
        # by one: replayed, in order, into a fresh SQLite store.
        replay = SQLiteBackend(tmp_path / "replay.db")
        again = replay.thread("team", "bot", create=True)
        assert again is not None
        replay.append(
            again,
            [
                NewMessage(
                    id=r.message.id,
                    role=r.message.role,
                    content=r.message.content,
                    timestamp=r.message.timestamp,
                    session=r.message.session,
                    speaker=r.message.speaker,
                    terms=" ".join(analyze_message(r.message.content, r.message.speaker)),
                    chash=r.chash,
                )
                for r in rows
            ],
        )
        words = analyze("ann bob cy asks answers kite lake says hello writer turn number")
        for key in ("turn", "window"):
            assert store.lexical_stats(key) == pytest.approx(replay.lexical_stats(key))
            assert store.doc_frequencies(key, words) == replay.doc_frequencies(key, words)
        pairs = ["kite_number", "answer_lake", "hello_writer", "lake_ann", "say_hello"]
        assert store.pair_frequencies(pairs) == replay.pair_frequencies(pairs)
        replay.close()
    finally:
        store.close()


ONE_ADD = textwrap.dedent(
    """
    import sys
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder

    with Memory(sys.argv[1], user="u", agent="a", embedder=HashingEmbedder(16), llm=None) as mem:
        if sys.argv[2] == "add":
            print(mem.add(sys.argv[3]).id)
        else:
            mem.forget(message_id=sys.argv[3])
    """
)


def _other_process(url: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", ONE_ADD, url, *args], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_a_process_sees_what_another_adds_and_forgets(pg_url: str) -> None:
    with Memory(pg_url, user="u", agent="a", embedder=HashingEmbedder(16), llm=None) as mem:
        for i in range(30):
            mem.add(f"ordinary chatter about the weather number {i}")
        assert not mem.search("zeppelin", k=5)  # caches warm, the word unknown
        mark = mem.backend.change_mark()
        added = _other_process(pg_url, "add", "the zeppelin lands at noon on the pier")
        assert mem.backend.change_mark() != mark
        time.sleep(1.1)  # past what one search reuses of the store's state
        hits = mem.search("zeppelin pier", k=5)
        assert hits and hits[0].message.id == added
        assert "zeppelin" in mem.backend.statistics(
            [mem.backend.thread("u", "a")]  # type: ignore[list-item]
        ).doc_frequencies("turn", ["zeppelin"])
        _other_process(pg_url, "forget", added)
        time.sleep(1.1)
        assert all(h.message.id != added for h in mem.search("zeppelin pier", k=5))


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder
    from arbormem.errors import StoreError

    mem = Memory(sys.argv[1], user="u", agent="a", embedder=HashingEmbedder(16), llm=None)
    i = 0
    while True:
        batch = [f"batch {i} message {j} about durable things" for j in range(3)]
        try:
            out = mem.add_many([{"content": text} for text in batch])
        except StoreError as exc:  # the server died under this write: try it again
            print("RETRY", str(exc).splitlines()[0][:80], flush=True)
            time.sleep(0.2)
            continue
        print(" ".join(m.id for m in out), flush=True)
        i += 1
    """
)


#: The most backends the crash test kills while waiting for one to land mid-write.
MAX_KILLS = 10


def _backends(server: PgServer, database: str) -> list[int]:
    """The processes serving clients of a database (waiting out a recovery)."""
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        try:
            rows = server.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                f" AND datname = '{database}' AND pid <> pg_backend_pid()"
            )
            return [int(r[0]) for r in rows]  # type: ignore[call-overload]
        except psycopg.OperationalError:  # still recovering from the last kill
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture
def own_server(pg_server: PgServer) -> Iterator[PgServer]:
    """A server of this test's own (it is crashed on purpose), with the test
    server's settings: nothing is synced to disk, and commits do not wait for the
    log unless the client asks (arbormem's sessions ask)."""
    server = PgServer(bin_path=pg_server.bin)
    server.start()
    try:
        yield server
    finally:
        server.remove()


def test_a_server_process_killed_mid_write_loses_no_acknowledged_message(
    own_server: PgServer,
) -> None:
    url = own_server.create_database("crash")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged: list[list[str]] = []
    kills = retries = 0
    # At least three kills, and more (up to MAX_KILLS) until one lands on a write in
    # flight: under load a kill can land between writes, and a background job of the
    # writer may meet the broken connection first and have the pool replace it, so
    # the next write needs no retry.
    try:
        for line in proc.stdout:
            if line.startswith("RETRY"):
                retries += 1
                continue
            acknowledged.append(line.split())
            enough = kills >= 3 and retries >= 1
            if len(acknowledged) % 15 == 0 and not enough and kills < MAX_KILLS:
                # SIGKILL a backend serving the writer, mid-write: PostgreSQL then
                # stops every session and replays its log (crash recovery).
                landed = False
                for pid in _backends(own_server, "crash"):
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                        landed = True
                    except ProcessLookupError:
                        pass  # gone since it was listed (ended, or stopped by a recovery)
                kills += landed
            if enough and len(acknowledged) >= 15 * kills + 15:
                break
    finally:
        proc.kill()
        _, errors = proc.communicate(timeout=60)
    assert kills >= 3 and retries >= 1, (
        f"{kills} kills, {retries} retries; the writer said: {errors[-2000:]}"
    )
    with Memory(url, user="u", agent="a", embedder=HashingEmbedder(16), llm=None) as mem:
        stored = [m.id for m in mem.messages()]
    held = set(stored)
    for batch in acknowledged:
        assert set(batch) <= held  # every acknowledged batch whole
    assert len(stored) % 3 == 0  # and no batch in part
    assert len(stored) == len(held)
