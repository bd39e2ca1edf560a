"""``arbormem bench chat`` and ``arbormem bench context``: prompt size and context
latency over one scripted or generated session (see :mod:`arbormem.bench.chat` and
:mod:`arbormem.bench.context`)."""

from __future__ import annotations

import click

from arbormem.bench.chat import DEFAULT_TURNS
from arbormem.bench.chat import print_table as print_chat
from arbormem.bench.chat import run as run_chat
from arbormem.bench.context import DEFAULT_MESSAGES, DEFAULT_QUERIES, TARGET_P95_MS
from arbormem.bench.context import run as run_context
from arbormem.cli.common import StoreOptions, handle_errors


@click.command("chat")
@click.option(
    "--turns",
    "-n",
    default=DEFAULT_TURNS,
    show_default=True,
    type=click.IntRange(min=1),
    help="User turns in the scripted conversation.",
)
@click.option(
    "--budget",
    "-b",
    type=click.IntRange(min=32),
    help="Token budget of each prompt [default: 4000, or ARBORMEM_CONTEXT_BUDGET].",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the scripted chat.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def chat(opts: StoreOptions, turns: int, budget: int | None, seed: int, as_json: bool) -> None:
    """Prompt tokens with memory against the whole history, over a scripted chat.

    Runs --turns scripted user messages through the same ChatSession as
    `arbormem chat`, on a fresh temporary store (the global --embedder, else
    the default one), against a deterministic in-process model: the answers
    are scripted, so this measures prompt size and Memory.context latency,
    not answer quality. Reports tokens sent, tokens the full history would
    have cost, their ratio (target: under 15% at 500 turns), context p50/p95
    latency and the token counter.

    \b
    Examples:
      arbormem bench chat
      arbormem bench chat --turns 1000 --budget 2000
      arbormem --embedder hash bench chat --turns 50 --json
    """
    import json
    import sys

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r\x1b[2K  {msg}")
            sys.stderr.flush()

    result = run_chat(turns, budget=budget, embedder=opts.embedder, seed=seed, progress=progress)
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        print_chat(result)


@click.command("context")
@click.option(
    "--messages",
    "-n",
    default=DEFAULT_MESSAGES,
    show_default=True,
    type=click.IntRange(min=1),
    help="Messages in the session before the prompts are assembled.",
)
@click.option(
    "--queries",
    "-q",
    default=DEFAULT_QUERIES,
    show_default=True,
    type=click.IntRange(min=1),
    help="Prompts assembled (and timed) in that session.",
)
@click.option(
    "--budget",
    "-b",
    type=click.IntRange(min=32),
    help="Token budget of each prompt [default: 4000, or ARBORMEM_CONTEXT_BUDGET].",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the generated session.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def context(
    opts: StoreOptions,
    messages: int,
    queries: int,
    budget: int | None,
    seed: int,
    as_json: bool,
) -> None:
    """Latency of Memory.context in one long session, with no LLM.

    Stores --messages generated messages in one session of a fresh
    temporary store, then assembles --queries prompts in that session and
    reports the p50/p95/max time of each (target: p95 under 50 ms at
    2,000 messages), the mean prompt size and the token counter.

    \b
    Examples:
      arbormem bench context
      arbormem bench context --messages 10000 --budget 2000 --json
    """
    import json
    import sys

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r\x1b[2K  {msg}")
            sys.stderr.flush()

    result = run_context(
        messages,
        queries=queries,
        budget=budget,
        embedder=opts.embedder,
        seed=seed,
        progress=progress,
    )
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(
        f"{result['messages']:,} messages in one session, {result['queries']} prompts of "
        f"at most {result['budget']:,} tokens ({result['token_counter']}):\n"
        f"  context p50 {result['context_ms_p50']:.1f} ms, "
        f"p95 {result['context_ms_p95']:.1f} ms, max {result['context_ms_max']:.1f} ms "
        f"(target p95 under {TARGET_P95_MS:.0f} ms)\n"
        f"  prompt {result['prompt_tokens_mean']:,.0f} tokens on average"
    )
