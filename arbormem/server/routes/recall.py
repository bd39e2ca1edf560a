"""``/v1/search``, ``/v1/context`` and ``/v1/topics``: what the memory recalls."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from arbormem.config import UNSET
from arbormem.server import schemas
from arbormem.server.deps import PrincipalDep, ReadMemory
from arbormem.server.errors import ApiError
from arbormem.server.schemas import AUTH_ERRORS, WRITE_ERRORS, answer

router = APIRouter(prefix="/v1", tags=["recall"])


@router.post("/search", response_model=schemas.SearchResult, responses=AUTH_ERRORS)
def search(body: schemas.SearchBody, mem: ReadMemory) -> Response:
    """The ``k`` messages that best answer ``query`` in one user's scope, best first."""
    return schemas.search_answer(
        mem.search(
            body.query,
            k=body.k,
            session=body.session,
            since=body.since,
            until=body.until,
            role=body.role,
            neighbors=body.neighbors,
            user=body.user,
            agent=body.agent,
            all_agents=body.all_agents,
            records=body.records,
        )
    )


@router.post("/context", response_model=schemas.ContextOut, responses=WRITE_ERRORS)
def context(body: schemas.ContextBody, mem: ReadMemory, p: PrincipalDep) -> Response:
    """The prompt for the next turn within a token budget (``messages`` is ready for a
    chat call). Naming a ``mode`` stores it with the session, so a read-only key
    may not."""
    if body.mode is not None and p.read_only:
        raise ApiError(
            403, "forbidden", f"key {p.key_id} is read-only: mode is stored", field="mode"
        )
    budget: Any = UNSET if body.budget_tokens is None else body.budget_tokens
    return answer(
        mem.context(
            body.query,
            mode=body.mode,
            session=body.session,
            system_prompt=body.system_prompt,
            user=body.user,
            agent=body.agent,
            budget_tokens=budget,
        ).to_dict()
    )


@router.post("/topics", responses=AUTH_ERRORS)
def topics(body: schemas.TopicsBody, mem: ReadMemory) -> schemas.TopicPaths:
    """The best branches of the topic tree for ``query``, root to topic."""
    return schemas.topic_paths(
        mem.topic_paths(
            body.query, k=body.k, user=body.user, agent=body.agent, all_agents=body.all_agents
        )
    )
