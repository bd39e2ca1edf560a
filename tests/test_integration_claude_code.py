"""Claude Code hooks run as Claude Code runs them: a subprocess fed the event JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from arbormem import Memory

ROOT = Path(__file__).resolve().parents[1]


def run_hook(
    db: Path, event: dict[str, Any] | str, *options: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "arbormem",
            "--db",
            str(db),
            "--embedder",
            "hash",
            *options,
            "integrations",
            "claude-code",
            "hook",
        ],
        input=event if isinstance(event, str) else json.dumps(event),
        capture_output=True,
        text=True,
        timeout=120,
    )


def event(name: str, session: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/work/project",
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def test_turns_are_stored_and_recalled_in_later_sessions(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    first = run_hook(
        db, event("UserPromptSubmit", "s1", prompt="We deploy the billing service on Fridays.")
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""  # nothing to recall yet
    stop = run_hook(
        db,
        event(
            "Stop",
            "s1",
            stop_hook_active=False,
            last_assistant_message="Understood: billing deploys on Fridays.",
        ),
    )
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout == ""  # a Stop hook that printed context would make Claude continue

    later = run_hook(db, event("UserPromptSubmit", "s2", prompt="When do we deploy billing?"))
    assert later.returncode == 0, later.stderr
    out = json.loads(later.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    assert "We deploy the billing service on Fridays." in out["additionalContext"]
    assert "When do we deploy billing?" not in out["additionalContext"]

    # A prompt in the same session is not told what is already in its context.
    same = run_hook(db, event("UserPromptSubmit", "s2", prompt="When do we deploy billing again?"))
    assert "When do we deploy billing?" not in same.stdout

    with Memory(db, embedder="hash", agent="claude-code") as mem:
        stored = [(m.session, m.role, m.content) for m in mem.messages()]
    assert stored[:3] == [
        ("s1", "user", "We deploy the billing service on Fridays."),
        ("s1", "assistant", "Understood: billing deploys on Fridays."),
        ("s2", "user", "When do we deploy billing?"),
    ]


def test_stop_reads_the_transcript_when_the_event_has_no_reply(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    transcript = tmp_path / "t.jsonl"
    lines = [
        {"type": "user", "message": {"role": "user", "content": "hi"}},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]},
        },
    ]
    transcript.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    done = run_hook(
        db, {**event("Stop", "s1"), "transcript_path": str(transcript)}, "--agent", "cc"
    )
    assert done.returncode == 0, done.stderr
    with Memory(db, embedder="hash", agent="cc") as mem:
        assert [m.content for m in mem.messages()] == ["Hello there."]


def test_bad_input_is_a_clear_non_blocking_error(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    done = run_hook(db, "{not json")
    assert done.returncode == 1  # not 2: Claude Code goes on with the prompt
    assert done.stdout == ""
    assert "<stdin>" in done.stderr and "not JSON" in done.stderr
    missing = run_hook(db, {"hook_event_name": "Stop"})
    assert missing.returncode == 1 and "session_id" in missing.stderr


def test_install_merges_into_existing_settings(tmp_path: Path) -> None:
    project = tmp_path / "project"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    theirs = {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}]
    }
    settings.write_text(json.dumps({"model": "opus", "hooks": theirs}))
    db = tmp_path / "m.db"
    cmd = [
        sys.executable,
        "-m",
        "arbormem",
        "--db",
        str(db),
        "--user",
        "ana",
        "integrations",
        "claude-code",
        "install",
        "--dir",
        str(project),
        "--mcp",
    ]
    for _ in range(2):  # installing twice adds nothing the second time
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    data = json.loads(settings.read_text())
    assert data["model"] == "opus"
    assert data["hooks"]["PreToolUse"] == theirs["PreToolUse"]
    for name in ("UserPromptSubmit", "Stop"):
        groups = data["hooks"][name]
        assert len(groups) == 1
        command = groups[0]["hooks"][0]["command"]
        assert command.endswith("--user ana integrations claude-code hook")
        assert str(db) in command
    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["mcpServers"]["arbormem"]["args"][-1] == "mcp"

    # The installed command is the one Claude Code will run: it works as written.
    command = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    ran = subprocess.run(
        command,
        shell=True,
        input=json.dumps(event("UserPromptSubmit", "s", prompt="hello")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    with Memory(db, user="ana", agent="claude-code") as mem:
        assert [m.content for m in mem.messages()] == ["hello"]


def test_install_refuses_a_broken_settings_file(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{broken")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "arbormem",
            "integrations",
            "claude-code",
            "install",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "settings.json" in done.stderr and "not valid JSON" in done.stderr
    assert settings.read_text() == "{broken"


def test_user_scope_writes_the_home_settings(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "arbormem",
            "integrations",
            "claude-code",
            "install",
            "--scope",
            "user",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "UserPromptSubmit" in json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    )


def test_example_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "claude_code_hooks.py"), str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Our API uses Flask." in done.stdout
