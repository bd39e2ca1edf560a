"""A real arbormem server for tests: a store on a real file, a key file with keys
of two tenants (one read-only), uvicorn on 127.0.0.1 and a free port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.server import Authenticator, KeyRing
from arbormem.server.app import create_app
from arbormem.server.auth import JWTConfig
from arbormem.server.live import live_server
from arbormem.server.state import ProxyConfig


@dataclass
class Served:
    url: str
    db: Path
    ring: KeyRing
    memory: Memory
    #: Tenant acme, may write.
    acme: str
    #: Tenant beta, may write.
    beta: str
    #: Tenant acme, read-only.
    acme_ro: str

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}


@contextmanager
def serve(
    tmp: Path,
    *,
    proxy: ProxyConfig | None = None,
    jwt: JWTConfig | None = None,
    auth: bool = True,
    **app_args: Any,
) -> Iterator[Served]:
    db = tmp / "served.db"
    ring = KeyRing(tmp / "served.keys.json")
    keys = {
        "acme": ring.create("acme"),
        "beta": ring.create("beta"),
        "acme_ro": ring.create("acme", read_only=True),
    }
    with Memory(db, embedder=HashingEmbedder(64)) as mem:
        app = create_app(
            mem, Authenticator(ring=ring, jwt=jwt, enabled=auth), proxy_config=proxy, **app_args
        )
        with live_server(app) as url:
            yield Served(url=url, db=db, ring=ring, memory=mem, **keys)
