"""``POST /v1/chat/completions``: an OpenAI-compatible proxy that gives any chat
client memory.

The last user message is the query: :meth:`Memory.context` recalls for it, and the
system message it builds (the caller's system prompt with the recalled memory)
replaces the caller's own system messages; the rest of the caller's messages go on
unchanged to the configured endpoint. The exchange (that user message and the
reply) is stored once the reply is complete. Streams pass through chunk by chunk.
Upstream failures become statuses in OpenAI's error shape: its 4xx and 5xx as they
were, a timeout 504, an unreachable endpoint 502.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from arbormem.memory import Memory
from arbormem.server.deps import PrincipalDep, server_state
from arbormem.server.errors import ApiError
from arbormem.server.schemas import WRITE_ERRORS, ErrorOut
from arbormem.server.state import ProxyConfig

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible proxy"])

#: The user whose memory a request without ``user`` reads and extends.
DEFAULT_USER = "default"


def _openai_error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}},
        status_code=status,
    )


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _prepare(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str, str]:
    messages = body.get("messages")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
    ):
        raise ApiError(
            422, "input", "must be a non-empty list of {role, content} objects", field="messages"
        )
    queries = [m for m in messages if m["role"] == "user"]
    if not queries or not _text(queries[-1].get("content")).strip():
        raise ApiError(
            422, "input", "needs a user message with text to recall for", field="messages"
        )
    system = "\n\n".join(_text(m.get("content")) for m in messages if m["role"] == "system")
    return messages, _text(queries[-1]["content"]), system


def _assemble(
    mem: Memory,
    messages: list[dict[str, Any]],
    query: str,
    system: str,
    user: str,
    agent: str | None,
) -> list[dict[str, Any]]:
    ctx = mem.context(query, system_prompt=system or None, user=user, agent=agent)
    memory_message = {"role": "system", "content": ctx.messages[0]["content"]}
    return [memory_message, *(m for m in messages if m["role"] != "system")]


def _store(mem: Memory, query: str, reply: str, user: str, agent: str | None) -> None:
    mem.add_many(
        [{"role": "user", "content": query}, {"role": "assistant", "content": reply}],
        user=user,
        agent=agent,
    )


def _client(config: ProxyConfig) -> Any:
    import openai

    return openai.AsyncOpenAI(
        base_url=config.base_url, api_key=config.api_key, timeout=config.timeout, max_retries=0
    )


@router.post(
    "/chat/completions",
    responses={
        **WRITE_ERRORS,
        404: {"model": ErrorOut, "description": "The proxy is off (no --llm-base-url)"},
        502: {"description": "The endpoint failed or is unreachable (OpenAI's error shape)"},
        504: {"description": "The endpoint timed out (OpenAI's error shape)"},
    },
)
async def chat_completions(
    request: Request,
    p: PrincipalDep,
    body: Annotated[dict[str, Any], Body(description="An OpenAI chat completion request")],
    x_arbormem_agent: Annotated[str | None, Header(max_length=512)] = None,
) -> Any:
    """A chat completion with the user's memory recalled into the prompt; the
    exchange is stored. ``user`` (OpenAI's own field) names whose memory."""
    import openai

    state = server_state(request)
    if state.proxy is None:
        raise ApiError(
            404, "not_found", "the proxy is off: start the server with --llm-base-url URL"
        )
    if p.read_only:
        raise ApiError(
            403, "forbidden", f"key {p.key_id} is read-only: the proxy stores the exchange"
        )
    user = body.get("user", DEFAULT_USER)
    if not isinstance(user, str) or not user.strip():
        raise ApiError(422, "input", "must be a non-blank user id", field="user")
    agent = x_arbormem_agent
    messages, query, system = _prepare(body)
    mem = state.memory_for(p.tenant)
    prompt = await run_in_threadpool(_assemble, mem, messages, query, system, user, agent)
    upstream = _client(state.proxy)
    kwargs = {k: v for k, v in body.items() if k not in ("messages", "stream", "model")}
    model = body.get("model") or state.proxy.model or "default"
    try:
        if not body.get("stream"):
            resp = await upstream.chat.completions.create(model=model, messages=prompt, **kwargs)
            reply = resp.choices[0].message.content if resp.choices else None
            if reply:
                await run_in_threadpool(_store, mem, query, reply, user, agent)
            await upstream.close()
            return JSONResponse(resp.model_dump(mode="json", exclude_unset=True))
        # Opened before answering, so that the endpoint's refusal is our status.
        stream = await upstream.chat.completions.create(
            model=model, messages=prompt, stream=True, **kwargs
        )
    except openai.APIStatusError as exc:
        await upstream.close()
        return _openai_error(exc.status_code, f"upstream: {exc.message}", "upstream_error")
    except openai.APITimeoutError:
        await upstream.close()
        return _openai_error(504, "upstream timed out", "timeout")
    except openai.APIConnectionError as exc:
        await upstream.close()
        return _openai_error(502, f"upstream unreachable: {exc}", "upstream_error")
    except openai.OpenAIError as exc:  # a malformed answer
        await upstream.close()
        return _openai_error(502, f"upstream: {exc}", "upstream_error")

    async def events() -> AsyncIterator[str]:
        parts: list[str] = []
        try:
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta and choice.delta.content:
                        parts.append(choice.delta.content)
                yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
        except openai.APIError as exc:
            error = {"error": {"message": f"upstream: {exc}", "type": "upstream_error"}}
            yield f"data: {json.dumps(error)}\n\n"
            return
        finally:
            await upstream.close()
        # A stream that ended cleanly is a complete reply: store the exchange.
        if parts:
            await run_in_threadpool(_store, mem, query, "".join(parts), user, agent)
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )
