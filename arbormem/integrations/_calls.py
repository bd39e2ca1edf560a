"""Calling a memory that may be synchronous (``Memory``) or asynchronous
(``AsyncMemory``, an async client) from the adapters' async and sync code."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any


async def acall(memory: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``memory.method(*args, **kwargs)`` from async code: awaited when the memory is
    asynchronous, else run in a worker thread so the event loop never blocks on disk."""
    fn = getattr(memory, method)
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


def call(memory: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``memory.method(*args, **kwargs)`` from sync code. An asynchronous memory is run
    to completion here, which only works outside a running event loop."""
    result = getattr(memory, method)(*args, **kwargs)
    if inspect.isawaitable(result):
        return asyncio.run(_wait(result))
    return result


async def _wait(awaitable: Any) -> Any:
    return await awaitable


def scope_kwargs(user: str | None, agent: str | None) -> dict[str, str]:
    """The ``user=``/``agent=`` keywords of a call, leaving out those not given so the
    memory's own default scope applies."""
    out: dict[str, str] = {}
    if user is not None:
        out["user"] = user
    if agent is not None:
        out["agent"] = agent
    return out
