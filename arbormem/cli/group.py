"""The top-level command group, whose options may come before or after the command.

``arbormem --user sam search x`` and ``arbormem search x --user sam`` mean the
same. The group's options (``--db``, ``--user``, ``--agent``, ``--embedder``,
``--reranker``, ``--read-only``) are copied, hidden, onto every command added
to it (and onto the commands of a nested group such as ``bench``), except
where a command has an option of that name of its own (``bench locomo
--embedder``). A value given after the command replaces the one from the
environment or the config file; given on both sides with different values,
it is a usage error rather than a silent choice.
"""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from arbormem.cli.common import StoreOptions


class StoreGroup(click.Group):
    """A :class:`click.Group` whose own options are also accepted after a command."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        _accept_group_options(cmd, self.params)


def _accept_group_options(cmd: click.Command, group_params: list[click.Parameter]) -> None:
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _accept_group_options(sub, group_params)
        return
    own_names = {p.name for p in cmd.params}
    own_flags = {flag for p in cmd.params for flag in (*p.opts, *p.secondary_opts)}
    added = []
    for param in group_params:
        # --version is eager and means nothing after a command.
        if not isinstance(param, click.Option) or param.is_eager or param.name in own_names:
            continue
        flags = [f for f in param.opts if f not in own_flags]
        if not flags or param.name is None:
            continue
        cmd.params.append(
            click.Option(
                [param.name, *flags],
                is_flag=param.is_flag,
                hidden=True,
                expose_value=False,
                callback=_given_after_command,
                help=param.help,
            )
        )
        added.append(max(flags, key=len))
    if added:
        note = (
            f"Global options ({', '.join(added)}) may also be given here, after the "
            "command; see 'arbormem --help'."
        )
        cmd.epilog = f"{cmd.epilog}\n\n{note}" if cmd.epilog else note


def _given_after_command(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    name = param.name
    if name is None or ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
        return
    root = ctx.find_root()
    before = root.params.get(name)
    if root.get_parameter_source(name) is ParameterSource.COMMANDLINE and before != value:
        flag = max(param.opts, key=len)
        raise click.UsageError(
            f"{flag} is given twice, {before!r} before the command and {value!r} after it: "
            "give it once",
            ctx,
        )
    opts = ctx.find_object(StoreOptions)
    if opts is not None:
        opts.given_after_command(name, value)
