"""``arbormem context``: the prompt arbormem would send for the next turn."""

from __future__ import annotations

import click

from arbormem.cli.common import StoreOptions, echo_json, handle_errors
from arbormem.cli.scopes import hint_if_empty


@click.command()
@click.argument("query")
@click.option(
    "--budget",
    "-b",
    type=click.IntRange(min=32),
    help="Token budget of the prompt [default: 4000, or ARBORMEM_CONTEXT_BUDGET].",
)
@click.option(
    "--mode",
    "-M",
    type=click.Choice(["conversation", "code", "reasoning"]),
    help="Memory mode for the session (remembered for it).",
)
@click.option("--session", "-s", help="Session the turn belongs to [default: the current one].")
@click.option(
    "--context-window", type=click.IntRange(min=36), help="The model's context window in tokens."
)
@click.option("--json", "as_json", is_flag=True, help="Print sections and chat messages as JSON.")
@click.pass_obj
@handle_errors
def context(
    opts: StoreOptions,
    query: str,
    budget: int | None,
    mode: str | None,
    session: str | None,
    context_window: int | None,
    as_json: bool,
) -> None:
    """Assemble the prompt for QUERY: system, summary, recall, state, window, input.

    \b
    Examples:
      arbormem context "what did we decide about the database?" --budget 1500
      arbormem context "next step?" --mode code --json
    """
    from arbormem.config import UNSET

    with opts.open(existing=True) as mem:
        ctx = mem.context(
            query,
            budget_tokens=budget if budget is not None else UNSET,
            mode=mode,
            session=session,
            context_window=context_window,
        )
        hint_if_empty(mem)  # an empty prompt otherwise looks like a working recall
    if as_json:
        echo_json(ctx.to_dict())
        return
    click.echo(
        f"mode {ctx.mode}, session {ctx.session}, {ctx.prompt_tokens}/{ctx.budget} "
        f"tokens ({ctx.counter}), reply max_tokens {ctx.max_tokens}"
    )
    for section in ctx.sections:
        extra = f", {section.items} items" if section.items else ""
        click.echo(f"\n== {section.name} ({section.tokens} tokens{extra})")
        if section.text:
            click.echo(section.text)
