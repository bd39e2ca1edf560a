"""The run-time parts of one open store, assembled once from its settings.

An :class:`Engine` holds what every operation on a store works with: the back-end,
the embedder, the optional LLM and reranker, recall, the topic tree, each session's
working memory, the background job runner, and the lock that serialises this
process's writes. :class:`~arbormem.Memory` is a thin facade over one engine; views
of other tenants (:meth:`Memory.for_tenant <arbormem.Memory.for_tenant>`) share it,
so a server holding many tenants opens the store, loads the embedder and runs its
background work once.

The engine also resolves a scope to its thread, checking each thread's tree the
first time this process opens it (see :class:`~arbormem.tree.check.OpenChecks`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from arbormem.blas import limit_blas_threads
from arbormem.config import scope_name
from arbormem.context.working import WorkingMemory
from arbormem.deep import DeepVectors, deep_embedder
from arbormem.embed import CachedEmbedder, Embedder, get_embedder
from arbormem.errors import InputError
from arbormem.images.clip import open_clip
from arbormem.jobs import Jobs
from arbormem.llm import LLMClient
from arbormem.models import Scope
from arbormem.recall.rerank import Reranker
from arbormem.recall.retriever import RecallConfig, Retriever
from arbormem.records.keeper import RecordKeeper
from arbormem.results import PreparedSearch
from arbormem.settings import Settings
from arbormem.store import Backend, open_store
from arbormem.store.types import Purge, Thread
from arbormem.tree.check import OpenChecks
from arbormem.tree.config import TreeConfig
from arbormem.tree.grow import TreeGrower
from arbormem.tree.recall import TreeRecall
from arbormem.tree.service import Trees

if TYPE_CHECKING:
    from arbormem.images.index import CaptionIndex

log = logging.getLogger(__name__)


class Engine:
    """Everything one open store works with (see the module docs)."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        llm: LLMClient | None = None,
        backend: Backend | None = None,
        deep: Embedder | None = None,
        recall: RecallConfig | None = None,
        tree: TreeConfig | None = None,
        synchronous: str = "NORMAL",
        read_only: bool | None = None,
    ) -> None:
        """``embedder``, ``reranker``, ``llm`` and ``deep`` (the background embedder)
        given as objects are used as they are; otherwise they are made from
        ``settings`` (``llm``: the settings' LLM, or none). Every part that can be
        refused is made before the store opens, so a bad setting leaves no new file
        behind."""
        # Process-wide, once: numpy's BLAS threads took a core from the searches.
        limit_blas_threads()
        self.settings = settings
        inner = embedder or get_embedder(
            settings.embedder,
            timeout=settings.embedder_timeout,
            max_retries=settings.embedder_max_retries,
        )
        deep_inner = deep_embedder(deep or settings.deep_embedder, inner)
        #: The CLIP model that embeds pictures (see :mod:`arbormem.images.clip`), or None.
        self.clip = open_clip(settings.image_embedder)
        self.reranker = reranker
        self.llm = llm
        self.backend = backend or open_store(
            settings.db,
            synchronous=synchronous,
            read_only=read_only,
            ann_threshold=settings.ann_threshold,
            lock_wait=settings.lock_wait,
        )
        #: Whether closing the engine closes the back-end (one given is the caller's).
        self._owns_backend = backend is None
        self.path: str = str(getattr(self.backend, "path", settings.db))
        self.embedder = inner if isinstance(inner, CachedEmbedder) else CachedEmbedder(inner)
        self.tree_config = tree or TreeConfig()
        self.jobs = Jobs()
        #: Serialises this process's writes (and tree changes) to the store.
        self.write_lock = threading.RLock()
        #: The background embedder's vectors (see :mod:`arbormem.deep`), or None.
        self.deep: DeepVectors | None = None
        if deep_inner is not None:
            folder = self.backend.cache_folder
            self.deep = DeepVectors(
                self.backend,
                deep_inner
                if isinstance(deep_inner, CachedEmbedder)
                else CachedEmbedder(deep_inner),
                None if folder is None else folder / "deep",
                settings.ann_threshold,
                self.write_lock,
            )
        self.tree_recall = TreeRecall(self.backend, self.embedder, folder=self.backend.cache_folder)
        self.retriever = Retriever(
            self.backend,
            self.embedder,
            recall,
            tree=self.tree_recall if self.tree_config.enabled else None,
            reranker=reranker,
            jobs=self.jobs,
            deep=self.deep,
        )
        self.grower = TreeGrower(self.backend, self.embedder, self.tree_config, llm)
        self._captions: CaptionIndex | None = None
        self.checks = OpenChecks(self.grower, self.write_lock, self.jobs)
        self.trees = Trees(
            self.backend, self.grower, self.tree_recall, self.retriever, self.write_lock, self.jobs
        )
        self.working = WorkingMemory(self.backend, llm, jobs=self.jobs)
        #: Typed records, extracted in the background after every add.
        self.records = RecordKeeper(self)
        #: Threads whose deferred window keys this process has caught up (see the
        #: write pipeline).
        self.tails_checked: set[int] = set()
        self._closed = False
        if self.backend.purged_on_open is not None:
            self.purged(self.backend.purged_on_open)

    # -- threads -----------------------------------------------------------------------

    def thread(self, scope: Scope, *, create: bool = False, wait: bool = True) -> Thread | None:
        """The scope's thread (made on request), its tree checked once per process;
        ``wait=False`` for reads, which do not wait for the check."""
        thread = self.backend.thread(scope.user, scope.agent, tenant=scope.tenant)
        if thread is None and create:
            # New ids must be names; threads stored under blank or padded ids by
            # earlier versions stay readable, and can be forgotten.
            for field, value in (("user", scope.user), ("agent", scope.agent)):
                try:
                    scope_name(value)
                except ValueError as exc:
                    raise InputError(str(exc), field=field) from None
            thread = self.backend.thread(scope.user, scope.agent, create=True, tenant=scope.tenant)
        if thread is not None and self.tree_config.enabled:
            self.checks.ensure(thread, wait=wait)
        return thread

    def threads(self, scope: Scope, all_agents: bool, *, wait: bool = False) -> list[Thread]:
        """The scope's thread, or with ``all_agents`` every thread of its user."""
        if all_agents:
            return [
                t
                for t in self.backend.threads(scope.user, tenant=scope.tenant)
                if self.thread(Scope(t.user, t.agent, t.tenant), wait=wait) is not None
            ]
        thread = self.thread(scope, wait=wait)
        return [thread] if thread else []

    # -- background work -----------------------------------------------------------------

    def touch(self, threads: Sequence[Thread], *, wrote: bool, rowids: Sequence[int] = ()) -> None:
        """Note activity on threads: with idle reorganisation on, a write makes a
        thread due for it once it has been quiet that long, and any activity (a
        search too) pushes that moment back. A write (of the rows ``rowids``) also
        has the deep embedder (if any) index the new messages once writes pause."""
        if wrote and self.deep is not None:
            for thread in threads:
                self.deep.notify(thread, wrote=True, rowids=rowids)
        idle = self.tree_config.reorganize_idle_seconds
        if idle is None or not self.tree_config.enabled or self.backend.read_only:
            return
        for thread in threads:
            key = ("reorganize", thread.id)
            if wrote:
                self.jobs.submit(
                    "reorganize", partial(self._reorganize_idle, thread), key=key, delay=idle
                )
            self.jobs.postpone(key, idle)

    def _reorganize_idle(self, thread: Thread) -> None:
        if self._closed:
            return  # a store closing does not start a reorganisation
        self.trees.reorganize(thread)

    def schedule_upkeep(self, thread: Thread, session: str) -> None:
        """After a reply: the session's tracker and rolling summary catch up in the
        background (and the window keys its newest messages deferred are written)."""
        mode = self.settings.memory_mode

        def work() -> None:
            self.backend.write_tail_windows(thread, session)
            self.working.upkeep(thread, session, None, mode)

        # While one upkeep of this session waits to start, replies arriving meanwhile
        # need no other: it reads the session's new messages when it runs.
        self.working.submit(work, key=(thread.id, session))

    def prepare_search(self, thread: Thread | None) -> PreparedSearch:
        """Build the thread's vector index and topic vectors now (see
        :meth:`Memory.prepare_search <arbormem.Memory.prepare_search>`)."""
        start = time.perf_counter()
        if thread is None:
            return PreparedSearch(duration_secs=round(time.perf_counter() - start, 3))
        built = self.backend.prepare_nearest(thread, self.embedder)
        topics = self.tree_recall.prepare(thread) if self.tree_config.enabled else 0
        return PreparedSearch(
            vectors=built.vectors,
            approximate=built.approximate,
            saved=built.saved,
            topics=topics,
            duration_secs=round(time.perf_counter() - start, 3),
        )

    # -- after deletions ----------------------------------------------------------------

    def caption_index(self) -> CaptionIndex:
        """The in-memory index of image captions ``search_images`` reads (made on
        first use, shared by every tenant view of this engine)."""
        with self.write_lock:
            if self._captions is None:
                from arbormem.images.index import CaptionIndex

                self._captions = CaptionIndex(self.backend, self.embedder, self.clip)
            return self._captions

    def forgotten(self, threads: Sequence[Thread], chashes: Sequence[str]) -> None:
        """Drop every cache of this process that may hold what was deleted."""
        self.embedder.discard(chashes)
        for thread in threads:
            self.tree_recall.invalidate(thread)
            self.tree_recall.discard_files(thread)
            self.trees.forget_descriptions(thread)
            self.retriever.forget(thread)
            self.grower.forget_cursor(thread)
            if self.deep is not None:
                self.deep.forget(thread)

    def purged(self, done: Purge) -> None:
        """Drop what a purge found unused, and the saved topic vectors of threads a
        forget cut short left behind."""
        self.embedder.discard(done.chashes)
        for thread_id in done.threads:
            self.tree_recall.discard_files(Thread(thread_id, "", ""))

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Finish the background work, then release everything. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.checks.close()
        self.jobs.close()
        self.trees.close()
        self.retriever.close()
        if self.deep is not None:
            self.deep.close()
        if self.llm is not None:
            self.llm.close()
        if self._owns_backend:
            self.backend.close()

    @property
    def closed(self) -> bool:
        return self._closed


def check_parts(
    *,
    tree: object,
    recall: object,
    backend: object,
    llm: object,
    read_only: object,
) -> None:
    """Refuse a wrongly typed part before anything is opened."""
    for field, value, kinds in (
        ("tree", tree, (TreeConfig, bool)),
        ("recall", recall, (RecallConfig,)),
        ("backend", backend, (Backend,)),
    ):
        if value is not None and not isinstance(value, kinds):
            raise InputError(
                f"must be {' or '.join(k.__name__ for k in kinds)} or None, "
                f"got {type(value).__name__}",
                field=field,
            )
    if llm is not None and not isinstance(llm, LLMClient):
        raise InputError(
            f"must be an arbormem.llm.LLMClient or None, got {type(llm).__name__}",
            field="llm",
            hint="build one with arbormem.llm.get_llm(resolve_llm_config(model=...))",
        )
    if read_only is not None and not isinstance(read_only, bool):
        raise InputError(
            f"must be True, False or None, got {type(read_only).__name__}", field="read_only"
        )
    if isinstance(backend, Backend) and read_only is not None and read_only != backend.read_only:
        raise InputError(
            f"the back-end given is {'' if backend.read_only else 'not '}read-only: "
            "open it read-only (or not) itself",
            field="read_only",
        )
