"""Claude Code hooks: every prompt and reply stored, recalled memory added before each prompt.

Claude Code runs a hook command with the event as JSON on stdin (see its hooks
documentation). ``arbormem integrations claude-code hook`` handles two events:

* ``UserPromptSubmit``: searches the memory for the prompt, prints what it found
  from *earlier* sessions as ``additionalContext`` (Claude Code adds it before the
  prompt; the model calls nothing), then stores the prompt;
* ``Stop``: stores the reply (``last_assistant_message``, else the transcript's last
  assistant message) and prints nothing: on ``Stop``, any context printed would
  make Claude continue the turn.

Each Claude Code session is an arbormem session (its ``session_id``), in the scope
``--user`` / ``--agent`` (``claude-code`` by default). ``arbormem integrations
claude-code install`` writes the hooks into ``.claude/settings.json`` (the
project's, or the user's with ``--scope user``), keeping what is there.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arbormem.errors import InputError

#: The agent id of the scope the hooks store into unless ``--agent`` names another.
DEFAULT_AGENT = "claude-code"
#: The events the hooks handle, with the timeout (seconds) Claude Code gives each.
EVENTS = {"UserPromptSubmit": 30, "Stop": 30}
#: Claude Code keeps at most this many characters of additional context inline.
MAX_CONTEXT_CHARS = 10_000
#: Recalled messages added before a prompt.
RECALL_K = 5


def read_event(raw: str) -> dict[str, Any]:
    """The hook input: a JSON object with ``hook_event_name`` and ``session_id``."""
    try:
        event = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            source="<stdin>",
            hint="Claude Code sends each hook its event as one JSON object",
        ) from None
    if not isinstance(event, dict):
        raise InputError("must be a JSON object", source="<stdin>")
    for field in ("hook_event_name", "session_id"):
        if not isinstance(event.get(field), str) or not event[field]:
            raise InputError(f"has no {field!r} string", source="<stdin>")
    return event


def _last_assistant_text(transcript: str | None) -> str:
    """The last assistant text of a Claude Code transcript (JSON lines), or ""."""
    if not transcript or not os.path.isfile(transcript):
        return ""
    last = ""
    with open(transcript, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            message = entry.get("message") if isinstance(entry, dict) else None
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            content = message.get("content")
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):
                text = "\n".join(
                    str(p.get("text", "")) for p in content if isinstance(p, dict)
                ).strip()
            else:
                text = ""
            if text:
                last = text
    return last


def recall_text(hits: Sequence[Any], session: str) -> str:
    """The recalled messages as Claude Code's additional context ("" when none is
    from another session: this session's turns are already in Claude's context)."""
    lines = []
    for hit in hits:
        m = hit.message
        if m.session == session:
            continue
        lines.append(f"- {m.timestamp.date().isoformat()} {m.role}: {m.text}")
    if not lines:
        return ""
    text = "Earlier conversations that may be relevant (from arbormem):\n" + "\n".join(lines)
    return text[:MAX_CONTEXT_CHARS]


def handle(event: Mapping[str, Any], memory: Any, *, agent: str | None = None) -> str:
    """Do what ``event`` asks of ``memory``; returns what the hook prints ("" for nothing)."""
    scope = {"agent": agent or DEFAULT_AGENT}
    name = event["hook_event_name"]
    session = event["session_id"]
    meta = {"claude_code": {k: event[k] for k in ("cwd", "prompt_id") if k in event}}
    if name == "UserPromptSubmit":
        prompt = event.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return ""
        context = recall_text(memory.search(prompt, k=RECALL_K, **scope), session)
        memory.add(prompt, role="user", session=session, metadata=meta, **scope)
        if not context:
            return ""
        out = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}}
        return json.dumps(out)
    if name == "Stop":
        reply = event.get("last_assistant_message")
        if not isinstance(reply, str) or not reply.strip():
            reply = _last_assistant_text(event.get("transcript_path"))
        if reply.strip():
            memory.add(reply, role="assistant", session=session, metadata=meta, **scope)
        return ""  # anything printed on Stop would make Claude continue
    return ""  # an event these hooks were not installed for


def hook_command(options: Sequence[str] = ()) -> str:
    """The shell command Claude Code runs: this Python, so it works outside the
    virtual environment arbormem was installed in."""
    words = [sys.executable, "-m", "arbormem", *options, "integrations", "claude-code", "hook"]
    return shlex.join(words)


def with_hooks(settings: Mapping[str, Any], command: str) -> dict[str, Any]:
    """``settings`` (a parsed settings.json) with the hooks added for each event; a
    handler already there with the same command is not added twice."""
    out = dict(settings)
    hooks = dict(out.get("hooks") or {})
    for event, timeout in EVENTS.items():
        groups = list(hooks.get(event) or [])
        present = any(
            h.get("command") == command
            for g in groups
            if isinstance(g, dict)
            for h in g.get("hooks") or []
            if isinstance(h, dict)
        )
        if not present:
            groups.append({"hooks": [{"type": "command", "command": command, "timeout": timeout}]})
        hooks[event] = groups
    out["hooks"] = hooks
    return out


def with_mcp_server(config: Mapping[str, Any], options: Sequence[str] = ()) -> dict[str, Any]:
    """A ``.mcp.json`` document with arbormem's stdio MCP server (``arbormem mcp``) added."""
    out = dict(config)
    servers = dict(out.get("mcpServers") or {})
    servers["arbormem"] = {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "arbormem", *options, "mcp"],
    }
    out["mcpServers"] = servers
    return out


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except json.JSONDecodeError as exc:
        raise InputError(
            f"is not valid JSON ({exc.msg} at line {exc.lineno})",
            source=str(path),
            hint="fix or move the file, then install again",
        ) from None
    if not isinstance(data, dict):
        raise InputError("must hold a JSON object", source=str(path))
    return data


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Replace ``path`` atomically: Claude Code never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(
    settings_path: Path, options: Sequence[str] = (), *, mcp_path: Path | None = None
) -> list[Path]:
    """Write the hooks into ``settings_path`` (and, with ``mcp_path``, the MCP server
    into that ``.mcp.json``); returns the files written."""
    command = hook_command(options)
    written = []
    _write_json(settings_path, with_hooks(_read_json(settings_path), command))
    written.append(settings_path)
    if mcp_path is not None:
        _write_json(mcp_path, with_mcp_server(_read_json(mcp_path), options))
        written.append(mcp_path)
    return written
