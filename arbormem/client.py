"""`Client` and `AsyncClient`: the :class:`~arbormem.Memory` API over HTTP.

Same method names, arguments and result types as ``Memory``, so code moves from
the library to a server by changing one line::

    mem = Memory("memory.db", user="alice")
    mem = Client("http://127.0.0.1:8420", api_key=KEY, user="alice")

Errors come back as the library's: bad input is an :class:`InputError` naming the
field, an id not in the scope :class:`NotFound`, a refused key or a read-only one
:class:`RemoteError` with its ``status``. Needs the ``server`` extra (for httpx2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from arbormem.context.assemble import Context, Section
from arbormem.errors import InputError, NotFound, RemoteError, StoreError
from arbormem.models import (
    DEFAULT_AGENT,
    DEFAULT_USER,
    Hit,
    Hits,
    ImageRef,
    Message,
    Scope,
    Session,
)
from arbormem.results import Exported, Forgotten, Imported, Stats
from arbormem.timeutil import format_timestamp, parse_timestamp

Json = dict[str, Any]


@dataclass(frozen=True)
class _Call:
    """One request and how to read its answer."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None
    read: Any = None


# -- answers back to the library's types ------------------------------------------------------


def _message(d: Mapping[str, Any], tenant: str = "") -> Message:
    return Message(
        id=d["id"],
        role=d["role"],
        content=d["content"],
        timestamp=parse_timestamp(d["timestamp"]),
        session=d["session"],
        index=d["index"],
        speaker=d.get("speaker"),
        user=d["user"],
        agent=d["agent"],
        metadata=dict(d.get("metadata") or {}),
        tenant=tenant,
    )


def _hits(d: Json) -> Hits:
    return Hits(
        [
            Hit(
                message=_message(h),
                score=h["score"],
                signals=dict(h["signals"]),
                neighbors=tuple(_message(n) for n in h["neighbors"]),
                superseded_by=h.get("superseded_by"),
                image=ImageRef.from_dict(h["image"]) if h.get("image") else None,
            )
            for h in d["hits"]
        ],
        archived=d.get("archived", []),
        archived_count=d.get("archived_count", 0),
    )


def _session(d: Mapping[str, Any]) -> Session:
    return Session(
        id=d["id"],
        user=d["user"],
        agent=d["agent"],
        started_at=parse_timestamp(d["started_at"]),
        last_at=parse_timestamp(d["last_at"]),
        message_count=d["message_count"],
        metadata=dict(d.get("metadata") or {}),
    )


def _context(d: Json) -> Context:
    return Context(
        sections=[Section(**s) for s in d["sections"]],
        messages=d["messages"],
        prompt_tokens=d["prompt_tokens"],
        budget=d["budget"],
        max_tokens=d["max_tokens"],
        counter=d["token_counter"],
        mode=d["mode"],
        session=d["session"],
        dropped=dict(d.get("dropped") or {}),
    )


def _when(value: datetime | str | float | None) -> str | float | None:
    return format_timestamp(value) if isinstance(value, datetime) else value


def _raise(status: int, payload: Any) -> None:
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        raise RemoteError(f"server answered {status}: {payload!r}"[:500], status=status)
    kind, text = error.get("type"), str(error.get("message"))
    if kind == "input":
        raise InputError(text, field=error.get("field"), hint=error.get("hint"))
    if status == 404 and kind == "not_found":
        raise NotFound(text)
    if kind in ("store", "read_only"):
        raise StoreError(text)
    raise RemoteError(text, status=status, type=kind)


# -- the requests, shared by both clients ---------------------------------------------------


class _Requests:
    def __init__(self, url: str, user: str | None, agent: str | None) -> None:
        self.url = url.rstrip("/")
        self.scope = Scope(user or DEFAULT_USER, agent or DEFAULT_AGENT)

    def _who(self, user: str | None, agent: str | None) -> Json:
        return {"user": user or self.scope.user, "agent": agent or self.scope.agent}

    def _add_many(
        self,
        messages: Iterable[Mapping[str, Any]],
        session: str | None,
        user: str | None,
        agent: str | None,
    ) -> _Call:
        items = []
        for m in messages:
            item = {k: v for k, v in dict(m).items() if v is not None}
            if "timestamp" in item:
                item["timestamp"] = _when(item["timestamp"])
            items.append(item)
        body = {**self._who(user, agent), "session": session, "messages": items}
        return _Call(
            "POST", "/v1/messages", body=body, read=lambda d: [_message(m) for m in d["messages"]]
        )

    def _search(self, query: str, k: int, user: str | None, agent: str | None, **kw: Any) -> _Call:
        body = {**self._who(user, agent), "query": query, "k": k}
        for name, value in kw.items():
            if (
                value is not None
                and value is not False
                and not (name == "neighbors" and value == 0)
            ):
                body[name] = _when(value) if name in ("since", "until") else value
        return _Call("POST", "/v1/search", body=body, read=_hits)

    def _get(self, message_id: str, user: str | None, agent: str | None) -> _Call:
        return _Call(
            "GET", f"/v1/messages/{message_id}", params=self._who(user, agent), read=_message
        )

    def _messages(
        self,
        session: str | None,
        start: int | None,
        limit: int | None,
        user: str | None,
        agent: str | None,
    ) -> _Call:
        params = {**self._who(user, agent), "session": session, "start": start, "limit": limit}
        return _Call(
            "GET",
            "/v1/messages",
            params={k: v for k, v in params.items() if v is not None},
            read=lambda d: [_message(m) for m in d["messages"]],
        )

    def _sessions(self, user: str | None, agent: str | None) -> _Call:
        return _Call(
            "GET",
            "/v1/sessions",
            params=self._who(user, agent),
            read=lambda d: [_session(s) for s in d["sessions"]],
        )

    def _scopes(self, user: str | None) -> _Call:
        return _Call(
            "GET",
            "/v1/users",
            params={"user": user} if user else None,
            read=lambda d: [Scope(s["user"], s["agent"]) for s in d["scopes"]],
        )

    def _stats(self, user: str | None, agent: str | None) -> _Call:
        return _Call("GET", "/v1/stats", params=self._who(user, agent), read=lambda d: Stats(**d))

    def _forget(
        self, message_id: str | None, session: str | None, user: str | None, agent: str | None
    ) -> _Call:
        read = lambda d: Forgotten(**d)  # noqa: E731
        if message_id is not None:
            path = f"/v1/messages/{message_id}"
        elif session is not None:
            path = f"/v1/sessions/{session}"
        elif user is not None and agent is None:
            return _Call("DELETE", f"/v1/users/{user}", read=read)
        else:
            raise InputError(
                "name what to forget: a message id, a session, or a user",
                field="message_id",
                hint="the server forgets whole users with forget(user=...)",
            )
        return _Call("DELETE", path, params=self._who(user, agent), read=read)

    def _context(self, query: str, user: str | None, agent: str | None, **kw: Any) -> _Call:
        body = {**self._who(user, agent), "query": query}
        body.update({k: v for k, v in kw.items() if v is not None})
        return _Call("POST", "/v1/context", body=body, read=_context)

    def _export(self, user: str | None, agent: str | None, everything: bool) -> _Call:
        params: Json = {"everything": "true"} if everything else {"user": user or self.scope.user}
        if agent is not None:
            params["agent"] = agent
        return _Call(
            "GET",
            "/v1/export",
            params=params,
            read=lambda d: Exported(
                document=d,
                threads=len(d["threads"]),
                messages=sum(
                    len(s["messages"]) for t in d["threads"] for s in t.get("sessions", [])
                ),
            ),
        )

    def _import(self, source: Mapping[str, Any] | Exported) -> _Call:
        document = source.document if isinstance(source, Exported) else source
        return _Call(
            "POST",
            "/v1/import",
            params={"background": "false"},
            body=dict(document),
            read=lambda d: Imported(**d),
        )


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _finish(call: _Call, status: int, payload: Any) -> Any:
    if status >= 400:
        _raise(status, payload)
    return call.read(payload) if call.read else payload


class Client(_Requests):
    """:class:`~arbormem.Memory`'s API on a server (``arbormem serve``).

    ``user`` and ``agent`` are the default scope of every call, as in ``Memory``.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        import httpx2

        super().__init__(url, user, agent)
        self._http = httpx2.Client(base_url=self.url, headers=_headers(api_key), timeout=timeout)

    def _do(self, call: _Call) -> Any:
        import httpx2

        try:
            r = self._http.request(call.method, call.path, params=call.params, json=call.body)
        except httpx2.HTTPError as exc:
            raise RemoteError(f"{self.url}: {exc}", status=0) from None
        return _finish(call, r.status_code, r.json() if r.content else None)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(
        self,
        content: str,
        *,
        role: str = "user",
        speaker: str | None = None,
        session: str | None = None,
        timestamp: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Message:
        """Store one message; it is on the server's disk when this returns."""
        item: dict[str, Any] = {"content": content, "role": role, "speaker": speaker}
        item.update(timestamp=timestamp, metadata=metadata, id=id)
        added: list[Message] = self._do(self._add_many([item], session, user, agent))
        return added[0]

    def add_many(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[Message]:
        """Store many messages in one transaction: all of them or none."""
        result: list[Message] = self._do(self._add_many(messages, session, user, agent))
        return result

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        session: str | Sequence[str] | None = None,
        since: datetime | str | float | None = None,
        until: datetime | str | float | None = None,
        role: str | Sequence[str] | None = None,
        neighbors: int = 0,
        user: str | None = None,
        agent: str | None = None,
        all_agents: bool = False,
    ) -> Hits:
        """The ``k`` messages that best answer ``query``, best first."""
        session = list(session) if isinstance(session, (list, tuple)) else session
        role = list(role) if isinstance(role, (list, tuple)) else role
        hits: Hits = self._do(
            self._search(
                query,
                k,
                user,
                agent,
                session=session,
                since=since,
                until=until,
                role=role,
                neighbors=neighbors,
                all_agents=all_agents,
            )
        )
        return hits

    def get(self, message_id: str, *, user: str | None = None, agent: str | None = None) -> Message:
        """One message by id; :class:`NotFound` when it is not in this scope."""
        found: Message = self._do(self._get(message_id, user, agent))
        return found

    def messages(
        self,
        *,
        session: str | None = None,
        start: int | None = None,
        limit: int | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[Message]:
        """Messages of the thread in order: all (up to ``limit``), or one session's."""
        found: list[Message] = self._do(self._messages(session, start, limit, user, agent))
        return found

    def sessions(self, *, user: str | None = None, agent: str | None = None) -> list[Session]:
        found: list[Session] = self._do(self._sessions(user, agent))
        return found

    def scopes(self, user: str | None = None) -> list[Scope]:
        found: list[Scope] = self._do(self._scopes(user))
        return found

    def stats(self, *, user: str | None = None, agent: str | None = None) -> Stats:
        found: Stats = self._do(self._stats(user, agent))
        return found

    def forget(
        self,
        message_id: str | None = None,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Forgotten:
        """Delete a message, a session, or (``user`` alone) everything of a user."""
        gone: Forgotten = self._do(self._forget(message_id, session, user, agent))
        return gone

    def context(
        self,
        query: str,
        *,
        budget_tokens: int | None = None,
        mode: str | None = None,
        session: str | None = None,
        system_prompt: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Context:
        """The prompt for the next turn within ``budget_tokens``."""
        ctx: Context = self._do(
            self._context(
                query,
                user,
                agent,
                budget_tokens=budget_tokens,
                mode=mode,
                session=session,
                system_prompt=system_prompt,
            )
        )
        return ctx

    def export(
        self, *, user: str | None = None, agent: str | None = None, everything: bool = False
    ) -> Exported:
        found: Exported = self._do(self._export(user, agent, everything))
        return found

    def import_(self, source: Mapping[str, Any] | Exported) -> Imported:
        done: Imported = self._do(self._import(source))
        return done


class AsyncClient(_Requests):
    """:class:`Client` for asyncio: the same methods, awaited."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        import httpx2

        super().__init__(url, user, agent)
        self._http = httpx2.AsyncClient(
            base_url=self.url, headers=_headers(api_key), timeout=timeout
        )

    async def _do(self, call: _Call) -> Any:
        import httpx2

        try:
            r = await self._http.request(call.method, call.path, params=call.params, json=call.body)
        except httpx2.HTTPError as exc:
            raise RemoteError(f"{self.url}: {exc}", status=0) from None
        return _finish(call, r.status_code, r.json() if r.content else None)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def add(
        self,
        content: str,
        *,
        role: str = "user",
        speaker: str | None = None,
        session: str | None = None,
        timestamp: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Message:
        item: dict[str, Any] = {"content": content, "role": role, "speaker": speaker}
        item.update(timestamp=timestamp, metadata=metadata, id=id)
        added: list[Message] = await self._do(self._add_many([item], session, user, agent))
        return added[0]

    async def add_many(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[Message]:
        result: list[Message] = await self._do(self._add_many(messages, session, user, agent))
        return result

    async def search(
        self,
        query: str,
        *,
        k: int = 10,
        session: str | Sequence[str] | None = None,
        since: datetime | str | float | None = None,
        until: datetime | str | float | None = None,
        role: str | Sequence[str] | None = None,
        neighbors: int = 0,
        user: str | None = None,
        agent: str | None = None,
        all_agents: bool = False,
    ) -> Hits:
        session = list(session) if isinstance(session, (list, tuple)) else session
        role = list(role) if isinstance(role, (list, tuple)) else role
        hits: Hits = await self._do(
            self._search(
                query,
                k,
                user,
                agent,
                session=session,
                since=since,
                until=until,
                role=role,
                neighbors=neighbors,
                all_agents=all_agents,
            )
        )
        return hits

    async def get(
        self, message_id: str, *, user: str | None = None, agent: str | None = None
    ) -> Message:
        found: Message = await self._do(self._get(message_id, user, agent))
        return found

    async def messages(
        self,
        *,
        session: str | None = None,
        start: int | None = None,
        limit: int | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[Message]:
        found: list[Message] = await self._do(self._messages(session, start, limit, user, agent))
        return found

    async def sessions(self, *, user: str | None = None, agent: str | None = None) -> list[Session]:
        found: list[Session] = await self._do(self._sessions(user, agent))
        return found

    async def scopes(self, user: str | None = None) -> list[Scope]:
        found: list[Scope] = await self._do(self._scopes(user))
        return found

    async def stats(self, *, user: str | None = None, agent: str | None = None) -> Stats:
        found: Stats = await self._do(self._stats(user, agent))
        return found

    async def forget(
        self,
        message_id: str | None = None,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Forgotten:
        gone: Forgotten = await self._do(self._forget(message_id, session, user, agent))
        return gone

    async def context(
        self,
        query: str,
        *,
        budget_tokens: int | None = None,
        mode: str | None = None,
        session: str | None = None,
        system_prompt: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Context:
        ctx: Context = await self._do(
            self._context(
                query,
                user,
                agent,
                budget_tokens=budget_tokens,
                mode=mode,
                session=session,
                system_prompt=system_prompt,
            )
        )
        return ctx

    async def export(
        self, *, user: str | None = None, agent: str | None = None, everything: bool = False
    ) -> Exported:
        found: Exported = await self._do(self._export(user, agent, everything))
        return found

    async def import_(self, source: Mapping[str, Any] | Exported) -> Imported:
        done: Imported = await self._do(self._import(source))
        return done
