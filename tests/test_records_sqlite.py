"""Records in a real SQLite file: an older store gains them, they survive reopening,
forgetting through :class:`~arbormem.Memory` leaves no trace of them, and the
record service over the file answers exactly as the in-memory record book does."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.bench.updates import CONTEXT_TURNS, generate, load_conversations
from arbormem.embed import HashingEmbedder
from arbormem.records import Context, Record, RecordBook, RecordService, Turn, record_id
from arbormem.records.model import Composite
from arbormem.store import SQLiteBackend
from arbormem.store.sqlite.schema import LATEST

from .conftest import UNDO_SCHEMA_FROM_18

T0 = datetime(2024, 1, 8, 9, 0, tzinfo=timezone.utc)
DATA = Path(__file__).resolve().parent / "data"


def test_an_older_store_gains_the_record_tables_and_keeps_its_messages(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Memory(path, embedder=HashingEmbedder(32)) as mem:
        first = mem.add("I live in Paris.", speaker="Sam")
        mem.add("Nice, I love Paris.", role="assistant", speaker="Ana")
    # Put the store back at schema version 17, before records.
    conn = sqlite3.connect(path)
    conn.executescript(UNDO_SCHEMA_FROM_18)
    conn.execute("DELETE FROM schema_migrations WHERE version >= 18")
    conn.commit()
    conn.close()
    store = SQLiteBackend(path)
    version = store._writer.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
    assert version == LATEST
    (thread,) = store.threads()
    assert [r.message.content for r in store.messages(thread)] == [
        "I live in Paris.",
        "Nice, I love Paris.",
    ]
    records = RecordService(store, thread)
    records.add_exchange([Turn(first.id, "I live in Paris.", T0, "Sam")])
    (paris,) = records.records(subject="Sam")
    assert paris.value == "Paris" and paris.sources == (first.id,)
    store.delete_messages([first.id])
    assert records.records(current=False) == []
    store.close()


def test_records_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    store = SQLiteBackend(path)
    thread = store.thread("sam", "bot", create=True)
    assert thread is not None
    records = RecordService(store, thread)
    records.add_exchange([Turn("m1", "I live in Paris.", T0, "Sam")])
    records.add_exchange([Turn("m2", "I moved to Lyon.", T0 + timedelta(days=40), "Sam")])
    records.fuse({r.id: [1.0, 0.0] for r in records.records(current=False)}, threshold=0.5)
    store.set_records_cursor(thread, 2)
    before = records.to_dict()
    store.close()
    store = SQLiteBackend(path, read_only=True)
    again = RecordService(store, thread)
    assert again.to_dict() == before
    assert store.records_cursor(thread) == 2
    (lyon,) = again.records(subject="Sam")
    assert [r.value for r in again.history(lyon.id)] == ["Paris", "Lyon"]
    store.close()


def test_forgetting_through_memory_leaves_no_trace_of_the_record(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        moved = mem.add("Big news: I moved to Lyon!", speaker="Sam")
        kept = mem.add("See you at the market.", speaker="Sam")
        (thread,) = mem.backend.threads()
        scope = f"{thread.user}/{thread.agent}"
        secret = Record(
            id=record_id(scope, "Sam lives at 12 quokkaville lane."),
            kind="fact",
            text="Sam lives at 12 quokkaville lane.",
            subject="Sam",
            attribute="address",
            value="12 quokkaville lane",
            sources=(moved.id,),
            scope=scope,
        )
        market = Record(
            id=record_id(scope, "Sam goes to the market."),
            kind="event",
            text="Sam goes to the market.",
            sources=(moved.id, kept.id),
            scope=scope,
        )
        mem.backend.write_records(thread, [secret, market])
        mem.backend.replace_composites(
            thread, [Composite("cmp-1", 1, secret.text, (secret.id, market.id), scope=scope)]
        )
        mem.forget(moved.id)
        assert mem.backend.record(thread, secret.id) is None
        assert mem.backend.composites(thread) == []
        assert mem.backend.list_records(thread) == [replace(market, sources=(kept.id,))]
    wal = db_path.with_name(db_path.name + "-wal")
    raw = db_path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"quokkaville" not in raw
    assert b"quokkavill" not in raw  # the full-text index's stem of it


def _feed(book: RecordService, conversation_turns: list[Turn], speakers: tuple[str, ...]) -> None:
    for n, turn in enumerate(conversation_turns):
        recent = tuple(conversation_turns[max(0, n - CONTEXT_TURNS) : n])
        book.add_exchange([turn], Context(speakers=speakers, recent=recent))


@pytest.mark.parametrize("source", ["generated", "hand-written"])
def test_the_service_over_sqlite_keeps_and_finds_what_the_record_book_does(
    tmp_path: Path, source: str
) -> None:
    conversations = (
        generate(4, seed=11)
        if source == "generated"
        else load_conversations(DATA / "updates_handwritten.json")[:6]
    )
    store = SQLiteBackend(tmp_path / "same.db")
    for conv in conversations:
        turns = [Turn(m.id, m.text, m.timestamp, m.speaker, m.role) for m in conv.messages]
        book = RecordBook()
        # One thread of the book's scope at a time, so that the ids are equal too.
        thread = store.thread("default", "default", create=True)
        assert thread is not None
        stored = RecordService(store, thread)
        _feed(book, turns, conv.speakers)
        _feed(stored, turns, conv.speakers)
        assert stored.to_dict() == book.to_dict()
        for q in conv.questions:
            asked = {"as_of": q.as_of, "speaker": q.asker, "k": 3}
            assert stored.search(q.text, **asked) == book.search(q.text, **asked)  # type: ignore[arg-type]
        store.delete_thread(thread)
    store.close()


def test_a_record_deleted_on_its_own_leaves_the_file_once_purged(tmp_path: Path) -> None:
    path = tmp_path / "alone.db"
    store = SQLiteBackend(path)
    thread = store.thread("sam", "bot", create=True)
    assert thread is not None
    records = RecordService(store, thread)
    for n in range(40):  # enough rows that pages fill and get reorganised
        records.remember(f"Sam noted fact number {n} about the garden.", sources=(f"m{n}",))
    (secret,) = [
        p.record
        for p in [records.remember("Sam keeps the spare key under the quokkaville gnome.")]
        if p.record is not None
    ]
    assert store.delete_records(thread, [secret.id]) == [secret.id]
    assert store.purge().purged
    store.close()
    wal = path.with_name(path.name + "-wal")
    raw = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"quokkavill" not in raw
