"""The HTTP API's bodies and answers, as pydantic models (they make the OpenAPI schema).

Answers have the shape of the library results' ``to_dict()`` (a hit is what
``arbormem search --json`` prints), built by the ``from_*`` helpers here, so the
routes stay one call to :class:`~arbormem.Memory` and one conversion.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from arbormem.context.assemble import Context
from arbormem.models import Hits, Message, Session
from arbormem.results import Forgotten, Imported, Stats
from arbormem.tree.recall import TopicPath

Id = Annotated[str, Field(min_length=1, max_length=512)]
Count = Annotated[StrictInt, Field(ge=1, le=1000)]


class Body(BaseModel):
    # An unknown field is a mistake the caller should hear about (a misspelt "sesion").
    model_config = ConfigDict(extra="forbid")


# -- request bodies ------------------------------------------------------------------------


class NewMessage(Body):
    role: StrictStr = "user"
    content: StrictStr
    speaker: StrictStr | None = None
    #: ISO 8601 text or Unix seconds.
    timestamp: StrictStr | float | None = None
    metadata: dict[str, Any] | None = None
    session: StrictStr | None = None
    id: StrictStr | None = None


class AddBody(Body):
    user: Id
    agent: Id | None = None
    session: StrictStr | None = None
    messages: Annotated[list[NewMessage], Field(min_length=1, max_length=10_000)]


class SearchBody(Body):
    user: Id
    agent: Id | None = None
    query: StrictStr
    k: Count = 10
    session: StrictStr | list[StrictStr] | None = None
    since: StrictStr | float | None = None
    until: StrictStr | float | None = None
    role: StrictStr | list[StrictStr] | None = None
    neighbors: Annotated[StrictInt, Field(ge=0, le=100)] = 0
    all_agents: StrictBool = False


class ContextBody(Body):
    user: Id
    agent: Id | None = None
    query: StrictStr
    budget_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    mode: StrictStr | None = None
    session: StrictStr | None = None
    system_prompt: StrictStr | None = None


class TopicsBody(Body):
    user: Id
    agent: Id | None = None
    query: StrictStr
    k: Count = 3
    all_agents: StrictBool = False


# -- answers -------------------------------------------------------------------------------


class MessageOut(BaseModel):
    id: str
    index: int
    session: str
    role: str
    speaker: str | None
    content: str
    timestamp: str
    user: str
    agent: str
    metadata: dict[str, Any]


class ImageRefOut(BaseModel):
    id: str
    sha256: str
    mime: str
    size: int
    file: str | None
    url: str | None


class HitOut(MessageOut):
    score: float
    signals: dict[str, float]
    message_ids: list[str]
    superseded_by: str | None
    neighbors: list[MessageOut]
    #: The image the hit's message captions (null for any other message).
    image: ImageRefOut | None = None


class Added(BaseModel):
    ids: list[str]
    messages: list[MessageOut]


class MessageList(BaseModel):
    messages: list[MessageOut]


class SearchResult(BaseModel):
    hits: list[HitOut]
    #: Soft-archived messages holding the query's words (never hits).
    archived: list[str]
    archived_count: int


class SessionOut(BaseModel):
    id: str
    user: str
    agent: str
    started_at: str
    last_at: str
    message_count: int
    metadata: dict[str, Any]


class SessionList(BaseModel):
    sessions: list[SessionOut]


class ScopeOut(BaseModel):
    user: str
    agent: str


class ScopeList(BaseModel):
    scopes: list[ScopeOut]


class ForgottenOut(BaseModel):
    messages: int
    sessions: int
    threads: int
    purged: bool
    purge_pending: str | None


class SectionOut(BaseModel):
    name: str
    text: str
    tokens: int
    items: int


class ContextOut(BaseModel):
    mode: str
    session: str
    budget: int
    prompt_tokens: int
    max_tokens: int
    token_counter: str
    dropped: dict[str, int]
    sections: list[SectionOut]
    #: Ready for an OpenAI-style chat call.
    messages: list[dict[str, str]]


class StatsOut(BaseModel):
    scope: str
    messages: int
    sessions: int
    embedder: str
    vector_models: dict[str, int]


class TopicStep(BaseModel):
    id: int
    kind: str
    name: str
    summary: str
    first_at: str | None
    last_at: str | None


class TopicPathOut(BaseModel):
    score: float
    sufficient: bool
    user: str
    agent: str
    nodes: list[TopicStep]
    turns: list[MessageOut]
    text: str


class TopicPaths(BaseModel):
    paths: list[TopicPathOut]


class TopicNodeOut(BaseModel):
    """A node of the topic tree with its children (one level: ask for a child by id)."""

    model_config = ConfigDict(extra="allow")

    id: int
    kind: str
    path: list[int]
    message_count: int
    children: list[dict[str, Any]] = []


class ImportedOut(BaseModel):
    threads: int
    messages: int
    skipped: int
    archived: int
    not_archived: int
    session_states: int


class Job(BaseModel):
    id: str
    kind: str
    status: Literal["running", "done", "failed"]
    result: ImportedOut | None = None
    error: ErrorDetail | None = None


class Health(BaseModel):
    status: str
    version: str


class Ready(BaseModel):
    ready: bool
    read_only: bool


class ErrorDetail(BaseModel):
    #: ``input``, ``not_found``, ``forbidden``, ``unauthorized``, ``store``, ``upstream``...
    type: str
    message: str
    #: The field at fault, for input errors (a dotted path into the body).
    field: str | None = None
    hint: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


Job.model_rebuild()

#: Documented on every route that needs a key (schemathesis checks they are).
AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "The body is not JSON"},
    401: {"model": ErrorOut, "description": "No key, or an unknown one"},
    422: {"model": ErrorOut, "description": "Invalid input; `field` names it"},
}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **AUTH_ERRORS,
    403: {"model": ErrorOut, "description": "A read-only key"},
}
LOOKUP_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "Not in this scope"}
}


# -- conversions ---------------------------------------------------------------------------


def message(m: Message) -> dict[str, Any]:
    return m.to_dict()


def messages(ms: list[Message]) -> MessageList:
    return MessageList.model_validate({"messages": [m.to_dict() for m in ms]})


def search_result(hits: Hits) -> SearchResult:
    return SearchResult.model_validate(
        {
            "hits": [h.to_dict() for h in hits],
            "archived": list(hits.archived),
            "archived_count": hits.archived_count,
        }
    )


def sessions(items: list[Session]) -> SessionList:
    return SessionList.model_validate({"sessions": [s.to_dict() for s in items]})


def forgotten(f: Forgotten) -> ForgottenOut:
    return ForgottenOut.model_validate(f.to_dict())


def context(c: Context) -> ContextOut:
    return ContextOut.model_validate(c.to_dict())


def stats(s: Stats) -> StatsOut:
    return StatsOut.model_validate(s.to_dict())


def imported(i: Imported) -> ImportedOut:
    return ImportedOut.model_validate(i.to_dict())


def topic_paths(paths: list[TopicPath]) -> TopicPaths:
    from arbormem.timeutil import format_timestamp

    def when(value: Any) -> str | None:
        return format_timestamp(value) if value is not None else None

    return TopicPaths(
        paths=[
            TopicPathOut(
                score=round(float(p.score), 6),
                sufficient=p.sufficient,
                user=p.user,
                agent=p.agent,
                nodes=[
                    TopicStep(
                        id=n.id,
                        kind=n.kind,
                        name=n.name,
                        summary=n.summary,
                        first_at=when(n.first_at),
                        last_at=when(n.last_at),
                    )
                    for n in p.nodes
                ],
                turns=[MessageOut.model_validate(m.to_dict()) for m in p.turns],
                text=p.render(),
            )
            for p in paths
        ]
    )
