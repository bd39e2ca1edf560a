"""A real HTTP server on 127.0.0.1 that speaks the OpenAI REST protocol.

It serves ``POST /v1/chat/completions`` (plain and ``stream: true`` as
server-sent events) and ``POST /v1/embeddings``, answering from a script the
test sets up, so every failure mode a remote endpoint has can be produced on
demand: good answers, malformed JSON, empty answers, answers slower than the
client's timeout, 429 and 500 errors, dropped connections, streams that
stall, break or end early.

:class:`ScriptedLLM` is the in-process counterpart: an
:class:`arbormem.llm.LLMClient` that answers from a script, for unit tests of
the features that use an LLM.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from arbormem.errors import LLMError
from arbormem.llm import ChatRequest, Chunk, LLMClient


@dataclass
class Reply:
    """One scripted answer. ``content`` is the assistant text (or None for an empty answer)."""

    content: str | None = "ok"
    #: Sent as the ``content`` value instead of ``content`` (a number, a list of parts...).
    content_value: Any = None
    status: int = 200
    delay: float = 0.0
    #: Raw body to send instead of a well-formed completion (for protocol garbage).
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 10
    completion_tokens: int = 5
    #: False: send no ``usage`` at all (servers that ignore ``stream_options`` do this).
    send_usage: bool = True
    #: Error replies only: the ``param`` the error names (a parameter the model rejects).
    error_param: str | None = None
    #: Streams only: after this many content chunks, close the connection (no finish, no [DONE]).
    cut_after: int | None = None
    #: Streams only: after this many content chunks, send an error event.
    error_after: int | None = None
    #: Streams only: pause this long before every chunk after the first (a stalled stream).
    chunk_delay: float = 0.0


def _content(reply: Reply) -> Any:
    return reply.content if reply.content_value is None else reply.content_value


def _vector(text: str, dim: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [((digest[i % len(digest)] + i * 7) % 255) / 255.0 - 0.5 for i in range(dim)]
    norm = sum(v * v for v in raw) ** 0.5 or 1.0
    return [v / norm for v in raw]


class FakeOpenAI:
    """Start with ``with FakeOpenAI() as server:``; point clients at ``server.base_url``."""

    def __init__(self, embedding_dim: int = 32) -> None:
        self.embedding_dim = embedding_dim
        self.script: deque[Reply] = deque()
        self.default = Reply()
        self.requests: list[dict[str, Any]] = []
        self.embedding_failures = 0
        #: Bodies the embeddings route sends next, as they are (200), one per request.
        self.embedding_bodies: deque[str] = deque()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def queue(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def reset(self) -> None:
        """Forget the script, the recorded requests and any changed default."""
        self.script.clear()
        self.requests.clear()
        self.default = Reply()
        self.embedding_failures = 0
        self.embedding_bodies.clear()

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self) -> Reply:
        return self.script.popleft() if self.script else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(
                self,
                status: int,
                body: str,
                ctype: str = "application/json",
                headers: dict[str, str] | None = None,
            ) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, "body": payload})
                if self.path.endswith("/embeddings"):
                    self._embeddings(payload)
                elif self.path.endswith("/chat/completions"):
                    self._chat(payload)
                else:
                    self._send(404, json.dumps({"error": {"message": "no such route"}}))

            def _embeddings(self, payload: dict[str, Any]) -> None:
                if server.embedding_failures > 0:
                    server.embedding_failures -= 1
                    self._send(500, json.dumps({"error": {"message": "embedding backend down"}}))
                    return
                if server.embedding_bodies:
                    self._send(200, server.embedding_bodies.popleft())
                    return
                inputs = payload.get("input", [])
                if isinstance(inputs, str):
                    inputs = [inputs]
                data = [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": _vector(text, server.embedding_dim),
                    }
                    for i, text in enumerate(inputs)
                ]
                body = {
                    "object": "list",
                    "data": data,
                    "model": payload.get("model"),
                    "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
                }
                self._send(200, json.dumps(body))

            def _chat(self, payload: dict[str, Any]) -> None:
                reply = server._next()
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    error = {"message": f"scripted {reply.status}", "type": "server_error"}
                    if reply.error_param:
                        error["param"] = reply.error_param
                    error_body = json.dumps({"error": error})
                    self._send(reply.status, error_body, headers=reply.headers)
                    return
                if reply.raw is not None:
                    self._send(200, reply.raw)
                    return
                if payload.get("stream"):
                    self._stream(payload, reply)
                    return
                body = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": payload.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": _content(reply)},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                    },
                }
                if not reply.send_usage:
                    del body["usage"]
                self._send(200, json.dumps(body))

            def _stream(self, payload: dict[str, Any], reply: Reply) -> None:
                text = reply.content or ""
                chunks: list[Any] = [text[i : i + 4] for i in range(0, len(text), 4)] or [""]
                if reply.content_value is not None:
                    chunks = [reply.content_value]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": payload.get("model", "fake"),
                }
                try:
                    for i, piece in enumerate(chunks):
                        if i == reply.cut_after:
                            self.close_connection = True
                            return
                        if i == reply.error_after:
                            error = {"error": {"message": "scripted stream error"}}
                            self.wfile.write(f"data: {json.dumps(error)}\n\n".encode())
                            self.wfile.flush()
                            self.close_connection = True
                            return
                        if i and reply.chunk_delay:
                            time.sleep(reply.chunk_delay)
                        delta = {"content": piece}
                        if i == 0:
                            delta["role"] = "assistant"
                        event = {
                            **base,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                        }
                        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                        self.wfile.flush()
                    final = {
                        **base,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": {
                            "prompt_tokens": reply.prompt_tokens,
                            "completion_tokens": reply.completion_tokens,
                            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                        },
                    }
                    if not reply.send_usage:
                        del final["usage"]
                    self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        return Handler


Answer = str | None | BaseException | Callable[[list[dict[str, Any]]], str]


class ScriptedLLM(LLMClient):
    """An LLM that answers from a script, in process, for tests of LLM-using features.

    Each answer is a string (``None`` for an empty answer), an exception to
    raise, or a function of the messages returning the answer. When the script
    runs out, ``default`` answers (``None``: an ``LLMError``). ``calls`` keeps
    every request's messages. Streams come back a word at a time. Token usage
    is left to the base class's local estimate.

        llm = ScriptedLLM('{"topic": "cooking"}', LLMError("down"))
    """

    def __init__(self, *answers: Answer, default: Answer = None, model: str = "scripted") -> None:
        super().__init__(model)
        self.script: deque[Answer] = deque(answers)
        self.default = default
        self.calls: list[list[dict[str, Any]]] = []

    def queue(self, *answers: Answer) -> None:
        self.script.extend(answers)

    def _complete(self, request: ChatRequest) -> Iterator[Chunk]:
        self.calls.append(request.messages)
        if self.script:
            answer = self.script.popleft()
        elif self.default is not None:
            answer = self.default
        else:
            raise LLMError(f"ScriptedLLM has no answer left for {request.feature}")
        if isinstance(answer, BaseException):
            raise answer
        text = answer(request.messages) if callable(answer) else (answer or "")
        if not request.stream:
            yield Chunk(text, "stop")
            return
        words = text.split(" ")
        for i, word in enumerate(words):
            yield Chunk(word if i == 0 else " " + word)
        yield Chunk("", "stop")
