"""``arbormem bench serve`` end to end on a small load (figures are not asserted:
speed is what the command reports, not what a test checks)."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def test_bench_serve_reports_every_route_and_loses_nothing() -> None:
    out = run_cli(
        "--embedder", "hash", "bench", "serve", "--tenants", "2", "--turns", "40",
        "--clients", "3", "--duration", "2", "--mcp-calls", "5", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result["routes"]) == {"search", "add"}
    assert result["routes"]["search"]["count"] > 0
    assert result["errors"] == 0, result["error_samples"]
    assert result["lost"] == 0
    assert result["mcp_search_memories"]["count"] == 5
    assert set(result["bar"]) == {
        "requests_per_s", "search_p95_ms", "add_p95_ms", "errors", "lost", "mcp_p95_ms",
    }  # fmt: skip
    assert 0.0 <= result["repeated_queries"] <= 1.0
    # Where the machine's cores went: the load generator sent requests, so it used
    # some CPU; the server and the whole machine used at least as much as it did.
    busy = result["cores_busy"]
    assert result["client_cpu_ms_per_request"] > 0
    assert busy["load_generator"] > 0
    assert busy["machine"] >= busy["load_generator"] * 0.9
    assert busy["server"] > 0


def test_bench_serve_with_fresh_queries_asks_no_query_twice() -> None:
    # The embedder's query cache must not answer any search of such a run.
    out = run_cli(
        "--embedder", "hash", "bench", "serve", "--tenants", "2", "--turns", "40",
        "--clients", "3", "--duration", "2", "--mcp-calls", "0", "--search-share", "1",
        "--fresh-queries", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["config"]["fresh_queries"] is True
    assert result["routes"]["search"]["count"] > 0
    assert result["repeated_queries"] == 0.0


def test_bench_serve_at_an_offered_rate_sends_about_that_many() -> None:
    # An open loop: requests arrive at random at the rate, whatever the server does.
    out = run_cli(
        "--embedder", "hash", "bench", "serve", "--tenants", "2", "--turns", "40",
        "--clients", "4", "--duration", "3", "--mcp-calls", "0", "--rate", "20", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["config"]["offered_requests_per_s"] == 20
    sent = result["requests"]
    # Poisson arrivals: 60 expected; 30 and 90 are over five standard deviations away.
    assert 30 <= sent <= 90, sent
    assert result["errors"] == 0 and result["lost"] == 0


def test_bench_serve_refuses_a_rate_that_is_not_positive() -> None:
    out = run_cli("bench", "serve", "--rate", "0")
    assert out.returncode != 0
    assert "--rate" in out.stderr
