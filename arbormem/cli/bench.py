"""``arbormem bench``: the benchmark commands."""

from __future__ import annotations

import json
from typing import Any

import click

from arbormem.cli.common import StoreOptions, echo_json, handle_errors

EMBEDDER_HELP = (
    "Embedder spec [default: the global --embedder or ARBORMEM_EMBEDDER, else "
    "`embedder` in the config file, else wordllama]."
)

DEEP_HELP = (
    "Background embedder whose vectors recall reads once it has indexed a store: "
    "none, auto (bge-small when installed) or an embedder spec [default: the global "
    "--deep-embedder or ARBORMEM_DEEP_EMBEDDER, else `deep_embedder` in the config file, "
    "else auto]."
)

RERANKER_HELP = (
    "Reranker of arbormem's and flat's best turns: none, cross-encoder or onnx:FOLDER "
    "[default: the global --reranker or ARBORMEM_RERANKER, else `reranker` in the config "
    "file, else none]."
)


@click.group()
def bench() -> None:
    """Measure recall and speed."""


def _bench_store(opts: StoreOptions, command: str) -> str | None:
    """The PostgreSQL database a benchmark makes its fresh stores on: the global
    ``--db`` (or ``ARBORMEM_DB``) when it is a ``postgresql://`` URL; None for
    temporary SQLite files. A file path given with ``--db`` is refused rather than
    ignored: the benchmark never writes into an existing store."""
    import os

    from arbormem.errors import InputError

    db = opts.db if opts.db is not None else os.environ.get("ARBORMEM_DB")
    if db is None:
        return None
    if db.split("://", 1)[0].lower() in ("postgresql", "postgres") and "://" in db:
        return db
    # (click fills --db from ARBORMEM_DB too: a store file named there is the
    # environment's, for other commands, and is left alone.)
    if opts.db is not None and opts.db != os.environ.get("ARBORMEM_DB"):
        raise InputError(
            f"bench {command} makes a fresh store of its own for each run, so it does not"
            f" use the file {db}",
            field="--db",
            hint="give --db a postgresql:// URL to measure the PostgreSQL back-end"
            " (its stores are made there and dropped), or leave --db out",
        )
    return None


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
        + (f"; {ds['distractors']:,} distractor turns each" if ds.get("distractors") else "")
    )
    table.add_column("system")
    for _, label in _HEADLINE:
        table.add_column(label, justify="right")
    table.add_column(f"budget@{budget}", justify="right")
    table.add_column("ctx tok", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    table.add_column("ingest/s", justify="right")
    # Only with background indexing (a deep embedder): how long until it was done.
    indexing = any("full_index_seconds" in s for s in result["systems"].values())
    if indexing:
        table.add_column("indexed in s", justify="right")
    for name, s in result["systems"].items():
        ingest = s.get("ingest_turns_per_s")
        indexed = s.get("full_index_seconds")
        table.add_row(
            name,
            *[f"{s[key]:.3f}" for key, _ in _HEADLINE],
            f"{s[f'budget_recall@{budget}']:.3f}",
            f"{s['context_tokens_mean']:.0f}",
            f"{s['query_ms_p50']:.1f}",
            f"{s['query_ms_p95']:.1f}",
            f"{ingest:,.0f}" if ingest else "-",
            *([f"{indexed:,.1f}" if indexed else "-"] if indexing else []),
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
    default="arbormem,flat,bm25,dense,window,full",
    show_default=True,
    help="Comma-separated systems to run side by side.",
)
@click.option(
    "--budget",
    default=1000,
    show_default=True,
    help="Token budget of the context for budget_recall.",
)
@click.option("--embedder", help=EMBEDDER_HELP)
@click.option(
    "--distractors",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Generated turns between other people added to each conversation's history.",
)
@click.option(
    "--ann-threshold",
    type=int,
    help="Vectors per thread above which dense search is approximate (0 forces the index).",
)
@click.option("--reranker", help=RERANKER_HELP)
@click.option("--deep-embedder", help=DEEP_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def locomo(
    opts: StoreOptions,
    paths: tuple[str, ...],
    systems: str,
    budget: int,
    embedder: str | None,
    distractors: int,
    ann_threshold: int | None,
    reranker: str | None,
    deep_embedder: str | None,
    as_json: bool,
) -> None:
    """Recall on LoCoMo files or folders, every system side by side.

    LoCoMo is published by its authors at https://github.com/snap-research/locomo
    (data/locomo10.json, CC BY-NC 4.0); a folder is searched for .json files.
    With a deep embedder, each conversation's questions are asked once its
    background indexing is done; "indexed in s" is how long that took in all.

    \b
    Examples:
      arbormem bench locomo locomo10.json
      arbormem bench locomo conv-26.json --systems arbormem,bm25 --json
      arbormem bench locomo locomo10.json --budget 2000
      arbormem bench locomo locomo10.json --systems arbormem --distractors 10000
      arbormem bench locomo locomo10.json --systems arbormem --reranker cross-encoder
    """
    import sys

    from arbormem.bench.locomo import run, to_json

    names = [s.strip() for s in systems.split(",") if s.strip()]
    if not names:
        raise click.BadParameter("name at least one system", param_hint="--systems")

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"  {msg}", err=True)

    result = run(
        paths,
        names,
        budget=budget,
        embedder=embedder or opts.embedder,
        progress=progress,
        distractors=distractors,
        ann_threshold=ann_threshold,
        reranker=reranker or opts.reranker,
        store=_bench_store(opts, "locomo"),
        deep_embedder=_deep(deep_embedder, opts),
    )
    if as_json:
        click.echo(to_json(result))
    else:
        _table(result)


def _deep(given: str | None, opts: StoreOptions) -> Any:
    """The deep embedder spec of a bench command: its option, else the global one,
    else unset (the configured one)."""
    from arbormem.config import UNSET

    chosen = given if given is not None else opts.deep_embedder
    return UNSET if chosen is None else chosen


def _scale_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    cfg = result["config"]
    table = Table(
        title=f"arbormem bench scale: one thread, {cfg['embedder']}, search k={cfg['k']}, "
        f"{cfg['queries']} queries, {cfg['cpu_count']} CPU"
    )
    for label in (
        "turns",
        "ingest/s",
        "p50 ms",
        "p95 ms",
        "first query s",
        "peak RSS MiB",
        "on disk MiB",
    ):
        table.add_column(label, justify="right")
    for r in result["runs"]:
        rss = r["peak_rss_mb"]
        table.add_row(
            f"{r['turns']:,}",
            f"{r['ingest_turns_per_s']:,.0f}",
            f"{r['query_ms_p50']:.1f}",
            f"{r['query_ms_p95']:.1f}",
            f"{r['first_query_s']:.2f}",
            f"{rss:,.0f}" if rss is not None else "-",
            f"{r['db_mb']:,.0f}",
        )
    Console().print(table)


@bench.command("scale")
@click.option(
    "--turns",
    "-n",
    "sizes",
    multiple=True,
    help="Thread size to measure (repeatable; 10000, 100k, 1M) [default: 10k, 100k and 1M].",
)
@click.option(
    "--queries",
    default=300,
    show_default=True,
    type=click.IntRange(min=1),
    help="Searches timed per size, one at a time.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the generated conversations.")
@click.option(
    "--batch",
    "batch_size",
    default=1000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Turns per add_many call (an import of history); 0: one call per generated session.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    help="Keep the stores here (scale-<N>.db) instead of a temporary folder.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Also write a PNG of latency and memory against size (needs matplotlib).",
)
@click.pass_obj
@handle_errors
def scale(
    opts: StoreOptions,
    sizes: tuple[str, ...],
    queries: int,
    seed: int,
    batch_size: int,
    workdir: str | None,
    as_json: bool,
    plot_path: str | None,
) -> None:
    """Ingest speed, recall latency, memory and disk use against thread size.

    Each size is one thread of generated everyday conversation, built in a
    fresh store through the Memory API and measured in its own processes:
    ingest turns/s, search p50/p95 (k=10), peak resident memory, size on disk,
    and the time for a fresh process to open the store and answer a query.

    \b
    Examples:
      arbormem bench scale
      arbormem bench scale --turns 10k --turns 100k --json
      arbormem bench scale --turns 1M --plot scale.png --workdir /tmp/stores
      arbormem --db postgresql://me@db.internal/bench bench scale --turns 100k
    """
    import sys

    from arbormem.bench.scale import DEFAULT_SIZES, check_plotting, parse_size, plot, run

    turns = [parse_size(s) for s in sizes] or list(DEFAULT_SIZES)
    if plot_path:
        check_plotting()

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            click.echo(msg, err=True)

    result = run(
        turns,
        embedder=opts.embedder,
        queries=queries,
        seed=seed,
        batch_size=batch_size,
        workdir=workdir,
        progress=progress,
        store=_bench_store(opts, "scale"),
    )
    if plot_path:
        plot(result, plot_path)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        _scale_table(result)
    if plot_path and sys.stderr.isatty():
        click.echo(f"wrote {plot_path}", err=True)


def _segment_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for source, figures in result["files"].items():
        table = Table(
            title=f"{source}: {figures['dialogues']} dialogues, {figures['utterances']} utterances"
        )
        table.add_column("system", no_wrap=True)
        for label in ("Pk", "WD", "F1", "P", "R", "pred", "gold", "utt/s"):
            table.add_column(label, justify="right", no_wrap=True)
        for name, s in figures["systems"].items():
            speed = s["utterances_per_s"]
            table.add_row(
                name,
                f"{s['pk']:.3f}",
                f"{s['windowdiff']:.3f}",
                f"{s['f1']:.3f}",
                f"{s['precision']:.3f}",
                f"{s['recall']:.3f}",
                str(s["boundaries_predicted"]),
                str(s["boundaries_gold"]),
                f"{speed:,.0f}" if speed and name == "arbormem" else "-",
            )
        console.print(table)
    for key, text in result["conventions"].items():
        console.print(f"{key}: {text}", highlight=False)
    console.print(f"embedder: {result['config']['embedder']}, llm: none", highlight=False)


@bench.command("segment")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--embedder", help=EMBEDDER_HELP)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="Score only the first N dialogues of each file.",
)
@click.option(
    "--join",
    type=click.IntRange(min=2),
    help="Put each file's dialogues end to end N at a time, each whole dialogue one segment.",
)
@click.option(
    "--tasks",
    type=click.IntRange(min=0),
    default=0,
    help="Also score N generated task dialogues of changing domains (a DialSeg711 stand-in).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --tasks.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def segment_cmd(
    opts: StoreOptions,
    paths: tuple[str, ...],
    embedder: str | None,
    limit: int | None,
    join: int | None,
    tasks: int,
    seed: int,
    as_json: bool,
) -> None:
    """Topic segmentation: the tree against gold boundaries, with two baselines.

    Each dialogue is fed one utterance per add() into a fresh store (one
    session, default tree, no LLM); a boundary falls wherever consecutive
    utterances sit in different innermost topics. Reports Pk, WindowDiff,
    boundary F1 and boundary counts for arbormem, no_boundary and a causal
    texttiling, per file.

    \b
    Examples:
      arbormem bench segment ../shared/datasets/segmentation/tiage-dev.json
      arbormem bench segment a.json b.json --json
      arbormem bench segment dialogues.json --limit 50 --embedder hash
      arbormem bench segment --tasks 300 --seed 1
      arbormem bench segment dialogues.json --join 4
    """
    import sys

    from arbormem.bench.segment import run, to_json

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"  {msg}", err=True)

    if not paths and not tasks:
        raise click.UsageError("give at least one dialogue file, or --tasks N")
    result = run(
        paths,
        embedder=embedder or opts.embedder,
        limit=limit,
        join=join,
        tasks=tasks,
        seed=seed,
        progress=progress,
    )
    if as_json:
        click.echo(to_json(result))
    else:
        _segment_table(result)


from arbormem.cli.bench_session import chat, context  # noqa: E402

bench.add_command(chat)
bench.add_command(context)


@bench.command("updates")
@click.option(
    "--conversations",
    "-n",
    default=60,
    show_default=True,
    type=click.IntRange(min=0),
    help="Generated conversations to score (0: only --file).",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the generated conversations.")
@click.option(
    "--file",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Hand-written conversations (JSON, see arbormem.bench.updates) scored separately; repeatable.",
)
@click.option(
    "--locomo",
    "locomo_paths",
    multiple=True,
    type=click.Path(exists=True),
    help="Also run the extractor alone over LoCoMo files or folders: turns/s and records.",
)
@click.option("--show-records", is_flag=True, help="With --locomo: print every record extracted.")
@click.option(
    "--store",
    is_flag=True,
    help="Keep the records in a real SQLite store (a temporary file) instead of in memory: "
    "the figures must not change. With --locomo, also time writing them there.",
)
@click.option(
    "--ingest",
    is_flag=True,
    hidden=True,
    help="Retired: bench locomo times ingest with Memory's own extraction.",
)
@click.option(
    "--memory",
    "through_memory",
    is_flag=True,
    help="Ask every question through the public API (a Memory per conversation), "
    "context at 300 tokens included.",
)
@click.option(
    "--embedder",
    "memory_embedder",
    default="hash",
    show_default=True,
    help="With --memory: the memory's embedder.",
)
@click.option("--misses", is_flag=True, help="List the questions answered wrongly.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@handle_errors
def updates_cmd(
    conversations: int,
    seed: int,
    files: tuple[str, ...],
    locomo_paths: tuple[str, ...],
    show_records: bool,
    store: bool,
    ingest: bool,
    through_memory: bool,
    memory_embedder: str,
    misses: bool,
    as_json: bool,
) -> None:
    """Changed facts: current-value and as-of accuracy of records search, no LLM.

    Conversations where people's home, employer, diet, phone, partner, pets,
    allergies and meeting times change zero to three times among chatter; for
    each person and attribute, the current value and the value in a past month
    are asked. Targets: current-value accuracy@1 >= 0.95, as-of >= 0.90.

    \b
    Examples:
      arbormem bench updates
      arbormem bench updates -n 200 --seed 1 --json
      arbormem bench updates --store
      arbormem bench updates --memory
      arbormem bench updates -n 0 --file tests/data/updates_handwritten.json --misses
      arbormem bench updates -n 0 --locomo ../shared/datasets/locomo/conv-26.json --show-records

    Ingest speed with extraction on is measured by 'arbormem bench locomo' (its
    ingest_turns_per_s includes every turn's records).
    """
    from arbormem.bench.updates import extract_locomo, run

    if ingest:
        # It ran the extractor beside Memory's own extraction and timed both: a figure
        # that matched no real path once Memory extracted records after every add.
        raise click.UsageError(
            "--ingest is retired: 'arbormem bench locomo PATH --systems arbormem' times "
            "ingest with Memory's own records extraction (ingest_turns_per_s)"
        )

    result = run(
        conversations=conversations,
        seed=seed,
        files=files,
        show_misses=misses,
        store=store,
        memory=through_memory,
        embedder=memory_embedder,
    )
    if conversations == 0:
        result.pop("generated", None)
    if locomo_paths:
        result["locomo_extraction"] = extract_locomo(locomo_paths, keep=show_records, store=store)
    if as_json:
        click.echo(json.dumps(result, indent=2, default=str))
        return
    for name, r in result.items():
        if not isinstance(r, dict) or "questions" not in r:
            continue
        q = r["questions"]
        click.echo(
            f"{name}: {r['conversations']} conversations, {q['current']} current and "
            f"{q['as_of']} as-of questions; current-value accuracy@1 {r['current_accuracy@1']}, "
            f"as-of accuracy {r['as_of_accuracy']}, context@300 {r['context_holds_current@300']}; "
            f"{r['records_messages_per_s']} messages/s through the {r['engine']}"
        )
        for attribute, figures in r.get("by_attribute", {}).items():
            click.echo(f"  {attribute}: current {figures['current']}, as of {figures['as_of']}")
        for miss in r.get("misses", []):
            click.echo(
                f"  miss: {miss['question']} (expected {miss['expect']!r}, got {miss['got']!r})"
            )
    extraction = result.get("locomo_extraction")
    if extraction:
        click.echo(
            f"LoCoMo extraction: {extraction['turns']} turns in {extraction['seconds']} s "
            f"({extraction['turns_per_s']} turns/s wall, {extraction['turns_per_cpu_s']} per CPU "
            f"second, {extraction['ms_per_turn']} ms/turn), "
            f"{extraction['records']} records {extraction['by_kind']}"
        )
        kept = extraction["in_memory"]
        click.echo(
            f"  keeping them in memory: {kept['cpu_ms_per_turn']} CPU ms/turn, "
            f"{kept['cpu_ms_per_written_exchange']} per exchange that gave candidates"
        )
        for mode, cost in extraction.get("store", {}).items():
            if isinstance(cost, dict):
                click.echo(
                    f"  in a SQLite store, {mode.replace('_', ' ')}: {cost['ms_per_turn']} ms/turn "
                    f"({cost['cpu_ms_per_turn']} CPU), {cost['ms_per_written_exchange']} ms "
                    f"({cost['cpu_ms_per_written_exchange']} CPU) per exchange that gave "
                    f"candidates; same records as in memory: {cost['same_as_in_memory']}"
                )
        for item in extraction.get("listed", []):
            shown = f"  [{item['kind']}] {item['text']}  <- {', '.join(item['sources'])}"
            if item["superseded_by"]:
                shown += f" (until {item['valid_to']}, superseded)"
            click.echo(shown)


@bench.command("fit")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--embedder", help=EMBEDDER_HELP)
@click.option("--deep-embedder", help=DEEP_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def fit_cmd(
    opts: StoreOptions,
    paths: tuple[str, ...],
    embedder: str | None,
    deep_embedder: str | None,
    as_json: bool,
) -> None:
    """Fit the ranker's weights on LoCoMo files, reporting leave-one-out figures.

    Each folder is a development set (a file belongs to its folder's): every
    conversation of every set is held out in turn, the sets weigh the same in the
    fit, and the figures are reported for each set side by side.

    \b
    Examples:
      arbormem bench fit locomo/ realtalk/
      arbormem bench fit locomo10.json --json > fit.json
    """
    import json
    import sys

    from arbormem.bench.fit import run

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"  {msg}", err=True)

    result = run(
        paths,
        embedder=embedder or opts.embedder,
        progress=progress,
        deep_embedder=_deep(deep_embedder, opts),
    )
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    labels = {
        "leave_one_out": "leave-one-out",
        "in_sample": "in sample",
        "shipped_weights_in_sample": "shipped, in sample",
    }
    figures = {
        "recall@5": "R@5",
        "recall@10": "R@10",
        "recall@20": "R@20",
        "ndcg@5": "nDCG@5",
        "session_hit@1": "hit@1",
    }
    # Each set's figures in a column group of their own, the sets side by side.
    group = 7 * len(figures)
    for mode in ("tree", "flat", "deep_tree", "deep_flat"):
        if mode not in result:
            continue
        r = result[mode]
        sets = r["by_set"]
        counts = ", ".join(f"{name} {s['questions']}" for name, s in sets.items())
        click.echo(f"{mode}: {r['questions']} questions ({counts})")
        click.echo(f"  {'':20}" + " | ".join(f"{name[:group]:<{group}}" for name in sets))
        heads = "".join(f"{h:>7}" for h in figures.values())
        click.echo(f"  {'':20}" + " | ".join(heads for _ in sets))
        for label, title in labels.items():
            cells = ("".join(f"{s[label][f]:>7.3f}" for f in figures) for s in sets.values())
            click.echo(f"  {title:20}" + " | ".join(cells))
        for name, s in sets.items():
            for cat, c in s["by_category"].items():
                click.echo(
                    f"  {name} category {cat} ({c['questions']} questions): candidates hold "
                    f"{c['candidate_recall']:.3f} of the evidence, recall@10 {c['recall@10']:.3f}"
                )
        click.echo(f"  weights: {r['weights']}")


@bench.command("web")
@click.option(
    "--turns", "-n", default=5000, show_default=True, type=click.IntRange(min=1),
    help="Messages of the generated thread (ignored with --store).",
)  # fmt: skip
@click.option(
    "--store", "store_path", type=click.Path(dir_okay=False, exists=True),
    help="Time the pages on this store's default scope instead of a generated thread.",
)  # fmt: skip
@click.option(
    "--repeat", default=20, show_default=True, type=click.IntRange(min=1),
    help="Requests timed per page after the first (cold) one.",
)  # fmt: skip
@click.option(
    "--no-warm-up", is_flag=True,
    help="Start the servers without their warm-up and ask for every page at once.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@handle_errors
def web_cmd(
    turns: int, store_path: str | None, repeat: int, no_warm_up: bool, as_json: bool
) -> None:
    """Time every page of the web view on a large thread (real uvicorn on 127.0.0.1).

    Each page in a fresh 'arbormem ui' process: its first (cold) request, then the
    p50 / p95 of the next ones, against the bar of 300 ms. The browser's first page
    (scopes) is asked for at once, the others once the server's warm-up is done
    (its time from the start is shown). Needs the web extra.

    \b
    Examples:
      arbormem bench web
      arbormem bench web --store memory.db --repeat 50 --json
    """
    from pathlib import Path

    from arbormem.bench.web import run

    result = run(
        Path(store_path) if store_path else None,
        turns=turns, repeat=repeat, warm_up=not no_warm_up,
    )  # fmt: skip
    if as_json:
        echo_json(result)
        return
    click.echo(f"{result['messages']} messages, {result['sessions']} sessions; "
               f"{repeat} requests per page after the first")  # fmt: skip
    click.echo(
        f"{'page':30} {'cold ms':>8} {'p50 ms':>7} {'p95 ms':>7}  within {result['bar_ms']:.0f} ms"
        "  started ms  warmed ms"
    )
    for name, row in result["pages"].items():
        warm = "-" if row["warm_ms"] is None else f"{row['warm_ms']:.0f}"
        click.echo(f"{name:30} {row['cold_ms']:8.1f} {row['p50_ms']:7.1f} {row['p95_ms']:7.1f}  "
                   f"{'yes' if row['within_bar'] else 'NO':>12}  {row['ready_ms']:10.0f}"
                   f"  {warm:>9}")  # fmt: skip


from arbormem.cli.bench_serve import serve_cmd  # noqa: E402

bench.add_command(serve_cmd)


@bench.command("images")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option(
    "--images",
    "n",
    default=10_000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Images in the scope searched for the speed figures (0: skip them).",
)
@click.option("--queries", default=200, show_default=True, type=click.IntRange(min=1))
@click.option("--embedder", help=EMBEDDER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def images_bench(
    opts: StoreOptions,
    paths: tuple[str, ...],
    n: int,
    queries: int,
    embedder: str | None,
    as_json: bool,
) -> None:
    """Image memories: LoCoMo recall on the questions about shared pictures (turns
    holding the caption against image memories), and search_images speed.

    \b
    Examples:
      arbormem bench images ../shared/datasets/locomo --images 0
      arbormem bench images --images 10000 --json
    """
    import sys

    from arbormem.bench.images import run

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"  {msg}", err=True)

    result = run(paths, n=n, queries=queries, embedder=embedder or opts.embedder, progress=progress)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    pics = result.get("locomo_pictures")
    if pics:
        d = pics["dataset"]
        click.echo(
            f"LoCoMo: {d['conversations']} conversations, {d['picture_questions']} of "
            f"{d['questions']} questions cite a turn that shared a picture ({pics['embedder']})"
        )
        for name, s in pics["systems"].items():
            p, a = s["pictures"], s["all"]
            click.echo(
                f"  {name:7} pictures R@5 {p['recall@5']}, R@10 {p['recall@10']};"
                f"  all R@10 {a['recall@10']}   ({s['how']})"
            )
    speed = result.get("search_speed")
    if speed:
        click.echo(
            f"search_images over {speed['images']:,} images ({speed['embedder']}, "
            f"k={speed['k']}): p50 {speed['search_ms_p50']} ms, p95 {speed['search_ms_p95']} ms "
            f"(CPU p50 {speed['search_cpu_ms_p50']} ms, p95 {speed['search_cpu_ms_p95']} ms); "
            f"stored {speed['ingest_images_per_s']} images/s"
        )
