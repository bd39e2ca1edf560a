"""The HTTP API's bodies and answers, as pydantic models (they make the OpenAPI schema).

Answers have the shape of the library results' ``to_dict()`` (a hit is what
``arbormem search --json`` prints), built by the ``from_*`` helpers here, so the
routes stay one call to :class:`~arbormem.Memory` and one conversion.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from arbormem.models import Hits
from arbormem.results import Imported
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
    #: Also current typed records, in ``records`` (the hits are the same turns).
    records: StrictBool = False


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


class RememberBody(Body):
    user: Id
    agent: Id | None = None
    #: One self-contained statement ("Sam lives in Lyon.").
    text: StrictStr
    kind: StrictStr = "fact"
    subject: StrictStr | None = None
    attribute: StrictStr | None = None
    value: StrictStr | None = None
    negated: StrictBool = False
    #: When it became true: ISO 8601 text or Unix seconds [default: now].
    when: StrictStr | float | None = None
    tags: list[StrictStr] | None = None
    intent: StrictStr | None = None
    body: StrictStr | None = None


class RecordSearchBody(Body):
    user: Id
    agent: Id | None = None
    query: StrictStr
    k: Annotated[StrictInt, Field(ge=1, le=10_000)] = 10
    #: Only the records that hold now (false: every version).
    current: StrictBool = True
    #: The records that held at this moment: ISO 8601 text or Unix seconds.
    as_of: StrictStr | float | None = None
    kind: StrictStr | None = None
    #: Who "I" is in the query.
    speaker: StrictStr | None = None


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
    #: Current typed records for the query, best first (empty unless asked for).
    records: list[RecordHitOut] = []


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


class RecordOut(BaseModel):
    """A typed record (see docs/records.md)."""

    id: str
    kind: str
    text: str
    subject: str | None
    attribute: str | None
    value: str | None
    negated: bool
    tags: list[str]
    entities: list[str]
    #: Ids of the messages it was distilled from.
    sources: list[str]
    valid_from: str | None
    valid_to: str | None
    superseded_by: str | None
    supersedes: str | None
    confidence: float
    importance: float
    created_at: str | None
    updated_at: str | None
    recall_count: int
    mentions: int
    intent: str | None
    body: str | None
    scope: str


class RecordHitOut(RecordOut):
    score: float
    signals: dict[str, float]
    #: The messages the record stands for where turns are scored (its sources).
    message_ids: list[str]


class RecordList(BaseModel):
    records: list[RecordOut]


class RecordHits(BaseModel):
    hits: list[RecordHitOut]


class RememberedOut(BaseModel):
    #: added, merged, superseded, closed, history or ignored.
    action: str
    record: RecordOut | None
    #: Ids of the records it closed.
    closed: list[str]


class RecordsForgottenOut(BaseModel):
    records: list[str]
    purged: bool
    purge_pending: str | None


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


def answer(data: Any, status: int = 200) -> Response:
    """``data`` (a library result's ``to_dict()``, already in the documented shape) as
    the answer, with no pydantic pass over it: the route's ``response_model`` documents
    it, and the library's tests pin the shape."""
    return JSONResponse(data, status_code=status)


def search_answer(hits: Hits) -> Response:
    return answer(hits.to_dict())


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
