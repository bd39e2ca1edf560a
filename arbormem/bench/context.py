"""``arbormem bench context``: how long assembling one prompt takes in a long session.

A fresh temporary store gets one session of N generated messages (the scale
benchmark's generator, two people over a month, stored in batches of 500),
then :meth:`Memory.context` is called for Q generated questions in that
session, one at a time, with no LLM. Reported: p50/p95/max latency of each
call (recall, topic paths, window, summary and packing included), the mean
prompt size and the token counter.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

__all__ = ["run"]

DEFAULT_MESSAGES = 2000
DEFAULT_QUERIES = 200
TARGET_P95_MS = 50.0
SESSION = "long-session"
START = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
BATCH = 500
MONTH = timedelta(days=30)


def _pct(values: list[float], q: float) -> float:
    import numpy as np

    return round(float(np.percentile(values, q)), 2) if values else 0.0


def run(
    messages: int = DEFAULT_MESSAGES,
    *,
    queries: int = DEFAULT_QUERIES,
    budget: int | None = None,
    embedder: str | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build the session, time the context calls; the figures as a JSON-ready dict."""
    from arbormem.bench.synth import NAMES, generate_queries, generate_turns
    from arbormem.config import UNSET
    from arbormem.memory import Memory

    # Two people talking for a month, stored as one session.
    names = list(NAMES[:2])
    turns = list(
        generate_turns(messages, seed=seed, start=START, end=START + MONTH, speakers=names)
    )
    questions = generate_queries(queries + 1, seed=seed, names=names)
    with (
        tempfile.TemporaryDirectory(prefix="arbormem-bench-context-") as tmp,
        Memory(
            Path(tmp) / "context.db",
            user="bench",
            agent="context",
            embedder=embedder if embedder else UNSET,
            llm=None,
            reranker=None,
        ) as mem,
    ):
        started = time.perf_counter()
        for i in range(0, len(turns), BATCH):
            mem.add_many(
                [
                    {
                        "content": t.content,
                        "role": t.role,
                        "speaker": t.speaker,
                        "timestamp": t.timestamp,
                    }
                    for t in turns[i : i + BATCH]
                ],
                session=SESSION,
            )
            if progress:
                progress(f"stored {min(i + BATCH, len(turns)):,}/{len(turns):,} messages")
        ingest_s = time.perf_counter() - started
        mem.context(questions[0], budget_tokens=budget or UNSET, session=SESSION)  # warm-up
        times: list[float] = []
        tokens: list[int] = []
        counter = ""
        for n, q in enumerate(questions[1:], 1):
            t0 = time.perf_counter()
            ctx = mem.context(q, budget_tokens=budget or UNSET, session=SESSION)
            times.append((time.perf_counter() - t0) * 1000)
            tokens.append(ctx.prompt_tokens)
            counter = ctx.counter
            if progress and n % 20 == 0:
                progress(f"context {n}/{queries}")
        used_budget = ctx.budget
        model = mem.embedder.model_id
    return {
        "messages": messages,
        "queries": queries,
        "budget": used_budget,
        "context_ms_p50": _pct(times, 50),
        "context_ms_p95": _pct(times, 95),
        "context_ms_max": round(max(times), 2) if times else 0.0,
        "prompt_tokens_mean": round(sum(tokens) / len(tokens), 1) if tokens else 0.0,
        "target_p95_ms": TARGET_P95_MS,
        "token_counter": counter,
        "ingest_s": round(ingest_s, 2),
        "config": {"seed": seed, "embedder": model, "llm": None},
    }
