"""A real uvicorn on 127.0.0.1, on a free port the kernel picks, in a thread."""

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

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@contextmanager
def live_server(app: Any, timeout: float = 30.0) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its base URL (no trailing slash)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # bound before the server starts: no race for the port
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="off"))

    def run() -> None:
        try:
            server.run(sockets=[sock])
        finally:
            server.ready.set()  # also when startup failed

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        server.ready.wait(timeout)
        if not server.started:
            raise RuntimeError("uvicorn did not start (see its log)")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
