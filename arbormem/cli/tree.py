"""``arbormem tree`` and ``arbormem reorganize``: seeing and tidying the topic tree."""

from __future__ import annotations

import click
from click.core import ParameterSource

from arbormem.cli.common import StoreOptions, echo_json, handle_errors
from arbormem.cli.scopes import hint_if_empty


@click.command()
@click.option("--summaries", "-s", is_flag=True, help="Show each topic's summary.")
@click.option("--messages", "-m", is_flag=True, help="Show the messages of every exchange.")
@click.option("--depth", "-d", type=click.IntRange(min=1), help="Show only this many levels.")
@click.option("--no-leaves", is_flag=True, help="Show topics only, not exchanges.")
@click.option("--json", "as_json", is_flag=True, help="Export the tree as JSON.")
@click.option("--mermaid", is_flag=True, help="Export a Mermaid graph.")
@click.option("--dot", is_flag=True, help="Export a Graphviz DOT graph.")
@click.pass_obj
@handle_errors
def tree(
    opts: StoreOptions,
    summaries: bool,
    messages: bool,
    depth: int | None,
    no_leaves: bool,
    as_json: bool,
    mermaid: bool,
    dot: bool,
) -> None:
    """Print the topic tree of the scope's conversation.

    \b
    Examples:
      arbormem tree --no-leaves --summaries
      arbormem tree --depth 2
      arbormem tree --json > tree.json
      arbormem tree --mermaid > tree.mmd
      arbormem tree --dot | dot -Tpng > tree.png
    """
    chosen = [name for name, on in (("json", as_json), ("mermaid", mermaid), ("dot", dot)) if on]
    if len(chosen) > 1:
        # The last one used to win without a word.
        raise click.UsageError(f"choose one export: --{' or --'.join(chosen)}")
    fmt = chosen[0] if chosen else None
    with opts.open(existing=True) as mem:
        hint_if_empty(mem)
        if fmt:
            click.echo(
                mem.render_tree(
                    fmt, summaries=summaries, messages=messages, depth=depth, leaves=not no_leaves
                ),
                nl=fmt == "json",
            )
            return
        root = mem.tree(messages=messages or not no_leaves)
    import sys

    from arbormem.tree.view import render_rich, render_text

    if sys.stdout.isatty():
        from rich.console import Console

        Console().print(
            render_rich(
                root, summaries=summaries, messages=messages, max_depth=depth, leaves=not no_leaves
            )
        )
    else:
        click.echo(
            render_text(
                root, summaries=summaries, messages=messages, max_depth=depth, leaves=not no_leaves
            )
        )


@click.command()
@click.option(
    "--threshold",
    default=0.55,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="Cosine similarity two topic summaries need before a merge is considered.",
)
@click.option(
    "--prune-trivial",
    is_flag=True,
    help="Soft-archive small talk: exchanges whose messages are all under 20 words and "
    "carry no name, number, date or personal statement.",
)
@click.option("--undo", "undo_id", type=int, help="Undo the logged reorganisation with this id.")
@click.option("--log", "show_log", is_flag=True, help="List past reorganisations and rebuilds.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@handle_errors
def reorganize(
    ctx: click.Context,
    threshold: float,
    prune_trivial: bool,
    undo_id: int | None,
    show_log: bool,
    as_json: bool,
) -> None:
    """Merge related branches of the topic tree (logged, undoable).

    \b
    Examples:
      arbormem reorganize
      arbormem reorganize --threshold 0.6 --prune-trivial --json
      arbormem reorganize --log
      arbormem reorganize --undo 3
    """
    opts: StoreOptions = ctx.obj
    # Options the chosen action would ignore are refused (they used to be dropped).
    merging = [
        f"--{name.replace('_', '-')}"
        for name in ("threshold", "prune_trivial")
        if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT
    ]
    if show_log and (undo_id is not None or merging):
        raise click.UsageError(
            "--log lists past runs: it takes no --undo, --threshold or --prune-trivial"
        )
    if undo_id is not None and merging:
        raise click.UsageError(f"--undo takes no {' or '.join(merging)}")
    with opts.open(existing=True) as mem:
        if show_log:
            entries = mem.tree_log()
            if as_json:
                echo_json(entries)
            for e in [] if as_json else entries:
                undone = f" (undone {e.undone_at})" if e.undone_at else ""
                click.echo(f"{e.id}\t{e.at}\t{e.kind}\t{dict(e.stats)}{undone}")
            return
        if undo_id is not None:
            result = mem.undo_reorganize(undo_id)
        else:
            result = mem.reorganize(threshold, prune_trivial)
    if as_json:
        echo_json(result)
    elif undo_id is not None:
        click.echo("Already undone." if result.already else f"Undid reorganisation {undo_id}.")
    else:
        click.echo(
            f"Merged {result.merged} topic(s), archived {result.pruned} exchange(s), "
            f"skipped {result.skipped} pair(s) in {result.duration_secs} s"
            + (f" (log id {result.log_id})." if result.log_id else ".")
        )
