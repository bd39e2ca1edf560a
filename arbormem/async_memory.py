"""`AsyncMemory`: the same API for asyncio servers.

Each call runs the synchronous :class:`~arbormem.memory.Memory` method in a
worker thread, so the event loop never blocks on SQLite or on embedding.
Readers run concurrently (each worker thread has its own read connection);
writes are serialised by the store.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from arbormem.memory import Memory
from arbormem.models import Hits, Ingested, Message, Session

T = TypeVar("T")


class AsyncMemory:
    """Async wrapper around :class:`Memory`; takes the same arguments.

    >>> async def main():
    ...     async with AsyncMemory(":memory:", embedder="hash") as mem:
    ...         await mem.add("hello")
    ...         return [h.message.content for h in await mem.search("hello")]
    >>> asyncio.run(main())
    ['hello']
    """

    def __init__(self, *args: Any, memory: Memory | None = None, **kwargs: Any) -> None:
        self.memory = memory or Memory(*args, **kwargs)

    @property
    def read_only(self) -> bool:
        """Whether the store only reads (see :attr:`Memory.read_only`)."""
        return self.memory.read_only

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    async def add(self, content: str, **kwargs: Any) -> Message:
        return await self._run(self.memory.add, content, **kwargs)

    async def add_many(self, messages: Any, **kwargs: Any) -> list[Message]:
        # Passed as given: Memory.add_many checks it (list() raised a raw TypeError).
        return await self._run(self.memory.add_many, messages, **kwargs)

    async def ingest(self, messages: Any, **kwargs: Any) -> Ingested:
        return await self._run(self.memory.ingest, messages, **kwargs)

    async def search(self, query: str, **kwargs: Any) -> Hits:
        return await self._run(self.memory.search, query, **kwargs)

    async def get(self, message_id: str, **kwargs: Any) -> Message:
        return await self._run(self.memory.get, message_id, **kwargs)

    async def messages(self, **kwargs: Any) -> list[Message]:
        return await self._run(self.memory.messages, **kwargs)

    async def sessions(self, **kwargs: Any) -> list[Session]:
        return await self._run(self.memory.sessions, **kwargs)

    async def forget(self, message_id: str | None = None, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.memory.forget, message_id, **kwargs)

    async def purge(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.memory.purge, **kwargs)

    async def export(self, dest: Any = None, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.memory.export, dest, **kwargs)

    async def import_(self, source: Any) -> dict[str, int]:
        return await self._run(self.memory.import_, source)

    async def stats(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.memory.stats, **kwargs)

    async def close(self) -> None:
        await self._run(self.memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
