"""Bad input gets a clear error naming the place and the fix, and changes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arbormem import ConfigError, InputError, Memory, MessageTooLarge, StoreError
from arbormem.embed import HashingEmbedder, get_embedder
from arbormem.ingest.formats import read_conversation_file

from .conftest import write_json


def _nested(levels: int) -> dict:
    """{"a": {"a": ... 1}}, built without recursion."""
    node: dict = {"a": 1}
    for _ in range(levels - 1):
        node = {"a": node}
    return node


def _count(memory: Memory) -> int:
    return len(memory.messages())


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        ({"role": "user", "content": None}, "'messages[1].content': must be a string (got null)"),
        ({"role": "user", "content": 42}, "'messages[1].content': must be a string (got int)"),
        ({"role": "user", "content": "   "}, "'messages[1].content': is empty"),
        ({"role": "wizard", "content": "hi"}, "'messages[1].role': unknown role 'wizard'"),
        (
            {"role": "user", "content": "hi", "timestamp": "next tuesday"},
            "'messages[1].timestamp': cannot read 'next tuesday'",
        ),
        (
            {"role": "user", "content": "hi", "metadata": [1, 2]},
            "'messages[1].metadata': must be an object",
        ),
        ({"role": "user", "content": "hi", "speaker": ""}, "'messages[1].speaker'"),
        # Stored, NaN made every --json output and export invalid JSON.
        (
            {"role": "user", "content": "hi", "metadata": {"x": float("nan")}},
            "'messages[1].metadata': is not JSON-serialisable",
        ),
        (
            {"role": "user", "content": "hi", "metadata": {"x": [float("inf")]}},
            "'messages[1].metadata': is not JSON-serialisable",
        ),
        # Accepted, 975 levels broke every later export with a RecursionError.
        (
            {
                "role": "user",
                "content": "hi",
                "metadata": _nested(975),
            },
            "'messages[1].metadata': is nested more than 64 levels deep",
        ),
        ({"content": "bad \ud800 surrogate"}, "not valid UTF-8"),
    ],
)
def test_add_many_rejects_bad_messages_and_stores_none(
    memory: Memory, message: dict, fragment: str
) -> None:
    memory.add("already here")
    with pytest.raises(InputError) as err:
        memory.add_many([{"role": "user", "content": "fine"}, message])
    assert fragment in str(err.value)
    assert _count(memory) == 1


def test_role_aliases_are_normalised(memory: Memory) -> None:
    stored = memory.add_many(
        [
            {"role": "Human", "content": "a"},
            {"role": "ai", "content": "b"},
            {"role": "function", "content": "c"},
            {"role": "developer", "content": "d"},
        ]
    )
    assert [m.role for m in stored] == ["user", "assistant", "tool", "system"]


def test_messages_over_the_limit_are_refused_with_the_limit_stated(db_path: Path) -> None:
    from arbormem.embed import HashingEmbedder

    with Memory(db_path, embedder=HashingEmbedder(16), max_message_bytes=1000) as mem:
        mem.add("x" * 1000)
        with pytest.raises(MessageTooLarge) as err:
            mem.add("y" * 1001)
        assert "1,001 bytes, over the limit of 1,000" in str(err.value)
        assert "split it" in str(err.value)
        assert len(mem.messages()) == 1


def test_default_limit_is_one_mebibyte(memory: Memory) -> None:
    memory.add("é" * (512 * 1024))  # exactly 1 MiB of UTF-8
    with pytest.raises(MessageTooLarge):
        memory.add("a" * (1024 * 1024 + 1))


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text('[\n {"role": "user", "content": "hi"},\n {"role": "user" "content": "x"}\n]')
    with pytest.raises(InputError) as err:
        read_conversation_file(path)
    assert str(path) in str(err.value) and "line 3" in str(err.value)


def test_json_lines_in_a_json_file_are_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "user", "content": "yo"}\n')
    with pytest.raises(InputError, match=r"line 2.*name the file \.jsonl"):
        read_conversation_file(path)


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n\n{"role": "user", "content": }\n')
    with pytest.raises(InputError) as err:
        read_conversation_file(path)
    assert f"{path} line 3" in str(err.value)


def test_json_nested_past_the_stack_is_an_input_error(tmp_path: Path) -> None:
    # It ended ingest and import in a RecursionError traceback.
    deep = "[" * 100_000 + "]" * 100_000
    for name, text, where in (
        ("deep.json", deep, "deep.json"),
        ("deep.jsonl", '{"content": "hi"}\n' + deep, "deep.jsonl line 2"),
    ):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(InputError, match="nested too deeply") as err:
            read_conversation_file(path)
        assert where in str(err.value)


def test_jsonl_field_errors_name_the_line(tmp_path: Path, memory: Memory) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [{"role": "user", "content": "hi"}] * 11 + [{"role": "user", "content": None}]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    conv = read_conversation_file(path)
    with pytest.raises(InputError) as err:
        memory.add_many(conv.records)
    assert f"{path} line 12: 'content': must be a string (got null)" in str(err.value)
    assert _count(memory) == 0


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(
        b'{"role": "user", "content": "ok"}\n{"role": "user", "content": "\xff\xfe"}\n'
    )
    with pytest.raises(InputError) as err:
        read_conversation_file(path)
    assert "line 2" in str(err.value) and "UTF-8" in str(err.value)


def test_unrecognised_layout_says_what_is_expected(tmp_path: Path) -> None:
    path = write_json(tmp_path / "odd.json", {"hello": "world"})
    with pytest.raises(InputError) as err:
        read_conversation_file(path)
    assert "expected a list of messages" in str(err.value)


def test_message_that_is_not_an_object(tmp_path: Path) -> None:
    path = write_json(tmp_path / "list.json", [{"role": "user", "content": "a"}, "b"])
    with pytest.raises(InputError) as err:
        read_conversation_file(path)
    assert "[1]" in str(err.value) and "JSON object" in str(err.value)


def test_missing_content_is_named(tmp_path: Path) -> None:
    path = write_json(tmp_path / "list.json", [{"role": "user"}])
    with pytest.raises(InputError) as err:
        read_conversation_file(path)
    assert "'[0].content': missing" in str(err.value)


def test_failed_import_leaves_the_store_exactly_as_it_was(memory: Memory, tmp_path: Path) -> None:
    memory.add("keep me", session="s1")
    before = memory.export()
    dump = memory.export()
    dump.document["threads"][0]["user"] = "someone-else"
    dump.document["threads"][0]["sessions"][0]["messages"][0]["id"] = "fresh-id"
    dump.document["threads"][0]["sessions"][0]["messages"].append(
        {"id": "bad", "role": "user", "content": "ok", "timestamp": "not a time"}
    )
    with pytest.raises(InputError) as err:
        memory.import_(dump)
    assert "timestamp" in str(err.value)
    after = memory.export()
    assert before.document["threads"] == after.document["threads"]
    assert memory.scopes() == [memory.scope]


def test_failed_add_after_validation_rolls_back(memory: Memory) -> None:
    memory.add("one", id="dup")
    # The store refuses the stored id; the error then names the record that gave it.
    with pytest.raises(InputError, match=r"'messages\[1\]\.id': message id 'dup' is already"):
        memory.add_many([{"content": "two"}, {"content": "three", "id": "dup"}])
    assert [m.content for m in memory.messages()] == ["one"]


def test_dates_at_the_ends_of_the_calendar_are_stored_and_searched(
    memory: Memory, tmp_path: Path
) -> None:
    # Year 5 used to be stored as "5-01-01..." and then every read of the thread failed;
    # the last days of year 9999 overflowed the date arithmetic of "next week" and kin.
    memory.add_many(
        [
            {"role": "user", "content": "ancient skiing trip", "timestamp": "0005-01-01T00:00:00Z"},
            {"role": "user", "content": "we went skiing", "timestamp": "9999-12-20T10:00:00Z"},
            {"role": "assistant", "content": "fun", "timestamp": "9999-12-31T23:59:59Z"},
        ]
    )
    questions = [
        "skiing in December?",
        "skiing tomorrow",
        "skiing next year",
        "skiing next week",
        "skiing 3 years ago",
        "skiing in December 9999",
        "skiing in January",
        "skiing in 0000",
    ]
    for question in questions:
        assert "skiing" in memory.search(question, k=3)[0].message.content
    assert 5 in [s.started_at.year for s in memory.sessions()]
    memory.export(tmp_path / "out.json")
    assert '"0005-01-01T00:00:00' in (tmp_path / "out.json").read_text()


def test_out_of_range_arguments_are_input_errors(memory: Memory, tmp_path: Path) -> None:
    memory.add("Leo is allergic to peanuts.")
    for kwargs, field in [
        ({"k": 10**20}, "'k'"),
        ({"k": 0}, "'k'"),
        ({"neighbors": -1}, "'neighbors'"),
        ({"neighbors": 101}, "'neighbors': must be from 0 to 100"),
        ({"k": 10_000, "neighbors": 100}, "'neighbors': k=10,000 hits with 100 neighbours"),
        ({"k": "3"}, "'k'"),
        ({"session": 3}, "'session'"),
        ({"role": [None]}, "'role'"),
        ({"role": "usr"}, "'role': unknown role 'usr'"),
        ({"session": []}, "'session': is empty"),
    ]:
        with pytest.raises(InputError, match=field):
            memory.search("peanuts", **kwargs)
    for budget in (0, 5, True, "lots"):
        with pytest.raises(InputError, match="'budget_tokens'"):
            memory.context("peanuts", budget_tokens=budget)
    for kwargs, field in [
        ({"context_window": 0}, "'context_window'"),
        ({"context_window": 10}, "'context_window'"),
        ({"reply_tokens": -3}, "'reply_tokens'"),
        ({"reply_tokens": "x"}, "'reply_tokens'"),
    ]:
        with pytest.raises(InputError, match=field):
            memory.context("peanuts", **kwargs)
    for threshold in (-1, 5, float("nan"), "0.5"):
        with pytest.raises(InputError, match="'similarity_threshold'"):
            memory.reorganize(similarity_threshold=threshold)  # type: ignore[arg-type]
    small = memory.context("peanuts", context_window=36)
    assert small.prompt_tokens <= 36 - 4
    with pytest.raises(InputError, match="cannot write the export") as err:
        memory.export(tmp_path / "missing-folder" / "out.json")
    assert "missing-folder" in str(err.value)
    assert not (tmp_path / "missing-folder").exists()


def test_export_never_writes_over_the_store_or_a_file_named_like_its_temporary(
    memory: Memory, db_path: Path
) -> None:
    memory.add("keep me")
    for target in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}.ann") / "x.json"):
        # Exporting onto the database replaced it: every later command failed with
        # "file is not a database".
        with pytest.raises(InputError, match="this store's own file"):
            memory.export(target)
    assert [m.content for m in memory.messages()] == ["keep me"]
    # A store opened by a relative path, then a change of working folder.
    elsewhere = db_path.parent / "elsewhere"
    elsewhere.mkdir()
    here = Path.cwd()
    os.chdir(db_path.parent)
    try:
        with Memory(db_path.name, embedder=HashingEmbedder(8), llm=None) as relative:
            os.chdir(elsewhere)
            with pytest.raises(InputError, match="this store's own file"):
                relative.export(db_path)
    finally:
        os.chdir(here)
    assert not (elsewhere / db_path.name).exists()
    out = db_path.with_name("out.json")
    bystander = out.with_name("out.json.tmp")
    bystander.write_text("someone else's file")
    memory.export(out)
    assert bystander.read_text() == "someone else's file"
    assert json.loads(out.read_text())["threads"][0]["sessions"]
    assert sorted(p.name for p in out.parent.glob("out.json*")) == ["out.json", "out.json.tmp"]


def test_another_programs_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    import sqlite3

    from arbormem.errors import StoreError

    other = tmp_path / "notes.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('buy milk')")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    # Opening it used to switch it to WAL and add arbormem's tables to it.
    with pytest.raises(StoreError, match="another program's SQLite database"):
        Memory(other, llm=None)
    assert other.read_bytes() == before and not Path(f"{other}-wal").exists()
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # an empty file is anyone's: it becomes a store
    with Memory(empty, llm=None) as mem:
        assert mem.messages() == []


def test_user_and_agent_ids_must_be_names(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arbormem.embed import HashingEmbedder
    from arbormem.errors import ConfigError

    from .conftest import run_cli

    # An empty id was stored as given ("scope: /default"); `agent = true` became "True".
    for kwargs, fragment in (
        ({"user": ""}, "'user': must not be blank"),
        ({"agent": True}, "'agent': must be text"),
        ({"user": " bob"}, "'user': must have no spaces around it"),
    ):
        with pytest.raises(InputError, match=fragment):
            Memory(db_path, embedder=HashingEmbedder(8), llm=None, **kwargs)  # type: ignore[arg-type]
    with Memory(db_path, embedder=HashingEmbedder(8), llm=None) as mem:
        with pytest.raises(InputError, match="'agent': must not be blank"):
            mem.add("x", agent=" ")
        # Not the default agent: a blank id is refused in every call (and creates nothing).
        with pytest.raises(InputError, match="'agent': must not be blank"):
            mem.search("x", agent=" ")
        # A thread an earlier version stored under a padded id stays readable and
        # can be forgotten.
        mem.backend.thread(" bob", "default", create=True)
        mem.add("kept under the old id", user=" bob")
        assert [m.content for m in mem.messages(user=" bob")] == ["kept under the old id"]
        assert mem.forget(user=" bob").messages == 1
    config = tmp_path / "config.toml"
    config.write_text("agent = true\n")
    with monkeypatch.context() as patched:
        patched.setenv("ARBORMEM_CONFIG", str(config))
        with pytest.raises(ConfigError, match=r"agent.*must be text"):
            Memory(db_path, embedder=HashingEmbedder(8), llm=None)
    out = run_cli("--user", "", "stats", env={"ARBORMEM_DB": str(db_path)})
    assert out.returncode != 0 and "user" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("stats", env={"ARBORMEM_DB": str(db_path), "ARBORMEM_CONFIG": str(config)})
    assert out.returncode != 0 and "agent" in out.stderr and "Traceback" not in out.stderr


def test_a_context_budget_setting_too_small_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Settings are read when the memory opens: a bad one is refused there, no file made.
    monkeypatch.setenv("ARBORMEM_CONTEXT_BUDGET", "5")
    with pytest.raises(ConfigError, match=r"ARBORMEM_CONTEXT_BUDGET='5'.*at least 32"):
        Memory(tmp_path / "budget.db", embedder=HashingEmbedder(64))
    assert not (tmp_path / "budget.db").exists()


def test_an_id_given_twice_in_one_batch_names_the_record(memory: Memory, tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "dup.json",
        [
            {"id": "m1", "content": "first"},
            {"id": "m2", "content": "x"},
            {"id": "m1", "content": "y"},
        ],
    )
    with pytest.raises(InputError) as err:
        memory.add_many(read_conversation_file(path).records)
    assert "dup.json" in str(err.value) and "[2].id" in str(err.value)
    assert "duplicate message id 'm1'" in str(err.value)
    assert _count(memory) == 0


def test_an_import_index_past_the_integer_range_is_refused(memory: Memory) -> None:
    memory.add("Leo is allergic to peanuts.")
    data = memory.export()
    data.document["threads"][0]["sessions"][0]["messages"][0]["index"] = 2**70
    with pytest.raises(InputError, match="index"):
        Memory(":memory:", embedder="hash").import_(data)


@pytest.mark.parametrize(
    ("where", "setting"),
    [
        ("file", "ann_threshold = 2.5"),
        ("file", "max_message_bytes = 0"),
        ("file", "embedder_max_retries = 2.5"),
        ("env", ("ARBORMEM_ANN_THRESHOLD", "1e3x")),
        ("env", ("ARBORMEM_MAX_MESSAGE_BYTES", "-4")),
    ],
)
def test_whole_number_settings_are_not_cut_down_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, setting: object
) -> None:
    # ann_threshold = 2.5 in the config file used to become 2; True became 1.
    config = tmp_path / "config.toml"
    monkeypatch.setenv("ARBORMEM_CONFIG", str(config))
    if where == "file":
        config.write_text(f"{setting}\n")
        name = str(setting).split(" = ")[0]
        embedder = "openai:text-embedding-3-small" if "embedder" in name else None
    else:
        config.write_text("")
        name, value = setting  # type: ignore[misc]
        monkeypatch.setenv(name, value)
        embedder = None
    with pytest.raises(ConfigError, match=name):
        if embedder:
            get_embedder(embedder)
        else:
            Memory(tmp_path / "m.db", embedder=HashingEmbedder(16))
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize("value", [2.5, True, -1])
def test_a_whole_number_argument_is_refused_by_name(tmp_path: Path, value: object) -> None:
    with pytest.raises(InputError, match="ann_threshold"):
        Memory(tmp_path / "m.db", embedder=HashingEmbedder(16), ann_threshold=value)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="max_message_bytes"):
        Memory(tmp_path / "m.db", embedder=HashingEmbedder(16), max_message_bytes=value)  # type: ignore[arg-type]


def test_token_budgets_must_be_whole(memory: Memory) -> None:
    with pytest.raises(InputError, match="whole number"):
        memory.context("what is for dinner?", budget_tokens=600.5)  # type: ignore[arg-type]


def test_numpy_numbers_are_taken_for_what_they_hold(tmp_path: Path) -> None:
    import numpy as np

    from arbormem.tree.config import TreeConfig

    config = TreeConfig(max_children=np.int64(12), split_threshold=np.float32(0.25))
    assert (config.max_children, type(config.max_children)) == (12, int)
    assert TreeConfig(max_children=12.0).max_children == 12
    with pytest.raises(ConfigError, match="max_children"):
        TreeConfig(max_children=np.float64(12.5))
    with pytest.raises(ConfigError, match="dense_weight"):
        TreeConfig(dense_weight=np.True_)  # type: ignore[arg-type]
    for bad in (np.float32(2.5), np.True_):
        with pytest.raises(InputError, match="ann_threshold"):
            Memory(tmp_path / "m.db", embedder=HashingEmbedder(16), ann_threshold=bad)
    with Memory(
        tmp_path / "m.db", embedder=HashingEmbedder(16), ann_threshold=np.int64(500)
    ) as mem:
        assert mem.backend.dense_cache(mem.embedder).ann_threshold == 500


def test_a_refused_synchronous_setting_creates_no_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="synchronous"):
        Memory(tmp_path / "new" / "m.db", embedder=HashingEmbedder(16), synchronous="fast")
    assert not (tmp_path / "new").exists()


def test_numpy_booleans_and_whole_strings_in_llm_and_store_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from arbormem.llm import LLMConfig

    with pytest.raises(ConfigError, match="timeout"):
        LLMConfig(model="m", timeout=np.True_)  # type: ignore[arg-type]
    config = LLMConfig(model="m", max_retries=2.0, context_window=np.int64(4096))  # type: ignore[arg-type]
    assert (config.max_retries, type(config.max_retries)) == (2, int)
    assert type(config.context_window) is int
    monkeypatch.setenv("ARBORMEM_ANN_THRESHOLD", "1200.0")  # as 1200.0 from TOML is
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(16)) as mem:
        assert mem.backend.dense_cache(mem.embedder).ann_threshold == 1200


@pytest.mark.parametrize("text", ["12.0000000000000001", "1e-400", "9007199254740993.5", "1e400"])
def test_a_whole_number_written_as_text_is_read_exactly(text: str) -> None:
    from arbormem.config import to_whole

    with pytest.raises(ValueError, match="whole number"):
        to_whole(text)
    assert to_whole("9007199254740993.0") == 9007199254740993  # not rounded through a float


def test_an_infinite_llm_timeout_is_refused() -> None:
    from arbormem.llm import LLMConfig

    with pytest.raises(ConfigError, match="finite"):
        LLMConfig(model="m", timeout=float("inf"))


def test_huge_numbers_in_settings_are_config_errors_not_crashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from arbormem.llm import resolve_llm_config

    with pytest.raises(ConfigError, match="context_window"):
        resolve_llm_config(model="m", context_window="1" + "0" * 400)
    monkeypatch.setenv("ARBORMEM_LLM_MAX_RETRIES", "1e999999999999999999")
    with pytest.raises(ConfigError, match="ARBORMEM_LLM_MAX_RETRIES"):
        resolve_llm_config(model="m")
