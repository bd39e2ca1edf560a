"""Generate ``docs/cli.md`` from the commands themselves, so it cannot drift.

Run ``python -m arbormem.cli.docs`` after changing a command; a test fails
while the file is stale.
"""

from __future__ import annotations

from pathlib import Path

import click

HEADER = """# CLI reference

Generated from the code by `python -m arbormem.cli.docs`; do not edit by hand.

Global options (`--db`, `--user`, `--agent`, `--embedder`, `--reranker`, `--read-only`)
go before or after the command: `arbormem --user alice search "..."` and
`arbormem search "..." --user alice` are the same (given on both sides with different
values, it is an error). The store is `--db`, else `ARBORMEM_DB`, else
the config file's `db`, else the per-user default (`~/.local/share/arbormem/memory.db`
on Linux). Only `ingest`, `add`, `import` and `chat` create a store; the other commands report
that there is none at that path (a mistyped `--db`) instead of making an empty one.
A command that finds its scope empty (a mistyped `--user` or `--agent`) says so on
stderr, naming the users (or the user's agents) the store holds, nearest first.
"""


def _commands(group: click.Group, prefix: list[str]) -> list[tuple[list[str], click.Command]]:
    out: list[tuple[list[str], click.Command]] = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        out.append(([*prefix, name], cmd))
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, [*prefix, name]))
    return out


def render_cli_reference() -> str:
    from arbormem.cli import cli

    parts = [HEADER]
    with click.Context(cli, info_name="arbormem", terminal_width=100, max_content_width=100) as ctx:
        parts.append("## arbormem\n\n```\n" + cli.get_help(ctx) + "\n```\n")
    for path, cmd in _commands(cli, []):
        names = ["arbormem", *path]
        parent = click.Context(cli, info_name="arbormem")
        ctx = parent
        for name in path:
            ctx = click.Context(
                ctx.command.commands[name] if isinstance(ctx.command, click.Group) else cmd,
                info_name=name,
                parent=ctx,
                terminal_width=100,
                max_content_width=100,
            )
        parts.append(f"## {' '.join(names)}\n\n```\n{cmd.get_help(ctx)}\n```\n")
    return "\n".join(parts)


def main() -> None:
    target = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
    target.write_text(render_cli_reference(), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
