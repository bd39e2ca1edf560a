"""``arbormem bench scale``: ingest speed, recall latency and footprint against size.

For each size N, one thread of N generated turns (:mod:`arbormem.bench.synth`)
is built in a fresh store (a SQLite file, or a schema of its own on a PostgreSQL
database given as ``store``) through the public :class:`~arbormem.Memory` API, in ``add_many`` batches of 1,000 turns (``batch``; each turn keeps its own
session), or one ``add_many`` per generated session of 20 to 40 turns with
``batch=0``. Then:

* ``ingest_turns_per_s``: turns per second of wall time spent in ``add_many``
  (embeddings included; generating the text is not counted);
* ``query_ms_p50`` / ``query_ms_p95``: one ``Memory.search(k=10)`` at a time
  over a few hundred generated queries, query embedding included, after a
  warm-up that builds or loads the vector index (``Memory.prepare_search``, as
  ``arbormem ingest`` runs it) and asks one search (timed as ``warm_query_s``);
* ``peak_rss_mb``: peak resident memory of the process that built and
  queried the store (each size runs in its own subprocess, so the peak is
  that size's alone); ``baseline_rss_mb`` is the same process before ingest;
* ``db_mb``: the store's files on disk (database, WAL and shared memory), or on
  PostgreSQL its tables and indexes;
* ``first_query_s``: in another fresh process, the time to open the existing
  store and answer one query (embedder loading included, interpreter start
  and imports excluded), with its breakdown and that process's peak memory.

The subprocesses run ``python -m arbormem.bench.scale build|reopen``, an
internal protocol that prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.errors import ArbormemError, ConfigError
from arbormem.store.sqlite import files as store_files

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
DEFAULT_QUERIES = 300
#: Turns per ``add_many`` call: an import of history. 0: one call per session.
DEFAULT_BATCH = 1000
K = 10
#: The generated history spans two years, whatever its size.
START = datetime(2023, 1, 1, tzinfo=timezone.utc)
END = datetime(2025, 1, 1, tzinfo=timezone.utc)
USER, AGENT = "bench", "scale"


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process in MiB (None where unsupported)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def store_mb(db: Path) -> float:
    """Size on disk of a SQLite store with its WAL and shared-memory files."""
    return round(store_files.store_bytes(db) / 2**20, 1)


# -- the two measuring processes ---------------------------------------------------------


def _status(message: str, *, done: bool = False) -> None:
    sys.stderr.write(f"\r\x1b[2K  {message}" + ("\n" if done else ""))
    sys.stderr.flush()


def build(
    db: str | Path,
    turns: int,
    *,
    embedder: str | None,
    queries: int = DEFAULT_QUERIES,
    seed: int = 0,
    batch_size: int = DEFAULT_BATCH,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Build a store of ``turns`` generated turns, then time searches on it."""
    from arbormem.bench.synth import generate_queries, generate_turns
    from arbormem.embed import get_embedder
    from arbormem.memory import Memory

    emb = get_embedder(embedder)
    emb.embed("warm up")  # model loading is a one-off, not part of ingest throughput
    baseline = peak_rss_mb()
    speakers: set[str] = set()
    sessions: set[str] = set()
    calls = 0
    ingest_s = 0.0
    last_report = 0.0
    done = 0
    with Memory(db, user=USER, agent=AGENT, embedder=emb, reranker=None) as mem:
        batch: list[dict[str, Any]] = []
        key = None

        def flush() -> None:
            nonlocal ingest_s, done, calls, last_report
            t0 = time.perf_counter()
            mem.add_many(batch)
            ingest_s += time.perf_counter() - t0
            done += len(batch)
            calls += 1
            batch.clear()
            if show_progress and time.monotonic() - last_report > 0.5:
                last_report = time.monotonic()
                _status(f"{turns:,} turns: {done:,} ingested ({done / ingest_s:,.0f} turns/s)")

        for turn in generate_turns(turns, seed=seed, start=START, end=END):
            if batch and (len(batch) >= batch_size if batch_size > 0 else turn.session != key):
                flush()
            key = turn.session
            sessions.add(turn.session)
            speakers.add(turn.speaker)
            batch.append(
                {
                    "content": turn.content,
                    "role": turn.role,
                    "speaker": turn.speaker,
                    "timestamp": turn.timestamp,
                    "session": turn.session,
                }
            )
        if batch:
            flush()
        if show_progress:
            _status(f"{turns:,} turns: ingested, querying")
        asked = generate_queries(queries + 1, seed=seed, names=sorted(speakers))
        # The warm-up builds the thread's vector index first, as `arbormem ingest`
        # does after an import (on PostgreSQL a search would start it in the
        # background and search exactly until it is ready).
        t0 = time.perf_counter()
        mem.prepare_search()
        mem.search(asked[0], k=K)
        warm = time.perf_counter() - t0
        times = []
        for q in asked[1:]:
            t0 = time.perf_counter()
            mem.search(q, k=K)
            times.append((time.perf_counter() - t0) * 1000)
        recall = mem.recall_config.to_dict()
        model = mem.embedder.model_id
        tree = mem.tree_config.enabled
    ms = np.asarray(times or [0.0])
    if show_progress:
        _status(f"{turns:,} turns: built and queried", done=True)
    return {
        "turns": turns,
        "sessions": len(sessions),
        "add_many_calls": calls,
        "ingest_s": round(ingest_s, 2),
        "ingest_turns_per_s": round(turns / ingest_s, 1) if ingest_s > 0 else None,
        "warm_query_s": round(warm, 3),
        "query_ms_p50": round(float(np.percentile(ms, 50)), 2),
        "query_ms_p95": round(float(np.percentile(ms, 95)), 2),
        "query_ms_max": round(float(ms.max()), 2),
        "queries": len(times),
        "baseline_rss_mb": baseline,
        "peak_rss_mb": peak_rss_mb(),
        "embedder": model,
        "recall": recall,
        "tree": tree,
    }


def reopen(db: str | Path, *, embedder: str | None, seed: int = 0) -> dict[str, Any]:
    """Open an existing store in this (fresh) process and answer a first query."""
    from arbormem.bench.synth import generate_queries
    from arbormem.embed import get_embedder
    from arbormem.memory import Memory

    first, second = generate_queries(2, seed=seed + 1)
    t0 = time.perf_counter()
    with Memory(db, user=USER, agent=AGENT, embedder=get_embedder(embedder), reranker=None) as mem:
        opened = time.perf_counter()
        mem.embedder.embed("warm up")
        loaded = time.perf_counter()
        mem.search(first, k=K)
        answered = time.perf_counter()
        mem.search(second, k=K)
        again = time.perf_counter()
    return {
        "first_query_s": round(answered - t0, 3),
        "open_s": round(opened - t0, 3),
        "embedder_load_s": round(loaded - opened, 3),
        "first_search_s": round(answered - loaded, 3),
        "second_query_ms": round((again - answered) * 1000, 2),
        "reopen_peak_rss_mb": peak_rss_mb(),
    }


def _child(args: Sequence[str]) -> dict[str, Any]:
    """Run one measuring process and return the JSON object it prints."""
    import arbormem

    env = dict(os.environ)
    root = str(Path(arbormem.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "arbormem.bench.scale", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise ArbormemError(
            f"the measuring process '{' '.join(args[:3])}' failed with exit code "
            f"{proc.returncode}; its error is printed above"
        )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# -- the benchmark -------------------------------------------------------------------------


def run(
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    embedder: str | None = None,
    queries: int = DEFAULT_QUERIES,
    seed: int = 0,
    batch_size: int = DEFAULT_BATCH,
    workdir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Measure every size, each in its own processes; returns the JSON-ready result.

    Stores are built in a temporary folder, or kept in ``workdir`` (as
    ``scale-<N>.db``, replacing any previous one) for later inspection. With
    ``store`` (a ``postgresql://`` URL) each size's store is a schema of its own
    on that database (``scale_<N>``), replaced if there, and dropped after unless
    ``workdir`` is given (then kept for inspection).
    """
    if not sizes or any(n <= 0 for n in sizes):
        raise ConfigError(f"sizes must be positive turn counts, got {list(sizes)}")
    show = sys.stderr.isatty()
    runs: list[dict[str, Any]] = []
    built: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="arbormem-scale-") as tmp:
        folder = Path(workdir) if workdir is not None else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for i, n in enumerate(sizes, 1):
            if progress:
                progress(f"[{i}/{len(sizes)}] {n:,} turns")
            db: str | Path = folder / f"scale-{n}.db"
            if store is not None:
                from arbormem.store.postgres.admin import drop_store, with_schema

                db = with_schema(store, f"scale_{n}")
                drop_store(db)
            else:
                store_files.remove_store(db)  # its log and saved vector index too
            common = ["--db", str(db), "--seed", str(seed)]
            if embedder:
                common += ["--embedder", embedder]
            built = _child(
                ["build", *common, "--turns", str(n), "--queries", str(queries)]
                + ["--batch", str(batch_size)]
                + (["--progress"] if show else [])
            )
            reopened = _child(["reopen", *common])
            if store is not None:
                from arbormem.store.postgres.admin import drop_store, store_bytes

                size = round(store_bytes(str(db)) / 2**20, 1)
                if workdir is None:
                    drop_store(str(db))
            else:
                size = store_mb(Path(db))
            runs.append(
                {
                    "turns": n,
                    "ingest_turns_per_s": built["ingest_turns_per_s"],
                    "query_ms_p50": built["query_ms_p50"],
                    "query_ms_p95": built["query_ms_p95"],
                    "peak_rss_mb": built["peak_rss_mb"],
                    "db_mb": size,
                    "first_query_s": reopened["first_query_s"],
                    **{
                        k: v
                        for k, v in built.items()
                        if k not in ("turns", "embedder", "recall", "tree") and k not in reopened
                    },
                    **reopened,
                }
            )
    return {"runs": runs, "config": _config(built, queries, seed, batch_size, store)}


def _config(
    built: dict[str, Any], queries: int, seed: int, batch_size: int, store: str | None = None
) -> dict[str, Any]:
    import arbormem

    if store is None:
        described = "sqlite"
    else:
        from arbormem.store.postgres.connection import redact

        described = f"postgres ({redact(store)}, a schema per size)"

    return {
        "embedder": built.get("embedder"),
        "recall": built.get("recall"),
        "tree": built.get("tree"),
        "llm": None,
        "k": K,
        "queries": queries,
        "seed": seed,
        "store": described,
        "batches": (
            f"add_many of {batch_size} turns"
            if batch_size > 0
            else "one add_many per generated session of 20-40 turns"
        ),
        "history": f"{START.date()} to {END.date()}",
        "arbormem": arbormem.__version__,
        "python": platform.python_version(),
        "sqlite": store_files.engine_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def check_plotting() -> None:
    """Fail early, before a long run, when ``--plot`` cannot work."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'arbormem[plot]'") from None


def plot(result: dict[str, Any], path: str | Path) -> None:
    """Write a PNG of latency, first-query time, memory and ingest speed against size."""
    check_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    n = [r["turns"] for r in runs]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    panels = [
        (axes[0][0], "recall latency (ms)", [("query_ms_p50", "p50"), ("query_ms_p95", "p95")]),
        (axes[0][1], "open store + first query (s)", [("first_query_s", "fresh process")]),
        (axes[1][0], "size (MiB)", [("peak_rss_mb", "peak RSS"), ("db_mb", "on disk")]),
        (axes[1][1], "ingest (turns/s)", [("ingest_turns_per_s", "add_many")]),
    ]
    for ax, title, series in panels:
        for key, label in series:
            values = [r.get(key) for r in runs]
            if any(v is None for v in values):
                continue
            ax.plot(n, values, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("turns in the thread")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    cfg = result["config"]
    fig.suptitle(
        f"arbormem bench scale: {cfg['embedder']}, k={cfg['k']}, "
        f"{cfg['cpu_count']} CPU, Python {cfg['python']}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_size(text: str) -> int:
    """``"10000"``, ``"10_000"``, ``"10,000"``, ``"10k"`` or ``"1M"`` as an int."""
    raw = text.strip().replace("_", "").replace(",", "").lower()
    factor = 1
    if raw.endswith("k"):
        raw, factor = raw[:-1], 1_000
    elif raw.endswith("m"):
        raw, factor = raw[:-1], 1_000_000
    try:
        value = int(float(raw) * factor)
    except ValueError:
        raise ConfigError(f"--turns {text!r} is not a number (try 10000, 100k or 1M)") from None
    if value <= 0:
        raise ConfigError(f"--turns must be positive, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> None:
    """The measuring processes' entry point (not a user command)."""
    parser = argparse.ArgumentParser(prog="python -m arbormem.bench.scale")
    parser.add_argument("step", choices=("build", "reopen"))
    parser.add_argument("--db", required=True, help="a store file or a postgresql:// URL")
    parser.add_argument("--embedder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES)
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    if args.step == "build":
        out = build(
            args.db,
            args.turns,
            embedder=args.embedder,
            queries=args.queries,
            seed=args.seed,
            batch_size=args.batch,
            show_progress=args.progress,
        )
    else:
        out = reopen(args.db, embedder=args.embedder, seed=args.seed)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
