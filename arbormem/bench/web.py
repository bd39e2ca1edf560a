"""``arbormem bench web``: how fast each page of the web view answers on a large thread.

Builds a thread of generated conversation (``--turns``, 5,000 by default) or opens
a given store, serves the web view with a real uvicorn on 127.0.0.1, and requests
every page one at a time: the first request of each page (cold: the tree loaded,
the vectors read) and then ``--repeat`` more, reporting each page's p50 and p95
and whether the p95 is within the bar (300 ms).
"""

from __future__ import annotations

import socket
import statistics
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
def _serve(app: Any) -> Iterator[str]:
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url) as answer:
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{url} answered {answer.status}")
    return (time.perf_counter() - start) * 1000


def run(db: Path | None = None, *, turns: int = 5000, repeat: int = 20) -> dict[str, Any]:
    """Time every page; returns the figures per page."""
    from arbormem import Memory
    from arbormem.web import create_app

    with tempfile.TemporaryDirectory() as tmp:
        if db is None:
            db = Path(tmp) / "web.db"
            build(db, turns)
        with Memory(db) as mem:
            stats = mem.stats()
            tree = mem.tree(messages=False)
            top = tree.children[0] if tree.children else None
            leaf = next((n for n in tree.walk() if n.kind == "leaf"), None)
            hit = mem.search(QUERIES[0])[0].message.id if stats.messages else None
            session = mem.sessions()[0].id if stats.messages else ""
            q = f"user={mem.scope.user}&agent={mem.scope.agent}"
            pages: dict[str, list[str]] = {
                "scopes": ["/"],
                "sessions": [f"/sessions?{q}"],
                "messages": [f"/messages?{q}&session={session}"],
                "tree": [f"/tree?{q}"],
                "tree, message in place": [f"/tree?{q}&message={hit}"],
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
            with _serve(create_app(mem)) as base:
                for name, urls in pages.items():
                    cold = _get(base + urls[0])
                    times = [_get(base + urls[(i + 1) % len(urls)]) for i in range(repeat)]
                    times.sort()
                    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
                    results[name] = {
                        "cold_ms": round(cold, 1),
                        "p50_ms": round(statistics.median(times), 1),
                        "p95_ms": round(p95, 1),
                        "within_bar": p95 <= BAR_MS,
                    }
    return {"messages": stats.messages, "sessions": stats.sessions, "repeat": repeat,
            "bar_ms": BAR_MS, "pages": results}  # fmt: skip
