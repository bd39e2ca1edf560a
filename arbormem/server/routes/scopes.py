"""``/v1/sessions`` and ``/v1/users``: the threads of a tenant, and forgetting them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from arbormem.server import schemas
from arbormem.server.deps import ReadMemory, WriteMemory
from arbormem.server.routes.messages import AgentQ, UserQ
from arbormem.server.schemas import AUTH_ERRORS, LOOKUP_ERRORS, WRITE_ERRORS, answer

router = APIRouter(prefix="/v1", tags=["sessions and users"])


@router.get("/sessions", response_model=schemas.SessionList, responses=AUTH_ERRORS)
def list_sessions(mem: ReadMemory, user: UserQ, agent: AgentQ = None) -> Response:
    """The sessions of a user's thread, in order of their first message."""
    return answer({"sessions": [s.to_dict() for s in mem.sessions(user=user, agent=agent)]})


@router.delete(
    "/sessions/{session_id}",
    response_model=schemas.ForgottenOut,
    responses={**WRITE_ERRORS, **LOOKUP_ERRORS},
)
def forget_session(
    session_id: Annotated[str, Path(min_length=1, max_length=512)],
    mem: WriteMemory,
    user: UserQ,
    agent: AgentQ = None,
) -> Response:
    """Delete one session for good."""
    return answer(mem.forget(session=session_id, user=user, agent=agent).to_dict())


@router.get("/users", response_model=schemas.ScopeList, responses=AUTH_ERRORS)
def list_scopes(
    mem: ReadMemory, user: Annotated[str | None, Query(min_length=1, max_length=512)] = None
) -> Response:
    """Every (user, agent) of the caller's tenant, or one user's agents."""
    return answer({"scopes": [{"user": s.user, "agent": s.agent} for s in mem.scopes(user)]})


@router.delete(
    "/users/{user}",
    response_model=schemas.ForgottenOut,
    responses={**WRITE_ERRORS, **LOOKUP_ERRORS},
)
def forget_user(
    user: Annotated[str, Path(min_length=1, max_length=512)], mem: WriteMemory
) -> Response:
    """Everything of one user, across agents: for erasure requests."""
    return answer(mem.forget(user=user).to_dict())
