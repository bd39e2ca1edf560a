"""Scopes and stores from the command line: where the global options go, what an
empty scope says, and what is not a store. Run as a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import run_cli, write_json

HASH = {"ARBORMEM_EMBEDDER": "hash"}


def test_global_options_go_after_the_command_too(tmp_path: Path) -> None:
    db = tmp_path / "after.db"
    chat = write_json(tmp_path / "c.json", [{"role": "user", "content": "sam drinks green tea"}])
    # `search x --user sam` was "No such option '--user'. Did you mean '--since'?"
    added = run_cli("ingest", str(chat), "--db", str(db), "--user", "sam", env=HASH)
    assert added.returncode == 0, added.stderr
    found = run_cli("search", "green tea", "--json", "--db", str(db), "-u", "sam", env=HASH)
    assert found.returncode == 0, found.stderr
    assert [h["content"] for h in json.loads(found.stdout)] == ["sam drinks green tea"]
    assert (
        json.loads(
            run_cli("--db", str(db), "--user", "sam", "sessions", "--json", env=HASH).stdout
        )[0]["message_count"]
        == 1
    )
    # After the command it wins over the environment, as before the command it does.
    env = {**HASH, "ARBORMEM_DB": str(db), "ARBORMEM_USER": "nobody"}
    stats = run_cli("stats", "--json", "--user", "sam", "--read-only", env=env)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["messages"] == 1
    # The same option with two values is an error, not a silent pick.
    both = run_cli("--user", "bob", "sessions", "--user", "sam", "--db", str(db), env=HASH)
    assert both.returncode == 2
    assert "--user is given twice, 'bob' before the command and 'sam' after it" in both.stderr
    same = run_cli("--user", "sam", "sessions", "--user", "sam", "--db", str(db), env=HASH)
    assert same.returncode == 0 and "session-1" in same.stdout
    helped = run_cli("search", "--help")
    assert "may also be given here, after the command" in helped.stdout


def test_an_empty_scope_names_the_scopes_the_store_holds(tmp_path: Path) -> None:
    env = {**HASH, "ARBORMEM_DB": str(tmp_path / "scopes.db")}
    chat = write_json(tmp_path / "c.json", [{"role": "user", "content": "a lemon cake for Leo"}])
    for user, agent in (("sam", "default"), ("samuel", "support"), ("alice", "default")):
        out = run_cli("--user", user, "--agent", agent, "ingest", str(chat), env=env)
        assert out.returncode == 0, out.stderr
    users = "Users in this store, nearest first: sam, samuel, alice (choose one with --user)"
    # A mistyped user was "No sessions." and nothing more.
    typo = run_cli("--user", "sma", "sessions", env=env)
    assert typo.returncode == 0 and typo.stdout == "No sessions.\n"
    assert "nothing is stored for user 'sma' with agent 'default'" in typo.stderr
    assert users in typo.stderr
    # stdout stays what a program reads; the hint is on stderr only.
    as_json = run_cli("--user", "sma", "search", "lemon cake", "--json", env=env)
    assert as_json.stdout.strip() == "[]" and users in as_json.stderr
    for args in (["context", "cake"], ["tree"], ["stats"], ["export"], ["show", "x"]):
        assert users in run_cli("--user", "sma", *args, env=env).stderr, args
    agent = run_cli("--user", "samuel", "--agent", "suport", "sessions", env=env).stderr
    assert "Agents of user 'samuel' in this store, nearest first: support" in agent
    # A scope that holds messages gives no hint, even when nothing matches.
    found = run_cli("--user", "sam", "search", "zeppelin", env=env)
    assert found.stdout == "No matches.\n" and found.stderr == ""
    empty = tmp_path / "empty.db"
    export = write_json(
        tmp_path / "e.json", {"format": "arbormem-export", "version": 1, "threads": []}
    )
    assert run_cli("--db", str(empty), "import", str(export), env=HASH).returncode == 0
    nothing = run_cli("--db", str(empty), "sessions", env=HASH).stderr
    assert f"the store {empty} holds no messages yet" in nothing


def test_an_empty_file_or_a_folder_is_not_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "touched.db"
    empty.touch()
    # Read commands used to turn it into an empty store and answer "No sessions."
    for args in (["sessions"], ["search", "x"], ["stats"], ["context", "x"], ["export"]):
        out = run_cli("--db", str(empty), *args, env=HASH)
        assert out.returncode == 1, (args, out.stdout)
        assert f"{empty} is an empty file (0 bytes), not an arbormem store" in out.stderr
        assert empty.stat().st_size == 0 and sorted(tmp_path.iterdir()) == [empty]
    # Storing into it is what makes it a store.
    chat = write_json(tmp_path / "c.json", [{"role": "user", "content": "a lemon cake"}])
    assert run_cli("--db", str(empty), "ingest", str(chat), env=HASH).returncode == 0
    assert "session-1" in run_cli("--db", str(empty), "sessions", env=HASH).stdout
    folder = tmp_path / "stores"
    folder.mkdir()
    for args in (["sessions"], ["ingest", str(chat)]):
        out = run_cli("--db", str(folder), *args, env=HASH)
        assert out.returncode == 1 and f"{folder} is a folder" in out.stderr, args
    assert list(folder.iterdir()) == []
