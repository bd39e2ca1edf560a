"""`AsyncMemory`: the same API for asyncio servers.

Each call runs the synchronous :class:`~arbormem.memory.Memory` method in a
worker thread, so the event loop never blocks on the store or on embedding.
Readers run concurrently (each worker thread has its own read connection);
writes are serialised by the store. Every public method of ``Memory`` is here,
with the same arguments and results (a test keeps the two in step).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from arbormem.context.assemble import Context
from arbormem.jobs import PendingJob
from arbormem.memory import Memory
from arbormem.models import Hits, Ingested, Message, Scope, Session
from arbormem.records.model import Record as MemoryRecord
from arbormem.records.service import RecordHit
from arbormem.results import (
    Exported,
    Forgotten,
    ImageHit,
    ImageMemory,
    ImagesExpired,
    Imported,
    PreparedSearch,
    Purged,
    RecordsForgotten,
    Reembedded,
    Remembered,
    Reorganized,
    Stats,
    TreeLogEntry,
    Undone,
)
from arbormem.settings import Settings
from arbormem.tree.check import TreeProblem
from arbormem.tree.navigate import TreeNavigator
from arbormem.tree.recall import TopicPath
from arbormem.tree.view import TopicNode

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

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    # -- attributes, read without a thread hop --------------------------------------------

    @property
    def read_only(self) -> bool:
        """Whether the store only reads (see :attr:`Memory.read_only`)."""
        return self.memory.read_only

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (see :attr:`Memory.closed`)."""
        return self.memory.closed

    @property
    def scope(self) -> Scope:
        return self.memory.scope

    @property
    def tenant(self) -> str:
        return self.memory.tenant

    @property
    def settings(self) -> Settings:
        return self.memory.settings

    @property
    def tree_problems(self) -> list[TreeProblem]:
        return self.memory.tree_problems

    def for_tenant(self, tenant: str) -> AsyncMemory:
        """See :meth:`Memory.for_tenant`."""
        return AsyncMemory(memory=self.memory.for_tenant(tenant))

    # -- writing ----------------------------------------------------------------------------

    async def add(self, content: str, **kwargs: Any) -> Message:
        return await self._run(self.memory.add, content, **kwargs)

    async def add_many(self, messages: Any, **kwargs: Any) -> list[Message]:
        # Passed as given: Memory.add_many checks it (list() raised a raw TypeError).
        return await self._run(self.memory.add_many, messages, **kwargs)

    async def ingest(self, messages: Any, **kwargs: Any) -> Ingested:
        return await self._run(self.memory.ingest, messages, **kwargs)

    # -- reading ----------------------------------------------------------------------------

    async def search(self, query: str, **kwargs: Any) -> Hits:
        return await self._run(self.memory.search, query, **kwargs)

    async def get(self, message_id: str, **kwargs: Any) -> Message:
        return await self._run(self.memory.get, message_id, **kwargs)

    async def messages(self, **kwargs: Any) -> list[Message]:
        return await self._run(self.memory.messages, **kwargs)

    async def sessions(self, **kwargs: Any) -> list[Session]:
        return await self._run(self.memory.sessions, **kwargs)

    async def scopes(self, user: str | None = None) -> list[Scope]:
        return await self._run(self.memory.scopes, user)

    async def stats(self, **kwargs: Any) -> Stats:
        return await self._run(self.memory.stats, **kwargs)

    # -- images -------------------------------------------------------------------------------

    async def add_image(self, image: Any, **kwargs: Any) -> ImageMemory:
        return await self._run(self.memory.add_image, image, **kwargs)

    async def get_image(self, image_id: str, **kwargs: Any) -> ImageMemory:
        return await self._run(self.memory.get_image, image_id, **kwargs)

    async def image_bytes(self, image_id: str, **kwargs: Any) -> bytes:
        return await self._run(self.memory.image_bytes, image_id, **kwargs)

    async def list_images(self, **kwargs: Any) -> list[ImageMemory]:
        return await self._run(self.memory.list_images, **kwargs)

    async def search_images(self, query: str, **kwargs: Any) -> list[ImageHit]:
        return await self._run(self.memory.search_images, query, **kwargs)

    async def similar_images(self, image: Any, **kwargs: Any) -> list[ImageHit]:
        return await self._run(self.memory.similar_images, image, **kwargs)

    async def expire_images(self, **kwargs: Any) -> ImagesExpired:
        return await self._run(self.memory.expire_images, **kwargs)

    async def restore_image(self, image_id: str, **kwargs: Any) -> ImageMemory:
        return await self._run(self.memory.restore_image, image_id, **kwargs)

    async def forget_image(self, image_id: str, **kwargs: Any) -> Forgotten:
        return await self._run(self.memory.forget_image, image_id, **kwargs)

    # -- forgetting -------------------------------------------------------------------------

    async def forget(self, message_id: str | None = None, **kwargs: Any) -> Forgotten:
        return await self._run(self.memory.forget, message_id, **kwargs)

    async def purge(self, **kwargs: Any) -> Purged:
        return await self._run(self.memory.purge, **kwargs)

    # -- typed records -------------------------------------------------------------------

    async def remember(self, text: str, **kwargs: Any) -> Remembered:
        return await self._run(self.memory.remember, text, **kwargs)

    async def records(self, **kwargs: Any) -> list[MemoryRecord]:
        return await self._run(self.memory.records, **kwargs)

    async def search_records(self, query: str, **kwargs: Any) -> list[RecordHit]:
        return await self._run(self.memory.search_records, query, **kwargs)

    async def record_history(self, record_id: str, **kwargs: Any) -> list[MemoryRecord]:
        return await self._run(self.memory.record_history, record_id, **kwargs)

    async def rebuild_records(self, **kwargs: Any) -> int:
        return await self._run(self.memory.rebuild_records, **kwargs)

    async def forget_record(self, record_id: str, **kwargs: Any) -> RecordsForgotten:
        return await self._run(self.memory.forget_record, record_id, **kwargs)

    # -- working memory and context ---------------------------------------------------------

    async def current_session(self, **kwargs: Any) -> str:
        return await self._run(self.memory.current_session, **kwargs)

    async def session_mode(self, **kwargs: Any) -> str:
        return await self._run(self.memory.session_mode, **kwargs)

    async def set_mode(self, mode: str, **kwargs: Any) -> str:
        return await self._run(self.memory.set_mode, mode, **kwargs)

    async def context(self, query: str, **kwargs: Any) -> Context:
        return await self._run(self.memory.context, query, **kwargs)

    # -- the topic tree ---------------------------------------------------------------------

    async def tree(self, **kwargs: Any) -> TopicNode:
        return await self._run(self.memory.tree, **kwargs)

    async def render_tree(self, format: str = "text", **kwargs: Any) -> str:
        return await self._run(self.memory.render_tree, format, **kwargs)

    async def reorganize(self, *args: Any, **kwargs: Any) -> Reorganized:
        return await self._run(self.memory.reorganize, *args, **kwargs)

    async def undo_reorganize(self, log_id: int, **kwargs: Any) -> Undone:
        return await self._run(self.memory.undo_reorganize, log_id, **kwargs)

    async def restore_archived(self, **kwargs: Any) -> int:
        return await self._run(self.memory.restore_archived, **kwargs)

    async def tree_log(self, **kwargs: Any) -> list[TreeLogEntry]:
        return await self._run(self.memory.tree_log, **kwargs)

    async def tree_tools(self, **kwargs: Any) -> TreeNavigator:
        return await self._run(self.memory.tree_tools, **kwargs)

    async def topic_paths(self, query: str, **kwargs: Any) -> list[TopicPath]:
        return await self._run(self.memory.topic_paths, query, **kwargs)

    # -- export, import and maintenance -----------------------------------------------------

    async def export(self, dest: Any = None, **kwargs: Any) -> Exported:
        return await self._run(self.memory.export, dest, **kwargs)

    async def import_(self, source: Any) -> Imported:
        return await self._run(self.memory.import_, source)

    async def prepare_search(self, **kwargs: Any) -> PreparedSearch:
        return await self._run(self.memory.prepare_search, **kwargs)

    async def reembed(self, **kwargs: Any) -> Reembedded:
        return await self._run(self.memory.reembed, **kwargs)

    async def wait(self, timeout: float | None = None, *, indexed: bool = False) -> bool:
        return await self._run(self.memory.wait, timeout, indexed=indexed)

    async def pending(self) -> list[PendingJob]:
        return self.memory.pending()

    async def close(self) -> None:
        await self._run(self.memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
