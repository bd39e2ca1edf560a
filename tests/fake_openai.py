"""A real HTTP server on 127.0.0.1 that speaks the OpenAI REST protocol.

It serves ``POST /v1/chat/completions`` (plain and ``stream: true`` as
server-sent events) and ``POST /v1/embeddings``, answering from a script the
test sets up, so every failure mode a remote endpoint has can be produced on
demand: good answers, malformed JSON, empty answers, answers slower than the
client's timeout, 429 and 500 errors, dropped connections.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``content`` is the assistant text (or None for an empty answer)."""

    content: str | None = "ok"
    status: int = 200
    delay: float = 0.0
    #: Raw body to send instead of a well-formed completion (for protocol garbage).
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 10
    completion_tokens: int = 5


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
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def queue(self, *replies: Reply) -> None:
        self.script.extend(replies)

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
                    body = json.dumps(
                        {"error": {"message": f"scripted {reply.status}", "type": "server_error"}}
                    )
                    self._send(reply.status, body, headers=reply.headers)
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
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                    },
                }
                self._send(200, json.dumps(body))

            def _stream(self, payload: dict[str, Any], reply: Reply) -> None:
                text = reply.content or ""
                chunks = [text[i : i + 4] for i in range(0, len(text), 4)] or [""]
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
                    self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        return Handler
