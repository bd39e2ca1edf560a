"""Warming a memory up when a server starts, so that its first search is not its slowest.

The first search of a process loads what every later one reuses: the embedder's
model, the token counter's vocabulary, and the scope's recall caches (its vectors,
its speakers' names). On a 5,000-message thread that is most of a second, paid by
whoever asks first. ``arbormem ui`` and ``arbormem serve`` pay it in a background
thread as they start, through the public API only: a context for a placeholder
query in each scope, which runs a search and counts tokens as a real one does,
and stores nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: The query the warm-up asks (any words will do: what is loaded does not depend on them).
QUERY = "what did we talk about"
#: Scopes warmed, largest first: each one's caches cost memory, and the first few are
#: the ones a person looks at.
MAX_SCOPES = 4


def warm(memory: Any, *, max_scopes: int = MAX_SCOPES) -> float:
    """Run a context (and so a search) in ``memory``'s default scope and its largest
    other ones, up to ``max_scopes``; returns the seconds it took. Errors are logged,
    never raised: a warm-up that fails leaves the first request to load what it needs."""
    start = time.perf_counter()
    try:
        default = (memory.scope.user, memory.scope.agent)
        sizes = []
        for scope in memory.scopes()[:64]:
            pair = (scope.user, scope.agent)
            if pair != default:
                sizes.append((memory.stats(user=pair[0], agent=pair[1]).messages, pair))
        sizes.sort(reverse=True)
        for user, agent in [default, *(p for _, p in sizes)][:max_scopes]:
            memory.context(QUERY, budget_tokens=1000, user=user, agent=agent)
    except Exception:  # a warm-up must never take a server down
        where = getattr(memory, "path", "the memory")
        if getattr(memory, "closed", False):
            # Stopped as it started (a server interrupted at once): nothing failed.
            log.debug("warming up %s stopped: the memory was closed", where)
        else:
            log.warning("warming up %s failed", where, exc_info=True)
    return time.perf_counter() - start


def warm_in_background(
    memory: Any,
    done: Callable[[float], object] | None = None,
    first: Callable[[], object] | None = None,
) -> threading.Thread:
    """Start :func:`warm` in a daemon thread, after ``first()`` if given (its errors
    logged); ``done(seconds)`` is called when it ends, with the seconds of both."""

    def run() -> None:
        start = time.perf_counter()
        if first is not None:
            try:
                first()
            except Exception:  # as for warm(): never fatal
                log.warning("warming up failed", exc_info=True)
        warm(memory)
        if done is not None:
            done(time.perf_counter() - start)

    thread = threading.Thread(target=run, name="arbormem-warmup", daemon=True)
    thread.start()
    return thread


__all__ = ["MAX_SCOPES", "QUERY", "warm", "warm_in_background"]
