"""`Memory`: the public, synchronous API. Everything else calls through it.

>>> from arbormem import Memory
>>> with Memory(":memory:", embedder="hash") as mem:
...     _ = mem.add("Sarah is allergic to peanuts.", speaker="Tom")
...     mem.search("what is Sarah allergic to?")[0].message.content
'Sarah is allergic to peanuts.'

A ``Memory`` checks each call's arguments, resolves its scope, and hands the work
to the parts of its :class:`~arbormem.engine.Engine`: the write pipeline
(:mod:`arbormem.ingest.pipeline`), recall (:mod:`arbormem.recall`), forgetting
(:mod:`arbormem.forgetting`), context assembly (:mod:`arbormem.context.build`) and
the topic tree (:mod:`arbormem.tree`).
"""

from __future__ import annotations

import atexit
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from arbormem import arguments
from arbormem.arguments import MAX_NEIGHBORS, MAX_POSITION, MAX_RESULTS, MAX_WITH_NEIGHBORS
from arbormem.config import UNSET
from arbormem.context.assemble import Context
from arbormem.context.build import build_context, check_context_arguments
from arbormem.context.modes import get_mode
from arbormem.embed import Embedder
from arbormem.engine import Engine, check_parts
from arbormem.errors import ConfigError, InputError, NotFound, StoreError
from arbormem.forgetting import Forgetter, check_target
from arbormem.images.api import ImageMethods
from arbormem.images.service import ImagesService
from arbormem.ingest.formats import Record
from arbormem.ingest.pipeline import Writer, session_name
from arbormem.ingest.transfer import export_target, export_to, read_import
from arbormem.ingest.validate import normalize_role
from arbormem.jobs import PendingJob
from arbormem.llm import LLMClient, get_llm
from arbormem.models import Hits, Ingested, Message, Scope, Session
from arbormem.recall.features import FEATURES
from arbormem.recall.rerank import Reranker, get_reranker
from arbormem.recall.retriever import RecallConfig
from arbormem.records.methods import RecordsMethods
from arbormem.records.public import RecordsAPI
from arbormem.results import (
    Exported,
    Forgotten,
    Imported,
    PreparedSearch,
    Purged,
    RankingFeatures,
    Reembedded,
    Stats,
)
from arbormem.settings import Settings
from arbormem.store import Backend, Filters
from arbormem.store.types import PURGE_WAIT, Thread
from arbormem.text import query_terms
from arbormem.timeutil import parse_timestamp, utcnow
from arbormem.tokens import default_counter
from arbormem.tree.check import TreeProblem
from arbormem.tree.config import TreeConfig
from arbormem.tree.methods import TreeMethods

log = logging.getLogger(__name__)

#: Stores still open, closed at interpreter exit: background work a script never
#: waited for (session upkeep, the window keys it writes) is finished, not lost.
_OPEN: weakref.WeakSet[Memory] = weakref.WeakSet()


@atexit.register
def _close_open_stores() -> None:
    for mem in list(_OPEN):
        try:
            mem.close()
        except Exception as exc:  # exiting anyway: say what was left undone
            log.warning("could not close %s at exit: %s", mem.path, exc)


#: Constructor arguments that are settings (see :class:`~arbormem.settings.Settings`).
_SETTING_ARGUMENTS = (
    "user",
    "agent",
    "session_gap",
    "max_message_bytes",
    "max_name_bytes",
    "max_metadata_bytes",
    "ann_threshold",
)


class Memory(RecordsMethods, ImageMethods, TreeMethods):
    """Long-term memory of conversations, stored in one database.

    ``path`` is a SQLite file (created if missing), ``":memory:"``, a store URL
    (``sqlite:///path``, ``postgresql://...`` with the ``postgres`` extra), or
    omitted for ``ARBORMEM_DB``, the config file's ``db``, or the per-user default.
    ``user`` and ``agent`` set the default scope of every call; each call can
    name another. ``embedder`` is a spec such as ``"wordllama"`` (the default),
    ``"minilm"``, ``"openai:text-embedding-3-small"`` or an :class:`Embedder`.
    ``read_only=True`` opens an existing store for search and reading alone;
    the default opens it read-only only when it cannot be written (see
    :attr:`read_only`), and ``False`` refuses to. ``reranker`` names a
    second stage that reorders the best turns of every search (``"cross-encoder"``,
    ``"onnx:FOLDER"`` or a :class:`~arbormem.recall.rerank.Reranker`; ``None`` for none):
    better first hits for about 25 ms per reordered turn (see :mod:`arbormem.recall.rerank`).
    ``deep_embedder`` embeds added messages again in the background with a slower,
    wiser model (``"bge-small"``, ``"auto"``, an :class:`Embedder`; see :mod:`arbormem.deep`).

    Every setting not given is resolved once, here: the ``ARBORMEM_*`` variable, then
    the config file, then the default (see :class:`~arbormem.settings.Settings`).
    ``settings`` gives them all at once (the arguments given beside it override it),
    so one process can hold memories configured differently. ``tenant`` confines
    this memory to one tenant of a store shared by several (see :meth:`for_tenant`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Any = UNSET,
        *,
        settings: Settings | None = None,
        user: str | Any = UNSET,
        agent: str | Any = UNSET,
        embedder: str | Embedder | Any = UNSET,
        backend: Backend | None = None,
        recall: RecallConfig | None = None,
        session_gap: timedelta | float | Any = UNSET,
        max_message_bytes: int | Any = UNSET,
        max_name_bytes: int | Any = UNSET,
        max_metadata_bytes: int | Any = UNSET,
        synchronous: str = "NORMAL",
        tree: TreeConfig | bool | None = None,
        llm: Any = UNSET,
        ann_threshold: int | Any = UNSET,
        read_only: bool | None = None,
        reranker: str | Reranker | Any | None = UNSET,
        tenant: str = "",
        deep_embedder: str | Embedder | Any | None = UNSET,
    ) -> None:
        check_parts(
            tree=tree,
            recall=recall,
            backend=backend,
            llm=None if llm is UNSET else llm,
            read_only=read_only,
        )
        if settings is not None and not isinstance(settings, Settings):
            raise InputError(
                f"must be a Settings or None, got {arguments.type_name(settings)}",
                field="settings",
            )
        if path is not UNSET:
            arguments.path(path, "path")  # checked only: a sqlite:/// URL is kept as given
            path = os.fspath(path)
        given = {
            name: value
            for name, value in (
                ("user", user),
                ("agent", agent),
                ("session_gap", session_gap),
                ("max_message_bytes", max_message_bytes),
                ("max_name_bytes", max_name_bytes),
                ("max_metadata_bytes", max_metadata_bytes),
                ("ann_threshold", ann_threshold),
            )
            if value is not UNSET
        }
        if path is not UNSET:
            given["db"] = path
        if isinstance(embedder, Embedder):
            given["embedder"] = embedder.model_id
        elif embedder is not UNSET:
            given["embedder"] = embedder
        if isinstance(reranker, str):
            given["reranker"] = reranker
        elif reranker is None:
            given["reranker"] = "none"
        elif reranker is not UNSET and not isinstance(reranker, Reranker):
            given["reranker"] = reranker  # refused below, naming the argument
        if isinstance(deep_embedder, str) or deep_embedder is None:
            given["deep_embedder"] = "none" if deep_embedder is None else deep_embedder
        if settings is None:
            settings = Settings.resolve(llm=UNSET if llm is UNSET else None, **given)
        else:
            settings = settings.replace(**given)
        for field in ("user", "agent"):
            arguments.name(
                getattr(settings, field), field, max_bytes=settings.max_name_bytes, strip=False
            )
        tenant_name = "" if tenant == "" else arguments.scope_id(tenant, "tenant") or ""
        # Every part that can be refused is made before the store opens: a bad one
        # leaves no new file behind and no connection open.
        second_stage = (
            reranker if isinstance(reranker, Reranker) else get_reranker(settings.reranker)
        )
        client = get_llm(settings.llm) if llm is UNSET else llm
        engine = Engine(
            settings,
            embedder=embedder if isinstance(embedder, Embedder) else None,
            reranker=second_stage,
            llm=client,
            deep=deep_embedder if isinstance(deep_embedder, Embedder) else None,
            backend=backend,
            recall=recall,
            tree=tree if isinstance(tree, TreeConfig) else TreeConfig(enabled=tree is not False),
            synchronous=synchronous,
            read_only=read_only,
        )
        self._attach(engine, tenant_name, owner=True)
        _OPEN.add(self)

    def _attach(self, engine: Engine, tenant: str, *, owner: bool) -> None:
        self._engine = engine
        self._owner = owner
        self._closed = False
        #: The resolved settings (read-only; see :class:`~arbormem.settings.Settings`).
        self.settings: Settings = engine.settings
        #: The tenant this memory works in ("": a store of one tenant). Threads of
        #: other tenants in the same store are never read, listed or changed.
        self.tenant = tenant
        self.scope = Scope(engine.settings.user, engine.settings.agent, tenant)
        self._writer = Writer(engine)
        self._forgetter = Forgetter(engine)
        self._records = RecordsAPI(engine)
        self._images = ImagesService(engine, self._writer)

    def for_tenant(self, tenant: str) -> Memory:
        """This memory confined to ``tenant``: the same store, embedder, caches and
        background work, a partition of its own. Two tenants' ``"alice"`` are two
        people; nothing one tenant's memory does reaches another's threads. Closing
        the view does not close the store; closing the memory that opened it does."""
        name = arguments.scope_id(tenant, "tenant") if tenant != "" else ""
        view = Memory.__new__(Memory)
        view._attach(self._engine, name or "", owner=False)
        return view

    # -- the parts, for tests and tools that look inside ------------------------------

    @property
    def backend(self) -> Backend:
        """The store's back-end (every capability of :mod:`arbormem.store`)."""
        return self._engine.backend

    @property
    def embedder(self) -> Embedder:
        return self._engine.embedder

    @property
    def llm(self) -> LLMClient | None:
        """The chat LLM, or None when it is off."""
        return self._engine.llm

    @property
    def path(self) -> str:
        """Where the store is: its file, or its URL."""
        return self._engine.path

    @property
    def closed(self) -> bool:
        """Whether this memory was closed: by :meth:`close`, or for a tenant view
        (:meth:`for_tenant`), also by closing the memory it came from."""
        return self._closed or self._engine.closed

    @property
    def limits(self) -> arguments.Limits:
        return self.settings.limits

    @property
    def max_message_bytes(self) -> int:
        return self.settings.max_message_bytes

    @property
    def session_gap(self) -> timedelta:
        return self.settings.session_gap

    @property
    def tree_config(self) -> TreeConfig:
        return self._engine.tree_config

    @property
    def engine(self) -> Engine:
        """The run-time parts this memory works with (see :mod:`arbormem.engine`)."""
        return self._engine

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Finish background work and close the store. Safe to call twice; a tenant
        view (:meth:`for_tenant`) leaves the store open."""
        if not self._closed:
            self._closed = True
            if self._owner:
                self._engine.close()

    def wait(self, timeout: float | None = None, *, indexed: bool = False) -> bool:
        """Wait for the background work submitted so far (session upkeep, topic
        naming, tree checks, preloads, a due reorganisation; with ``indexed``, the
        background embedder's indexing of what was added too), starting delayed work
        at once; True when it all finished within ``timeout`` seconds."""
        if timeout is not None:
            timeout = arguments.seconds(timeout, "timeout")
        if not isinstance(indexed, bool):
            raise InputError(
                f"must be True or False, got {arguments.type_name(indexed)}", field="indexed"
            )
        end = None if timeout is None else time.monotonic() + timeout
        done = self._engine.jobs.wait(timeout)
        deep = self._engine.deep
        if indexed and deep is not None:
            left = None if end is None else max(0.0, end - time.monotonic())
            done = deep.wait(left) and done
        return done

    def pending(self) -> list[PendingJob]:
        """The background jobs not finished yet, oldest first."""
        return self._engine.jobs.pending()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Memory {self.path} scope={self.scope} embedder={self.embedder.model_id}>"

    # -- scope helpers -----------------------------------------------------------------

    def _scope(self, user: str | None, agent: str | None) -> Scope:
        """The scope a call names: None is the store's default; a blank or mistyped id
        is an :class:`InputError` (a blank one fell back to the default, and
        ``forget(user="")`` deleted the default user's thread)."""
        most = self.limits.name_bytes
        return Scope(
            arguments.scope_id(user, "user", max_bytes=most) or self.scope.user,
            arguments.scope_id(agent, "agent", max_bytes=most) or self.scope.agent,
            self.tenant,
        )

    def _thread(self, scope: Scope, *, create: bool = False, wait: bool = True) -> Thread | None:
        return self._engine.thread(scope, create=create, wait=wait)

    def _threads(self, scope: Scope, all_agents: bool, *, wait: bool = False) -> list[Thread]:
        return self._engine.threads(scope, all_agents, wait=wait)

    def _mode(self, value: Any) -> str:
        """A memory mode named by a caller, or an InputError listing the modes."""
        text = arguments.name(value, "mode", max_bytes=self.limits.name_bytes)
        try:
            return get_mode(text).name
        except ConfigError as exc:
            raise InputError(str(exc), field="mode") from None

    def _message_id(self, value: Any) -> str:
        """A message id to look up, as given (never stripped: it must match)."""
        return arguments.name(value, "message_id", max_bytes=self.limits.name_bytes, strip=False)

    def _session(self, value: Any) -> str | None:
        return session_name(value, max_bytes=self.limits.name_bytes)

    def _query(self, query: Any) -> str:
        """A query: a non-blank string of valid UTF-8, no larger than a message may be
        (``context`` is given the user's next message as its query)."""
        return arguments.text(query, "query", max_bytes=self.limits.message_bytes)

    @property
    def read_only(self) -> bool:
        """Whether this store only reads: opened with ``read_only=True``, or a file
        (or folder) that refuses writes. Searches, exports and views work; ``add``,
        ``forget``, ``reorganize`` and every other change raise :class:`StoreError`."""
        return self.backend.read_only

    def check_writable(self) -> None:
        """Raise :class:`StoreError`, saying why, when the store cannot be changed:
        for callers about to do work a refused write would waste (an LLM call)."""
        self.backend.writable()

    @property
    def recall_config(self) -> RecallConfig:
        """Where recall takes its candidates from and how it weighs them."""
        return self._engine.retriever.config

    @property
    def tree_problems(self) -> list[TreeProblem]:
        """Inconsistencies found in the trees this instance opened: repaired, unless
        the store is read-only (then the trees are used as stored)."""
        self._engine.checks.wait()
        return list(self._engine.checks.problems)

    # -- writing ------------------------------------------------------------------------

    def add(
        self,
        content: str,
        *,
        role: str = "user",
        speaker: str | None = None,
        session: str | None = None,
        timestamp: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Message:
        """Store one message and index it; returns it with its id and position.

        When this returns, the message is committed to disk.
        """
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InputError(
                f"must be a JSON object (a mapping), got {arguments.type_name(metadata)}",
                field="metadata",
            )
        record = Record(
            content=content,
            role=role,
            speaker=speaker,
            timestamp=timestamp,
            metadata=dict(metadata or {}),
            session=session,
            id=id,
        )
        return self._writer.add([record], scope=self._scope(user, agent)).messages[0]

    def add_many(
        self,
        messages: Iterable[Mapping[str, Any] | Record],
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[Message]:
        """Store many messages in one transaction: all of them land or none does.

        Each item is a mapping with ``content`` and optionally ``role``,
        ``speaker``, ``timestamp``, ``metadata``, ``session`` and ``id``.
        """
        arguments.callback(progress, "progress")
        records, images = self._images.extract(self._writer.records(messages))
        added = self._writer.add(
            records, scope=self._scope(user, agent), session=session, progress=progress
        )
        self._images.attach(added.messages, images)
        return list(added.messages)

    def ingest(
        self,
        messages: Iterable[Mapping[str, Any] | Record],
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Ingested:
        """Store what is new among ``messages``: :meth:`add_many` for conversation
        logs, safe to run again on the same file or on one that has grown since.

        A message already stored is skipped: one with an ``id``, by its id (a
        different message under a stored id is an ``InputError``); one without, when
        a stored message of the scope has the same role, speaker, content and
        timestamp (and the same session, when it names one), or, with no timestamp,
        the same role, speaker and content in the session it names. The rules are in
        :mod:`arbormem.ingest.dedup`. And messages of which none has a timestamp (those
        of one source file, or of this call) start a session of their own unless they
        name one, instead of joining the current session by their time, which would
        be now. Like :meth:`add_many`, all in one transaction.
        """
        arguments.callback(progress, "progress")
        records, images = self._images.extract(self._writer.records(messages))
        done = self._writer.add(
            records, scope=self._scope(user, agent), session=session, progress=progress, ingest=True
        )
        self._images.attach(done.messages, images)
        return done

    # -- reading ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        session: str | Sequence[str] | None = None,
        since: datetime | str | float | None = None,
        until: datetime | str | float | None = None,
        role: str | Sequence[str] | None = None,
        neighbors: int = 0,
        user: str | None = None,
        agent: str | None = None,
        all_agents: bool = False,
        records: bool = False,
    ) -> Hits:
        """The ``k`` messages that best answer ``query``, best first.

        Confined to one scope (``user`` with ``agent``); ``all_agents=True``
        widens it to every agent of that user, never to another user.
        ``neighbors=n`` attaches the n turns before and after each hit.
        Soft-archived messages are never hits; the result (a list) names those
        that hold the query's words in ``archived`` (see :class:`Hits`).
        ``records=True`` also finds up to ``k`` current typed records, in
        ``Hits.records`` (the turns are ranked as without; filters are the turns').
        """
        self._query(query)
        arguments.count(k, "k", 1, MAX_RESULTS)
        arguments.count(neighbors, "neighbors", 0, MAX_NEIGHBORS)
        arguments.flag(all_agents, "all_agents")
        arguments.flag(records, "records")
        if k * (2 * neighbors + 1) > MAX_WITH_NEIGHBORS:
            # k=10,000 with 100 neighbours read two million messages (35 s, 3.9 GB).
            raise InputError(
                f"k={k:,} hits with {neighbors} neighbours a side is up to "
                f"{k * (2 * neighbors + 1):,} messages, over {MAX_WITH_NEIGHBORS:,}: "
                "ask for fewer hits or fewer neighbours",
                field="neighbors",
            )
        scope = self._scope(user, agent)
        names = arguments.names(session, "session")
        roles = arguments.names(role, "role")
        filters = Filters(
            sessions=None if names is None else tuple(str(self._session(n)) for n in names),
            since=parse_timestamp(since, field="since") if since is not None else None,
            until=parse_timestamp(until, field="until") if until is not None else None,
            roles=None if roles is None else tuple(normalize_role(r) for r in roles),
        )
        threads = self._threads(scope, all_agents)
        self._engine.touch(threads, wrote=False)
        hits = self._engine.retriever.search(threads, query, k, filters, neighbors=neighbors)
        hits = self._images.with_refs(threads, hits)
        archived, count = self.backend.archived_matches(threads, query_terms(query), filters, k)
        found = self._records.beside_turns(threads, query, k) if records else []
        return Hits(hits, archived=archived, archived_count=count, records=found)

    def ranking_features(
        self, query: str, *, user: str | None = None, agent: str | None = None
    ) -> RankingFeatures:
        """Every candidate recall would weigh for ``query`` in the scope, with all
        the ranker's features of each (none left out for weighing nothing)."""
        self._query(query)
        threads = self._threads(self._scope(user, agent), False)
        if not threads:
            return RankingFeatures((), FEATURES, np.zeros((0, len(FEATURES)), dtype=np.float32))
        _, rowids, matrix, _, rows = self._engine.retriever.candidates(threads, query)
        return RankingFeatures(tuple(rows[r].message for r in rowids), FEATURES, matrix)

    def get(self, message_id: str, *, user: str | None = None, agent: str | None = None) -> Message:
        """One message by id; :class:`NotFound` when it is not in this scope."""
        message_id = self._message_id(message_id)
        scope = self._scope(user, agent)
        row = self.backend.get(message_id)
        if row is None or row.message.scope != scope:
            raise NotFound(f"no message {message_id!r} in scope {scope}")
        return row.message

    def messages(
        self,
        *,
        session: str | None = None,
        start: int | None = None,
        end: int | None = None,
        limit: int | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[Message]:
        """Messages of the thread in order: all, one session's, or positions [start, end)."""
        session = self._session(session)
        for name, value in (("start", start), ("end", end), ("limit", limit)):
            if value is not None:
                arguments.count(value, name, 0, MAX_POSITION)
        thread = self._thread(self._scope(user, agent), wait=False)
        if thread is None:
            return []
        rows = self.backend.messages(thread, session=session, start=start, end=end, limit=limit)
        return [r.message for r in rows]

    def sessions(self, *, user: str | None = None, agent: str | None = None) -> list[Session]:
        """Sessions of the thread in order of their first message."""
        thread = self._thread(self._scope(user, agent), wait=False)
        return self.backend.sessions(thread) if thread else []

    def scopes(self, user: str | None = None) -> list[Scope]:
        """Every scope of this memory's tenant (or one user's), for administration."""
        user = arguments.scope_id(user, "user", max_bytes=self.limits.name_bytes)
        return [
            Scope(t.user, t.agent, t.tenant) for t in self.backend.threads(user, tenant=self.tenant)
        ]

    def stats(self, *, user: str | None = None, agent: str | None = None) -> Stats:
        """Counts for the scope's thread, and the vector models stored."""
        scope = self._scope(user, agent)
        thread = self._thread(scope, wait=False)
        return Stats(
            scope=str(scope),
            messages=self.backend.count(thread) if thread else 0,
            sessions=len(self.backend.sessions(thread)) if thread else 0,
            embedder=self.embedder.model_id,
            vector_models=self.backend.vector_models(),
        )

    # -- forgetting -----------------------------------------------------------------------

    def forget(
        self,
        message_id: str | None = None,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        wait: float = PURGE_WAIT,
    ) -> Forgotten:
        """Delete for good, with everything derived (index rows, vectors, caches).

        * ``forget(message_id)``: one message of the scope;
        * ``forget(session="s1")``: one session of the scope;
        * ``forget(user="alice", agent="bot")``: that whole thread;
        * ``forget(user="alice")``: everything of that user, across agents.

        Returns what went, and ``purged``: True when no copy of the forgotten text
        is left in the store's files, else ``purge_pending`` says why (see
        :meth:`purge`). ``wait``: seconds to wait at most for other connections
        reading an older snapshot of the store, which keep the old pages in the files
        until they end.
        """
        wait = arguments.seconds(wait, "wait")
        session = self._session(session)
        if message_id is not None:
            message_id = self._message_id(message_id)
        check_target(message_id, session, user is not None or agent is not None)
        scope = self._scope(user, agent)
        if message_id is not None or session is not None:
            return self._forgetter.messages(
                scope, message_id=message_id, session=session, wait=wait
            )
        return self._forgetter.threads(scope, whole_user=agent is None, wait=wait)

    def purge(self, *, wait: float = 30.0, rewrite: bool | None = True) -> Purged:
        """Finish taking forgotten text out of the store's files.

        Merges the full-text indexes of any forget that a crash cut short, rewrites
        the file when rows were deleted since it last was (``rewrite=None``: only a
        store of at most 64 MiB, as ``forget`` does; False: never), and empties the
        write-ahead log, waiting up to ``wait`` seconds for connections reading an
        older snapshot. ``purge_pending`` is ``"readers"`` when such a reader
        outlasted ``wait``, ``"rewrite"`` when the file was not rewritten.
        """
        wait = arguments.seconds(wait, "wait")
        if rewrite is not None and not isinstance(rewrite, bool):
            raise InputError(f"must be True, False or None, got {rewrite!r}", field="rewrite")
        self.backend.writable()
        return self._forgetter.purge(wait=wait, rewrite=rewrite)

    # -- working memory and context --------------------------------------------------------------

    @property
    def working(self) -> Any:
        """Per-session working memory (modes, tracked state, rolling summaries)."""
        return self._engine.working

    def current_session(self, *, user: str | None = None, agent: str | None = None) -> str:
        """The session a new message would join now (the last one, unless it went quiet)."""
        thread = self._thread(self._scope(user, agent), wait=False)
        last = self.backend.last_session(thread) if thread else None
        if last is not None and utcnow() - last.last_at <= self.session_gap:
            return last.id
        taken = {s.id for s in self.backend.sessions(thread)} if thread else set()
        n = len(taken) + 1
        while f"session-{n}" in taken:
            n += 1
        return f"session-{n}"

    def session_mode(
        self, *, session: str | None = None, user: str | None = None, agent: str | None = None
    ) -> str:
        """The memory mode of a session (the current one by default): its own, else
        the configured default."""
        session = self._session(session)
        scope = self._scope(user, agent)
        thread = self._thread(scope, wait=False)
        default = self.settings.memory_mode
        if thread is None:
            return default
        key = session or self.current_session(user=scope.user, agent=scope.agent)
        return str(self.working.load(thread, key, default).mode)

    def set_mode(
        self,
        mode: str,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> str:
        """Switch a session's memory mode; its messages, summary and window are kept."""
        mode = self._mode(mode)  # before the thread is made for it
        session = self._session(session)
        scope = self._scope(user, agent)
        thread = self._thread(scope, create=True, wait=False)  # session state, not the tree
        assert thread is not None
        key = session or self.current_session(user=scope.user, agent=scope.agent)
        self.working.set_mode(thread, key, mode)
        return key

    def context(
        self,
        query: str,
        *,
        budget_tokens: int | Any = UNSET,
        mode: str | None = None,
        session: str | None = None,
        system_prompt: str | None = None,
        k: int | None = None,
        paths: int = 2,
        context_window: int | None = None,
        reply_tokens: int = 1024,
        user: str | None = None,
        agent: str | None = None,
    ) -> Context:
        """The prompt for the next turn, within ``budget_tokens``: a :class:`Context`.

        Sections, in order: the system prompt with the mode's additions, the
        session's rolling summary, recalled memory (topic paths and turns), the
        mode's tracked state, the sliding window of the session's recent
        messages, and ``query``. ``context.messages`` is ready for an
        OpenAI-style chat call; ``context.max_tokens`` is the room left for the
        reply in the model's context window.
        """
        self._query(query)
        budget = check_context_arguments(
            budget_tokens=budget_tokens,
            default_budget=self.settings.context_budget,
            k=k,
            paths=paths,
            system_prompt=system_prompt,
            max_bytes=self.limits.message_bytes,
            context_window=context_window,
            reply_tokens=reply_tokens,
        )
        chosen = None if mode is None else self._mode(mode)
        key_given = self._session(session)
        scope = self._scope(user, agent)
        if chosen is not None and self.read_only:
            raise StoreError(
                f"{self.path} is read-only, and mode= is stored with the session: "
                "leave it out to use the session's stored mode"
            )
        # A read: no wait for the tree check, and no thread made for a scope that has
        # none (unless a mode is to be stored for it).
        thread = self._thread(scope, create=chosen is not None, wait=False)
        key = key_given or self.current_session(user=scope.user, agent=scope.agent)
        if chosen is not None:
            assert thread is not None
            self.working.set_mode(thread, key, chosen)
        window = (
            context_window
            or (getattr(self.llm, "context_window", None) if self.llm is not None else None)
            or self.settings.context_window
        )
        return build_context(
            store=self.backend,
            working=self.working,
            thread=thread,
            session=key,
            query=query,
            budget=budget,
            default_mode=self.settings.memory_mode,
            system_prompt=system_prompt,
            k=k,
            paths=paths,
            window_size=window,
            reply_tokens=reply_tokens,
            search=lambda q, n: self.search(q, k=n, user=scope.user, agent=scope.agent),
            topic_paths=lambda q, n: self.topic_paths(
                q, k=n, user=scope.user, agent=scope.agent, drill=False
            ),
            records=lambda most, recalled: self._records.context_section(
                thread, query, most, default_counter(), recalled
            ),
        )

    # -- export and import -------------------------------------------------------------------

    def export(
        self,
        dest: str | os.PathLike[str] | None = None,
        *,
        user: str | None = None,
        agent: str | None = None,
        everything: bool = False,
    ) -> Exported:
        """Everything stored for the scope (a user's, with ``user`` alone; the whole
        tenant's with ``everything``) in the export format. With ``dest`` it is also
        written there (atomically). Vectors are not exported: they are derived, and
        recomputed on import."""
        target = export_target(self.backend, dest)
        arguments.flag(everything, "everything")
        self._engine.jobs.wait(kind="records")  # the records of every message stored
        scope = self._scope(user, agent)  # a blank id is refused, not the default
        if everything:
            threads = self.backend.threads(tenant=self.tenant)
        elif agent is None and user is not None:
            threads = self.backend.threads(user, tenant=self.tenant)
        else:
            threads = self._threads(scope, False)
        return export_to(self.backend, threads, target)

    def import_(self, source: str | os.PathLike[str] | Mapping[str, Any] | Exported) -> Imported:
        """Restore an export (a file, its parsed JSON, or an :class:`Exported`). All or
        nothing: on any error the store is unchanged.

        Messages whose id is already stored with the same content are skipped, so
        importing the same file twice is harmless; a different message under an
        existing id is an error. Messages marked archived are archived again by whole
        exchanges (``not_archived`` counts those that could not be, with a warning),
        and each session's memory mode, tracked state and summary are restored (a
        session that already has one here keeps its own). Threads land in this
        memory's tenant.
        """
        data, name = read_import(source.document if isinstance(source, Exported) else source)
        return self._writer.import_(data, name, self.tenant)

    # -- maintenance ----------------------------------------------------------------------------

    def prepare_search(
        self, *, user: str | None = None, agent: str | None = None
    ) -> PreparedSearch:
        """Build what the first search of a thread would otherwise build on the spot.

        A thread past ``ann_threshold`` turns searches an approximate vector index;
        after a large import, building it takes minutes on PostgreSQL (about 5 at a
        million turns on the reference machine). There a search that finds none
        starts the build in the background and searches exactly until it is ready;
        on SQLite the first search builds it. This builds it now (waiting for a
        build a search started), with the topics' summary vectors, and keeps it for
        the next process (``saved`` is False when it could not be: a full disk).
        ``arbormem ingest`` calls it after storing.
        """
        return self._engine.prepare_search(self._thread(self._scope(user, agent)))

    def reembed(
        self, *, prune: bool = True, progress: Callable[[int], None] | None = None
    ) -> Reembedded:
        """Embed every message lacking a vector of the current model; drop other models'.

        This also happens on its own, lazily, the first time a thread is searched
        after the embedder changed.
        """
        arguments.flag(prune, "prune")
        arguments.callback(progress, "progress")
        return self._writer.reembed(prune=prune, progress=progress)
