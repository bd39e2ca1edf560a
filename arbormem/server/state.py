"""What one running server holds: the shared store, who may call, background jobs."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arbormem.errors import ArbormemError
from arbormem.memory import Memory
from arbormem.server.auth import Authenticator


@dataclass
class ProxyConfig:
    """Where ``POST /v1/chat/completions`` forwards to."""

    base_url: str
    api_key: str = "none"
    #: The model used when a request names none.
    model: str | None = None
    timeout: float = 60.0


@dataclass
class JobRecord:
    id: str
    kind: str
    tenant: str
    status: str = "running"
    result: Any = None
    error: ArbormemError | Exception | None = None


class Jobs:
    """Long requests (large imports) run in a thread; a route reports their status.

    Jobs live as long as the process: a restart forgets them (the import itself is
    all-or-nothing, so a job cut short left nothing half-written)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, JobRecord] = {}

    def start(self, kind: str, tenant: str, fn: Callable[[], Any]) -> JobRecord:
        job = JobRecord(id=uuid.uuid4().hex, kind=kind, tenant=tenant)
        with self._lock:
            self._jobs[job.id] = job

        def run() -> None:
            try:
                job.result = fn()
                job.status = "done"
            except Exception as exc:  # reported through the status route
                job.error = exc
                job.status = "failed"

        threading.Thread(target=run, name=f"arbormem-{kind}-{job.id[:8]}", daemon=True).start()
        return job

    def get(self, job_id: str, tenant: str) -> JobRecord | None:
        with self._lock:
            job = self._jobs.get(job_id)
        # Another tenant's job is as absent as a job that never was.
        return job if job is not None and job.tenant == tenant else None


@dataclass
class ServerState:
    memory: Memory
    auth: Authenticator
    #: Origins a browser may call from (CORS and the Origin check); loopback ones always.
    origins: tuple[str, ...] = ()
    proxy: ProxyConfig | None = None
    #: Whether the server listens on loopback only (the MCP endpoint then checks Host).
    loopback_only: bool = True
    jobs: Jobs = field(default_factory=Jobs)
    _views: dict[str, Memory] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def memory_for(self, tenant: str) -> Memory:
        """The store confined to ``tenant`` (one view per tenant, kept)."""
        with self._lock:
            view = self._views.get(tenant)
            if view is None:
                view = (
                    self.memory if tenant == self.memory.tenant else self.memory.for_tenant(tenant)
                )
                self._views[tenant] = view
            return view
