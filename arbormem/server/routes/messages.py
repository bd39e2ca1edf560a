"""``/v1/messages``: add (201 once durable), read, list by session, forget."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from arbormem.server import schemas
from arbormem.server.deps import ReadMemory, WriteMemory
from arbormem.server.schemas import AUTH_ERRORS, LOOKUP_ERRORS, WRITE_ERRORS, answer

router = APIRouter(prefix="/v1", tags=["messages"])

UserQ = Annotated[str, Query(min_length=1, max_length=512, description="The user's id")]
AgentQ = Annotated[
    str | None,
    Query(min_length=1, max_length=512, description="The agent's id [default: the server's]"),
]


@router.post("/messages", status_code=201, response_model=schemas.Added, responses=WRITE_ERRORS)
def add_messages(body: schemas.AddBody, mem: WriteMemory) -> Response:
    """Store messages in one transaction (all or none); answers once they are on disk."""
    added = mem.add_many(
        [m.model_dump(exclude_none=True) for m in body.messages],
        session=body.session,
        user=body.user,
        agent=body.agent,
    )
    return answer(
        {"ids": [m.id for m in added], "messages": [m.to_dict() for m in added]}, status=201
    )


@router.get("/messages", response_model=schemas.MessageList, responses=AUTH_ERRORS)
def list_messages(
    mem: ReadMemory,
    user: UserQ,
    agent: AgentQ = None,
    session: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
    start: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int | None, Query(ge=0, le=10_000)] = 1000,
) -> Response:
    """The thread's messages in order: one session's, or from position ``start``."""
    found = mem.messages(session=session, start=start, limit=limit, user=user, agent=agent)
    return answer({"messages": [m.to_dict() for m in found]})


@router.get(
    "/messages/{message_id}",
    response_model=schemas.MessageOut,
    responses={**AUTH_ERRORS, **LOOKUP_ERRORS},
)
def get_message(message_id: str, mem: ReadMemory, user: UserQ, agent: AgentQ = None) -> Response:
    """One message by id (404 when it is not in this scope)."""
    return answer(mem.get(message_id, user=user, agent=agent).to_dict())


@router.delete(
    "/messages/{message_id}",
    response_model=schemas.ForgottenOut,
    responses={**WRITE_ERRORS, **LOOKUP_ERRORS},
)
def forget_message(
    message_id: str, mem: WriteMemory, user: UserQ, agent: AgentQ = None
) -> Response:
    """Delete one message for good, with everything derived from it."""
    return answer(mem.forget(message_id, user=user, agent=agent).to_dict())
