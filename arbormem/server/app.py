"""The app factory: REST under ``/v1``, MCP at ``/mcp``, one shared store.

Every route calls the public :class:`~arbormem.Memory` API of the caller's tenant
(``memory.for_tenant``) in a worker thread (FastAPI runs ``def`` routes in its
thread pool), so the event loop never waits on the store or the embedder.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from arbormem import __version__
from arbormem.memory import Memory
from arbormem.server import errors, schemas
from arbormem.server.auth import Authenticator
from arbormem.server.errors import error_body
from arbormem.server.routes import admin, messages, proxy, recall, records, scopes, tree
from arbormem.server.state import ProxyConfig, ServerState

#: Browsers on this machine may always call (a local agent UI, the MCP inspector).
LOOPBACK_ORIGINS = ("http://127.0.0.1", "http://localhost", "http://[::1]")


def origin_allowed(origin: str, allowed: Sequence[str], own: str | None) -> bool:
    """An exact allowed origin, this server's own, or a loopback origin on any port."""
    if origin in allowed or origin == own:
        return True
    return any(origin == base or origin.startswith(base + ":") for base in LOOPBACK_ORIGINS)


class OriginCheck:
    """Refuses (403) a request whose ``Origin`` is neither allowed, this server's own,
    nor loopback: a page on another site must not drive a local server through the
    visitor's browser (DNS rebinding, CSRF).

    Plain ASGI rather than ``@app.middleware("http")``: that wrapper runs every
    request through a task group and a memory stream, a cost paid on each call."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str] = ()) -> None:
        self.app = app
        self.allowed = tuple(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = host = None
            for name, value in scope["headers"]:
                if name == b"origin":
                    origin = value.decode("latin-1")
                elif name == b"host":
                    host = value.decode("latin-1")
            if origin is not None:
                own = f"{scope.get('scheme', 'http')}://{host or ''}"
                if not origin_allowed(origin, self.allowed, own):
                    refusal = JSONResponse(
                        error_body(
                            "forbidden", f"origin {origin} is not allowed (see --allow-origin)"
                        ),
                        status_code=403,
                    )
                    await refusal(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def create_app(
    memory: Memory,
    auth: Authenticator,
    *,
    origins: Sequence[str] = (),
    proxy_config: ProxyConfig | None = None,
    mcp: bool = True,
    loopback_only: bool = True,
    stateless_mcp: bool = False,
    on_close: Callable[[], None] | None = None,
) -> FastAPI:
    """The server's ASGI app over ``memory`` (closed by ``on_close`` at shutdown, if
    given; else left open for its owner)."""
    state = ServerState(
        memory=memory,
        auth=auth,
        origins=tuple(origins),
        proxy=proxy_config,
        loopback_only=loopback_only,
    )
    mcp_server = None
    if mcp:
        from arbormem.server.mcp import build_http_mcp

        mcp_server, mcp_app = build_http_mcp(state, stateless=stateless_mcp)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if mcp_server is None:
                yield
            else:
                # A route's sub-app never runs its own lifespan: its session manager
                # runs here.
                async with mcp_server.session_manager.run():
                    yield
        finally:
            if on_close is not None:
                on_close()

    app = FastAPI(
        title="arbormem",
        version=__version__,
        summary="Long-term memory for LLM agents: REST API. Every route but health and "
        "readiness needs 'Authorization: Bearer <key>' and acts in the key's tenant.",
        lifespan=lifespan,
    )
    app.state.arbormem = state
    errors.install(app)
    for module in (messages, recall, records, scopes, tree, admin, proxy):
        app.include_router(module.router)

    @app.get("/v1/health", tags=["service"], response_model=schemas.Health)
    async def health() -> JSONResponse:
        """Liveness; no key needed."""
        # async: nothing here blocks, so no hop to the thread pool.
        return JSONResponse({"status": "ok", "version": __version__})

    @app.get(
        "/v1/ready",
        tags=["service"],
        response_model=schemas.Ready,
        responses={503: {"model": schemas.ErrorOut}},
    )
    def ready() -> Any:
        """Readiness: the store answers; no key needed."""
        try:
            memory.scopes("-readiness-probe-")  # one indexed read of the store
        except Exception as exc:  # any failure means not ready, said as such
            return JSONResponse(error_body("store", f"not ready: {exc}"), status_code=503)
        return JSONResponse({"ready": True, "read_only": memory.read_only})

    if mcp_server is not None:
        # A Route, not a Mount: a Mount answers POST /mcp with a redirect to /mcp/.
        app.router.routes.append(Route("/mcp", endpoint=mcp_app))
    web = _web_view(state)
    if web is not None:
        # Last: /v1 and /mcp are matched first; every other path is a page.
        app.mount("/", web)

    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_origin_regex=r"http://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?",
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version"],
        expose_headers=["Mcp-Session-Id"],
    )

    # Added after CORS, so it runs first.
    app.add_middleware(OriginCheck, allowed=state.origins)
    return app


def _web_view(state: ServerState) -> Any:
    """The web view (:mod:`arbormem.web`) behind the same keys: each page shows the
    key's tenant, and a read-only key cannot post (undo, reorganise). None when the
    web view's own dependencies are not installed."""
    try:
        from arbormem.web.app import Unauthorized, create_app
    except ImportError:  # jinja2 missing: the API and MCP still serve
        return None
    from starlette.exceptions import HTTPException

    def check_key(key: str) -> bool:
        return state.auth.principal(key) is not None

    def memory_for(request: Request) -> Memory:
        principal = state.auth.principal(getattr(request.state, "api_key", None))
        if principal is None:
            raise Unauthorized()
        if principal.read_only and request.method == "POST":
            raise HTTPException(403, "this key is read-only")
        return state.memory_for(principal.tenant)

    return create_app(memory_for, check_key=check_key if state.auth.enabled else None)
