"""The app factory: REST under ``/v1``, MCP at ``/mcp``, one shared store.

Every route calls the public :class:`~arbormem.Memory` API of the caller's tenant
(``memory.for_tenant``) in a worker thread (FastAPI runs ``def`` routes in its
thread pool), so the event loop never waits on the store or the embedder.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.routing import Route

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

    @app.get("/v1/health", tags=["service"])
    def health() -> schemas.Health:
        """Liveness; no key needed."""
        return schemas.Health(status="ok", version=__version__)

    @app.get("/v1/ready", tags=["service"], responses={503: {"model": schemas.ErrorOut}})
    def ready() -> Any:
        """Readiness: the store answers; no key needed."""
        try:
            memory.scopes("-readiness-probe-")  # one indexed read of the store
        except Exception as exc:  # any failure means not ready, said as such
            return JSONResponse(error_body("store", f"not ready: {exc}"), status_code=503)
        return schemas.Ready(ready=True, read_only=memory.read_only)

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

    @app.middleware("http")
    async def check_origin(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        # Added after CORS, so it runs first: a page on another site must not drive
        # a local server through the visitor's browser (DNS rebinding, CSRF).
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin is not None and not origin_allowed(origin, state.origins, own):
            return JSONResponse(
                error_body("forbidden", f"origin {origin} is not allowed (see --allow-origin)"),
                status_code=403,
            )
        return await call_next(request)

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
