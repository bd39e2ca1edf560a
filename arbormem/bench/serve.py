"""``arbormem bench serve``: a live server under concurrent load.

A store is filled with ``tenants`` threads of ``turns`` generated turns each (a
LoCoMo conversation has about 600), one tenant and user per thread, an API key per
tenant. ``arbormem serve`` then runs in a subprocess on 127.0.0.1, and ``clients``
threads (each its own HTTP connection) send for ``duration`` seconds (with ``rate``,
every request due within it is sent, so a slow server's run lasts longer) a mix of
searches (``search_share``) and single-message adds, each to a random tenant. It
reports requests per second, p50/p95 latency per route, errors, the share of
searches whose query an earlier request asked (``repeated_queries``: the
embedder's query cache answers those; ``fresh_queries`` makes them rare), and,
after the server has stopped, how many acknowledged adds the file does not hold
(``lost``).
Finally ``mcp_calls`` sequential ``search_memories`` calls over MCP's streamable
HTTP give that route's p50/p95.

By default each client sends its next request when the last one is answered (a
closed loop), so the requests per second are what the server manages with
``clients`` requests in flight, and latencies are mostly the queue of those
clients. With ``rate``, requests arrive at random at that rate whatever the
server does (an open loop), and each latency counts from when its request was
due: the p95 at a given rate.

The load generator runs in this process and the server in another, so the server's
figures are not slowed by the clients' Python; both share the machine's cores.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.bench.synth import generate_queries, generate_turns
from arbormem.config import UNSET
from arbormem.errors import InputError
from arbormem.memory import Memory

#: The issue's bar on the reference 2-core machine.
BAR = {"requests_per_s": 150.0, "search_p95_ms": 60.0, "add_p95_ms": 40.0, "mcp_p95_ms": 50.0}


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"count": 0, "p50_ms": 0.0, "p95_ms": 0.0}
    arr = np.asarray(samples) * 1000.0
    return {
        "count": len(samples),
        "p50_ms": round(float(np.percentile(arr, 50)), 2),
        "p95_ms": round(float(np.percentile(arr, 95)), 2),
    }


def fill_store(
    db: Path, tenants: int, turns: int, embedder: str | None, seed: int, indexed: bool = False
) -> None:
    """One thread of ``turns`` turns for user ``u`` in each tenant ``t0``...``tN``;
    with ``indexed``, also embedded by the background embedder (a store in use has
    been: without it the server spends the run catching up, on the clock)."""
    with Memory(db, embedder=UNSET if embedder is None else embedder) as mem:
        for t in range(tenants):
            rows = [
                {
                    "role": turn.role,
                    "speaker": turn.speaker,
                    "content": turn.content,
                    "timestamp": turn.timestamp,
                    "session": turn.session,
                }
                for turn in generate_turns(turns, seed=seed + t)
            ]
            mem.for_tenant(f"t{t}").add_many(rows, user="u")
        # The trees grown in the background (and the deep vectors), before the clock starts.
        mem.wait(indexed=indexed)


def _start_server(
    db: Path, keys: Path, embedder: str | None, workers: int
) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "arbormem", "--db", str(db)]
    if embedder is not None:
        cmd += ["--embedder", embedder]
    cmd += ["serve", "--port", "0", "--keys", str(keys), "--workers", str(workers)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " on http://" not in line:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"arbormem serve did not start: {line}{err}")
    return proc, line.rsplit(" on ", 1)[1].strip()


def _server_cpu_seconds(pid: int) -> float | None:
    """CPU time the server and its workers have used so far (None without psutil).

    On a machine shared with other work, wall-clock latencies measure the sharing;
    CPU time per request measures the server."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        root = psutil.Process(pid)
        total = 0.0
        for p in [root, *root.children(recursive=True)]:
            t = p.cpu_times()
            total += t.user + t.system
        return total
    except psutil.Error:
        return None


def _machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine has spent busy so far (None without
    psutil): with the server's and the load generator's own, it shows how much of
    the machine other work took during a run."""
    try:
        import psutil
    except ImportError:
        return None
    t = psutil.cpu_times()
    return float(sum(t)) - t.idle - getattr(t, "iowait", 0.0)


def _warm(http: Any, keys: list[str], queries: list[str]) -> None:
    """One search per tenant on a client's own connection before the clock starts.

    The first search of a thread in a server process loads its vectors, index,
    names and the deep model: start-up, not serving. Each of ``serve --workers``
    processes pays it once, and a keep-alive connection stays with one process, so
    every load connection warms the process it landed on (warming over a single
    connection left the other workers to pay it on the clock)."""
    for n, key in enumerate(keys):
        r = http.post(
            "/v1/search",
            json={"user": "u", "query": queries[n % len(queries)]},
            headers={"Authorization": f"Bearer {key}"},
        )
        r.raise_for_status()


def _load(
    url: str,
    keys: list[str],
    clients: int,
    duration: float,
    search_share: float,
    queries: list[str],
    seed: int,
    cpu: Callable[[], float | None] = lambda: None,
    fresh: bool = False,
    rate: float | None = None,
) -> dict[str, Any]:
    """``clients`` connections warm up (:func:`_warm`), then load the server for
    ``duration`` seconds; ``cpu`` reads the server's CPU seconds around the load.

    Searches draw their queries from ``queries`` with repeats; with ``fresh``, each
    client takes its own share of them in turn (after the warm-up's, which none
    takes), so that no query is asked twice while they last.

    Without ``rate`` each client sends its next request as soon as the last is
    answered (a closed loop: the server's speed sets the rate). With it, requests
    are due at random moments, ``rate`` a second over all clients (each client a
    Poisson stream of ``rate / clients``), and a latency counts from the moment its
    request was due: a client still waiting for an answer sends late, and that
    queueing is counted, not hidden."""
    import httpx2

    latencies: dict[str, list[float]] = {"search": [], "add": []}
    errors: list[str] = []
    acknowledged: list[tuple[int, str]] = []
    asked: list[tuple[float, str]] = []  # (when, query) of every search on the clock
    lock = threading.Lock()
    warm, start = threading.Barrier(clients + 1), threading.Barrier(clients + 1)
    deadline_box: list[float] = []

    def client(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        mine: dict[str, list[float]] = {"search": [], "add": []}
        mine_acks: list[tuple[int, str]] = []
        mine_errors: list[str] = []
        mine_asked: list[tuple[float, str]] = []
        own = queries[len(keys) + n :: clients] if fresh else []
        with httpx2.Client(base_url=url, timeout=120) as http:
            cold: str | None = None
            try:
                _warm(http, keys, queries)
            except Exception as exc:  # counted as an error; the others go on
                cold = f"warm-up: {type(exc).__name__}: {exc}"
            warm.wait()  # the clock starts when every connection is warm
            start.wait()
            http.timeout = httpx2.Timeout(30)
            if cold is not None:
                mine_errors.append(cold)
            deadline = deadline_box[0]
            due = deadline - duration  # the moment the clock started
            i = 0
            # With a rate, every request due before the deadline is sent, however
            # late: leaving out those a slow server delayed would flatter it.
            while cold is None and (rate is not None or time.perf_counter() < deadline):
                if rate is not None:
                    due += rng.expovariate(rate / clients)
                    if due >= deadline:
                        break
                    time.sleep(max(0.0, due - time.perf_counter()))
                t = rng.randrange(len(keys))
                headers = {"Authorization": f"Bearer {keys[t]}"}
                route = "search" if rng.random() < search_share else "add"
                if route == "search":
                    query = own[len(mine_asked) % len(own)] if own else rng.choice(queries)
                    mine_asked.append((time.perf_counter(), query))
                    body: dict[str, Any] = {"user": "u", "query": query, "k": 10}
                    path = "/v1/search"
                else:
                    text = f"client {n} note {i}: {rng.choice(queries)}"
                    body = {"user": "u", "messages": [{"content": text}]}
                    path = "/v1/messages"
                began = time.perf_counter() if rate is None else due
                try:
                    r = http.post(path, json=body, headers=headers)
                    took = time.perf_counter() - began
                    if r.status_code >= 400:
                        mine_errors.append(f"{route} {r.status_code}: {r.text[:200]}")
                    else:
                        mine[route].append(took)
                        if route == "add":
                            mine_acks.append((t, r.json()["ids"][0]))
                except httpx2.HTTPError as exc:
                    mine_errors.append(f"{route}: {type(exc).__name__}: {exc}")
                i += 1
        with lock:
            for k, v in mine.items():
                latencies[k].extend(v)
            acknowledged.extend(mine_acks)
            errors.extend(mine_errors)
            asked.extend(mine_asked)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for th in threads:
        th.start()
    warm.wait()
    cpu_before = cpu()
    # This process's CPU is the load generator's (its main thread only waits).
    own_before, busy_before = time.process_time(), _machine_busy_seconds()
    began = time.perf_counter()
    deadline_box.append(began + duration)
    start.wait()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - began
    cpu_after = cpu()
    own_s = time.process_time() - own_before
    busy_after = _machine_busy_seconds()
    done = sum(len(v) for v in latencies.values()) + len(errors)
    # Searches whose query an earlier request of the run (the warm-up's included)
    # asked: the embedder's query cache answers those without embedding.
    seen = set(queries[: len(keys)])
    repeats = 0
    for _, query in sorted(asked):
        repeats += query in seen
        seen.add(query)
    return {
        "elapsed_s": round(elapsed, 2),
        "requests": done,
        "requests_per_s": round(done / elapsed, 1),
        "routes": {k: _percentiles(v) for k, v in latencies.items()},
        "errors": len(errors),
        "error_samples": errors[:5],
        "repeated_queries": round(repeats / len(asked), 3) if asked else 0.0,
        "acknowledged": acknowledged,
        "cpu_s": None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
        "client_cpu_s": own_s,
        "busy_s": None if busy_before is None or busy_after is None else busy_after - busy_before,
    }


def _mcp_latency(url: str, key: str, calls: int, queries: list[str]) -> dict[str, float]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> list[float]:
        took = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for i in range(calls):
                began = time.perf_counter()
                result = await session.call_tool(
                    "search_memories", {"query": queries[i % len(queries)], "scope": "u"}
                )
                took.append(time.perf_counter() - began)
                if result.is_error:
                    raise RuntimeError(f"search_memories failed: {result.content}")
        return took

    return _percentiles(asyncio.run(run()))


def run(
    *,
    tenants: int = 20,
    turns: int = 600,
    clients: int = 16,
    duration: float = 60.0,
    search_share: float = 0.8,
    mcp_calls: int = 200,
    workers: int = 2,
    embedder: str | None = None,
    seed: int = 0,
    indexed: bool = False,
    fresh_queries: bool = False,
    rate: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    from arbormem.server.keys import KeyRing

    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        raise InputError(f"rate must be a positive number of requests a second, not {rate!r}")

    say = progress or (lambda _msg: None)
    with tempfile.TemporaryDirectory(prefix="arbormem-bench-serve-") as tmp:
        db, keyfile = Path(tmp) / "bench.db", Path(tmp) / "bench.keys.json"
        say(f"filling {tenants} tenants with {turns} turns each")
        began = time.perf_counter()
        fill_store(db, tenants, turns, embedder, seed, indexed)
        fill_s = time.perf_counter() - began
        ring = KeyRing(keyfile)
        keys = [ring.create(f"t{t}") for t in range(tenants)]
        # With fresh queries, enough that no client runs out of its own below 25
        # searches a second (past that it asks them again, counted as repeats).
        queries = generate_queries(
            tenants + max(2000, clients * int(duration * 25)) if fresh_queries else 2000,
            seed=seed,
        )
        proc, url = _start_server(db, keyfile, embedder, workers)
        try:
            say(f"serving at {url}: one search per tenant on each connection to warm up")
            offered = "" if rate is None else f", {rate:g} requests/s offered"
            say(f"{clients} clients for {duration:g} s{offered}")
            load = _load(
                url,
                keys,
                clients,
                duration,
                search_share,
                queries,
                seed,
                cpu=lambda: _server_cpu_seconds(proc.pid),
                fresh=fresh_queries,
                rate=rate,
            )
            say(f"{mcp_calls} MCP search_memories calls over HTTP")
            mcp = _mcp_latency(url, keys[0], mcp_calls, queries) if mcp_calls else {}
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        acknowledged = load.pop("acknowledged")
        cpu_s = load.pop("cpu_s")
        client_cpu_s = load.pop("client_cpu_s")
        busy_s = load.pop("busy_s")
        with Memory(db, read_only=True, embedder=UNSET if embedder is None else embedder) as mem:
            stored = {
                t: {m.id for m in mem.for_tenant(f"t{t}").messages(user="u")}
                for t in range(tenants)
            }
        lost = sum(1 for t, mid in acknowledged if mid not in stored[t])
    result = {
        "config": {
            "tenants": tenants,
            "turns_per_thread": turns,
            "clients": clients,
            "workers": workers,
            "duration_s": duration,
            "search_share": search_share,
            "embedder": embedder or "default",
            "cpus": os.cpu_count(),
            "fill_s": round(fill_s, 1),
            "indexed": indexed,
            "fresh_queries": fresh_queries,
            "offered_requests_per_s": rate,
        },
        **load,
        "server_cpu_ms_per_request": None
        if cpu_s is None or not load["requests"]
        else round(cpu_s * 1000 / load["requests"], 2),
        "client_cpu_ms_per_request": round(client_cpu_s * 1000 / load["requests"], 2)
        if load["requests"]
        else None,
        # Cores in use over the run: the server's, the load generator's (this
        # process), and the whole machine's (the rest is other work).
        "cores_busy": {
            "server": None if cpu_s is None else round(cpu_s / load["elapsed_s"], 2),
            "load_generator": round(client_cpu_s / load["elapsed_s"], 2),
            "machine": None if busy_s is None else round(busy_s / load["elapsed_s"], 2),
        },
        "adds_acknowledged": len(acknowledged),
        "lost": lost,
        "mcp_search_memories": mcp,
    }
    routes = load["routes"]
    result["bar"] = {
        "requests_per_s": load["requests_per_s"] >= BAR["requests_per_s"],
        "search_p95_ms": routes["search"]["p95_ms"] <= BAR["search_p95_ms"],
        "add_p95_ms": routes["add"]["p95_ms"] <= BAR["add_p95_ms"],
        "errors": load["errors"] == 0,
        "lost": lost == 0,
        "mcp_p95_ms": bool(mcp) and mcp["p95_ms"] <= BAR["mcp_p95_ms"],
    }
    return result
