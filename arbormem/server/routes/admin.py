"""Stats, export, import (as a background job when large) and job status."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse, Response

from arbormem.errors import ArbormemError
from arbormem.server import schemas
from arbormem.server.deps import PrincipalDep, ReadMemory, WriteMemory, server_state
from arbormem.server.errors import ApiError, body_of
from arbormem.server.routes.messages import AgentQ, UserQ
from arbormem.server.schemas import AUTH_ERRORS, LOOKUP_ERRORS, WRITE_ERRORS, answer

router = APIRouter(prefix="/v1", tags=["administration"])

#: Imports with more messages than this run as a job (202 and a status route).
BACKGROUND_OVER = 2000


@router.get("/stats", response_model=schemas.StatsOut, responses=AUTH_ERRORS)
def stats(mem: ReadMemory, user: UserQ, agent: AgentQ = None) -> Response:
    """Counts of a user's thread, and the vectors the store holds by model."""
    return answer(mem.stats(user=user, agent=agent).to_dict())


@router.get("/export", response_model=dict[str, Any], responses=AUTH_ERRORS)
def export(
    mem: ReadMemory,
    user: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
    agent: AgentQ = None,
    everything: bool = False,
) -> Response:
    """A user's threads (or one thread, or the whole tenant's with ``everything``) in
    the export format, ready for ``POST /v1/import``."""
    if user is None and not everything:
        raise ApiError(422, "input", "name a user, or ask for everything=true", field="user")
    return answer(dict(mem.export(user=user, agent=agent, everything=everything).document))


def _count(document: Any) -> int:
    try:
        return sum(
            len(s.get("messages", [])) for t in document["threads"] for s in t.get("sessions", [])
        )
    except (KeyError, TypeError, AttributeError):
        return 0  # malformed: the import itself says where


@router.post(
    "/import",
    responses={
        **WRITE_ERRORS,
        202: {"model": schemas.Job, "description": "Large: running as a job"},
    },
)
def import_(
    request: Request,
    p: PrincipalDep,
    mem: WriteMemory,
    document: Annotated[dict[str, Any], Body(description="An export document")],
    background: Annotated[bool | None, Query()] = None,
) -> Any:
    """Restore an export into the caller's tenant, all or nothing. Large ones (or
    ``background=true``) answer 202 with a job to poll at ``/v1/jobs/{id}``."""
    if background or (background is None and _count(document) > BACKGROUND_OVER):
        job = server_state(request).jobs.start("import", p.tenant, lambda: mem.import_(document))
        return JSONResponse(
            schemas.Job(id=job.id, kind=job.kind, status="running").model_dump(), status_code=202
        )
    return schemas.imported(mem.import_(document))


@router.get("/jobs/{job_id}", responses={**AUTH_ERRORS, **LOOKUP_ERRORS})
def job_status(job_id: str, request: Request, p: PrincipalDep) -> schemas.Job:
    """How a background job is doing, and its result or error once it ended."""
    job = server_state(request).jobs.get(job_id, p.tenant)
    if job is None:
        raise ApiError(404, "not_found", f"no job {job_id!r}")
    error = None
    if job.error is not None:
        detail = (
            body_of(job.error)["error"]
            if isinstance(job.error, ArbormemError)
            else {"type": "internal", "message": f"{type(job.error).__name__}: {job.error}"}
        )
        error = schemas.ErrorDetail.model_validate(detail)
    return schemas.Job(
        id=job.id,
        kind=job.kind,
        status=job.status,  # type: ignore[arg-type]
        result=schemas.imported(job.result) if job.status == "done" else None,
        error=error,
    )
