"""``arbormem bench serve``: the server under concurrent load (see
:mod:`arbormem.bench.serve`)."""

from __future__ import annotations

import json

import click

from arbormem.cli.common import StoreOptions, handle_errors


@click.command("serve")
@click.option("--tenants", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--turns", default=600, show_default=True, type=click.IntRange(1), help="Turns per thread."
)
@click.option("--clients", default=16, show_default=True, type=click.IntRange(1, 256))
@click.option(
    "--duration", default=60.0, show_default=True, type=click.FloatRange(1), help="Seconds of load."
)
@click.option("--search-share", default=0.8, show_default=True, type=click.FloatRange(0, 1))
@click.option(
    "--mcp-calls",
    default=200,
    show_default=True,
    type=click.IntRange(0),
    help="Sequential MCP search_memories calls over HTTP (0: none).",
)
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes (serve --workers).",
)
@click.option(
    "--indexed",
    is_flag=True,
    help="Let the background embedder index the filled store before serving (slow: "
    "without it the server spends the run catching up, counted in its CPU per request).",
)
@click.option(
    "--fresh-queries",
    is_flag=True,
    help="Give every search a query no earlier request asked (by default they are drawn, "
    "with repeats, from 2,000, and the embedder's query cache answers the repeats).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Offered requests/s over all clients, arriving at random (an open loop; "
    "latencies count from when each request was due). Default: each client sends its "
    "next request as soon as the last is answered.",
)
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
@handle_errors
def serve_cmd(
    opts: StoreOptions,
    tenants: int,
    turns: int,
    clients: int,
    duration: float,
    search_share: float,
    mcp_calls: int,
    workers: int,
    indexed: bool,
    fresh_queries: bool,
    rate: float | None,
    seed: int,
    as_json: bool,
) -> None:
    """Load a live server: requests/s, p50/p95 per route, errors, lost adds.

    Fills a temporary store with TENANTS generated threads of TURNS turns, runs
    'arbormem serve' on 127.0.0.1 in a subprocess, and sends searches and adds from
    CLIENTS concurrent connections for DURATION seconds; then checks that every
    acknowledged add is stored, and times MCP search_memories over HTTP. Needs the
    server extra.

    \b
    Examples:
      arbormem bench serve
      arbormem bench serve --duration 10 --tenants 4 --json
      arbormem bench serve --rate 60 --indexed
    """
    from arbormem.bench.serve import BAR, run

    result = run(
        tenants=tenants,
        turns=turns,
        clients=clients,
        duration=duration,
        search_share=search_share,
        mcp_calls=mcp_calls,
        workers=workers,
        embedder=opts.embedder,
        seed=seed,
        indexed=indexed,
        fresh_queries=fresh_queries,
        rate=rate,
        progress=lambda msg: click.echo(msg, err=True),
    )
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    c = result["config"]
    click.echo(
        f"{c['tenants']} tenants x {c['turns_per_thread']} turns, {c['clients']} clients, "
        f"{c['workers']} server workers, "
        f"{result['elapsed_s']} s, embedder {c['embedder']}"
    )
    if c["offered_requests_per_s"] is not None:
        click.echo(f"offered {c['offered_requests_per_s']:g} requests/s at random moments")
    click.echo(
        f"requests/s {result['requests_per_s']} (bar {BAR['requests_per_s']:g}), "
        f"errors {result['errors']}, adds acknowledged {result['adds_acknowledged']}, "
        f"lost {result['lost']}"
    )
    click.echo(f"searches repeating an earlier query {result['repeated_queries']:.0%}")
    if result["server_cpu_ms_per_request"] is not None:
        click.echo(f"server CPU per request {result['server_cpu_ms_per_request']} ms")
    click.echo(f"load generator CPU per request {result['client_cpu_ms_per_request']} ms")
    busy = result["cores_busy"]
    if busy["machine"] is not None:
        click.echo(
            f"cores busy: server {busy['server']}, load generator {busy['load_generator']}, "
            f"whole machine {busy['machine']} of {c['cpus']}"
        )
    for route, figures in result["routes"].items():
        click.echo(
            f"  {route:<8} n={figures['count']:<6} p50 {figures['p50_ms']} ms  "
            f"p95 {figures['p95_ms']} ms"
        )
    mcp = result["mcp_search_memories"]
    if mcp:
        click.echo(f"  mcp search_memories p50 {mcp['p50_ms']} ms  p95 {mcp['p95_ms']} ms")
    missed = [name for name, ok in result["bar"].items() if not ok]
    click.echo("bar: met" if not missed else f"bar: missed on {', '.join(missed)}")
    for sample in result["error_samples"]:
        click.echo(f"  error: {sample}", err=True)
