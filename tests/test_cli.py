"""The CLI, run as a real subprocess, exactly as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_cli, tiny_locomo, write_json


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"ARBORMEM_DB": str(tmp_path / "cli.db"), "ARBORMEM_EMBEDDER": "hash"}


def test_ingest_search_sessions_show(tmp_path: Path, env: dict[str, str]) -> None:
    chat = write_json(
        tmp_path / "chat.json",
        [
            {"role": "user", "content": "My sister Sarah is allergic to peanuts."},
            {"role": "assistant", "content": "Noted, no peanuts for Sarah."},
            {"role": "user", "content": "Book a table in Lisbon for Friday."},
        ],
    )
    out = run_cli("ingest", str(chat), env=env)
    assert out.returncode == 0, out.stderr
    assert "3 messages in 1 session(s)" in out.stdout
    found = run_cli("search", "what is Sarah allergic to", "-k", "2", "--json", env=env)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits[0]["content"] == "My sister Sarah is allergic to peanuts."
    assert {"score", "signals", "session", "timestamp", "message_ids"} <= set(hits[0])
    text = run_cli("search", "Lisbon table", "--neighbors", "1", env=env)
    assert "> user: Book a table in Lisbon for Friday." in text.stdout
    sessions = json.loads(run_cli("sessions", "--json", env=env).stdout)
    assert [s["id"] for s in sessions] == ["session-1"] and sessions[0]["message_count"] == 3
    shown = run_cli("show", "session-1", "--json", env=env).stdout.strip().splitlines()
    assert [json.loads(line)["index"] for line in shown] == [0, 1, 2]
    one = run_cli("show", hits[0]["id"], env=env)
    assert "peanuts" in one.stdout


def test_scope_flags_and_default_db(tmp_path: Path) -> None:
    env = {"ARBORMEM_EMBEDDER": "hash", "XDG_DATA_HOME": str(tmp_path / "xdg")}
    chat = write_json(tmp_path / "c.json", [{"role": "user", "content": "alice likes tea"}])
    assert run_cli("--user", "alice", "ingest", str(chat), env=env).returncode == 0
    assert (tmp_path / "xdg" / "arbormem" / "memory.db").exists()
    assert json.loads(run_cli("--user", "bob", "search", "tea", "--json", env=env).stdout) == []
    assert len(json.loads(run_cli("-u", "alice", "search", "tea", "--json", env=env).stdout)) == 1
    db = tmp_path / "explicit.db"
    assert run_cli("--db", str(db), "ingest", str(chat), env=env).returncode == 0
    assert db.exists()


def test_ingest_locomo_and_jsonl(tmp_path: Path, env: dict[str, str]) -> None:
    conv = write_json(tmp_path / "conv-x.json", tiny_locomo())
    out = run_cli("ingest", str(conv), "--json", env=env)
    assert json.loads(out.stdout)["files"][0] == {
        "file": str(conv),
        "format": "locomo",
        "messages": 6,
        "sessions": 2,
        "skipped": 0,
    }
    hits = json.loads(run_cli("search", "marathon Lisbon", "--json", env=env).stdout)
    assert hits[0]["speaker"] == "Ben"
    assert hits[0]["timestamp"].startswith("2024-04-20T18:30")


def test_a_bad_record_in_a_later_file_stores_no_file(tmp_path: Path, env: dict[str, str]) -> None:
    good = write_json(tmp_path / "good.json", [{"role": "user", "content": "Leo likes chess."}])
    bad = write_json(tmp_path / "bad.json", [{"role": "wizard", "content": "hi"}])
    out = run_cli("ingest", str(good), str(bad), env=env)
    assert out.returncode == 1 and "bad.json" in out.stderr and "role" in out.stderr
    # Nothing stored, not even the new empty store.
    assert "no store at" in run_cli("search", "chess", "--json", env=env).stderr
    # Fixed, both go in, each counted on its own line.
    write_json(bad, [{"role": "user", "content": "Ana plays go."}, {"content": "and chess"}])
    out = run_cli("ingest", str(good), str(bad), "--json", env=env)
    assert [f["messages"] for f in json.loads(out.stdout)["files"]] == [1, 2]


def test_bad_file_is_one_clean_line_and_exit_1(tmp_path: Path, env: dict[str, str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "fine"}\n{"role": "user", "content": null}\n')
    out = run_cli("ingest", str(bad), env=env)
    assert out.returncode == 1
    assert out.stderr.strip() == f"Error: {bad} line 2: 'content': must be a string (got null)"
    assert "Traceback" not in out.stderr
    assert "no store at" in run_cli("sessions", "--json", env=env).stderr


def test_out_of_range_values_are_one_clean_line(tmp_path: Path, env: dict[str, str]) -> None:
    chat = write_json(tmp_path / "c.json", [{"role": "user", "content": "Leo likes chess."}])
    assert run_cli("ingest", str(chat), env=env).returncode == 0
    cases = [
        (["context", "chess", "--budget", "0"], 2, "--budget"),
        (["context", "chess"], 1, "ARBORMEM_CONTEXT_BUDGET"),
        (["export", str(tmp_path / "no-such-dir" / "x.json")], 1, "no-such-dir"),
        (["search", "chess", "-k", "100000000000000000000"], 1, "'k'"),
        (["search", "chess", "--neighbors", "-1"], 2, "--neighbors"),
        (["search", "chess", "-k", "100", "-n", "10000"], 2, "--neighbors"),  # ran out of memory
        (["search", "chess", "--since", "0001-01-01T00:00:00+01:00"], 1, "out of range"),
    ]
    for args, code, named in cases:
        extra = {"ARBORMEM_CONTEXT_BUDGET": "5"} if args == ["context", "chess"] else {}
        out = run_cli(*args, env={**env, **extra})
        assert (out.returncode, "Traceback" in out.stderr) == (code, False), (args, out.stderr)
        assert named in out.stderr, (args, out.stderr)


def test_forget_export_import_reembed(tmp_path: Path, env: dict[str, str]) -> None:
    chat = write_json(
        tmp_path / "chat.json",
        [
            {"role": "user", "content": "the wifi password is tangerine", "session": "s1"},
            {"role": "user", "content": "the door code is 1234", "session": "s2"},
        ],
    )
    run_cli("ingest", str(chat), env=env)
    hit = json.loads(run_cli("search", "wifi password", "--json", env=env).stdout)[0]
    refused = run_cli("forget", hit["id"], env=env, input="n\n")
    assert "Nothing forgotten" in refused.stderr and refused.stdout == ""
    # The question goes to stderr: with --json, stdout stays one JSON document.
    out = run_cli("forget", hit["id"], "--json", env=env, input="y\n")
    assert json.loads(out.stdout)["messages"] == 1 and "for good?" in out.stderr
    assert run_cli("forget", "--session", "s2", "--thread", env=env).returncode == 2
    dump = tmp_path / "dump.json"
    assert run_cli("export", str(dump), env=env).returncode == 0
    other = {**env, "ARBORMEM_DB": str(tmp_path / "other.db")}
    imported = run_cli("import", str(dump), "--json", env=other)
    assert json.loads(imported.stdout) == {
        "threads": 1,
        "messages": 1,
        "skipped": 0,
        "archived": 0,
        "not_archived": 0,
        "session_states": 0,
        "records": 0,
        "images": 0,
    }
    stdout_dump = json.loads(run_cli("export", env=other).stdout)
    assert stdout_dump["threads"] == json.loads(dump.read_text())["threads"]
    third = {**env, "ARBORMEM_DB": str(tmp_path / "third.db")}
    piped = run_cli("import", "-", "--json", env=third, input=json.dumps(stdout_dump))
    assert json.loads(piped.stdout)["messages"] == 1, piped.stderr
    # A byte-order mark is read past, as in a file.
    fourth = {**env, "ARBORMEM_DB": str(tmp_path / "fourth.db")}
    marked = run_cli("import", "-", env=fourth, input="\ufeff" + json.dumps(stdout_dump))
    assert marked.returncode == 0, marked.stderr
    bad = run_cli("import", "-", env=third, input="{not json")
    assert bad.returncode == 1 and "<stdin>" in bad.stderr
    re = run_cli("--embedder", "hash:32", "reembed", "--json", env=other)
    assert json.loads(re.stdout) == {"embedded": 1, "pruned": 1}


def test_bench_locomo_json(tmp_path: Path, env: dict[str, str]) -> None:
    conv = write_json(tmp_path / "conv-x.json", tiny_locomo())
    out = run_cli(
        "bench",
        "locomo",
        str(tmp_path),
        "--systems",
        "arbormem,bm25,window,full",
        "--budget",
        "200",
        "--json",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["dataset"] == {
        "files": [str(conv)],
        "conversations": 1,
        "turns": 6,
        "questions": 3,
    }
    arbor = result["systems"]["arbormem"]
    for key in (
        "recall@1",
        "recall@5",
        "recall@10",
        "recall@20",
        "ndcg@5",
        "session_hit@1",
        "budget_recall@200",
        "context_tokens_mean",
        "query_ms_p50",
        "query_ms_p95",
        "ingest_turns_per_s",
        "by_category",
        "config",
    ):
        assert key in arbor
    assert result["systems"]["full"]["budget_recall@200"] == 1.0
    assert set(arbor["by_category"]) == {"1", "3", "4"}
    assert arbor["config"]["embedder"] == "hash/256"
    table = run_cli("bench", "locomo", str(conv), "--systems", "arbormem", env=env)
    assert "R@10" in table.stdout


def test_every_command_is_documented() -> None:
    from arbormem.cli import cli

    docs = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()

    def walk(group: object, prefix: str) -> list[str]:
        names = []
        for name, cmd in getattr(group, "commands", {}).items():
            full = f"{prefix} {name}".strip()
            names.append(full)
            names.extend(walk(cmd, full))
        return names

    for command in walk(cli, ""):
        assert f"## arbormem {command}\n" in docs, f"'arbormem {command}' missing from docs/cli.md"


def test_cli_reference_is_generated_from_the_code() -> None:
    from arbormem.cli.docs import render_cli_reference

    docs = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    assert docs == render_cli_reference(), "docs/cli.md is stale: run python -m arbormem.cli.docs"


@pytest.mark.parametrize(
    ("config", "extra_env", "named"),
    [
        ("contxt_budget = 100\n", {}, "unknown setting 'contxt_budget'"),
        ('[llm]\nmodel = "x"\ncontext_budget = 500\n', {}, "must come before the [llm] table"),
        (b"# caf\xe9\nuser = 'bob'\n", {}, "not UTF-8"),
        ("context_window = 0\n", {}, "context_window = 0"),
        ("", {"ARBORMEM_CONTEXT_WINDOW": "10"}, "ARBORMEM_CONTEXT_WINDOW"),
        ("", {"ARBORMEM_SESSION_GAP": "inf"}, "ARBORMEM_SESSION_GAP"),
        ("session_gap = -5\n", {}, "session_gap = -5"),
        ("", {"ARBORMEM_EMBEDDER": "hash:abc"}, "hash:abc"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    tmp_path: Path, env: dict[str, str], config: str | bytes, extra_env: dict[str, str], named: str
) -> None:
    chat = write_json(tmp_path / "c.json", [{"content": "a chocolate cake for Leo"}])
    assert run_cli("ingest", str(chat), env=env).returncode == 0
    path = tmp_path / "config.toml"
    if isinstance(config, bytes):
        path.write_bytes(config)
    else:
        path.write_text(config)
    out = run_cli("context", "cake", env={**env, "ARBORMEM_CONFIG": str(path), **extra_env})
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert named in out.stderr


def test_a_store_path_with_a_tilde_is_in_the_home_folder(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "ARBORMEM_EMBEDDER": "hash", "ARBORMEM_DB": "~/x.db"}
    chat = write_json(tmp_path / "c.json", [{"content": "a chocolate cake for Leo"}])
    assert run_cli("ingest", str(chat), env=env).returncode == 0
    assert (tmp_path / "x.db").exists()
    assert run_cli("stats", env=env).returncode == 0


def test_content_a_terminal_cannot_show_is_replaced(tmp_path: Path, env: dict[str, str]) -> None:
    chat = write_json(tmp_path / "c.json", [{"content": "birthday cake \U0001f382 for Leo"}])
    assert run_cli("ingest", str(chat), env=env).returncode == 0
    out = run_cli("search", "birthday cake", env={**env, "PYTHONIOENCODING": "latin-1"})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "birthday cake ? for Leo" in out.stdout


def test_reading_commands_never_create_a_store(tmp_path: Path, env: dict[str, str]) -> None:
    typo = tmp_path / "no-such-folder" / "memroy.db"
    for args in (["search", "x"], ["stats"], ["sessions"], ["tree"], ["context", "x"]):
        out = run_cli("--db", str(typo), *args, env=env)
        assert out.returncode == 1 and "no store at" in out.stderr, (args, out.stderr)
    assert not typo.parent.exists()


def test_a_failed_ingest_or_import_leaves_no_new_store_behind(
    tmp_path: Path, env: dict[str, str]
) -> None:
    bad = write_json(tmp_path / "bad.json", [{"role": "user", "content": "hi", "timestamp": "x"}])
    typo = tmp_path / "new-folder" / "deeper" / "typo.db"
    for args in (["ingest", str(bad)], ["import", str(bad)]):
        out = run_cli("--db", str(typo), *args, env=env)
        assert out.returncode == 1, out.stderr
        # The empty store it left made 'sessions' on that path say "No sessions."
        assert not (tmp_path / "new-folder").exists(), args
        again = run_cli("--db", str(typo), "sessions", env=env)
        assert again.returncode == 1 and "no store at" in again.stderr
    # A '#' in the name (read as a URI fragment) left the store and a stray file.
    hashed = tmp_path / "new#1.db"
    assert run_cli("--db", str(hashed), "ingest", str(bad), env=env).returncode == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]
    # A link to a store not made yet is the user's: kept, and so is what it made.
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "real.db")
    assert run_cli("--db", str(link), "ingest", str(bad), env=env).returncode == 1
    assert link.is_symlink()
    # A store that existed before is kept, whatever the failure.
    good = write_json(tmp_path / "good.json", [{"role": "user", "content": "hello"}])
    assert run_cli("--db", str(typo), "ingest", str(good), env=env).returncode == 0
    assert run_cli("--db", str(typo), "ingest", str(bad), env=env).returncode == 1
    assert typo.exists()


def test_option_ranges_are_usage_errors(tmp_path: Path, env: dict[str, str]) -> None:
    for args, option in (
        (["reorganize", "--threshold", "-1"], "--threshold"),
        (["tree", "-d", "0"], "--depth"),
        (["bench", "scale", "--turns", "1k", "--queries", "0"], "--queries"),
        (["bench", "locomo", str(tmp_path), "--systems", ","], "--systems"),
        # Options the action would ignore (the last export, or --undo, used to win).
        (["tree", "--json", "--mermaid"], "--json or --mermaid"),
        (["reorganize", "--log", "--undo", "1"], "--log"),
        (["reorganize", "--undo", "1", "--prune-trivial"], "--prune-trivial"),
        (["reorganize", "--undo", "1", "--threshold", "0.7"], "--threshold"),
    ):
        out = run_cli(*args, env=env)
        assert out.returncode == 2 and option in out.stderr, (args, out.stderr)


def test_ingest_builds_the_search_indexes_the_first_search_would_have_built(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Past ann_threshold vectors the first search of a thread built an approximate
    # index on the spot (minutes at a million turns), without a word.
    records = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"note {i} about topic {i // 8}"}
        for i in range(120)
    ]
    chat = write_json(tmp_path / "big.json", records)
    env = {**env, "ARBORMEM_ANN_THRESHOLD": "50"}
    out = run_cli("ingest", str(chat), "--json", env=env)
    assert out.returncode == 0, out.stderr
    index = json.loads(out.stdout)["search_index"]
    assert (index["vectors"], index["approximate"]) == (120, True)
    assert index["topics"] > 0
    (described,) = (tmp_path / "cli.db.ann").glob("thread-*.json")
    saved = json.loads(described.read_text())
    assert saved["count"] == 120
    found = run_cli("search", "note 77 topic 9", "-k", "1", "--json", env=env)
    assert json.loads(found.stdout)[0]["content"] == "note 77 about topic 9"


INTERRUPTED_PREPARE = """
import sys
import arbormem.memory

def interrupted(self):
    raise KeyboardInterrupt  # Ctrl-C while the indexes are built

arbormem.memory.Memory.prepare_search = interrupted
from arbormem.cli import main
sys.argv = ["arbormem", *sys.argv[1:]]
main()
"""


def test_ctrl_c_while_preparing_the_indexes_says_the_messages_are_stored(
    tmp_path: Path, env: dict[str, str]
) -> None:
    import subprocess
    import sys

    chat = write_json(tmp_path / "chat.json", [{"role": "user", "content": "hello there"}])
    out = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_PREPARE, "ingest", str(chat)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    # It used to print "Aborted!" and exit 1; running the ingest again stored it twice.
    assert out.returncode == 0, out.stderr
    assert "the 1 messages are stored" in out.stderr and "1 messages" in out.stdout
    assert json.loads(run_cli("stats", "--json", env=env).stdout)["messages"] == 1


def test_a_blank_session_option_is_a_usage_error(tmp_path: Path, env: dict[str, str]) -> None:
    chat = write_json(tmp_path / "chat.json", [{"role": "user", "content": "hello there"}])
    out = run_cli("ingest", "--session", " ", str(chat), env=env)
    assert out.returncode == 2 and "--session" in out.stderr and "chat.json" not in out.stderr


def test_ingest_succeeds_when_the_vector_index_cannot_be_saved(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # A failed save used to end the command with a traceback and exit status 1 after
    # the messages were committed, and running it again stored them twice.
    (tmp_path / "cli.db.ann").write_text("a file where the index folder goes")
    records = [{"role": "user", "content": f"note {i} about topic {i // 8}"} for i in range(80)]
    chat = write_json(tmp_path / "big.json", records)
    env = {**env, "ARBORMEM_ANN_THRESHOLD": "50"}
    out = run_cli("ingest", str(chat), "--json", env=env)
    assert out.returncode == 0, out.stderr
    index = json.loads(out.stdout)["search_index"]
    assert (index["vectors"], index["approximate"], index["saved"]) == (80, True, False)
    assert "could not be saved" in out.stderr
    stats = run_cli("search", "note 33 topic 4", "-k", "1", "--json", env=env)
    assert json.loads(stats.stdout)[0]["content"] == "note 33 about topic 4"


def test_search_json_writes_every_key_of_every_hit(tmp_path: Path, env: dict[str, str]) -> None:
    # A key left out when it had no value made every consumer test for its presence.
    chat = write_json(
        tmp_path / "chat.json",
        [
            {"role": "user", "content": "Leo is allergic to peanuts."},
            {"role": "assistant", "content": "Noted: nothing with peanuts."},
        ],
    )
    assert run_cli("ingest", str(chat), env=env).returncode == 0
    plain = json.loads(run_cli("search", "peanuts", "--json", env=env).stdout)
    near = json.loads(run_cli("search", "peanuts", "-n", "1", "--json", env=env).stdout)
    assert plain and near
    for hit in plain:
        assert hit["superseded_by"] is None and hit["neighbors"] == []
    assert [set(h) for h in plain] == [set(h) for h in near]
    assert any(h["neighbors"] for h in near)
