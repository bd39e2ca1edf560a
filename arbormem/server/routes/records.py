"""``/v1/records``: typed records (docs/records.md): list, search, history, remember, forget."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from arbormem.server import schemas
from arbormem.server.deps import ReadMemory, WriteMemory
from arbormem.server.routes.messages import AgentQ, UserQ
from arbormem.server.schemas import AUTH_ERRORS, LOOKUP_ERRORS, WRITE_ERRORS, answer

router = APIRouter(prefix="/v1", tags=["records"])

RecordId = Annotated[str, Path(min_length=1, max_length=80, description="A record id, rec-...")]
Text = Annotated[str | None, Query(min_length=1, max_length=200)]


@router.get("/records", response_model=schemas.RecordList, responses=AUTH_ERRORS)
def list_records(
    mem: ReadMemory,
    user: UserQ,
    agent: AgentQ = None,
    kind: Annotated[str | None, Query(description="fact, preference, event...")] = None,
    subject: Text = None,
    attribute: Text = None,
    current: Annotated[bool, Query(description="Only those that hold now")] = True,
    as_of: Annotated[
        str | None, Query(max_length=64, description="Those that held then (ISO 8601)")
    ] = None,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
) -> Response:
    """A user's typed records, newest first: those that hold now, every version
    (``current=false``), or those that held at ``as_of``."""
    found = mem.records(
        kind=kind,
        subject=subject,
        attribute=attribute,
        current=current,
        as_of=as_of,
        limit=limit,
        user=user,
        agent=agent,
    )
    return answer({"records": [r.to_dict() for r in found]})


@router.post("/records/search", response_model=schemas.RecordHits, responses=AUTH_ERRORS)
def search_records(body: schemas.RecordSearchBody, mem: ReadMemory) -> Response:
    """The typed records that best answer ``query``, best first."""
    hits = mem.search_records(
        body.query,
        k=body.k,
        current=body.current,
        as_of=body.as_of,
        kind=body.kind,
        speaker=body.speaker,
        user=body.user,
        agent=body.agent,
    )
    return answer({"hits": [h.to_dict() for h in hits]})


@router.get(
    "/records/{record_id}/history",
    response_model=schemas.RecordList,
    responses={**AUTH_ERRORS, **LOOKUP_ERRORS},
)
def record_history(
    record_id: RecordId, mem: ReadMemory, user: UserQ, agent: AgentQ = None
) -> Response:
    """Every version of what a record states, oldest first (404 when it is not in
    this scope)."""
    found = mem.record_history(record_id, user=user, agent=agent)
    return answer({"records": [r.to_dict() for r in found]})


@router.post(
    "/records", status_code=201, response_model=schemas.RememberedOut, responses=WRITE_ERRORS
)
def remember(body: schemas.RememberBody, mem: WriteMemory) -> Response:
    """Store a typed record as given (no extraction); with ``subject``, ``attribute``
    and ``value`` it closes the value it replaces, history kept."""
    done = mem.remember(
        body.text,
        kind=body.kind,
        subject=body.subject,
        attribute=body.attribute,
        value=body.value,
        negated=body.negated,
        when=body.when,
        tags=body.tags,
        intent=body.intent,
        body=body.body,
        user=body.user,
        agent=body.agent,
    )
    return answer(done.to_dict(), status=201)


@router.delete(
    "/records/{record_id}",
    response_model=schemas.RecordsForgottenOut,
    responses={**WRITE_ERRORS, **LOOKUP_ERRORS},
)
def forget_record(
    record_id: RecordId, mem: WriteMemory, user: UserQ, agent: AgentQ = None
) -> Response:
    """Delete one typed record for good (its messages stay); what it had closed
    holds again."""
    return answer(mem.forget_record(record_id, user=user, agent=agent).to_dict())
