"""Every error answer has one shape: ``{"error": {"type", "message", "field", "hint"}}``.

Library errors map to statuses here, once: bad input 422 (naming the field), an
id not in the scope 404, a store that cannot be written now 503 (a lock held past
the configured wait) or 409 (a read-only store), a failing LLM 502.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from arbormem.errors import (
    ArbormemError,
    ConfigError,
    InputError,
    LLMError,
    NotFound,
    StoreError,
)


class ApiError(Exception):
    """An error answer decided by the server itself (auth, a missing job...)."""

    def __init__(self, status: int, type: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.field = field


def error_body(
    type: str, message: str, *, field: str | None = None, hint: str | None = None
) -> dict[str, Any]:
    return {"error": {"type": type, "message": message, "field": field, "hint": hint}}


def status_of(exc: ArbormemError) -> tuple[int, str]:
    if isinstance(exc, InputError):
        return 422, "input"
    if isinstance(exc, NotFound):
        return 404, "not_found"
    if isinstance(exc, StoreError):
        text = str(exc)
        if "read-only" in text or "read only" in text:
            return 409, "read_only"
        return 503, "store"
    if isinstance(exc, LLMError):
        return 502, "upstream"
    if isinstance(exc, ConfigError):
        return 500, "config"
    return 400, "error"


def body_of(exc: ArbormemError) -> dict[str, Any]:
    _, kind = status_of(exc)
    if isinstance(exc, InputError):
        return error_body(kind, exc.problem, field=exc.field, hint=exc.hint)
    return error_body(kind, str(exc))


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the shape above."""

    async def on_library_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ArbormemError)
        status, _ = status_of(exc)
        return JSONResponse(body_of(exc), status_code=status)

    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(
            error_body(exc.type, exc.message, field=exc.field),
            status_code=exc.status,
            headers=headers,
        )

    async def on_invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        if first.get("type") == "json_invalid":
            return JSONResponse(error_body("input", "the body is not valid JSON"), status_code=400)
        message = str(first.get("msg", "invalid request"))
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        return JSONResponse(
            error_body("input", message, field=".".join(loc) or None), status_code=422
        )

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kind = {404: "not_found", 405: "method_not_allowed", 400: "input"}.get(
            exc.status_code, "http"
        )
        return JSONResponse(
            error_body(kind, str(exc.detail)),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    app.add_exception_handler(ArbormemError, on_library_error)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(StarletteHTTPException, on_http)
