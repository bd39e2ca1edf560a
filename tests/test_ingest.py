"""Ingesting conversation logs: again, grown, from standard input, and without timestamps."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem import InputError, Memory
from arbormem.embed import HashingEmbedder
from arbormem.ingest.formats import read_conversation_file

from .conftest import run_cli, tiny_locomo, write_json

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=timezone.utc)


def log(n: int, *, ids: bool = False) -> list[dict[str, Any]]:
    """A dated log of ``n`` turns over three days (the last day's turns close together)."""
    out = []
    for i in range(n):
        m: dict[str, Any] = {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i} about {['cakes', 'bikes', 'trains'][i // 4 % 3]}",
            "timestamp": (T0 + timedelta(days=i // 4, minutes=i)).isoformat(),
        }
        if ids:
            m["id"] = f"m{i}"
        out.append(m)
    return out


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"ARBORMEM_DB": str(tmp_path / "cli.db"), "ARBORMEM_EMBEDDER": "hash"}


def sessions(mem: Memory) -> list[tuple[str, int]]:
    return [(s.id, s.message_count) for s in mem.sessions()]


# -- the library ------------------------------------------------------------------------


def test_ingesting_a_log_again_stores_only_what_it_gained(memory: Memory, tmp_path: Path) -> None:
    first = memory.ingest(log(6))
    assert (len(first.added), first.skipped) == (6, ())
    again = memory.ingest(log(10))
    assert again.skipped == tuple(range(6)) and len(again.added) == 4
    # Each message given maps to its stored message: the one it repeats, or the new one.
    assert [m.id for m in again.messages[:6]] == [m.id for m in first.messages]
    assert [m.content for m in again.messages] == [m["content"] for m in log(10)]
    # The same sessions as had the whole log been ingested at once.
    with Memory(tmp_path / "once.db", embedder=HashingEmbedder(64)) as once:
        once.ingest(log(10))
        assert sessions(memory) == sessions(once)
    assert memory.ingest(log(10)).added == []


def test_a_message_is_repeated_once_for_each_time_it_is_stored(memory: Memory) -> None:
    ok = {"role": "user", "content": "ok", "timestamp": "2026-03-02T18:00:00Z"}
    assert len(memory.ingest([ok, ok]).added) == 2  # both kept: the store is lossless
    assert memory.ingest([ok, ok]).added == []
    assert len(memory.ingest([ok, ok, ok]).added) == 1
    assert len(memory.messages()) == 3


def test_what_differs_is_not_a_repeat(memory: Memory) -> None:
    base = {"role": "user", "content": "ok", "timestamp": "2026-03-02T18:00:00Z", "session": "a"}
    memory.ingest([base])
    others = [
        {**base, "role": "assistant"},
        {**base, "speaker": "Maya"},
        {**base, "content": "ok!"},
        {**base, "timestamp": "2026-03-02T18:00:01Z"},
        {**base, "session": "b"},
    ]
    assert len(memory.ingest(others).added) == 5
    # A message naming no session repeats one in any session.
    unnamed = {k: v for k, v in base.items() if k != "session"}
    assert memory.ingest([unnamed]).skipped == (0,)
    # Scopes never see each other's messages, repeated or not.
    assert len(memory.ingest([base], user="someone-else").added) == 1


def test_messages_with_ids_are_skipped_by_id(memory: Memory) -> None:
    memory.ingest(log(4, ids=True))
    again = memory.ingest(log(6, ids=True))
    assert again.skipped == (0, 1, 2, 3) and [m.id for m in again.added] == ["m4", "m5"]
    changed = log(6, ids=True)
    changed[2]["content"] = "edited"
    with pytest.raises(InputError, match=r"'messages\[2\]\.id'.*already stored with different"):
        memory.ingest(changed)
    with pytest.raises(InputError, match=r"'messages\[0\]\.id'.*in another scope"):
        memory.ingest(log(1, ids=True), user="someone-else")
    assert len(memory.messages()) == 6  # nothing of either failed call


def test_add_many_names_the_record_whose_id_is_stored(memory: Memory, tmp_path: Path) -> None:
    # It failed with "message id 'm0' already exists in <db>", naming no file or line.
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in log(3, ids=True)))
    records = read_conversation_file(path).records
    memory.add_many(records)
    with pytest.raises(InputError) as err:
        memory.add_many(records)
    assert str(err.value).startswith(f"{path} line 1: 'id': message id 'm0' is already stored")


def test_undated_messages_naming_their_session_are_repeats_there(memory: Memory) -> None:
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    memory.ingest(chat, session="notes")
    grown = [*chat, {"role": "user", "content": "hi"}]
    again = memory.ingest(grown, session="notes")
    assert again.skipped == (0, 1) and [m.content for m in again.added] == ["hi"]
    assert sessions(memory) == [("notes", 3)]


def test_an_undated_conversation_is_a_session_of_its_own(memory: Memory) -> None:
    # Dated now, an unrelated chat joined the session a few minutes old.
    memory.add("planning the party", timestamp=datetime.now(timezone.utc) - timedelta(minutes=5))
    memory.ingest([{"content": "my bike tyre is flat"}, {"content": "check the rim tape"}])
    assert sessions(memory) == [("session-1", 1), ("session-2", 2)]
    # Not repeats either: undated and in no named session, it is new every time.
    assert len(memory.ingest([{"content": "my bike tyre is flat"}]).added) == 1
    assert sessions(memory)[-1] == ("session-3", 1)
    # Live messages without a timestamp still follow the idle gap.
    memory.add("and the brakes squeak")
    assert sessions(memory)[-1] == ("session-3", 2)


def test_undated_files_are_a_session_each(memory: Memory, tmp_path: Path) -> None:
    a = write_json(tmp_path / "a.json", [{"content": "first chat"}, {"content": "reply"}])
    b = write_json(tmp_path / "b.json", [{"content": "second chat"}])
    dated = write_json(tmp_path / "c.json", log(2))
    records = [read_conversation_file(p).records for p in (a, b, dated)]
    memory.ingest([r for rs in records for r in rs])
    assert sorted(n for _, n in sessions(memory)) == [1, 2, 2]


async def _ingest_async(db: Path) -> tuple[int, tuple[int, ...]]:
    from arbormem import AsyncMemory

    async with AsyncMemory(db, embedder="hash") as mem:
        await mem.ingest(log(3))
        again = await mem.ingest(log(4))
        return len(again.added), again.skipped


def test_async_memory_ingests(tmp_path: Path) -> None:
    import asyncio

    assert asyncio.run(_ingest_async(tmp_path / "a.db")) == (1, (0, 1, 2))


# -- the command -------------------------------------------------------------------------


def test_ingesting_a_file_twice_stores_it_once(tmp_path: Path, env: dict[str, str]) -> None:
    path = write_json(tmp_path / "s1.json", log(10))
    assert run_cli("ingest", str(path), env=env).returncode == 0
    out = run_cli("ingest", str(path), env=env)
    assert out.returncode == 0, out.stderr
    assert "0 messages in 0 session(s) (messages), 10 already stored" in out.stdout
    assert json.loads(run_cli("stats", "--json", env=env).stdout)["messages"] == 10
    write_json(path, log(12))
    out = run_cli("ingest", str(path), "--json", env=env)
    summary = json.loads(out.stdout)["files"][0]
    assert (summary["messages"], summary["skipped"]) == (2, 10)


def test_ingesting_a_file_with_ids_again(tmp_path: Path, env: dict[str, str]) -> None:
    path = tmp_path / "s2.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in log(4, ids=True)))
    assert run_cli("ingest", str(path), env=env).returncode == 0
    again = run_cli("ingest", str(path), env=env)
    assert again.returncode == 0 and "4 already stored" in again.stdout, again.stderr
    edited = log(4, ids=True)
    edited[3]["content"] = "edited"
    path.write_text("\n".join(json.dumps(m) for m in edited))
    out = run_cli("ingest", str(path), env=env)
    assert out.returncode == 1
    assert out.stderr.startswith(f"Error: {path} line 4: 'id': message id 'm3' is already stored")


def test_ingest_reads_standard_input(tmp_path: Path, env: dict[str, str]) -> None:
    lines = "\n".join(json.dumps(m) for m in log(4))
    out = run_cli("ingest", "-", "--json", env=env, input=lines)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)["files"][0]
    assert (summary["file"], summary["format"], summary["messages"]) == ("<stdin>", "jsonl", 4)
    # JSON too, told apart by its text; and what is there already is skipped.
    out = run_cli("ingest", "-", "--json", env=env, input=json.dumps(log(5)))
    summary = json.loads(out.stdout)["files"][0]
    assert (summary["format"], summary["messages"], summary["skipped"]) == ("messages", 1, 4)
    locomo = run_cli("ingest", "-", env=env, input=json.dumps(tiny_locomo()))
    assert "6 messages in 2 session(s) (locomo)" in locomo.stdout
    bad = run_cli("ingest", "-", env=env, input='{"content": "fine"}\n{"content": null}\n')
    assert bad.returncode == 1
    assert bad.stderr.strip() == "Error: <stdin> line 2: 'content': must be a string (got null)"
    twice = run_cli("ingest", "-", "-", env=env, input="")
    assert twice.returncode == 2 and "standard input" in twice.stderr


def test_undated_files_do_not_join_the_session_before(tmp_path: Path, env: dict[str, str]) -> None:
    a = write_json(tmp_path / "a.json", [{"content": "planning the party"}])
    b = write_json(tmp_path / "b.json", [{"content": "unrelated: my bike"}, {"content": "ok"}])
    assert run_cli("ingest", str(a), env=env).returncode == 0
    out = run_cli("ingest", str(b), env=env)
    assert out.returncode == 0, out.stderr
    assert "session of their own (session-2)" in out.stderr
    assert "--session session-2" in out.stderr
    found = json.loads(run_cli("sessions", "--json", env=env).stdout)
    assert [(s["id"], s["message_count"]) for s in found] == [("session-1", 1), ("session-2", 2)]
    # Told otherwise, they go where they are told, and a second time adds nothing.
    for _ in range(2):
        out = run_cli("ingest", "--session", "session-2", str(b), env=env)
        assert out.returncode == 0 and "note:" not in out.stderr
    found = json.loads(run_cli("sessions", "--json", env=env).stdout)
    assert [(s["id"], s["message_count"]) for s in found] == [("session-1", 1), ("session-2", 2)]


def test_add_stores_one_message(tmp_path: Path, env: dict[str, str]) -> None:
    out = run_cli(
        "add",
        "Leo is allergic to peanuts.",
        "--speaker",
        "Maya",
        "--session",
        "party",
        "--timestamp",
        "2026-03-02T18:05:10Z",
        "--json",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    stored = json.loads(out.stdout)
    assert (stored["speaker"], stored["session"], stored["role"]) == ("Maya", "party", "user")
    assert stored["timestamp"] == "2026-03-02T18:05:10.000000Z"
    reply = run_cli("add", "-", "-r", "assistant", "-s", "party", env=env, input="Noted.\n")
    assert reply.returncode == 0 and reply.stdout.startswith("Stored ")
    assert "in party (#1)." in reply.stdout
    shown = run_cli("show", "party", "--json", env=env).stdout.splitlines()
    assert [json.loads(line)["content"] for line in shown] == [
        "Leo is allergic to peanuts.",
        "Noted.",
    ]
    bad = run_cli("add", "hello", "--role", "wizard", env=env)
    assert bad.returncode == 1 and "'role': unknown role 'wizard'" in bad.stderr


# -- metadata checked once ----------------------------------------------------------------


def test_add_many_checks_each_message_metadata_once(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arbormem.ingest import pipeline, validate

    calls: list[Any] = []
    real = validate.check_metadata

    def counted(value: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(value)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(pipeline, "check_metadata", counted)
    monkeypatch.setattr(validate, "check_metadata", counted)
    stored = memory.add_many(
        [{"content": f"turn {i}", "metadata": {"n": i, "tags": ["a", {"b": i}]}} for i in range(3)]
    )
    assert len(calls) == 3
    assert [memory.get(m.id).metadata for m in stored] == [
        {"n": i, "tags": ["a", {"b": i}]} for i in range(3)
    ]


def test_metadata_replaced_after_it_was_checked_is_checked_again(memory: Memory) -> None:
    from dataclasses import replace

    writer = memory._writer
    (record,) = writer.records([{"content": "hello", "metadata": {"ok": 1}}])
    # What add stores is checked unless it is the very object records() checked: a
    # replacement (as the image extraction makes) must not pass unchecked.
    bad = replace(record, metadata={"x": float("nan")})
    with pytest.raises(InputError, match="not JSON-serialisable"):
        writer.add([bad], scope=memory._scope(None, None))
    assert memory.stats().messages == 0
