"""``arbormem integrations``: plugging arbormem into agent tools (Claude Code)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from arbormem.cli.common import StoreOptions, handle_errors


@click.group()
def integrations() -> None:
    """Plug arbormem into agent tools."""


@integrations.group("claude-code")
def claude_code() -> None:
    """Claude Code: store every prompt and reply, add recalled memory before prompts."""


@claude_code.command()
@click.pass_obj
@handle_errors
def hook(opts: StoreOptions) -> None:
    """Handle one Claude Code hook event (its JSON on stdin).

    Claude Code runs this; 'install' sets it up. UserPromptSubmit prints the
    recalled memory as additional context and stores the prompt; Stop stores the
    reply and prints nothing. The scope's agent is 'claude-code' unless --agent
    names another.

    \b
    Example:
      echo '{"hook_event_name": "UserPromptSubmit", "session_id": "s1",
             "prompt": "where do I live?"}' | arbormem integrations claude-code hook
    """
    from arbormem.integrations import claude_code as cc

    event = cc.read_event(sys.stdin.read())
    with opts.open() as mem:
        out = cc.handle(event, mem, agent=opts.agent)
    if out:
        click.echo(out)


@claude_code.command()
@click.option(
    "--scope",
    type=click.Choice(["project", "user"]),
    default="project",
    show_default=True,
    help="project: DIR/.claude/settings.json; user: ~/.claude/settings.json.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="The project folder [default: the current one].",
)
@click.option(
    "--mcp",
    is_flag=True,
    help="Also add the 'arbormem mcp' server to the project's .mcp.json.",
)
@click.pass_obj
@handle_errors
def install(opts: StoreOptions, scope: str, directory: Path, mcp: bool) -> None:
    """Install the hooks into Claude Code's settings (existing settings are kept).

    The hooks run this Python with the --db, --user and --agent given here, so
    they store into the same place whatever the shell they start in.

    \b
    Examples:
      arbormem integrations claude-code install
      arbormem --db ~/notes/memory.db integrations claude-code install --scope user
    """
    from arbormem.integrations import claude_code as cc

    options: list[str] = []
    if opts.db is not None:
        options += ["--db", str(Path(opts.db).expanduser().resolve())]
    if opts.user is not None:
        options += ["--user", opts.user]
    if opts.agent is not None:
        options += ["--agent", opts.agent]
    base = Path.home() if scope == "user" else directory.resolve()
    written = cc.install(
        base / ".claude" / "settings.json",
        options,
        mcp_path=directory.resolve() / ".mcp.json" if mcp else None,
    )
    for path in written:
        click.echo(f"wrote {path}")
