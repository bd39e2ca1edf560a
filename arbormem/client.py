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

import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

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
from arbormem.records.model import Record, record_from_dict
from arbormem.records.service import RecordHit
from arbormem.results import (
    Exported,
    Forgotten,
    Imported,
    RecordsForgotten,
    Remembered,
    Stats,
)
from arbormem.timeutil import format_timestamp, parse_timestamp

Json = dict[str, Any]
R = TypeVar("R")
P = ParamSpec("P")


@dataclass(frozen=True)
class _Call(Generic[R]):
    """One request and how to read its answer."""

    method: str
    path: str
    read: Callable[[Any], R]
    params: Mapping[str, Any] | None = None
    body: Any = None


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
        records=[_record_hit(r) for r in d.get("records", [])],
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


def _record(d: Mapping[str, Any]) -> Record:
    return record_from_dict(d, where="answer")


def _record_hit(d: Mapping[str, Any]) -> RecordHit:
    fields = dict(d)
    score, signals = fields.pop("score"), fields.pop("signals")
    fields.pop("message_ids", None)  # the record's sources, said again for turn-minded readers
    return RecordHit(record=_record(fields), score=score, signals=dict(signals))


def _remembered(d: Json) -> Remembered:
    record = d.get("record")
    return Remembered(
        action=d["action"],
        record=_record(record) if record is not None else None,
        closed=tuple(d.get("closed", ())),
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


# -- the requests: one builder per method, with Memory's signature --------------------------


class _Requests:
    """What both clients share: the server's address, the default scope, and one
    request builder per :class:`~arbormem.Memory` method. :class:`Client` sends the
    built requests and :class:`AsyncClient` awaits them (see :func:`_sync`)."""

    def __init__(self, url: str, user: str | None, agent: str | None) -> None:
        self.url = url.rstrip("/")
        self.scope = Scope(user or DEFAULT_USER, agent or DEFAULT_AGENT)

    def _who(self, user: str | None, agent: str | None) -> Json:
        return {"user": user or self.scope.user, "agent": agent or self.scope.agent}

    def _add(
        self,
        /,
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
    ) -> _Call[Message]:
        """Store one message; it is on the server's disk when this returns."""
        item: Json = {"content": content, "role": role, "speaker": speaker}
        item.update(timestamp=timestamp, metadata=metadata, id=id)
        many = self._add_many([item], session=session, user=user, agent=agent)
        return _Call(many.method, many.path, lambda d: many.read(d)[0], body=many.body)

    def _add_many(
        self,
        /,
        messages: Iterable[Mapping[str, Any]],
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> _Call[list[Message]]:
        """Store many messages in one transaction: all of them or none."""
        items = []
        for m in messages:
            item = {k: v for k, v in dict(m).items() if v is not None}
            if "timestamp" in item:
                item["timestamp"] = _when(item["timestamp"])
            items.append(item)
        body = {**self._who(user, agent), "session": session, "messages": items}
        return _Call(
            "POST", "/v1/messages", lambda d: [_message(m) for m in d["messages"]], body=body
        )

    def _search(
        self,
        /,
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
        records: bool = False,
    ) -> _Call[Hits]:
        """The ``k`` messages that best answer ``query``, best first (with
        ``records=True``, current typed records beside them in ``Hits.records``)."""
        body: Json = {**self._who(user, agent), "query": query, "k": k}
        if session is not None:
            body["session"] = session if isinstance(session, str) else list(session)
        if role is not None:
            body["role"] = role if isinstance(role, str) else list(role)
        if since is not None:
            body["since"] = _when(since)
        if until is not None:
            body["until"] = _when(until)
        if neighbors:
            body["neighbors"] = neighbors
        if all_agents:
            body["all_agents"] = True
        if records:
            body["records"] = True
        return _Call("POST", "/v1/search", _hits, body=body)

    def _get(
        self, /, message_id: str, *, user: str | None = None, agent: str | None = None
    ) -> _Call[Message]:
        """One message by id; :class:`NotFound` when it is not in this scope."""
        return _Call("GET", f"/v1/messages/{message_id}", _message, params=self._who(user, agent))

    def _messages(
        self,
        /,
        *,
        session: str | None = None,
        start: int | None = None,
        limit: int | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> _Call[list[Message]]:
        """Messages of the thread in order: all (up to ``limit``), or one session's."""
        params = {**self._who(user, agent), "session": session, "start": start, "limit": limit}
        return _Call(
            "GET",
            "/v1/messages",
            lambda d: [_message(m) for m in d["messages"]],
            params={k: v for k, v in params.items() if v is not None},
        )

    def _sessions(
        self, /, *, user: str | None = None, agent: str | None = None
    ) -> _Call[list[Session]]:
        """The sessions of a thread, in order of their first message."""
        return _Call(
            "GET",
            "/v1/sessions",
            lambda d: [_session(s) for s in d["sessions"]],
            params=self._who(user, agent),
        )

    def _scopes(self, /, user: str | None = None) -> _Call[list[Scope]]:
        """Every (user, agent) of the key's tenant, or one user's."""
        return _Call(
            "GET",
            "/v1/users",
            lambda d: [Scope(s["user"], s["agent"]) for s in d["scopes"]],
            params={"user": user} if user else None,
        )

    def _stats(self, /, *, user: str | None = None, agent: str | None = None) -> _Call[Stats]:
        """Counts of a thread, and the vectors the store holds by model."""
        return _Call("GET", "/v1/stats", lambda d: Stats(**d), params=self._who(user, agent))

    def _forget(
        self,
        /,
        message_id: str | None = None,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> _Call[Forgotten]:
        """Delete a message, a session, or (``user`` alone) everything of a user."""

        def read(d: Json) -> Forgotten:
            return Forgotten(**d)

        if message_id is not None:
            path = f"/v1/messages/{message_id}"
        elif session is not None:
            path = f"/v1/sessions/{session}"
        elif user is not None and agent is None:
            return _Call("DELETE", f"/v1/users/{user}", read)
        else:
            raise InputError(
                "name what to forget: a message id, a session, or a user",
                field="message_id",
                hint="the server forgets whole users with forget(user=...)",
            )
        return _Call("DELETE", path, read, params=self._who(user, agent))

    def _context(
        self,
        /,
        query: str,
        *,
        budget_tokens: int | None = None,
        mode: str | None = None,
        session: str | None = None,
        system_prompt: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> _Call[Context]:
        """The prompt for the next turn within ``budget_tokens``."""
        body: Json = {**self._who(user, agent), "query": query}
        extra = {
            "budget_tokens": budget_tokens,
            "mode": mode,
            "session": session,
            "system_prompt": system_prompt,
        }
        body.update({k: v for k, v in extra.items() if v is not None})
        return _Call("POST", "/v1/context", _context, body=body)

    def _export(
        self, /, *, user: str | None = None, agent: str | None = None, everything: bool = False
    ) -> _Call[Exported]:
        """A user's threads (or one thread, or the whole tenant's) as an export."""
        params: Json = {"everything": "true"} if everything else {"user": user or self.scope.user}
        if agent is not None:
            params["agent"] = agent

        def read(d: Json) -> Exported:
            sessions = (s for t in d["threads"] for s in t.get("sessions", []))
            return Exported(
                document=d,
                threads=len(d["threads"]),
                messages=sum(len(s["messages"]) for s in sessions),
            )

        return _Call("GET", "/v1/export", read, params=params)

    def _import_(self, /, source: Mapping[str, Any] | Exported) -> _Call[Imported]:
        """Restore an export into the key's tenant, all or nothing."""
        document = source.document if isinstance(source, Exported) else source
        return _Call(
            "POST",
            "/v1/import",
            lambda d: Imported(**d),
            params={"background": "false"},
            body=dict(document),
        )

    # -- typed records ------------------------------------------------------------------

    def _remember(
        self,
        /,
        text: str,
        *,
        kind: str = "fact",
        subject: str | None = None,
        attribute: str | None = None,
        value: str | None = None,
        negated: bool = False,
        when: datetime | str | float | None = None,
        tags: Sequence[str] | None = None,
        intent: str | None = None,
        body: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> _Call[Remembered]:
        """Store a typed record as given, with no extraction."""
        fields: Json = {
            "kind": kind,
            "subject": subject,
            "attribute": attribute,
            "value": value,
            "when": _when(when),
            "tags": list(tags) if tags is not None else None,
            "intent": intent,
            "body": body,
        }
        payload: Json = {**self._who(user, agent), "text": text, "negated": negated}
        payload.update({k: v for k, v in fields.items() if v is not None})
        return _Call("POST", "/v1/records", _remembered, body=payload)

    def _records(
        self,
        /,
        *,
        kind: str | None = None,
        subject: str | None = None,
        attribute: str | None = None,
        current: bool = True,
        as_of: datetime | str | float | None = None,
        limit: int | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> _Call[list[Record]]:
        """The scope's typed records, newest first: those that hold now, every
        version (``current=False``), or those that held at ``as_of``."""
        params: Json = {**self._who(user, agent), "current": "true" if current else "false"}
        extra = {
            "kind": kind,
            "subject": subject,
            "attribute": attribute,
            "as_of": _when(as_of),
            "limit": limit,
        }
        params.update({k: v for k, v in extra.items() if v is not None})
        return _Call(
            "GET", "/v1/records", lambda d: [_record(r) for r in d["records"]], params=params
        )

    def _search_records(
        self,
        /,
        query: str,
        *,
        k: int = 10,
        current: bool = True,
        as_of: datetime | str | float | None = None,
        kind: str | None = None,
        speaker: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> _Call[list[RecordHit]]:
        """Typed records for ``query``, best first."""
        body: Json = {**self._who(user, agent), "query": query, "k": k, "current": current}
        extra = {"as_of": _when(as_of), "kind": kind, "speaker": speaker}
        body.update({k: v for k, v in extra.items() if v is not None})
        return _Call(
            "POST",
            "/v1/records/search",
            lambda d: [_record_hit(h) for h in d["hits"]],
            body=body,
        )

    def _record_history(
        self, /, record_id: str, *, user: str | None = None, agent: str | None = None
    ) -> _Call[list[Record]]:
        """Every version of what a record states, oldest first."""
        return _Call(
            "GET",
            f"/v1/records/{record_id}/history",
            lambda d: [_record(r) for r in d["records"]],
            params=self._who(user, agent),
        )

    def _forget_record(
        self, /, record_id: str, *, user: str | None = None, agent: str | None = None
    ) -> _Call[RecordsForgotten]:
        """Delete one typed record for good (its messages stay)."""

        def read(d: Json) -> RecordsForgotten:
            return RecordsForgotten(tuple(d["records"]), d["purged"], d.get("purge_pending"))

        return _Call("DELETE", f"/v1/records/{record_id}", read, params=self._who(user, agent))


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _finish(call: _Call[R], status: int, payload: Any) -> R:
    if status >= 400:
        _raise(status, payload)
    return call.read(payload)


def _public(method: Any, build: Callable[..., Any], owner: str) -> None:
    """Give ``method`` the name, docstring and signature of Memory's method that
    ``build`` builds the request for (``help()`` and ``inspect`` show Memory's)."""
    name = build.__name__[1:]
    method.__name__ = name
    method.__qualname__ = f"{owner}.{name}"
    method.__doc__ = build.__doc__
    signature = inspect.signature(build)
    returns = signature.return_annotation
    if isinstance(returns, str) and returns.startswith("_Call["):
        returns = returns[len("_Call[") : -1]
    method.__signature__ = signature.replace(return_annotation=returns)


def _sync(
    build: Callable[Concatenate[_Requests, P], _Call[R]],
) -> Callable[Concatenate[Client, P], R]:
    """A :class:`Client` method: build the request, send it, read the answer."""

    def method(self: Client, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._send(build(self, *args, **kwargs))

    _public(method, build, "Client")
    return method


def _async(
    build: Callable[Concatenate[_Requests, P], _Call[R]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]:
    """An :class:`AsyncClient` method: the same request, awaited."""

    async def method(self: AsyncClient, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._send(build(self, *args, **kwargs))

    _public(method, build, "AsyncClient")
    return method


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

    def _send(self, call: _Call[R]) -> R:
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

    add = _sync(_Requests._add)
    add_many = _sync(_Requests._add_many)
    search = _sync(_Requests._search)
    get = _sync(_Requests._get)
    messages = _sync(_Requests._messages)
    sessions = _sync(_Requests._sessions)
    scopes = _sync(_Requests._scopes)
    stats = _sync(_Requests._stats)
    forget = _sync(_Requests._forget)
    context = _sync(_Requests._context)
    export = _sync(_Requests._export)
    import_ = _sync(_Requests._import_)
    remember = _sync(_Requests._remember)
    records = _sync(_Requests._records)
    search_records = _sync(_Requests._search_records)
    record_history = _sync(_Requests._record_history)
    forget_record = _sync(_Requests._forget_record)


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

    async def _send(self, call: _Call[R]) -> R:
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

    add = _async(_Requests._add)
    add_many = _async(_Requests._add_many)
    search = _async(_Requests._search)
    get = _async(_Requests._get)
    messages = _async(_Requests._messages)
    sessions = _async(_Requests._sessions)
    scopes = _async(_Requests._scopes)
    stats = _async(_Requests._stats)
    forget = _async(_Requests._forget)
    context = _async(_Requests._context)
    export = _async(_Requests._export)
    import_ = _async(_Requests._import_)
    remember = _async(_Requests._remember)
    records = _async(_Requests._records)
    search_records = _async(_Requests._search_records)
    record_history = _async(_Requests._record_history)
    forget_record = _async(_Requests._forget_record)
