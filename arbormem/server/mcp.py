"""The MCP server (the official ``mcp`` SDK): the same tools over stdio
(``arbormem mcp``) and over streamable HTTP at ``/mcp`` (``arbormem serve``).

Every tool takes an optional ``scope`` (``"user"`` or ``"user/agent"``); left out,
it is the server's default user and agent, so an agent need not repeat it on
every call. Over HTTP the bearer key (or JWT) decides the tenant, and a read-only
key cannot call the tools that write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field

from arbormem.errors import ArbormemError
from arbormem.memory import Memory

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp

    from arbormem.server.state import ServerState

INSTRUCTIONS = (
    "Long-term memory of past conversations. search_memories before answering about the "
    "user's past, preferences or facts; add_memory to keep something worth remembering; "
    "get_context for a ready prompt; search_records for the facts that hold now (where "
    "someone lives, works...), remember to keep one. 'scope' is 'user' or 'user/agent' "
    "and defaults to the server's; leave it out unless you serve several users."
)

Scope = Annotated[
    str | None,
    Field(description="Whose memory: 'user' or 'user/agent' [default: the server's scope]"),
]


@dataclass(frozen=True)
class Caller:
    memory: Memory
    can_write: bool


class StoredMemory(BaseModel):
    id: str
    session: str
    index: int


class FoundMemory(BaseModel):
    id: str
    content: str
    role: str
    speaker: str | None
    session: str
    timestamp: str
    score: float


class SearchAnswer(BaseModel):
    hits: list[FoundMemory]


class ContextAnswer(BaseModel):
    #: The prompt as one text: system prompt, recalled memory, recent turns, the query.
    text: str
    prompt_tokens: int
    session: str


class MessageItem(BaseModel):
    id: str
    index: int
    session: str
    role: str
    speaker: str | None
    content: str
    timestamp: str


class MessagesAnswer(BaseModel):
    messages: list[MessageItem]


class DeleteAnswer(BaseModel):
    deleted: int
    purged: bool


class RecordItem(BaseModel):
    """A typed record as an agent reads it: the statement, what it is about, and
    the dates it held."""

    id: str
    kind: str
    text: str
    subject: str | None
    attribute: str | None
    value: str | None
    #: Whether it still holds (no later record replaced it).
    current: bool
    valid_from: str | None
    valid_to: str | None
    superseded_by: str | None


class RecordsAnswer(BaseModel):
    records: list[RecordItem]


class RememberAnswer(BaseModel):
    #: added, merged, superseded, closed, history or ignored.
    action: str
    record: RecordItem | None
    #: Ids of the records it replaced (they stay in the history).
    closed: list[str]


class ForgetRecordAnswer(BaseModel):
    deleted: list[str]
    purged: bool


def _record(r: Any) -> RecordItem:
    d = r.to_dict()
    return RecordItem(current=r.current, **{k: d[k] for k in RecordItem.model_fields if k in d})


def parse_scope(scope: str | None) -> tuple[str | None, str | None]:
    """``"alice"`` or ``"alice/support"`` as (user, agent); None for the defaults."""
    from mcp.server.mcpserver.exceptions import ToolError

    if scope is None or scope == "":
        return None, None
    user, _, agent = scope.partition("/")
    if not user.strip() or (_ and not agent.strip()):
        raise ToolError(f"scope {scope!r}: give 'user' or 'user/agent'")
    return user, agent or None


@contextmanager
def _tool_errors() -> Iterator[None]:
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except ArbormemError as exc:  # the agent reads the message, not a bare failure
        raise ToolError(str(exc)) from None


def _item(m: Any) -> MessageItem:
    d = m.to_dict()
    return MessageItem(**{k: d[k] for k in MessageItem.model_fields})


def register_tools(server: MCPServer, caller: Callable[[], Caller]) -> None:
    """Add arbormem's tools to ``server``; ``caller()`` gives the memory of the request."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    add = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
    delete = ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    )

    def writer() -> Memory:
        c = caller()
        if not c.can_write:
            raise ToolError("this key is read-only: it cannot change memory")
        return c.memory

    @server.tool(annotations=add)
    def add_memory(
        content: Annotated[str, Field(description="The text to remember")],
        role: Annotated[str, Field(description="user, assistant, system or tool")] = "user",
        speaker: Annotated[str | None, Field(description="Who said it, by name")] = None,
        session: Annotated[str | None, Field(description="Session id [default: current]")] = None,
        scope: Scope = None,
    ) -> StoredMemory:
        """Store one message in long-term memory; it is searchable at once."""
        user, agent = parse_scope(scope)
        with _tool_errors():
            m = writer().add(
                content, role=role, speaker=speaker, session=session, user=user, agent=agent
            )
        return StoredMemory(id=m.id, session=m.session, index=m.index)

    @server.tool(annotations=read)
    def search_memories(
        query: Annotated[str, Field(description="What to look for, in plain words")],
        k: Annotated[int, Field(ge=1, le=50, description="How many hits")] = 5,
        scope: Scope = None,
    ) -> SearchAnswer:
        """Search past conversations; best matches first, each with its id and date."""
        user, agent = parse_scope(scope)
        with _tool_errors():
            hits = caller().memory.search(query, k=k, user=user, agent=agent)
        return SearchAnswer(
            hits=[
                FoundMemory(
                    id=h.id,
                    content=h.message.content,
                    role=h.message.role,
                    speaker=h.speaker,
                    session=h.session,
                    timestamp=h.message.to_dict()["timestamp"],
                    score=round(h.score, 4),
                )
                for h in hits
            ]
        )

    @server.tool(annotations=read)
    def get_context(
        query: Annotated[str, Field(description="The next user message")],
        budget_tokens: Annotated[int | None, Field(ge=100, description="Token budget")] = None,
        scope: Scope = None,
    ) -> ContextAnswer:
        """A prompt for the next turn: recalled memory, topic paths and recent turns,
        within a token budget."""
        user, agent = parse_scope(scope)
        from arbormem.config import UNSET

        budget: Any = UNSET if budget_tokens is None else budget_tokens
        with _tool_errors():
            ctx = caller().memory.context(query, budget_tokens=budget, user=user, agent=agent)
        return ContextAnswer(text=ctx.text, prompt_tokens=ctx.prompt_tokens, session=ctx.session)

    @server.tool(annotations=read)
    def view_topic(
        node: Annotated[int | None, Field(ge=0, description="A node id")] = None,
        path: Annotated[str | None, Field(description="Child positions from the root, 0/2")] = None,
        scope: Scope = None,
    ) -> dict[str, Any]:
        """A node of the topic tree (the root by default) with its children: names,
        summaries, dates and message counts. Walk down by child id."""
        from arbormem.server.routes.tree import find_node, node_view

        user, agent = parse_scope(scope)
        with _tool_errors():
            root = caller().memory.tree(user=user, agent=agent, messages=False)
            return node_view(find_node(root, node, path), messages=False)

    @server.tool(annotations=read)
    def get_messages(
        ids: Annotated[list[str] | None, Field(description="Message ids (from search)")] = None,
        session: Annotated[str | None, Field(description="A whole session")] = None,
        start: Annotated[int | None, Field(ge=0, description="From this position")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        scope: Scope = None,
    ) -> MessagesAnswer:
        """Read messages in full: by id, a session's, or from a position of the thread."""
        user, agent = parse_scope(scope)
        mem = caller().memory
        with _tool_errors():
            if ids:
                found = [mem.get(i, user=user, agent=agent) for i in ids[:limit]]
            else:
                found = mem.messages(
                    session=session, start=start, limit=limit, user=user, agent=agent
                )
        return MessagesAnswer(messages=[_item(m) for m in found])

    @server.tool(annotations=delete)
    def delete_memory(
        id: Annotated[str, Field(description="The message id to forget for good")],
        scope: Scope = None,
    ) -> DeleteAnswer:
        """Forget one message for good (it and everything derived from it)."""
        user, agent = parse_scope(scope)
        with _tool_errors():
            gone = writer().forget(id, user=user, agent=agent)
        return DeleteAnswer(deleted=gone.messages, purged=gone.purged)


def register_record_tools(server: MCPServer, caller: Callable[[], Caller]) -> None:
    """The typed-records tools (docs/records.md): what holds now, its history, and
    explicit statements."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    # The same statement twice is one record (ids hash the text): repeating the
    # call adds nothing. Replacing a value keeps the old one in the history.
    remember_hints = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    delete = ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    )

    def writer() -> Memory:
        c = caller()
        if not c.can_write:
            raise ToolError("this key is read-only: it cannot change memory")
        return c.memory

    @server.tool(annotations=remember_hints)
    def remember(
        text: Annotated[
            str, Field(description="One self-contained statement: 'Sam lives in Lyon.'")
        ],
        kind: Annotated[
            str,
            Field(
                description="fact, preference, event, constraint, procedure, "
                "failure_pattern or tool_affordance"
            ),
        ] = "fact",
        subject: Annotated[str | None, Field(description="Who or what it is about")] = None,
        attribute: Annotated[
            str | None, Field(description="What can change: home, employer, phone...")
        ] = None,
        value: Annotated[str | None, Field(description="The attribute's new value")] = None,
        when: Annotated[
            str | None, Field(description="When it became true, ISO 8601 [default: now]")
        ] = None,
        scope: Scope = None,
    ) -> RememberAnswer:
        """Keep a fact as a typed record. With subject, attribute and value it
        replaces the subject's current value of that attribute (the old one stays
        in the history)."""
        user, agent = parse_scope(scope)
        with _tool_errors():
            done = writer().remember(
                text,
                kind=kind,
                subject=subject,
                attribute=attribute,
                value=value,
                when=when,
                user=user,
                agent=agent,
            )
        return RememberAnswer(
            action=done.action,
            record=_record(done.record) if done.record is not None else None,
            closed=list(done.closed),
        )

    @server.tool(annotations=read)
    def search_records(
        query: Annotated[str, Field(description="What to look for: 'where does Sam live?'")],
        k: Annotated[int, Field(ge=1, le=50, description="How many records")] = 5,
        as_of: Annotated[
            str | None, Field(description="What held at this date (ISO 8601) instead of now")
        ] = None,
        scope: Scope = None,
    ) -> RecordsAnswer:
        """The facts that hold now (or held at as_of) about what the query asks,
        best first: one statement each, with the dates it held."""
        user, agent = parse_scope(scope)
        with _tool_errors():
            hits = caller().memory.search_records(query, k=k, as_of=as_of, user=user, agent=agent)
        return RecordsAnswer(records=[_record(h.record) for h in hits])

    @server.tool(annotations=read)
    def record_history(
        id: Annotated[str, Field(description="A record id (from search_records)")],
        scope: Scope = None,
    ) -> RecordsAnswer:
        """Every value a record's subject and attribute had, oldest first, with dates."""
        user, agent = parse_scope(scope)
        with _tool_errors():
            found = caller().memory.record_history(id, user=user, agent=agent)
        return RecordsAnswer(records=[_record(r) for r in found])

    @server.tool(annotations=delete)
    def forget_record(
        id: Annotated[str, Field(description="The record id to forget for good")],
        scope: Scope = None,
    ) -> ForgetRecordAnswer:
        """Forget one typed record for good (the messages stay); what it had
        replaced holds again."""
        user, agent = parse_scope(scope)
        with _tool_errors():
            gone = writer().forget_record(id, user=user, agent=agent)
        return ForgetRecordAnswer(deleted=list(gone.records), purged=gone.purged)


def build_stdio_mcp(memory: Memory) -> MCPServer:
    """The stdio server of ``arbormem mcp``: one store, one tenant, no keys (the
    process is the agent client's own child)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("arbormem", instructions=INSTRUCTIONS, log_level="WARNING")
    who = Caller(memory=memory, can_write=not memory.read_only)
    register_tools(server, lambda: who)
    register_record_tools(server, lambda: who)
    return server


class _KeyVerifier:
    """The SDK's token verifier over the server's own keys and JWTs."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken
        from starlette.concurrency import run_in_threadpool

        p = await run_in_threadpool(self.state.auth.principal, token)
        if p is None:
            return None
        return AccessToken(
            token=token,
            client_id=p.tenant or "-",
            scopes=["read"] if p.read_only else ["read", "write"],
        )


def build_http_mcp(state: ServerState, *, stateless: bool = False) -> tuple[MCPServer, ASGIApp]:
    """The MCP server for ``/mcp`` and its ASGI app (its session manager must run in
    the parent app's lifespan). ``stateless``: no MCP sessions, for several workers."""
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from pydantic import AnyHttpUrl

    if state.auth.enabled:
        # The SDK checks the bearer on every request, answers 401 itself, and binds
        # each MCP session to the key that opened it.
        server = MCPServer(
            "arbormem",
            instructions=INSTRUCTIONS,
            log_level="WARNING",
            token_verifier=_KeyVerifier(state),
            auth=AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1"), resource_server_url=None),
        )
    else:
        server = MCPServer("arbormem", instructions=INSTRUCTIONS, log_level="WARNING")

    def caller() -> Caller:
        token = get_access_token()
        if token is None:  # auth off: the store's own tenant
            return Caller(memory=state.memory_for(""), can_write=True)
        tenant = "" if token.client_id == "-" else token.client_id
        return Caller(memory=state.memory_for(tenant), can_write="write" in token.scopes)

    register_tools(server, caller)
    register_record_tools(server, caller)
    allowed_hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    allowed_origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *state.origins]
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=stateless,
        transport_security=TransportSecuritySettings(
            # Off for a server listening beyond loopback: its Host is the public name.
            enable_dns_rebinding_protection=state.loopback_only,
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
        ),
    )
    return server, app
