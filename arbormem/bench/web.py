"""``arbormem bench web``: how fast each page of the web view answers on a large thread.

Builds a thread of generated conversation (``--turns``, 5,000 by default) or opens
a given store, then times every page the way a person meets it: each page in a
fresh ``arbormem ui`` process (its own interpreter, nothing loaded by this one),
its first request (cold), then ``--repeat`` more for the p50 and p95. The server
warms the first search up in the background as it starts (see
:mod:`arbormem.warmup`); the scopes page, which the browser opens at once, is
asked for at once, every other page once the server says the warm-up is done,
and that wait is reported (``warm_ms``). With ``warm_up=False`` the servers do
no warm-up and every page is asked for at once.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

#: The bar: every page within this many milliseconds at the 95th percentile.
BAR_MS = 300.0
QUERIES = ("vet appointment", "concert tickets", "what did the doctor say", "garden", "flight")


def build(db: Path, turns: int, seed: int = 0) -> None:
    """A store of ``turns`` generated messages in one scope, its tree grown."""
    from arbormem import Memory
    from arbormem.bench.synth import generate_turns

    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with Memory(db) as mem:
        mem.add_many(
            {"content": t.content, "role": t.role, "speaker": t.speaker,
             "timestamp": t.timestamp, "session": t.session}
            for t in generate_turns(turns, seed=seed, start=start, end=start + timedelta(days=365))
        )  # fmt: skip
        mem.wait()


@contextmanager
def _ui(db: Path, warm_up: bool, wait: bool) -> Iterator[tuple[str, float, float | None]]:
    """A fresh ``arbormem ui`` on ``db``: its address, the milliseconds from the
    process's start to its address, and (``wait``: once it has said so) to the end
    of its warm-up."""
    command = [sys.executable, "-m", "arbormem", "--db", str(db), "ui", "--port", "0",
               "--no-browser", *([] if warm_up else ["--no-warm-up"])]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        if not found:
            raise RuntimeError(f"arbormem ui did not start: {line}{proc.stderr.read()}")
        ready_ms = (time.perf_counter() - start) * 1000
        warm_ms: float | None = None
        if warm_up and wait:
            for said in proc.stderr:  # the server says when its warm-up is done
                if "warmed up" in said:
                    warm_ms = (time.perf_counter() - start) * 1000
                    break
        # Whatever else it says is read, so that a full pipe never stops it.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield found.group(0), ready_ms, warm_ms
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url) as answer:
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{url} answered {answer.status}")
    return (time.perf_counter() - start) * 1000


def _row(first: float, times: list[float]) -> dict[str, Any]:
    times = sorted(times)
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return {
        "cold_ms": round(first, 1),
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(p95, 1),
        "within_bar": max(first, p95) <= BAR_MS,
    }


def run(
    db: Path | None = None, *, turns: int = 5000, repeat: int = 20, warm_up: bool = True
) -> dict[str, Any]:
    """Time every page, each in a fresh server process; returns the figures per page."""
    from arbormem import Memory

    with tempfile.TemporaryDirectory() as tmp:
        if db is None:
            db = Path(tmp) / "web.db"
            build(db, turns)
        # What the pages are asked about, found with a memory of this process that is
        # closed before any server starts: nothing it loads reaches a server.
        with Memory(db) as mem:
            stats = mem.stats()
            tree = mem.tree(messages=False, depth=2)
            top = tree.children[0] if tree.children else None
            leaf = next((n for n in tree.walk() if n.kind == "leaf"), None)
            middle = mem.messages(start=stats.messages // 2, end=stats.messages // 2 + 1)
            message = middle[0].id if middle else ""
            session = mem.sessions()[0].id if stats.messages else ""
            q = f"user={mem.scope.user}&agent={mem.scope.agent}"
        pages: dict[str, list[str]] = {
            "scopes": ["/"],
            "sessions": [f"/sessions?{q}"],
            "messages": [f"/messages?{q}&session={session}"],
            "tree": [f"/tree?{q}"],
            "tree, message in place": [f"/tree?{q}&message={message}"],
            "tree, a topic's children": [f"/tree/children?{q}&node={top.id if top else 0}"],
            "tree, an exchange's messages": [
                f"/tree/leaf?{q}&first={leaf.first_index if leaf else 0}"
                f"&last={leaf.last_index if leaf else 0}"
            ],
            "search": [f"/search?{q}&q={w.replace(' ', '+')}" for w in QUERIES],
            "context": [f"/context?{q}&q={w.replace(' ', '+')}&budget=2000" for w in QUERIES],
            "reorganisation log": [f"/log?{q}"],
        }
        results: dict[str, Any] = {}
        for name, urls in pages.items():
            # The browser opens the scopes page at once; a person then picks a page.
            wait = name != "scopes"
            with _ui(db, warm_up, wait) as (base, ready_ms, warm_ms):
                first = _get(base + urls[0])
                times = [_get(base + urls[(i + 1) % len(urls)]) for i in range(repeat)]
            results[name] = {
                **_row(first, times),
                "ready_ms": round(ready_ms, 1),
                "warm_ms": None if warm_ms is None else round(warm_ms, 1),
            }
    return {"messages": stats.messages, "sessions": stats.sessions, "repeat": repeat,
            "bar_ms": BAR_MS, "warm_up": warm_up, "pages": results}  # fmt: skip
