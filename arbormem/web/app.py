"""The web view's pages: a Starlette app over the public ``Memory`` API.

Every page is rendered on the server (Jinja2 templates in ``templates/``); the one
script (``static/arbormem.js``) opens and closes topics and loads an exchange's
messages into place. Nothing needs building.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from arbormem.errors import ArbormemError, InputError, NotFound

#: The cookie holding the API key: no expiry, so it lasts the browser session.
KEY_COOKIE = "arbormem_key"
#: Messages per page of a session.
PAGE_SIZE = 200
#: Scopes listed on the first page (each costs a count).
MAX_SCOPES = 200
#: Records on the records page (each costs a history read), and sources per record.
MAX_RECORDS = 200
MAX_SOURCES = 5
#: The pages of one scope, in the navigation's order.
NAV = (
    ("sessions", "Sessions"),
    ("tree", "Topic tree"),
    ("search", "Search"),
    ("context", "Context"),
    ("log", "Reorganisations"),
)
#: What each ranking signal measures (see arbormem.recall.features), shown on hover.
SIGNAL_HELP = {
    "bm_t": "BM25 of the turn",
    "bm_w": "BM25 of the turn's window",
    "bm_next": "BM25 of the next turn",
    "de_t": "embedding similarity of the turn",
    "de_w": "embedding similarity of the window",
    "de_s": "embedding similarity of the session",
    "bm_topic": "BM25 of the turn's topic",
    "bm_sess": "BM25 of the session",
    "cov_w": "share of the query's words in the window",
}
#: Content-Security-Policy: only this app's own script and styles (the context
#: chart's bar widths are the one inline style attribute).
CSP = (
    "default-src 'none'; script-src 'self'; style-src-elem 'self'; "
    "style-src-attr 'unsafe-inline'; connect-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

MemoryFor = Callable[[Request], Any]


class Unauthorized(Exception):
    """Raised by a ``memory_for`` callable when the request may not see any memory."""


def _when(node: Any) -> str:
    if node.first_at is None:
        return ""
    first, last = node.first_at.date(), (node.last_at or node.first_at).date()
    return first.isoformat() if first == last else f"{first.isoformat()} – {last.isoformat()}"


def _percent(part: int, whole: int) -> str:
    return f"{min(100.0, 100.0 * part / whole) if whole else 0.0:.1f}"


class WebView:
    """The pages, bound to how a request finds its memory."""

    def __init__(
        self,
        memory_for: MemoryFor,
        *,
        check_key: Callable[[str], bool] | None,
        title: str,
    ) -> None:
        self.memory_for = memory_for
        self.check_key = check_key
        self.title = title
        self.env = Environment(
            loader=PackageLoader("arbormem.web", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(when=_when, percent=_percent, signal_help=SIGNAL_HELP)

    def prepare(self) -> None:
        """Do now what a process's first page would otherwise pay for: compile every
        template (15-50 ms each) and load anyio's event-loop backend and worker threads,
        which Starlette imports on the first request (100-300 ms)."""
        try:
            import anyio
            import anyio.to_thread

            anyio.run(anyio.to_thread.run_sync, lambda: None)  # a loop of its own thread
        except Exception:  # only a head start: the first request loads it otherwise
            pass
        for name in self.env.list_templates(filter_func=lambda n: n.endswith(".html")):
            self.env.get_template(name)

    # -- plumbing ---------------------------------------------------------------------

    def _key(self, request: Request) -> str | None:
        key = request.cookies.get(KEY_COOKIE)
        if self.check_key is None:
            return None
        if not key or not self.check_key(key):
            raise Unauthorized()
        return key

    def _memory(self, request: Request) -> Any:
        request.state.api_key = self._key(request)
        return self.memory_for(request)

    @staticmethod
    def _scope(
        request: Request, mem: Any, given: Mapping[str, Any] | None = None
    ) -> tuple[str, str]:
        """The scope a request names (query or form), else the memory's default."""
        params = request.query_params if given is None else given
        default = getattr(mem, "scope", None)
        user = params.get("user") or getattr(default, "user", "default")
        agent = params.get("agent") or getattr(default, "agent", "default")
        return str(user), str(agent)

    @staticmethod
    def _url(request: Request, name: str, **params: Any) -> str:
        path = request.url_for(name).path
        given = {k: v for k, v in params.items() if v is not None}
        return f"{path}?{urlencode(given)}" if given else path

    def _page(
        self,
        request: Request,
        template: str,
        page: str,
        page_title: str,
        scope: tuple[str, str] | None = None,
        status: int = 200,
        **values: Any,
    ) -> HTMLResponse:
        links = {}
        if scope is not None:
            links = {k: self._url(request, k, user=scope[0], agent=scope[1]) for k, _ in NAV}
        nav = list(NAV)
        if scope is not None and values.get("has_records"):
            links["records"] = self._url(request, "records", user=scope[0], agent=scope[1])
            nav.append(("records", "Records"))
        html = self.env.get_template(template).render(
            title=self.title,
            page=page,
            page_title=page_title,
            scope={"user": scope[0], "agent": scope[1]} if scope else None,
            nav=nav,
            links=links,
            home=self._url(request, "scopes"),
            static=request.url_for("static", path="").path.rstrip("/"),
            logout=self._url(request, "logout"),
            logged_in=self.check_key is not None and page != "login",
            notice=request.query_params.get("done"),
            **values,
        )
        return HTMLResponse(html, status_code=status)

    def guarded(self, handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """``handler`` with the key check and library errors turned into pages."""

        def endpoint(request: Request) -> Response:
            try:
                return handler(request)
            except Unauthorized:
                if request.query_params.get("fragment"):
                    return HTMLResponse("<p role='alert'>Log in again.</p>", status_code=401)
                target = self._url(request, "login", next=str(request.url.path))
                return RedirectResponse(target, status_code=303)
            except (NotFound, InputError, ArbormemError) as exc:
                status = 404 if isinstance(exc, NotFound) else 400
                return self._page(
                    request, "error.html", "error", "Error", status=status, error=str(exc)
                )

        return endpoint

    @staticmethod
    def _same_origin(request: Request) -> bool:
        """A form posted from another site (a page the user has open elsewhere) is refused:
        browsers send ``Origin`` on every cross-site POST."""
        origin = request.headers.get("origin")
        return origin is None or origin == f"{request.url.scheme}://{request.headers.get('host')}"

    # -- pages ------------------------------------------------------------------------

    def scopes(self, request: Request) -> Response:
        mem = self._memory(request)
        scopes = mem.scopes()
        rows = []
        for s in scopes[:MAX_SCOPES]:
            stats = mem.stats(user=s.user, agent=s.agent)
            rows.append(
                {
                    "user": s.user,
                    "agent": s.agent,
                    "messages": stats.messages,
                    "sessions": stats.sessions,
                    "links": {
                        k: self._url(request, k, user=s.user, agent=s.agent)
                        for k in ("sessions", "tree", "search")
                    },
                }
            )
        more = len(scopes) if len(scopes) > MAX_SCOPES else 0
        return self._page(request, "scopes.html", "scopes", "Scopes", rows=rows, more=more)

    def sessions(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        stats = mem.stats(user=user, agent=agent)
        rows = [
            {
                "id": s.id,
                "started": s.started_at.strftime("%Y-%m-%d %H:%M"),
                "last": s.last_at.strftime("%Y-%m-%d %H:%M"),
                "count": s.message_count,
                "link": self._url(request, "messages", user=user, agent=agent, session=s.id),
            }
            for s in mem.sessions(user=user, agent=agent)
        ]
        return self._page(
            request, "sessions.html", "sessions", "Sessions", (user, agent), stats=stats,
            sessions=rows, has_records=self._has_records(mem),
        )  # fmt: skip

    def messages(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        session = request.query_params.get("session")
        offset = _int(request.query_params.get("offset"), "offset", 0)
        if session:
            every = mem.messages(session=session, user=user, agent=agent)
            shown = every[offset : offset + PAGE_SIZE]
            total = len(every)
        else:
            shown = mem.messages(start=offset, end=offset + PAGE_SIZE, user=user, agent=agent)
            total = mem.stats(user=user, agent=agent).messages

        def page(at: int) -> str:
            return self._url(
                request, "messages", user=user, agent=agent, session=session, offset=at
            )

        return self._page(
            request, "messages.html", "sessions",
            f"Session {session}" if session else "Messages", (user, agent),
            messages=shown, target=None,
            prev=page(max(0, offset - PAGE_SIZE)) if offset > 0 else None,
            next=page(offset + PAGE_SIZE) if offset + PAGE_SIZE < total else None,
        )  # fmt: skip

    def _tree_values(self, request: Request, user: str, agent: str) -> dict[str, Any]:
        def leaf_src(node: Any) -> str:
            return self._url(
                request, "tree_leaf", user=user, agent=agent,
                first=node.first_index, last=node.last_index, fragment=1,
            )  # fmt: skip

        def children_src(node: Any) -> str:
            return self._url(
                request, "tree_children", user=user, agent=agent, node=node.id, fragment=1
            )

        return {"leaf_src": leaf_src, "children_src": children_src}

    def tree(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        open_ids: set[int] = set()
        leaf_messages: list[Any] = []
        target = request.query_params.get("message") or None
        # Only the top level is read (the page opens topics one request at a time), and
        # with a message, the topics on the way down to it.
        root = mem.tree(user=user, agent=agent, messages=False, depth=1, open_at=target)
        if target:
            index = mem.get(target, user=user, agent=agent).index
            node = root
            while True:
                inside = [c for c in node.children if c.first_index <= index <= c.last_index]
                if not inside:
                    break
                node = inside[0]
                open_ids.add(node.id)
            if node.kind == "leaf":
                leaf_messages = mem.messages(
                    start=node.first_index, end=node.last_index + 1, user=user, agent=agent
                )
        nodes = self.env.get_template("nodes.html").make_module(
            {**self.env.globals, **self._tree_values(request, user, agent),
             "open_ids": open_ids, "leaf_messages": leaf_messages, "target": target}
        )  # fmt: skip
        return self._page(
            request, "tree.html", "tree", "Topic tree", (user, agent), root=root,
            nodes=nodes, has_records=self._has_records(mem),
        )  # fmt: skip

    def tree_children(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        node_id = _int(request.query_params.get("node"), "node", 0)
        node = mem.tree(user=user, agent=agent, messages=False, depth=1, node=node_id)
        html = self.env.get_template("nodes.html").render(
            children=node.children, open_ids=set(), leaf_messages=[], target=None,
            **self._tree_values(request, user, agent),
        )  # fmt: skip
        return HTMLResponse(html)

    def tree_leaf(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        first = _int(request.query_params.get("first"), "first", 0)
        last = _int(request.query_params.get("last"), "last", first)
        messages = mem.messages(start=first, end=last + 1, user=user, agent=agent)
        html = self.env.get_template("leaf.html").render(messages=messages, target=None)
        return HTMLResponse(html)

    def search(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        q = request.query_params.get("q", "").strip()
        k = _int(request.query_params.get("k"), "k", 10)
        hits: list[Any] = []
        archived = 0
        if q:
            found = mem.search(q, k=k, user=user, agent=agent)
            hits = list(found)
            archived = getattr(found, "archived_count", 0)

        def in_tree(message: Any) -> str:
            url = self._url(request, "tree", user=user, agent=agent, message=message.id)
            return f"{url}#m-{message.id}"

        return self._page(
            request, "search.html", "search", "Search", (user, agent), q=q, k=k, hits=hits,
            archived=archived, in_tree=in_tree, action=self._url(request, "search"),
            has_records=self._has_records(mem),
        )  # fmt: skip

    def context(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        q = request.query_params.get("q", "").strip()
        settings = getattr(mem, "settings", None)
        default_budget = getattr(settings, "context_budget", 4000)
        budget = _int(request.query_params.get("budget"), "budget", default_budget)
        ctx = mem.context(q, budget_tokens=budget, user=user, agent=agent) if q else None
        return self._page(
            request, "context.html", "context", "Context", (user, agent), q=q, budget=budget,
            ctx=ctx, action=self._url(request, "context"), has_records=self._has_records(mem),
        )  # fmt: skip

    def log(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        return self._page(
            request, "log.html", "log", "Reorganisations", (user, agent),
            entries=mem.tree_log(user=user, agent=agent),
            undo_action=self._url(request, "undo"),
            reorganize_action=self._url(request, "reorganize"),
            has_records=self._has_records(mem),
        )  # fmt: skip

    async def _form(self, request: Request) -> Mapping[str, Any]:
        async with request.form() as form:
            return {k: v for k, v in form.items() if isinstance(v, str)}

    async def undo(self, request: Request) -> Response:
        return await self._post(request, "undo")

    async def reorganize(self, request: Request) -> Response:
        return await self._post(request, "reorganize")

    async def _post(self, request: Request, action: str) -> Response:
        if not self._same_origin(request):
            return HTMLResponse("<p role='alert'>Refused: posted from another site.</p>", 403)
        form = await self._form(request)

        def act(req: Request) -> Response:
            mem = self._memory(req)
            user, agent = self._scope(req, mem, form)
            if action == "undo":
                log_id = _int(form.get("log_id"), "log_id", -1)
                done = mem.undo_reorganize(log_id, user=user, agent=agent)
                note = (
                    f"Reorganisation {log_id} was already undone."
                    if done.already
                    else f"Reorganisation {log_id} undone ({done.undone} changes put back)."
                )
            else:
                result = mem.reorganize(user=user, agent=agent)
                note = f"Reorganised: {_summary(result)}."
            target = self._url(req, "log", user=user, agent=agent, done=note)
            return RedirectResponse(target, status_code=303)

        return await run_in_threadpool(self.guarded(act), request)

    @staticmethod
    def _has_records(mem: Any) -> bool:
        return callable(getattr(mem, "records", None))

    def records(self, request: Request) -> Response:
        mem = self._memory(request)
        user, agent = self._scope(request, mem)
        if not self._has_records(mem):
            raise NotFound("this memory keeps no records")
        current = mem.records(user=user, agent=agent, limit=MAX_RECORDS + 1)
        said: dict[str, Any] = {}

        def sources(record: Any) -> list[dict[str, Any]]:
            """Each message a record was taken from: who said it when, and a link to it
            in its topic (a source since forgotten is named, not linked)."""
            out = []
            for message_id in list(record.sources)[:MAX_SOURCES]:
                if message_id not in said:
                    try:
                        said[message_id] = mem.get(message_id, user=user, agent=agent)
                    except NotFound:
                        said[message_id] = None
                message = said[message_id]
                link = self._url(request, "tree", user=user, agent=agent, message=message_id)
                out.append({"id": message_id, "message": message,
                            "link": f"{link}#m-{message_id}" if message else None})  # fmt: skip
            return out

        rows = []
        for record in current[:MAX_RECORDS]:
            # Earlier values: what the same subject's attribute held before, newest first
            # (a version that still holds, like a second thing someone likes, is a row
            # of its own, not an earlier value).
            history = mem.record_history(record.id, user=user, agent=agent)
            earlier = [h for h in reversed(history) if h.id != record.id and h.valid_to]
            rows.append(
                {"record": record, "sources": sources(record),
                 "earlier": [{"record": h, "sources": sources(h)} for h in earlier]}
            )  # fmt: skip
        return self._page(
            request, "records.html", "records", "Records", (user, agent),
            rows=rows, more=len(current) > MAX_RECORDS, has_records=True,
        )  # fmt: skip

    # -- logging in -------------------------------------------------------------------

    def login_form(self, request: Request) -> Response:
        return self._page(
            request, "login.html", "login", "Log in",
            action=self._url(request, "login"), next=request.query_params.get("next", ""),
        )  # fmt: skip

    async def login(self, request: Request) -> Response:
        if not self._same_origin(request):
            return HTMLResponse("<p role='alert'>Refused: posted from another site.</p>", 403)
        form = await self._form(request)
        key = form.get("key", "")
        next_path = form.get("next") or ""
        if not next_path.startswith("/") or next_path.startswith("//"):
            next_path = self._url(request, "scopes")  # never a redirect off this site
        if self.check_key is None:
            return RedirectResponse(next_path, status_code=303)
        if not key or not await run_in_threadpool(self.check_key, key):
            return self._page(
                request, "login.html", "login", "Log in", status=401, error="Wrong key",
                action=self._url(request, "login"), next=next_path,
            )  # fmt: skip
        response = RedirectResponse(next_path, status_code=303)
        response.set_cookie(
            KEY_COOKIE, key, httponly=True, samesite="strict",
            secure=request.url.scheme == "https", path=self._url(request, "scopes"),
        )  # fmt: skip
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse(self._url(request, "login"), status_code=303)
        response.delete_cookie(KEY_COOKIE, path=self._url(request, "scopes"))
        return response


def _summary(result: Any) -> str:
    to_dict = getattr(result, "to_dict", None)
    data = to_dict() if callable(to_dict) else {}
    parts = [f"{k} {v}" for k, v in data.items() if isinstance(v, (int, float)) and v]
    return ", ".join(parts) or "nothing to change"


def _int(value: str | None, name: str, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise InputError(f"must be a whole number, got {value!r}", field=name) from None


class _Headers:
    """ASGI middleware adding the security headers to every HTML answer."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def create_app(
    memory: Any,
    *,
    check_key: Callable[[str], bool] | None = None,
    title: str = "arbormem",
    allowed_hosts: list[str] | None = None,
) -> Starlette:
    """The web view as an ASGI app.

    ``memory`` is a ``Memory`` (or anything with its methods), or a callable that
    takes the Starlette ``Request`` and returns the memory to show (a server picks
    the key's tenant there: the key is in ``request.state.api_key``; raise
    :class:`Unauthorized` to send the browser to the login form). With
    ``check_key``, every page needs a key that it accepts, asked once by a login
    form and kept in a cookie for the browser session. ``allowed_hosts`` refuses
    requests for any other ``Host`` (DNS rebinding, for a local server).
    """
    memory_for: MemoryFor = memory if callable(memory) and not hasattr(memory, "search") else (
        lambda request: memory
    )  # fmt: skip
    view = WebView(memory_for, check_key=check_key, title=title)
    # In the background: the app is ready at once, and the rest soon after (a caller
    # that would rather wait joins ``app.state.prepared``, as ``arbormem ui`` does).
    prepared = threading.Thread(target=view.prepare, name="arbormem-web", daemon=True)
    prepared.start()
    g = view.guarded
    routes = [
        Route("/", g(view.scopes), name="scopes"),
        Route("/sessions", g(view.sessions), name="sessions"),
        Route("/messages", g(view.messages), name="messages"),
        Route("/tree", g(view.tree), name="tree"),
        Route("/tree/children", g(view.tree_children), name="tree_children"),
        Route("/tree/leaf", g(view.tree_leaf), name="tree_leaf"),
        Route("/search", g(view.search), name="search"),
        Route("/context", g(view.context), name="context"),
        Route("/log", g(view.log), name="log"),
        Route("/log/undo", view.undo, methods=["POST"], name="undo"),
        Route("/log/reorganize", view.reorganize, methods=["POST"], name="reorganize"),
        Route("/records", g(view.records), name="records"),
        Route("/login", view.login_form, methods=["GET"], name="login"),
        Route("/login", view.login, methods=["POST"], name="login_post"),
        Route("/logout", view.logout, methods=["POST"], name="logout"),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]
    middleware = [Middleware(_Headers)]
    if allowed_hosts:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts))
    app = Starlette(routes=routes, middleware=middleware)
    app.state.prepared = prepared
    return app


__all__ = ["KEY_COOKIE", "Unauthorized", "create_app"]
