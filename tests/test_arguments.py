"""Every public entry point checks its arguments: a wrong value is an InputError naming
the field, never a fallback to a default and never a raw TypeError or sqlite3 error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from arbormem import AsyncMemory, ConfigError, InputError, Memory
from arbormem.embed import HashingEmbedder

#: Every Memory method that takes user= and agent=, with arguments that would work.
SCOPED: dict[str, Callable[[Memory, dict[str, Any]], Any]] = {
    "add": lambda m, kw: m.add("another note", **kw),
    "add_many": lambda m, kw: m.add_many([{"content": "another note"}], **kw),
    "search": lambda m, kw: m.search("secret", **kw),
    "get": lambda m, kw: m.get(m.messages()[0].id, **kw),
    "messages": lambda m, kw: m.messages(**kw),
    "sessions": lambda m, kw: m.sessions(**kw),
    "stats": lambda m, kw: m.stats(**kw),
    "forget": lambda m, kw: m.forget(**kw),
    "forget_message": lambda m, kw: m.forget(m.messages()[0].id, **kw),
    "forget_session": lambda m, kw: m.forget(session=m.sessions()[0].id, **kw),
    "current_session": lambda m, kw: m.current_session(**kw),
    "set_mode": lambda m, kw: m.set_mode("code", **kw),
    "context": lambda m, kw: m.context("secret", **kw),
    "tree": lambda m, kw: m.tree(**kw),
    "render_tree": lambda m, kw: m.render_tree(**kw),
    "reorganize": lambda m, kw: m.reorganize(**kw),
    "undo_reorganize": lambda m, kw: m.undo_reorganize(1, **kw),
    "restore_archived": lambda m, kw: m.restore_archived(**kw),
    "tree_log": lambda m, kw: m.tree_log(**kw),
    "tree_tools": lambda m, kw: m.tree_tools(**kw),
    "topic_paths": lambda m, kw: m.topic_paths("secret", **kw),
    "export": lambda m, kw: m.export(**kw),
    "prepare_search": lambda m, kw: m.prepare_search(**kw),
}

#: Ids that are not ids: each must be refused, whatever the call.
BAD_IDS = ["", "   ", "\t\n", 0, 7, b"bob", ["bob"], 1.5, True]


@pytest.mark.parametrize("method", sorted(SCOPED))
def test_a_blank_or_mistyped_id_is_refused_never_the_default_scope(
    memory: Memory, method: str
) -> None:
    # search(user="") searched the default user, and forget(user="") deleted the
    # default user's whole thread.
    memory.add("the safe code is 4711", session="vault")
    before = memory.export()
    for field in ("user", "agent"):
        for bad in BAD_IDS:
            with pytest.raises(InputError) as err:
                SCOPED[method](memory, {field: bad})
            assert err.value.field == field, (field, bad)
    assert memory.export().document["threads"] == before.document["threads"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_scopes_and_async_calls_refuse_a_blank_id_too(memory: Memory, bad: Any) -> None:
    memory.add("the safe code is 4711")
    with pytest.raises(InputError, match="'user'"):
        memory.scopes(bad)
    calls: list[Callable[[AsyncMemory], Any]] = [
        lambda a: a.search("safe code", user=bad),
        lambda a: a.messages(user=bad),
        lambda a: a.forget(user=bad),
        lambda a: a.export(user=bad),
        lambda a: a.stats(agent=bad),
    ]
    wrapped = AsyncMemory(memory=memory)
    for call in calls:
        with pytest.raises(InputError):
            asyncio.run(call(wrapped))
    assert [m.content for m in memory.messages()] == ["the safe code is 4711"]


def test_a_blank_id_in_the_cli_is_a_clean_error(db_path: Path) -> None:
    from .conftest import run_cli

    with Memory(db_path, embedder=HashingEmbedder(16), llm=None) as mem:
        mem.add("the safe code is 4711")
    for args in (("--user", " ", "forget", "--everything-of-user", "--yes"),):
        out = run_cli(*args, env={"ARBORMEM_DB": str(db_path), "ARBORMEM_EMBEDDER": "hash:16"})
        assert out.returncode != 0 and "'user'" in out.stderr
        assert "Traceback" not in out.stderr
    with Memory(db_path, embedder=HashingEmbedder(16), llm=None) as mem:
        assert len(mem.messages()) == 1


# -- item 5: lone surrogates ---------------------------------------------------------------

BAD_TEXT = "caf\udce9"  # what Python makes of a Latin-1 byte read as UTF-8

#: A call with a lone surrogate in one string, and the field the error must name.
SURROGATE_CALLS: list[tuple[str, Callable[[Memory], Any]]] = [
    ("speaker", lambda m: m.add("hi", speaker=BAD_TEXT)),
    ("session", lambda m: m.add("hi", session=BAD_TEXT)),
    ("id", lambda m: m.add("hi", id=BAD_TEXT)),
    ("metadata", lambda m: m.add("hi", metadata={BAD_TEXT: 1})),
    ("metadata", lambda m: m.add("hi", metadata={"k": [BAD_TEXT]})),
    ("user", lambda m: m.add("hi", user=BAD_TEXT)),
    ("agent", lambda m: m.add("hi", agent=BAD_TEXT)),
    ("messages[0].speaker", lambda m: m.add_many([{"content": "hi", "speaker": BAD_TEXT}])),
    (
        "messages[0].metadata",
        lambda m: m.add_many([{"content": "hi", "metadata": {"k": BAD_TEXT}}]),
    ),
    ("session", lambda m: m.add_many([{"content": "hi"}], session=BAD_TEXT)),
    ("query", lambda m: m.search(BAD_TEXT)),
    ("session", lambda m: m.search("hi", session=[BAD_TEXT])),
    ("user", lambda m: m.search("hi", user=BAD_TEXT)),
    ("message_id", lambda m: m.get(BAD_TEXT)),
    ("message_id", lambda m: m.forget(BAD_TEXT)),
    ("session", lambda m: m.forget(session=BAD_TEXT)),
    ("session", lambda m: m.messages(session=BAD_TEXT)),
    ("query", lambda m: m.context(BAD_TEXT)),
    ("system_prompt", lambda m: m.context("hi", system_prompt=BAD_TEXT)),
    ("query", lambda m: m.topic_paths(BAD_TEXT)),
    ("mode", lambda m: m.set_mode(BAD_TEXT)),
    ("user", lambda m: m.scopes(BAD_TEXT)),
]


@pytest.mark.parametrize(("field", "call"), SURROGATE_CALLS, ids=[f for f, _ in SURROGATE_CALLS])
def test_a_lone_surrogate_anywhere_is_an_input_error_naming_the_field(
    memory: Memory, field: str, call: Callable[[Memory], Any]
) -> None:
    # Each of these ended in a raw UnicodeEncodeError from SQLite or the hasher.
    memory.add("hi there", session="s1")
    with pytest.raises(InputError) as err:
        call(memory)
    assert err.value.field == field
    assert [m.content for m in memory.messages()] == ["hi there"]


def test_a_lone_surrogate_in_an_import_or_a_file_names_where(
    memory: Memory, tmp_path: Path
) -> None:
    from arbormem.ingest.formats import read_conversation_file

    memory.add("hi there", speaker="Ana", metadata={"k": "v"}, session="s1")
    for path, value in (
        ("threads", "user"),
        ("threads", "agent"),
        ("sessions", "id"),
        ("messages", "speaker"),
        ("messages", "id"),
    ):
        dump = memory.export()
        thread = dump.document["threads"][0]
        target = {
            "threads": thread,
            "sessions": thread["sessions"][0],
            "messages": thread["sessions"][0]["messages"][0],
        }[path]
        target[value] = BAD_TEXT
        dump_path = tmp_path / "dump.json"
        # Written as JSON writes it: the surrogate as a \udce9 escape, valid UTF-8 text.
        dump_path.write_text(json.dumps(dump.document))
        with pytest.raises(InputError, match="not valid UTF-8") as err:
            memory.import_(dump_path)
        assert str(err.value.field).endswith(value) and err.value.source == str(dump_path)
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"content": "hi"}\n{"content": "yo", "speaker": "caf\\udce9"}\n')
    with pytest.raises(InputError, match="not valid UTF-8") as err:
        memory.add_many(read_conversation_file(chat).records)
    assert err.value.line == 2 and err.value.field == "speaker"
    assert len(memory.messages()) == 1


def test_bytes_that_are_not_utf8_on_the_command_line_are_a_clean_error(db_path: Path) -> None:
    from .conftest import run_cli

    with Memory(db_path, embedder=HashingEmbedder(16), llm=None) as mem:
        mem.add("hi there")
    env = {"ARBORMEM_DB": str(db_path), "ARBORMEM_EMBEDDER": "hash:16"}
    # A str holding \udcff reaches the child's argv as the byte 0xff, which Python
    # reads back as \udcff: what a shell passes for a Latin-1 argument.
    for args in (
        ("search", "caf\udcff"),
        ("show", "caf\udcff"),
        ("forget", "caf\udcff", "--yes"),
        ("--user", "caf\udcff", "stats"),
        ("search", "hi", "--session", "caf\udcff"),
    ):
        out = run_cli(*args, env=env)
        assert out.returncode == 1, (args, out.stderr)
        assert "Traceback" not in out.stderr and "UTF-8" in out.stderr, (args, out.stderr)


# -- item 4: size limits -----------------------------------------------------------------------


def _limited(db_path: Path, **limits: Any) -> Memory:
    return Memory(db_path, embedder=HashingEmbedder(16), llm=None, **limits)


def test_every_name_and_the_metadata_have_a_size_limit(memory: Memory) -> None:
    # A 10 MB speaker name took 14.8 s and 5.4 GB; 50 MB of metadata was accepted.
    long = "n" * 1025  # the default limit is 1 KiB
    memory.add("hi there", session="s1")
    for field, call in [
        ("speaker", lambda m: m.add("hi", speaker=long)),
        ("session", lambda m: m.add("hi", session=long)),
        ("id", lambda m: m.add("hi", id=long)),
        ("user", lambda m: m.add("hi", user=long)),
        ("agent", lambda m: m.add("hi", agent=long)),
        ("role", lambda m: m.add("hi", role=long)),
        ("metadata", lambda m: m.add("hi", metadata={"k": "v" * (64 * 1024)})),
        ("messages[0].speaker", lambda m: m.add_many([{"content": "hi", "speaker": long}])),
        ("message_id", lambda m: m.get(long)),
        ("message_id", lambda m: m.forget(long)),
        ("session", lambda m: m.search("hi", session=long)),
        ("user", lambda m: m.search("hi", user=long)),
        ("query", lambda m: m.search("q" * (1024 * 1024 + 1))),
        ("mode", lambda m: m.set_mode(long)),
        ("user", lambda m: m.scopes(long)),
    ]:
        with pytest.raises(InputError) as err:
            call(memory)
        assert err.value.field == field, (field, err.value)
        assert "over the limit" in str(err.value) or field == "role", err.value
    # At the limits, everything is taken.
    at_limit = "é" * 512  # 1,024 bytes
    stored = memory.add(
        "hi",
        speaker=at_limit,
        session=at_limit,
        id=at_limit,
        user=at_limit,
        agent=at_limit,
        metadata={"k": "v" * (64 * 1024 - 10)},
    )
    assert memory.get(stored.id, user=at_limit, agent=at_limit).speaker == at_limit


def test_the_limits_are_settings(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _limited(db_path, user="bob", agent="bot", max_name_bytes=4, max_metadata_bytes=20) as mem:
        mem.add("hi", speaker="Anna", metadata={"k": "123456789"})
        with pytest.raises(
            InputError, match=r"'speaker': is 5 bytes, over the limit of 4.*max_name_bytes"
        ):
            mem.add("hi", speaker="Annie")
        with pytest.raises(
            InputError, match=r"'metadata'.*over the limit of 20.*max_metadata_bytes"
        ):
            mem.add("hi", metadata={"k": "123456789012"})  # 21 bytes as JSON
        with pytest.raises(InputError, match="'user'"):
            mem.messages(user="alice")
    monkeypatch.setenv("ARBORMEM_MAX_NAME_BYTES", "3000")
    with _limited(db_path) as mem:
        assert mem.add("hi", speaker="s" * 3000).speaker == "s" * 3000
        assert mem.limits.name_bytes == 3000
    monkeypatch.setenv("ARBORMEM_MAX_NAME_BYTES", "0")
    with pytest.raises(ConfigError, match="ARBORMEM_MAX_NAME_BYTES"):
        _limited(db_path)
    monkeypatch.delenv("ARBORMEM_MAX_NAME_BYTES")
    with pytest.raises(InputError, match="'max_metadata_bytes'"):
        _limited(db_path, max_metadata_bytes="lots")
    with pytest.raises(InputError, match=r"'user'.*over the limit of 4"):
        _limited(db_path, max_name_bytes=4, user="alice", agent="bot")


def test_an_import_over_the_limits_names_the_field(memory: Memory, db_path: Path) -> None:
    memory.add("hi there", speaker="Ana")
    dump = memory.export()
    dump.document["threads"][0]["user"] = "a-long-user-id"
    with _limited(db_path.with_name("small.db"), max_name_bytes=9) as small:
        with pytest.raises(InputError, match="is 14 bytes, over the limit of 9") as err:
            small.import_(dump)
        assert err.value.field == "threads[0].user"
        assert small.scopes() == []
        dump.document["threads"][0]["user"] = "alice"
        dump.document["threads"][0]["sessions"][0]["messages"][0]["speaker"] = "Anastasia-Maria"
        with pytest.raises(InputError, match="over the limit of 9") as err:
            small.import_(dump)
        assert err.value.field == "threads[0].sessions[0].messages[0].speaker"


# -- item 6: wrong types -------------------------------------------------------------------

#: Calls with a wrong value, and the field the InputError must name. Each raised a raw
#: TypeError, ValueError, OverflowError or sqlite3 error, or (the flags) was taken as
#: true: export(everything="no") exported every user's messages.
WRONG_VALUES: list[tuple[str, Callable[[Memory], Any]]] = [
    ("messages", lambda m: m.add_many(None)),  # type: ignore[arg-type]
    ("messages", lambda m: m.add_many({"content": "one message"})),
    ("messages", lambda m: m.add_many("one message")),  # type: ignore[arg-type]
    ("progress", lambda m: m.add_many([{"content": "x"}], progress=5)),  # type: ignore[arg-type]
    ("source", lambda m: m.import_(None)),  # type: ignore[arg-type]
    ("source", lambda m: m.import_(b"dump.json")),  # type: ignore[arg-type]
    ("dest", lambda m: m.export("")),
    ("dest", lambda m: m.export(Path("."))),
    ("dest", lambda m: m.export(5)),  # type: ignore[arg-type]
    ("dest", lambda m: m.export("out\x00.json")),
    ("everything", lambda m: m.export(everything="no")),  # type: ignore[arg-type]
    ("message_id", lambda m: m.get(["x"])),  # type: ignore[arg-type]
    ("message_id", lambda m: m.forget(10**30)),  # type: ignore[arg-type]
    ("metadata", lambda m: m.add("x", metadata="x")),  # type: ignore[arg-type]
    ("metadata", lambda m: m.add("x", metadata=[("a", 1)])),  # type: ignore[arg-type]
    ("session", lambda m: m.add("x", session=1.5)),  # type: ignore[arg-type]
    ("session", lambda m: m.add("x", session=object())),  # type: ignore[arg-type]
    ("budget_tokens", lambda m: m.context("x", budget_tokens=None)),
    ("paths", lambda m: m.context("x", paths=-1)),
    ("k", lambda m: m.context("x", k="5")),  # type: ignore[arg-type]
    ("mode", lambda m: m.context("x", mode="poetry")),
    ("system_prompt", lambda m: m.context("x", system_prompt=5)),  # type: ignore[arg-type]
    ("mode", lambda m: m.set_mode(None, user="newcomer")),  # type: ignore[arg-type]
    ("mode", lambda m: m.set_mode("poetry", user="newcomer")),
    ("all_agents", lambda m: m.search("x", all_agents="yes")),  # type: ignore[arg-type]
    ("drill", lambda m: m.topic_paths("x", drill=None)),  # type: ignore[arg-type]
    ("log_id", lambda m: m.undo_reorganize({})),  # type: ignore[arg-type]
    ("depth", lambda m: m.render_tree(depth=-1)),
    ("leaves", lambda m: m.render_tree(leaves="no")),  # type: ignore[arg-type]
    ("messages", lambda m: m.tree(messages=None)),  # type: ignore[arg-type]
    ("prune_trivial_leaves", lambda m: m.reorganize(prune_trivial_leaves="yes")),  # type: ignore[arg-type]
    ("prune", lambda m: m.reembed(prune="no")),  # type: ignore[arg-type]
    ("progress", lambda m: m.reembed(progress="bar")),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("field", "call"), WRONG_VALUES, ids=[f for f, _ in WRONG_VALUES])
def test_a_wrong_value_is_an_input_error_naming_the_field(
    memory: Memory, field: str, call: Callable[[Memory], Any]
) -> None:
    memory.add("hi there", session="s1")
    memory.add("hello bob", user="bob")
    before = memory.export(everything=True)
    with pytest.raises(InputError) as err:
        call(memory)
    assert err.value.field == field
    assert memory.export(everything=True).document["threads"] == before.document["threads"]
    assert [s.user for s in memory.scopes()] == ["default", "bob"]  # nothing made either


def test_wrong_values_through_async_memory_and_the_tree_tools(memory: Memory) -> None:
    wrapped = AsyncMemory(memory=memory)
    with pytest.raises(InputError, match="'messages'"):
        asyncio.run(wrapped.add_many(None))  # list(None) raised a TypeError
    with pytest.raises(InputError, match="'source'"):
        asyncio.run(wrapped.import_(None))
    # The tree tools answer a model, so a bad call is an answer, never an exception.
    tools = memory.tree_tools()
    for name, arguments in (([], {}), (None, None), ({"a": 1}, "{}"), ("view_node", [1])):
        assert "error" in tools.call(name, arguments)  # type: ignore[arg-type]


def test_wrong_values_when_opening_a_store_name_the_argument(tmp_path: Path) -> None:
    for kwargs, field in (
        ({"path": 5}, "path"),
        ({"path": ""}, "path"),
        ({"path": b"memory.db"}, "path"),
        ({"tree": "yes"}, "tree"),
        ({"recall": {"k": 5}}, "recall"),
        ({"backend": "sqlite"}, "backend"),
        ({"max_name_bytes": 0}, "max_name_bytes"),
        ({"llm": "gpt-4o"}, "llm"),  # a model name is not a client: it failed at close()
    ):
        with pytest.raises(InputError) as err:
            Memory(**{"path": tmp_path / "m.db", "embedder": "hash", "llm": None, **kwargs})
        assert err.value.field == field
    assert list(tmp_path.iterdir()) == []  # no file left behind


def test_a_timestamp_string_has_a_length_limit(memory: Memory) -> None:
    # Ten million digits were read as a date (1111-11-11), and a long string that was
    # not one came back whole in the error message.
    for stamp in ("1" * 10_000_000, "2024-01-01T" + "1" * 1000, "soon " * 100_000):
        with pytest.raises(InputError, match="characters long") as err:
            memory.add("hi", timestamp=stamp)
        assert err.value.field == "timestamp" and len(str(err.value)) < 500
        with pytest.raises(InputError, match="characters long"):
            memory.search("hi", since=stamp)
    assert memory.messages() == []
