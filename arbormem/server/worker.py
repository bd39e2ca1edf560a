"""What ``arbormem serve`` runs, as one picklable description (:class:`ServeSpec`),
so that several worker processes can each build the same app.

One Python process serves requests on one core at a time (a search is mostly
Python), so ``serve --workers N`` starts N processes on one listening socket, each
with its own :class:`~arbormem.Memory` on the same store: the store takes several
writers (they wait for each other up to ``lock_wait``). Their MCP endpoint is then
stateless (a session would live in one worker, and the next request may reach
another).
"""

from __future__ import annotations

import gc
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from fastapi import FastAPI

from arbormem.config import UNSET
from arbormem.warmup import warm_in_background

#: The environment variable a worker reads its :class:`ServeSpec` from.
SPEC_VARIABLE = "ARBORMEM_SERVE_SPEC"
#: Allocations between two collections of the youngest generation in a serving
#: process (Python's default: 700). A search allocates thousands of short-lived
#: containers, nearly all freed by reference counting: at 700 the collector ran a few
#: times a search to find almost nothing (see :func:`serving_gc`).
YOUNG_GC_THRESHOLD = 10_000


def serving_gc(*_warmed: object) -> None:
    """Set the garbage collector up for serving: what the process holds so far (its
    modules, the app, and once the warm-up is done the store's caches) moves out of
    the collector's view for good (``gc.freeze``), and the youngest generation is
    collected every :data:`YOUNG_GC_THRESHOLD` allocations. Under ``bench serve``
    the collector took about 4% of a worker's CPU, most of it in full collections
    that walked the 230,000 objects of the loaded process again and again. What
    is collected is the same: cycles are still found, only later. (Also the warm-up's
    ``done`` callback, whose argument it ignores.)"""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, middle, oldest)


@dataclass
class ServeSpec:
    """Everything ``arbormem serve`` was told, enough to build its app anywhere."""

    db: str | None = None
    user: str | None = None
    agent: str | None = None
    embedder: str | None = None
    reranker: str | None = None
    read_only: bool | None = None
    keys: str | None = None
    auth: bool = True
    origins: list[str] = field(default_factory=list)
    jwt: dict[str, Any] | None = None
    proxy: dict[str, Any] | None = None
    mcp: bool = True
    loopback_only: bool = True
    stateless_mcp: bool = False

    def open_memory(self) -> Any:
        from arbormem.memory import Memory

        def given(value: Any) -> Any:
            return UNSET if value is None else value

        return Memory(
            given(self.db),
            user=given(self.user),
            agent=given(self.agent),
            embedder=given(self.embedder),
            reranker=given(self.reranker),
            read_only=self.read_only,
        )

    def build_app(self, memory: Any) -> FastAPI:
        from arbormem.server.app import create_app
        from arbormem.server.auth import Authenticator, JWTConfig
        from arbormem.server.keys import KeyRing
        from arbormem.server.state import ProxyConfig

        jwt = None
        if self.jwt is not None:
            jwt = JWTConfig(**{**self.jwt, "algorithms": tuple(self.jwt["algorithms"])})
        ring = KeyRing(self.keys) if self.auth and self.keys else None
        return create_app(
            memory,
            Authenticator(ring=ring, jwt=jwt, enabled=self.auth),
            origins=self.origins,
            proxy_config=None if self.proxy is None else ProxyConfig(**self.proxy),
            mcp=self.mcp,
            loopback_only=self.loopback_only,
            stateless_mcp=self.stateless_mcp,
            on_close=memory.close,
        )

    def to_environment(self) -> str:
        return json.dumps(asdict(self))


def app_from_environment() -> FastAPI:
    """The app of one worker process (uvicorn's factory), from ``ARBORMEM_SERVE_SPEC``."""
    spec = ServeSpec(**json.loads(os.environ[SPEC_VARIABLE]))
    memory = spec.open_memory()
    app = spec.build_app(memory)
    serving_gc()
    # Each worker's first search would pay for the loading otherwise; what it loads
    # is frozen too once it is done.
    warm_in_background(memory, done=serving_gc)
    return app
