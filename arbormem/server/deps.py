"""FastAPI dependencies: the caller's principal, the right to write, its tenant's store.

Module-level on purpose: FastAPI resolves annotations in module globals, and a
dependency defined inside the app factory breaks OpenAPI generation. Per-app
values are read from ``request.app.state.arbormem``.

They are ``async`` because FastAPI runs each plain ``def`` dependency in its thread
pool: three hops there and back per request for a dictionary lookup. Checking an
API key never blocks (a hash and a stat of the key file); only a JWT whose key must
be fetched from the issuer goes to a thread.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from arbormem.memory import Memory
from arbormem.server.errors import ApiError
from arbormem.server.keys import Principal
from arbormem.server.state import ServerState

_bearer = HTTPBearer(auto_error=False, description="An API key (`arbormem keys create`) or a JWT")


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.arbormem
    return state


async def principal(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    auth = server_state(request).auth
    token = creds.credentials if creds else None
    if auth.may_block(token):
        found = await run_in_threadpool(auth.principal, token)
    else:
        found = auth.principal(token)
    if found is None:
        raise ApiError(
            401,
            "unauthorized",
            "missing or unknown API key: send 'Authorization: Bearer <key>' "
            "(create one with 'arbormem keys create --tenant NAME')",
        )
    return found


PrincipalDep = Annotated[Principal, Depends(principal)]


async def writer(p: PrincipalDep) -> Principal:
    if p.read_only:
        raise ApiError(403, "forbidden", f"key {p.key_id} is read-only: this route writes")
    return p


WriterDep = Annotated[Principal, Depends(writer)]


async def reading_memory(request: Request, p: PrincipalDep) -> Memory:
    return server_state(request).memory_for(p.tenant)


async def writing_memory(request: Request, p: WriterDep) -> Memory:
    return server_state(request).memory_for(p.tenant)


#: The caller's tenant's store, for a route that only reads.
ReadMemory = Annotated[Memory, Depends(reading_memory)]
#: The same, for a route that writes (a read-only key gets 403).
WriteMemory = Annotated[Memory, Depends(writing_memory)]
