"""Run the server's app on a real uvicorn in a thread, on 127.0.0.1 and a free port:
for tests, benchmarks and embedding a server in a program."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)  # runs the app's lifespan first
        self.ready.set()


@contextmanager
def live_server(app: Any, *, host: str = "127.0.0.1", timeout: float = 60.0) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its base URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))  # the kernel picks a free port: no race with other servers
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    )

    def run() -> None:
        try:
            server.run(sockets=[sock])
        finally:
            server.ready.set()  # also when startup failed

    thread = threading.Thread(target=run, name="arbormem-live-server", daemon=True)
    thread.start()
    try:
        server.ready.wait(timeout)
        if not server.started:
            raise RuntimeError("uvicorn did not start (see its log)")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
