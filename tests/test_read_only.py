"""Stores opened for reading only: asked for, or because they cannot be written.

A store on read-only media, or in a folder the process may not write, used to
refuse every command, searches too: SQLite in WAL mode keeps a shared-memory
file beside the store, and opening asked for write access. Here the store is
real, and so is the folder that refuses writes (``chattr +i`` as root, whom
permission bits do not stop; ``chmod`` otherwise).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arbormem import AsyncMemory, Memory
from arbormem.chat import ChatSession
from arbormem.embed import HashingEmbedder
from arbormem.errors import InputError, StoreError
from arbormem.store.sqlite import SQLiteBackend
from tests.conftest import run_cli

EMBEDDER = HashingEmbedder(64)

EXCHANGES = [
    {"role": "user", "content": "My sister Ida is allergic to hazelnuts."},
    {"role": "assistant", "content": "Noted: no hazelnuts in anything for Ida."},
    {"role": "user", "content": "We are driving to Porto on Friday."},
    {"role": "assistant", "content": "Safe travels to Porto."},
]


def _fill(path: Path, **options: object) -> None:
    with Memory(path, embedder=EMBEDDER, **options) as mem:  # type: ignore[arg-type]
        mem.add_many(EXCHANGES)


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under the folder, with its size and modification time; SQLite's
    WAL files only when they hold something (a reader may leave them empty)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() and not (p.name.endswith(("-wal", "-shm")) and _empty_wal(p))
    }


def _empty_wal(path: Path) -> bool:
    wal = path if path.name.endswith("-wal") else path.with_name(path.name[:-4] + "-wal")
    return not wal.exists() or wal.stat().st_size == 0


def _lock(folder: Path) -> list[str]:
    """Make a folder refuse new files; returns the command that undoes it."""
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot make a folder immutable here: {done.stderr.strip()}")
        undo = ["chattr", "-i", str(folder)]
    else:
        folder.chmod(0o555)
        undo = ["chmod", "755", str(folder)]
    with pytest.raises(OSError):
        (folder / "probe").touch()
    return undo


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a store, which then refuses writes."""
    folder = tmp_path / "locked"
    folder.mkdir()
    _fill(folder / "memory.db")
    undo = _lock(folder)
    try:
        yield folder
    finally:
        subprocess.run(undo, check=True)


def test_asked_for_it_searches_and_refuses_every_change(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _fill(db)
    with Memory(db, embedder=EMBEDDER, read_only=True) as mem:
        assert mem.read_only
        hits = mem.search("what is Ida allergic to?", k=2)
        assert "hazelnuts" in hits[0].message.content
        assert len(mem.sessions()) == 1
        with pytest.raises(StoreError, match="cannot be changed: it was opened read-only"):
            mem.add("Ida can eat hazelnuts now.")
        with pytest.raises(StoreError, match="read-only"):
            mem.forget(hits[0].message.id)
        with pytest.raises(StoreError, match="read-only"):
            mem.reorganize()
    with Memory(db, embedder=EMBEDDER) as mem:
        assert not mem.read_only
        assert [m.content for m in mem.messages()] == [e["content"] for e in EXCHANGES]


def test_refusals(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "memory.db"
    with pytest.raises(StoreError, match=r"no store at .* to open read-only"):
        Memory(missing, embedder=EMBEDDER, read_only=True)
    assert not missing.parent.exists()
    with pytest.raises(StoreError, match="in-memory"):
        Memory(":memory:", embedder=EMBEDDER, read_only=True)
    with pytest.raises(InputError, match="read_only"):
        Memory(tmp_path / "x.db", embedder=EMBEDDER, read_only="yes")  # type: ignore[arg-type]
    assert not (tmp_path / "x.db").exists()


def test_a_store_changed_while_read_as_unchanging_is_reported(locked: Path) -> None:
    """In a folder that refuses writes the store is read as an unchanging file. A
    writer with another view of the folder (a read-only bind mount, another user)
    can still change it: reads then say so instead of failing on a malformed page."""
    db = locked / "memory.db"
    undo = ["chattr", "-i", str(locked)] if os.geteuid() == 0 else ["chmod", "755", str(locked)]
    with Memory(db, embedder=EMBEDDER) as reader:
        assert reader.backend._immutable
        assert len(reader.messages()) == len(EXCHANGES)
        subprocess.run(undo, check=True)
        with Memory(db, embedder=EMBEDDER) as writer:
            writer.add_many([{"role": "user", "content": f"Filler note {n}."} for n in range(200)])
        _lock(locked)
        with pytest.raises(StoreError, match="changed by another process since it was opened"):
            reader.search("hazelnuts", k=1)


def test_a_folder_closed_by_permissions(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Permission bits refuse the shared-memory file with another error than the
    immutable flag does ("readonly directory"). As root, a child process drops to
    nobody to meet them, in a working folder it may not enter (where looking for a
    .env file used to raise PermissionError)."""
    if os.geteuid() != 0:
        pytest.skip("the locked fixture covers permission bits when not root")
    # Outside pytest's own folders, which only their owner may enter.
    top = Path(tempfile.mkdtemp(prefix="arbormem-theirs-"))
    top.chmod(0o755)
    folder = top / "theirs"
    folder.mkdir()
    _fill(folder / "memory.db")
    folder.chmod(0o555)
    request.addfinalizer(lambda: shutil.rmtree(top, ignore_errors=True))
    script = f"""
import os
from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import StoreError
E = HashingEmbedder(64)
with Memory({str(folder / "memory.db")!r}, embedder=E) as mem:  # imports everything
    mem.search("warm up", k=1)
os.setgid(65534)
os.setuid(65534)
assert not os.access({str(folder)!r}, os.W_OK)
with Memory({str(folder / "memory.db")!r}, embedder=E) as mem:
    assert mem.read_only
    print(mem.search("hazelnuts", k=1)[0].message.content)
    try:
        mem.add("one more")
    except StoreError as exc:
        print("refused:", exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "hazelnuts" in done.stdout
    assert "refused:" in done.stdout and "refuses writes" in done.stdout


def test_an_older_schema_is_not_upgraded_read_only(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _fill(db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "DELETE FROM schema_migrations"
            " WHERE version = (SELECT MAX(version) FROM schema_migrations)"
        )
    conn.close()
    with pytest.raises(StoreError, match="open it once with write access to upgrade it"):
        Memory(db, embedder=EMBEDDER, read_only=True)


def test_a_folder_that_refuses_writes_opens_read_only(locked: Path) -> None:
    db = locked / "memory.db"
    before = _files(locked)
    with Memory(db, embedder=EMBEDDER) as mem:
        assert mem.read_only
        assert "Porto" in mem.search("where are we driving?", k=1)[0].message.content
        assert mem.export().document["threads"]
        with pytest.raises(StoreError, match="refuses writes"):
            mem.add("Ida can eat hazelnuts now.")
    assert _files(locked) == before
    with pytest.raises(StoreError, match="unable to open"):
        Memory(db, embedder=EMBEDDER, read_only=False)


def test_a_file_that_refuses_writes_opens_read_only(tmp_path: Path) -> None:
    """SQLite opens such a file read-only without a word; the first write failed."""
    db = tmp_path / "memory.db"
    _fill(db)
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
            pytest.skip("cannot make a file immutable here")
        undo = ["chattr", "-i", str(db)]
    else:
        db.chmod(0o444)
        undo = ["chmod", "644", str(db)]
    try:
        with Memory(db, embedder=EMBEDDER) as mem:
            assert mem.read_only
            assert mem.search("hazelnuts", k=1)
            with pytest.raises(StoreError, match="the file refuses writes"):
                mem.add("Ida can eat hazelnuts now.")
        with pytest.raises(StoreError, match="cannot be written"):
            Memory(db, embedder=EMBEDDER, read_only=False)
    finally:
        subprocess.run(undo, check=True)


def test_caches_are_built_but_not_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the thresholds the approximate index is built and the topics' summary
    vectors gathered, and both are saved beside the store for the next process;
    a read-only store keeps them in memory only."""
    monkeypatch.setattr("arbormem.tree.recall.SAVE_AFTER", 1)
    db = tmp_path / "memory.db"
    with Memory(db, embedder=EMBEDDER) as mem:
        for day, subject in enumerate(["hazelnut allergy", "Porto road trip", "chess club"]):
            for n in range(3):
                mem.add(f"More about the {subject}, part {n}.", session=f"day-{day}")
    before = _files(tmp_path)
    with Memory(db, embedder=EMBEDDER, ann_threshold=0, read_only=True) as mem:
        ready = mem.prepare_search()
        assert ready.approximate and ready.topics and not ready.saved
        assert "chess" in mem.search("chess club", k=1)[0].message.content
    assert _files(tmp_path) == before
    with Memory(db, embedder=EMBEDDER, ann_threshold=0) as mem:
        assert mem.prepare_search().saved
    saved = tmp_path / "memory.db.ann"
    assert any(saved.glob("*.usearch")) and any(saved.glob("topics-*.npz"))


def test_vectors_of_another_embedder_are_made_in_memory(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _fill(db)
    with Memory(db, embedder=HashingEmbedder(32), read_only=True) as mem:
        assert "hazelnuts" in mem.search("hazelnuts", k=1)[0].message.content
    with Memory(db, embedder=EMBEDDER) as mem:
        assert mem.stats().vector_models == {EMBEDDER.model_id: len(EXCHANGES)}


def test_a_wal_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    """Copied while a writer had it open, the store's last commits live in its WAL,
    which a read-only folder cannot read without its shared-memory file."""
    src = tmp_path / "live" / "memory.db"
    src.parent.mkdir()
    _fill(src)
    copy = tmp_path / "copy"
    copy.mkdir()
    with Memory(src, embedder=EMBEDDER) as mem:
        mem.add("Ida can eat hazelnuts now.")
        assert Path(f"{src}-wal").stat().st_size > 0
        for suffix in ("", "-wal"):
            shutil.copy(f"{src}{suffix}", copy / f"memory.db{suffix}")
    undo = _lock(copy)
    try:
        with pytest.raises(StoreError, match=r"memory\.db-wal may hold writes not yet merged"):
            Memory(copy / "memory.db", embedder=EMBEDDER)
    finally:
        subprocess.run(undo, check=True)
    with Memory(copy / "memory.db", embedder=EMBEDDER, read_only=True) as mem:
        assert len(mem.messages()) == len(EXCHANGES) + 1  # read through the WAL


def test_cli(locked: Path, tmp_path: Path) -> None:
    db = locked / "memory.db"
    found = run_cli("--db", str(db), "--embedder", "hash", "search", "hazelnuts", "--json")
    assert found.returncode == 0, found.stderr
    writable = tmp_path / "memory.db"
    _fill(writable)
    refused = run_cli("--db", str(writable), "--read-only", "forget", "--session", "x", "--yes")
    assert refused.returncode == 1
    assert "cannot be changed: it was opened read-only" in refused.stderr
    assert run_cli("--db", str(writable), "--read-only", "sessions").returncode == 0


def test_an_unsound_tree_is_used_as_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A writable store rebuilds an unsound tree on open; a read-only one cannot, and
    its tree views, context and search go on with the tree as it is."""
    db = tmp_path / "memory.db"
    _fill(db, tree=False)  # messages outside any tree: the check finds them
    with Memory(db, embedder=EMBEDDER, read_only=True) as mem:
        assert "hazelnuts" in mem.search("hazelnuts", k=1)[0].message.content
        assert mem.tree().kind == "root"
        assert '"kind": "root"' in mem.render_tree("json")
        assert mem.context("hazelnuts").messages
        assert mem.prepare_search().vectors == len(EXCHANGES)
        assert [p.reason for p in mem.tree_problems] == ["the thread has messages but no tree"]
    assert sum("is unsound" in r.getMessage() for r in caplog.records) == 1
    with Memory(db, embedder=EMBEDDER) as mem:  # writable: rebuilt
        assert mem.tree().message_count == len(EXCHANGES)
        assert mem.tree_problems


def test_context_under_pressure_compresses_without_storing(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with Memory(db, embedder=EMBEDDER) as mem:
        mem.add_many(
            [
                {"role": "user", "content": f"Note {n} about the garden: " + "roses " * 40}
                for n in range(30)
            ],
            session="s1",
        )
    before = _files(tmp_path)
    with Memory(db, embedder=EMBEDDER, read_only=True) as mem:
        roomy = mem.context("roses?", session="s1", context_window=100_000)
        tight = mem.context("roses?", session="s1", context_window=1_500)
        assert len(tight.messages) < len(roomy.messages)
        with pytest.raises(StoreError, match="mode= is stored with the session"):
            mem.context("roses?", session="s1", mode="code")
    assert _files(tmp_path) == before


def test_writes_are_refused_before_work(tmp_path: Path) -> None:
    """Embedding a batch, or asking an LLM, for what could not be stored is waste
    (and may be paid for): refused first."""

    class Counting(HashingEmbedder):
        calls = 0

        def embed_many(self, texts, **options):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return super().embed_many(texts, **options)

    db = tmp_path / "memory.db"
    _fill(db)
    with Memory(tmp_path / "other.db", embedder=EMBEDDER) as other:
        other.add("A message the read-only store does not hold.")
        export = other.export()
    with Memory(db, embedder=Counting(32), read_only=True) as mem:
        for write in (
            lambda: mem.add_many([{"role": "user", "content": "x"}]),
            mem.reembed,
            lambda: mem.import_(export),
            lambda: ChatSession(mem, llm=None),  # type: ignore[arg-type]
        ):
            with pytest.raises(StoreError, match="opened read-only"):
                write()
        assert Counting.calls == 0


def test_a_backend_given_decides(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _fill(db)
    backend = SQLiteBackend(db, read_only=True)
    try:
        with pytest.raises(InputError, match="read_only"):
            Memory(backend=backend, embedder=EMBEDDER, read_only=False)
        mem = Memory(backend=backend, embedder=EMBEDDER)
        assert mem.read_only
        mem.close()
    finally:
        backend.close()


def test_async(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _fill(db)

    async def main() -> None:
        async with AsyncMemory(db, embedder=EMBEDDER, read_only=True) as mem:
            assert mem.read_only
            assert (await mem.search("hazelnuts", k=1))[0].message.content
            with pytest.raises(StoreError):
                await mem.add("Ida can eat hazelnuts now.")

    asyncio.run(main())
