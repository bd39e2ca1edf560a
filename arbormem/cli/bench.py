"""``arbormem bench``: the benchmark commands."""

from __future__ import annotations

from typing import Any

import click

from arbormem.cli.common import StoreOptions, handle_errors


@click.group()
def bench() -> None:
    """Measure recall and speed."""


_HEADLINE = [
    ("recall@1", "R@1"),
    ("recall@5", "R@5"),
    ("recall@10", "R@10"),
    ("recall@20", "R@20"),
    ("ndcg@5", "nDCG@5"),
    ("session_hit@1", "sess@1"),
]


def _table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    budget = result["budget"]
    console = Console()
    ds = result["dataset"]
    table = Table(
        title=f"LoCoMo: {ds['conversations']} conversations, {ds['turns']} turns, "
        f"{ds['questions']} questions (categories 1-4); tokens: {result['token_counter']}"
    )
    table.add_column("system")
    for _, label in _HEADLINE:
        table.add_column(label, justify="right")
    table.add_column(f"budget@{budget}", justify="right")
    table.add_column("ctx tok", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    table.add_column("ingest/s", justify="right")
    for name, s in result["systems"].items():
        ingest = s.get("ingest_turns_per_s")
        table.add_row(
            name,
            *[f"{s[key]:.3f}" for key, _ in _HEADLINE],
            f"{s[f'budget_recall@{budget}']:.3f}",
            f"{s['context_tokens_mean']:.0f}",
            f"{s['query_ms_p50']:.1f}",
            f"{s['query_ms_p95']:.1f}",
            f"{ingest:,.0f}" if ingest else "-",
        )
    console.print(table)
    cats = Table(
        title="recall@10 by category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)"
    )
    cats.add_column("system")
    first = next(iter(result["systems"].values()))
    for cat, figures in first["by_category"].items():
        cats.add_column(f"{cat} (n={figures['questions']})", justify="right")
    for name, s in result["systems"].items():
        cats.add_row(name, *[f"{v['recall@10']:.3f}" for v in s["by_category"].values()])
    console.print(cats)


@bench.command("locomo")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--systems",
    default="arbormem,bm25,dense,window,full",
    show_default=True,
    help="Comma-separated systems to run side by side.",
)
@click.option(
    "--budget",
    default=1000,
    show_default=True,
    help="Token budget of the context for budget_recall.",
)
@click.option("--embedder", help="Embedder spec [default: the global --embedder, or wordllama].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def locomo(
    opts: StoreOptions,
    paths: tuple[str, ...],
    systems: str,
    budget: int,
    embedder: str | None,
    as_json: bool,
) -> None:
    """Recall on LoCoMo files or folders, every system side by side.

    \b
    Examples:
      arbormem bench locomo ../shared/datasets/locomo
      arbormem bench locomo conv-26.json --systems arbormem,bm25 --json
      arbormem bench locomo locomo10.json --budget 2000
    """
    import sys

    from arbormem.bench.locomo import run, to_json

    names = [s.strip() for s in systems.split(",") if s.strip()]

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"  {msg}", err=True)

    result = run(paths, names, budget=budget, embedder=embedder or opts.embedder, progress=progress)
    if as_json:
        click.echo(to_json(result))
    else:
        _table(result)
