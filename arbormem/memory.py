"""`Memory`: the public, synchronous API. Everything else calls through it.

>>> from arbormem import Memory
>>> with Memory(":memory:", embedder="hash") as mem:
...     _ = mem.add("Sarah is allergic to peanuts.", speaker="Tom")
...     mem.search("what is Sarah allergic to?")[0].message.content
'Sarah is allergic to peanuts.'
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from arbormem import arguments
from arbormem.config import UNSET, resolve, scope_name, store_settings, whole_at_least
from arbormem.embed import CachedEmbedder, Embedder, get_embedder
from arbormem.errors import InputError, NotFound, StoreError
from arbormem.ingest.dedup import find_stored
from arbormem.ingest.formats import Record, parse_json, read_bytes_as_text
from arbormem.ingest.transfer import EXPORT_FORMAT, EXPORT_VERSION, export_thread, plan_import
from arbormem.ingest.validate import (
    MAX_MESSAGE_BYTES,
    Where,
    check_metadata,
    check_name,
    normalize_role,
    prepare,
)
from arbormem.models import Hits, Ingested, Message, Scope, Session
from arbormem.recall.rerank import Reranker, get_reranker
from arbormem.recall.retriever import RecallConfig, Retriever
from arbormem.settings import DEFAULT_ANN_THRESHOLD
from arbormem.store import (
    Backend,
    Deleted,
    Filters,
    NewMessage,
    Purge,
    Row,
    Thread,
    open_store,
)
from arbormem.store.types import PURGE_WAIT
from arbormem.text import query_terms
from arbormem.timeutil import format_timestamp, parse_timestamp, utcnow
from arbormem.tree.background import IdleReorganizer
from arbormem.tree.check import OpenChecks, TreeProblem
from arbormem.tree.config import TreeConfig
from arbormem.tree.grow import Decision, TreeGrower
from arbormem.tree.navigate import TreeNavigator
from arbormem.tree.recall import TopicPath, TreeRecall
from arbormem.tree.service import Trees
from arbormem.tree.view import TopicNode

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


#: A message arriving more than this long after the previous one opens a new
#: session, unless the caller names the session.
DEFAULT_SESSION_GAP = timedelta(minutes=30)

#: Batches up to this size count as live conversation (upkeep runs after them).
LIVE_BATCH = 8
#: With a progress callback, add_many stores (and reports) this many messages at a time.
PROGRESS_STEP = 2_000
DEFAULT_CONTEXT_BUDGET = 4000
#: The most hits (and neighbours per hit) one search returns.
MAX_RESULTS = 10_000
#: Turns attached on each side of a hit: k x 2 x this many messages are read (100 hits
#: with 10,000 neighbours each exhausted 3 GB).
MAX_NEIGHBORS = 100
#: Messages one search may return with its neighbours, k x (2 x neighbors + 1).
MAX_WITH_NEIGHBORS = 50_000
DEFAULT_CONTEXT_WINDOW = 8192


#: Message positions are stored as 64-bit integers.
MAX_POSITION = 2**62


def _query(query: Any, max_bytes: int) -> str:
    """A query: a non-blank string of valid UTF-8, no larger than a message may be
    (``context`` is given the user's next message as its query)."""
    return arguments.text(query, "query", max_bytes=max_bytes)


def _count(name: str, value: Any, low: int, high: int = MAX_RESULTS) -> int:
    """A whole-number argument within [low, high], or an InputError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {value!r}", field=name)
    if not low <= value <= high:
        raise InputError(f"must be from {low} to {high:,}, got {value}", field=name)
    return value


def _seconds(value: Any, field: str) -> float:
    """A number of seconds an argument gives: finite and not negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number of seconds, got {value!r}", field=field)
    if not 0 <= value < float("inf"):
        raise InputError(f"must be a finite number of seconds >= 0, got {value!r}", field=field)
    return float(value)


def _session_name(
    value: Any, where: Where = Where(), *, max_bytes: int = arguments.MAX_NAME_BYTES
) -> str | None:
    """A session name as add stores it and import reads it back: stripped, never
    blank (a padded name found nothing once add began to strip it). A whole number
    is read as its digits, as the file formats read it."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return check_name(value, "session", where, max_bytes=max_bytes)


def _sessions(value: str | Sequence[str] | None, max_bytes: int) -> tuple[str, ...] | None:
    names = _as_tuple(value, "session")
    return (
        None if names is None else tuple(str(_session_name(n, max_bytes=max_bytes)) for n in names)
    )


def _as_tuple(value: str | Sequence[str] | None, field: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
        if not value:
            raise InputError("is empty: name at least one, or pass None for all", field=field)
        return tuple(value)
    raise InputError(f"must be a string or a list of strings, got {value!r:.60}", field=field)


def _session_gap(value: Any) -> timedelta:
    """A session gap from a ``timedelta`` or a number of seconds: not negative, at
    most ten years (``inf`` or ``1e20`` seconds overflowed every command)."""
    try:
        gap = value if isinstance(value, timedelta) else timedelta(seconds=float(value))
    except OverflowError:
        raise ValueError(f"a session gap is 0 seconds to 10 years, not {value}") from None
    if not timedelta(0) <= gap <= timedelta(days=3653):
        raise ValueError(f"a session gap is 0 seconds to 10 years, not {value}")
    return gap


def _roles(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """A role filter with the aliases ``add`` accepts ("human" is "user")."""
    roles = _as_tuple(value, "role")
    return None if roles is None else tuple(normalize_role(r) for r in roles)


def _undated_starts(records: Sequence[Record], sessions: Sequence[str | None]) -> list[bool]:
    """Which messages open a session of their own: the first naming no session of each
    source (a file; the caller's mappings are one) of which no message has a timestamp.
    Dated now, such messages joined whatever session was under ``session_gap`` old,
    however unrelated (issue 20)."""
    dated = {r.where.source for r in records if r.timestamp is not None}
    started: set[str | None] = set()
    out = []
    for r, name in zip(records, sessions):
        source = r.where.source
        starts = name is None and source not in dated and source not in started
        if starts:
            started.add(source)
        out.append(starts)
    return out


class Memory:
    """Long-term memory of conversations, stored in one database.

    ``path`` is a SQLite file (created if missing), ``":memory:"``, or omitted
    for ``ARBORMEM_DB``, the config file's ``db``, or the per-user default.
    ``user`` and ``agent`` set the default scope of every call; each call can
    name another. ``embedder`` is a spec such as ``"wordllama"`` (the default),
    ``"minilm"``, ``"openai:text-embedding-3-small"`` or an :class:`Embedder`.
    ``read_only=True`` opens an existing store for search and reading alone;
    the default opens it read-only only when it cannot be written (see
    :attr:`read_only`), and ``False`` refuses to. ``reranker`` names a
    second stage that reorders the best turns of every search (``"cross-encoder"``,
    ``"onnx:FOLDER"`` or a :class:`~arbormem.recall.rerank.Reranker`; ``None`` for none):
    better first hits for about 25 ms per reordered turn (see :mod:`arbormem.recall.rerank`).
    Unset, it is ``ARBORMEM_RERANKER``, else the config file's ``reranker``, else none.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Any = UNSET,
        *,
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
    ) -> None:
        if read_only is not None and not isinstance(read_only, bool):
            raise InputError(
                f"must be True, False or None, got {type(read_only).__name__}", field="read_only"
            )
        if path is not UNSET:
            arguments.path(path, "path")  # checked only: a sqlite:/// URL is kept as given
            path = os.fspath(path)
        for field, value, kinds in (
            ("tree", tree, (TreeConfig, bool)),
            ("recall", recall, (RecallConfig,)),
            ("backend", backend, (Backend,)),
        ):
            if value is not None and not isinstance(value, kinds):
                raise InputError(
                    f"must be {' or '.join(k.__name__ for k in kinds)} or None, "
                    f"got {arguments.type_name(value)}",
                    field=field,
                )
        settings = store_settings(
            db=path,
            user=user,
            agent=agent,
            embedder=embedder.model_id if isinstance(embedder, Embedder) else embedder,
        )
        #: The tenant this memory works in ("": a store of one tenant). Threads of
        #: other tenants in the same store are never read, listed or changed.
        self.tenant = "" if tenant == "" else arguments.scope_id(tenant, "tenant") or ""
        self.scope = Scope(settings.user, settings.agent, self.tenant)
        self.session_gap: timedelta = resolve(
            session_gap,
            "ARBORMEM_SESSION_GAP",
            "session_gap",
            DEFAULT_SESSION_GAP,
            _session_gap,
            field="session_gap",
        )
        self.max_message_bytes: int = resolve(
            max_message_bytes,
            "ARBORMEM_MAX_MESSAGE_BYTES",
            "max_message_bytes",
            MAX_MESSAGE_BYTES,
            whole_at_least(1),
            field="max_message_bytes",
        )
        #: The size limits of content, names and metadata (see :mod:`arbormem.arguments`).
        self.limits = arguments.Limits(
            message_bytes=self.max_message_bytes,
            name_bytes=resolve(
                max_name_bytes,
                "ARBORMEM_MAX_NAME_BYTES",
                "max_name_bytes",
                arguments.MAX_NAME_BYTES,
                whole_at_least(1),
                field="max_name_bytes",
            ),
            metadata_bytes=resolve(
                max_metadata_bytes,
                "ARBORMEM_MAX_METADATA_BYTES",
                "max_metadata_bytes",
                arguments.MAX_METADATA_BYTES,
                whole_at_least(2),  # "{}"
                field="max_metadata_bytes",
            ),
        )
        for field, given in (("user", settings.user), ("agent", settings.agent)):
            arguments.name(given, field, max_bytes=self.limits.name_bytes, strip=False)
        ann_threshold = resolve(
            ann_threshold,
            "ARBORMEM_ANN_THRESHOLD",
            "ann_threshold",
            DEFAULT_ANN_THRESHOLD,
            whole_at_least(0),
            field="ann_threshold",
        )
        # Every setting is read before the store opens: one that is refused leaves
        # no new file behind and no connection open.
        inner = embedder if isinstance(embedder, Embedder) else get_embedder(settings.embedder)
        second_stage = get_reranker(
            None if reranker is UNSET else "none" if reranker is None else reranker
        )
        if llm is UNSET:
            from arbormem.llm import get_llm, resolve_llm_config

            llm = get_llm(resolve_llm_config())
        else:
            from arbormem.llm import LLMClient

            if llm is not None and not isinstance(llm, LLMClient):
                raise InputError(
                    f"must be an arbormem.llm.LLMClient or None, got {arguments.type_name(llm)}",
                    field="llm",
                    hint="build one with arbormem.llm.get_llm(resolve_llm_config(model=...))",
                )
        if backend is not None and read_only is not None and read_only != backend.read_only:
            raise InputError(
                f"the back-end given is {'' if backend.read_only else 'not '}read-only: "
                "open it read-only (or not) itself",
                field="read_only",
            )
        self.backend = backend or open_store(
            settings.db, synchronous=synchronous, read_only=read_only, ann_threshold=ann_threshold
        )
        self.path = getattr(self.backend, "path", settings.db)
        self.embedder = inner if isinstance(inner, CachedEmbedder) else CachedEmbedder(inner)
        if isinstance(tree, TreeConfig):
            self.tree_config = tree
        else:
            self.tree_config = TreeConfig(enabled=tree is not False)
        self.tree_recall = TreeRecall(self.backend, self.embedder, folder=self.backend.cache_folder)
        if self.backend.purged_on_open is not None:
            self._purged(self.backend.purged_on_open)
        self.retriever = Retriever(
            self.backend,
            self.embedder,
            recall,
            tree=self.tree_recall if self.tree_config.enabled else None,
            reranker=second_stage,
        )
        self.llm = llm
        self.grower = TreeGrower(self.backend, self.embedder, self.tree_config, llm)
        self._write_lock = threading.RLock()
        self._checks = OpenChecks(self.grower, self._write_lock)
        self.trees = Trees(
            self.backend,
            self.grower,
            self.tree_recall,
            self.retriever,
            self._write_lock,
        )
        self._closed = False
        self._working: Any = None
        #: Threads whose deferred window keys this process has caught up (see _add_records).
        self._tails_checked: set[int] = set()
        idle = self.tree_config.reorganize_idle_seconds
        self._idle: IdleReorganizer | None = (
            IdleReorganizer(idle, self.trees.reorganize)
            if idle is not None and self.tree_config.enabled and not self.read_only
            else None
        )
        _OPEN.add(self)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Close the store. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._checks.close()
            if self._idle is not None:
                self._idle.stop()
            self.trees.close()
            self.retriever.close()
            if self._working is not None:
                self._working.close()
            if self.llm is not None:
                self.llm.close()
            self.backend.close()

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

    def _mode(self, value: Any) -> str:
        """A memory mode named by a caller, or an InputError listing the modes."""
        from arbormem.context.modes import get_mode
        from arbormem.errors import ConfigError

        text = arguments.name(value, "mode", max_bytes=self.limits.name_bytes)
        try:
            return get_mode(text).name
        except ConfigError as exc:
            raise InputError(str(exc), field="mode") from None

    def _message_id(self, value: Any) -> str:
        """A message id to look up, as given (never stripped: it must match)."""
        return arguments.name(value, "message_id", max_bytes=self.limits.name_bytes, strip=False)

    def _thread(self, scope: Scope, *, create: bool = False, wait: bool = True) -> Thread | None:
        """The scope's thread, its tree checked once per process (see
        :class:`~arbormem.tree.check.OpenChecks`); ``wait=False`` for reads, which
        do not wait for the check."""
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
            self._checks.ensure(thread, wait=wait)
        return thread

    @property
    def read_only(self) -> bool:
        """Whether this store only reads: opened with ``read_only=True``, or a file
        (or folder) that refuses writes. Searches, exports and views work; ``add``,
        ``forget``, ``reorganize`` and every other change raise :class:`StoreError`."""
        return self.backend.read_only

    @property
    def tree_problems(self) -> list[TreeProblem]:
        """Inconsistencies found in the trees this instance opened: repaired, unless
        the store is read-only (then the trees are used as stored)."""
        self._checks.wait()
        return list(self._checks.problems)

    def _threads(self, scope: Scope, all_agents: bool, *, wait: bool = False) -> list[Thread]:
        if all_agents:
            return [
                t
                for t in self.backend.threads(scope.user, tenant=scope.tenant)
                if self._thread(Scope(t.user, t.agent, t.tenant), wait=wait) is not None
            ]
        thread = self._thread(scope, wait=wait)
        return [thread] if thread else []

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
        record = Record(
            content=content,
            role=role,
            speaker=speaker,
            timestamp=timestamp,
            metadata=check_metadata(metadata, max_bytes=self.limits.metadata_bytes),
            session=session,
            id=id,
        )
        return self._add_records([record], user=user, agent=agent).messages[0]

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
        records = self._records(messages)
        added = self._add_records(
            records, session=session, user=user, agent=agent, progress=progress
        )
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
        :mod:`arbormem.ingest.dedup`. And messages of which none has a timestamp (those of
        one source file, or of this call) start a session of their own unless they
        name one, instead of joining the current session by their time, which would
        be now. Like :meth:`add_many`, all in one transaction.
        """
        arguments.callback(progress, "progress")
        return self._add_records(
            self._records(messages),
            session=session,
            user=user,
            agent=agent,
            progress=progress,
            ingest=True,
        )

    def _records(self, messages: Iterable[Mapping[str, Any] | Record]) -> list[Record]:
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
            raise InputError(
                f"must be a list of messages, got {arguments.type_name(messages)}",
                field="messages",
                hint="pass [{'content': ...}, ...]; add() takes one message",
            )
        records = []
        for i, item in enumerate(messages):
            if isinstance(item, Record):
                records.append(item)
                continue
            if not isinstance(item, Mapping):
                raise InputError(
                    f"must be a mapping with 'content', got {type(item).__name__}",
                    field=f"messages[{i}]",
                )
            records.append(
                Record(
                    content=item.get("content"),
                    role=item.get("role", "user"),
                    speaker=item.get("speaker", item.get("name")),
                    timestamp=item.get("timestamp"),
                    metadata=check_metadata(
                        item.get("metadata"),
                        Where(prefix=f"messages[{i}]."),
                        max_bytes=self.limits.metadata_bytes,
                    ),
                    session=item.get("session"),
                    id=item.get("id"),
                    where=Where(prefix=f"messages[{i}]."),
                )
            )
        return records

    def _add_records(
        self,
        records: Sequence[Record],
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        progress: Callable[[int], None] | None = None,
        ingest: bool = False,
    ) -> Ingested:
        scope = self._scope(user, agent)
        now = utcnow()
        prepared = [
            prepare(
                content=r.content,
                role=r.role,
                speaker=r.speaker,
                timestamp=r.timestamp,
                metadata=r.metadata,
                session="",
                message_id=r.id,
                where=r.where,
                max_bytes=self.max_message_bytes,
                now=now,
                limits=self.limits,
            )
            for r in records
        ]
        if not prepared:
            return Ingested((), ())
        given: set[str] = set()
        for r, p in zip(records, prepared):
            if r.id is not None and p.id in given:
                raise InputError(
                    f"duplicate message id {p.id!r}: an id may appear once",
                    source=r.where.source,
                    line=r.where.line,
                    field=r.where.field("id"),
                )
            given.add(p.id)
        # Named as export writes them and import reads them back: stripped, never blank.
        most = self.limits.name_bytes
        batch = _session_name(session, max_bytes=most)  # the caller's session=, named so
        explicit = [
            batch if r.session is None else _session_name(r.session, r.where, max_bytes=most)
            for r in records
        ]
        fresh = _undated_starts(records, explicit) if ingest else [False] * len(records)
        # A live exchange (not a bulk load) gets the session's upkeep afterwards, which
        # also writes the window keys its newest messages would change again.
        live = len(prepared) <= LIVE_BATCH and any(p.role == "assistant" for p in prepared)
        self.backend.writable()  # before embedding what could not be stored
        vectors = self._embed_new(prepared)
        with self._write_lock:
            thread = self._thread(scope, create=True)
            assert thread is not None
            if thread.id not in self._tails_checked:
                # A process that died before its upkeep ran left the window keys of
                # its last session's newest turns unwritten: the first write mends it.
                self._tails_checked.add(thread.id)
                last = self.backend.last_session(thread)
                if last is not None:
                    self.backend.write_tail_windows(thread, last.id)
            # Sessions are named before the LLM is asked where an exchange belongs
            # (it is only asked inside the current session), and again in the
            # transaction, where another process's writes are visible.
            self._assign_sessions(thread, prepared, explicit, fresh)
            decisions = self._llm_decisions(thread, prepared)
            with self.grower.dropped_on_failure(), self.backend.transaction():
                # In the transaction, where another writer's messages are visible.
                found = (
                    find_stored(self.backend, thread, records, prepared, explicit) if ingest else {}
                )
                todo = [i for i in range(len(prepared)) if i not in found]
                if found and progress is not None:
                    progress(len(found))  # done with: already stored
                new = [prepared[i] for i in todo]
                self._assign_sessions(
                    thread, new, [explicit[i] for i in todo], [fresh[i] for i in todo]
                )
                try:
                    rows = (
                        self.backend.append(
                            thread, new, vectors, self.embedder.model_id, defer_tail=live
                        )
                        if new
                        else []
                    )
                except StoreError:
                    named = self._stored_id_error(records, new)
                    if named is None:
                        raise
                    raise named from None
                # The tree grows a part at a time, so a caller's progress bar moves
                # while a large file goes in. Every row is stored first: names weigh
                # terms by the store's counts, which then include the whole batch.
                step = PROGRESS_STEP if progress is not None else max(len(rows), 1)
                for start in range(0, len(rows), step):
                    part = rows[start : start + step]
                    self._after_append(thread, part, vectors, decisions)
                    if progress is not None:
                        progress(len(part))
        if self._idle is not None:
            self._idle.touch(thread, wrote=bool(rows))
        self.trees.name_with_llm(thread)
        # After a reply, the session's tracker and rolling summary catch up in the
        # background. Bulk loads skip this; the next live reply catches them up.
        if live:
            for session in dict.fromkeys(r.message.session for r in rows):
                self._schedule_upkeep(thread, session)
        stored = iter(r.message for r in rows)
        return Ingested(
            tuple(found[i] if i in found else next(stored) for i in range(len(prepared))),
            tuple(sorted(found)),
        )

    def _stored_id_error(
        self, records: Sequence[Record], new: Sequence[NewMessage]
    ) -> InputError | None:
        """After the store refused to append ``new``: the error naming the file, line
        and field of a given id it holds already (the store's own names none), if that
        was why. Looked for only then, so a bulk add with ids pays nothing for it."""
        where = {p.id: r.where for r, p in zip(records, new) if r.id is not None}
        try:
            held = next((i for i in where if self.backend.get(i) is not None), None)
        except StoreError:
            return None
        if held is None:
            return None
        return InputError(
            f"message id {held!r} is already stored",
            source=where[held].source,
            line=where[held].line,
            field=where[held].field("id"),
            hint="give another id, or none; 'arbormem ingest' (Memory.ingest) skips "
            "messages already stored",
        )

    def _after_append(
        self,
        thread: Thread,
        rows: Sequence[Row],
        vectors: Mapping[str, np.ndarray] | None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> None:
        """Grow the topic tree in the same transaction as the messages."""
        self.grower.grow(thread, rows, vectors, decisions)

    def _llm_decisions(
        self, thread: Thread, prepared: Sequence[NewMessage]
    ) -> dict[str, Decision] | None:
        """Let the LLM place the first exchange of a live add (before the write starts).

        Bulk loads (more than one user message) are placed by the heuristic:
        one LLM round trip per exchange would make imports crawl.
        """
        if self.llm is None or not self.tree_config.enabled:
            return None
        users = [m for m in prepared if m.role == "user"]
        if len(users) != 1:
            return None
        first = users[0]
        probe = Message(
            id=first.id,
            role=first.role,
            content=first.content,
            timestamp=first.timestamp,
            session=first.session or "",
            index=-1,
            speaker=first.speaker,
        )
        decision = self.grower.llm_decision(thread, probe)
        return {first.id: decision} if decision else None

    def _embed_new(self, prepared: Sequence[NewMessage]) -> dict[str, np.ndarray] | None:
        """Vectors for content not already embedded with the current model.

        A failing embedder does not lose messages: they are stored without a
        vector and embedded on a later search or by ``reembed``.
        """
        model = self.embedder.model_id
        texts: dict[str, str] = {}
        for m in prepared:
            texts.setdefault(m.chash, f"{m.speaker}: {m.content}" if m.speaker else m.content)
        try:
            dim = self.embedder.dimensions
            stored = self.backend.vectors(model, list(texts))
            have = {h: v for h, v in stored.items() if v.shape[-1] == dim}  # see reembed
            todo = [h for h in texts if h not in have]
            if todo:
                fresh = self.embedder.embed_many([texts[h] for h in todo])
                have.update(zip(todo, fresh))
            return have
        except Exception as exc:  # any embedder's failure: the messages are stored all the same
            log.warning("embedding failed, storing messages without vectors for now: %s", exc)
            return None

    def _assign_sessions(
        self,
        thread: Thread,
        prepared: Sequence[NewMessage],
        explicit: Sequence[str | None],
        fresh: Sequence[bool],
    ) -> None:
        """Name the session of each message: given, or by the idle-gap rule; a
        ``fresh`` one opens a new session whatever the gap."""
        last = self.backend.last_session(thread)
        current = last.id if last else None
        current_at = last.last_at if last else None
        # The thread's session names are read only when a new one must be named: read
        # on every add, they made each add slower as the sessions grew (2.2 -> 24.7 ms
        # at 2,000 sessions in a review's measurement).
        stored: set[str] | None = None
        named: set[str] = set()  # the sessions of this batch so far
        for message, name, starts in zip(prepared, explicit, fresh):
            if name is not None:
                message.session = str(name)
            else:
                if (
                    starts
                    or current is None
                    or current_at is None
                    or message.timestamp - current_at > self.session_gap
                    or message.timestamp < current_at - self.session_gap
                ):
                    if stored is None:
                        stored = {s.id for s in self.backend.sessions(thread)}
                    taken = stored | named
                    n = len(taken) + 1
                    while f"session-{n}" in taken:
                        n += 1
                    current = f"session-{n}"
                message.session = current
            named.add(message.session)
            current = message.session
            current_at = message.timestamp

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
    ) -> Hits:
        """The ``k`` messages that best answer ``query``, best first.

        Confined to one scope (``user`` with ``agent``); ``all_agents=True``
        widens it to every agent of that user, never to another user.
        ``neighbors=n`` attaches the n turns before and after each hit.
        Soft-archived messages are never hits; the result (a list) names those
        that hold the query's words in ``archived`` (see :class:`Hits`).
        """
        _query(query, self.limits.message_bytes)
        _count("k", k, 1)
        _count("neighbors", neighbors, 0, MAX_NEIGHBORS)
        arguments.flag(all_agents, "all_agents")
        if k * (2 * neighbors + 1) > MAX_WITH_NEIGHBORS:
            # k=10,000 with 100 neighbours read two million messages (35 s, 3.9 GB).
            raise InputError(
                f"k={k:,} hits with {neighbors} neighbours a side is up to "
                f"{k * (2 * neighbors + 1):,} messages, over {MAX_WITH_NEIGHBORS:,}: "
                "ask for fewer hits or fewer neighbours",
                field="neighbors",
            )
        scope = self._scope(user, agent)
        filters = Filters(
            sessions=_sessions(session, self.limits.name_bytes),
            since=parse_timestamp(since, field="since") if since is not None else None,
            until=parse_timestamp(until, field="until") if until is not None else None,
            roles=_roles(role),
        )
        threads = self._threads(scope, all_agents)
        if self._idle is not None:
            for thread in threads:
                self._idle.touch(thread, wrote=False)
        hits = self.retriever.search(threads, query, k, filters, neighbors=neighbors)
        archived, count = self.backend.archived_matches(threads, query_terms(query), filters, k)
        return Hits(hits, archived=archived, archived_count=count)

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
        session = _session_name(session, max_bytes=self.limits.name_bytes)
        for name, value in (("start", start), ("end", end), ("limit", limit)):
            if value is not None:
                _count(name, value, 0, MAX_POSITION)
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
        """Every scope in the store (or one user's), for administration."""
        user = arguments.scope_id(user, "user", max_bytes=self.limits.name_bytes)
        return [
            Scope(t.user, t.agent, t.tenant) for t in self.backend.threads(user, tenant=self.tenant)
        ]

    def stats(self, *, user: str | None = None, agent: str | None = None) -> dict[str, Any]:
        """Counts for the scope's thread, and the vector models stored."""
        scope = self._scope(user, agent)
        thread = self._thread(scope, wait=False)
        return {
            "scope": str(scope),
            "messages": self.backend.count(thread) if thread else 0,
            "sessions": len(self.backend.sessions(thread)) if thread else 0,
            "embedder": self.embedder.model_id,
            "vector_models": self.backend.vector_models(),
        }

    # -- forgetting -----------------------------------------------------------------------

    def forget(
        self,
        message_id: str | None = None,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        wait: float = PURGE_WAIT,
    ) -> dict[str, Any]:
        """Delete for good, with everything derived (index rows, vectors, caches).

        * ``forget(message_id)``: one message of the scope;
        * ``forget(session="s1")``: one session of the scope;
        * ``forget(user="alice", agent="bot")``: that whole thread;
        * ``forget(user="alice")``: everything of that user, across agents.

        Returns ``{"messages", "sessions", "threads"}``: counts of what went;
        ``"purged"``: True when no copy of the forgotten text is left in the store's
        files; ``"purge_pending"``: why not, when not (see :meth:`purge`), else None.
        ``wait``: seconds to wait at most for other connections reading an older
        snapshot of the store, which keep the old pages in the files until they end.
        """
        wait = _seconds(wait, "wait")
        session = _session_name(session, max_bytes=self.limits.name_bytes)
        if message_id is not None:
            message_id = self._message_id(message_id)
        if message_id is not None and session is not None:
            raise InputError("give a message id or a session, not both", field="forget")
        scope = self._scope(user, agent)
        with self._write_lock:
            self._checks.wait()  # no check may rebuild a tree while it is being deleted
            if message_id is not None or session is not None:
                thread = self._thread(scope)
                if thread is None:
                    raise NotFound(f"nothing stored for scope {scope}")
                if self._working is not None:
                    self._working.wait()
                if message_id is not None:
                    row = self.backend.get(message_id)
                    doomed = [row] if row and row.message.scope == scope else []
                else:
                    doomed = self.backend.messages(thread, session=session)
                leaves = set(self.backend.message_leaves([r.rowid for r in doomed]).values())
                with self.backend.transaction():
                    if message_id is not None:
                        deleted = self.backend.delete_messages([message_id], thread)
                        if not deleted.messages:
                            raise NotFound(f"no message {message_id!r} in scope {scope}")
                    else:
                        assert session is not None
                        deleted = self.backend.delete_session(thread, session)
                        if not deleted.messages and not deleted.sessions:
                            raise NotFound(f"no session {session!r} in scope {scope}")
                    self.grower.forgotten(thread, leaves)
                # Summaries and trackers may quote what went. Background upkeep was
                # drained before the deletion (it could otherwise re-save a summary
                # made from the old messages); the reset happens outside the store's
                # transaction because upkeep takes its locks in the other order.
                if message_id is not None:
                    for row in doomed:
                        self.working.reset_derived(thread, row.message.session)
                self._forget_derived([thread], deleted)
                counts = deleted.to_dict()
            else:
                counts = self._forget_threads(scope, user, agent)
        # Outside the write lock: waiting for another process's readers must not hold
        # up this process's writes. One purge for all the threads forgotten.
        return {**counts, **self._purged(self.backend.purge(wait=wait))}

    def _forget_threads(self, scope: Scope, user: str | None, agent: str | None) -> dict[str, int]:
        """Delete a whole thread, or every thread of a user (the caller holds the lock)."""
        if user is None and agent is None:
            raise InputError(
                "say what to forget: a message id, session=..., agent=... or user=...",
                field="forget",
            )
        threads = (
            self.backend.threads(scope.user, tenant=self.tenant)
            if agent is None
            else self._threads(scope, False, wait=True)
        )
        if not threads:
            raise NotFound(f"nothing stored for {'user ' + scope.user if agent is None else scope}")
        if self._working is not None:
            self._working.wait()  # no upkeep may save state for a deleted thread
        total = Deleted()
        for thread in threads:
            deleted = self.backend.delete_thread(thread)
            self._forget_derived([thread], deleted)
            total.messages += deleted.messages
            total.sessions += deleted.sessions
            total.threads += deleted.threads
        return total.to_dict()

    def _forget_derived(self, threads: Sequence[Thread], deleted: Deleted) -> None:
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.discard(deleted.chashes)
        for thread in threads:
            self.tree_recall.invalidate(thread)
            self.tree_recall.discard_files(thread)
            self.trees.forget_descriptions(thread)
            self.retriever.forget(thread)
            self.grower.forget_cursor(thread)

    def _purged(self, done: Purge) -> dict[str, Any]:
        """Drop what a purge found unused, and say how far it got."""
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.discard(done.chashes)
        for thread_id in done.threads:  # a forget cut short may have left them
            self.tree_recall.discard_files(Thread(thread_id, "", ""))
        return {"purged": done.purged, "purge_pending": done.pending}

    def purge(self, *, wait: float = 30.0, rewrite: bool | None = True) -> dict[str, Any]:
        """Finish taking forgotten text out of the store's files.

        Merges the full-text indexes of any forget that a crash cut short, rewrites
        the file when rows were deleted since it last was (``rewrite=None``: only a
        store of at most 64 MiB, as ``forget`` does; False: never), and empties the
        write-ahead log, waiting up to ``wait`` seconds for connections reading an
        older snapshot. Returns ``{"purged", "purge_pending"}`` as :meth:`forget`
        does: ``"readers"`` when such a reader outlasted ``wait``, ``"rewrite"`` when
        the file was not rewritten.
        """
        wait = _seconds(wait, "wait")
        if rewrite is not None and not isinstance(rewrite, bool):
            raise InputError(f"must be True, False or None, got {rewrite!r}", field="rewrite")
        self.backend.writable()
        return self._purged(self.backend.purge(wait=wait, rewrite=rewrite))

    # -- working memory and context --------------------------------------------------------------

    @property
    def working(self) -> Any:
        """Per-session working memory (modes, tracked state, rolling summaries)."""
        if self._working is None:
            from arbormem.context.working import WorkingMemory

            self._working = WorkingMemory(self.backend, self.llm)
        return self._working

    def _schedule_upkeep(self, thread: Thread, session: str) -> None:
        from arbormem.context.modes import resolve_mode

        def work() -> None:
            self.backend.write_tail_windows(thread, session)
            self.working.upkeep(thread, session, None, resolve_mode())

        # While one upkeep of this session waits to start, replies arriving meanwhile
        # need no other: it reads the session's new messages when it runs.
        self.working.submit(work, key=(thread.id, session))

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
        session = _session_name(session, max_bytes=self.limits.name_bytes)
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
    ) -> Any:
        """The prompt for the next turn, within ``budget_tokens``: a :class:`Context`.

        Sections, in order: the system prompt with the mode's additions, the
        session's rolling summary, recalled memory (topic paths and turns), the
        mode's tracked state, the sliding window of the session's recent
        messages, and ``query``. ``context.messages`` is ready for an
        OpenAI-style chat call; ``context.max_tokens`` is the room left for the
        reply in the model's context window.
        """
        from arbormem.context.working import build_context

        _query(query, self.limits.message_bytes)
        if budget_tokens is None:  # resolve() reads None as "off", which a budget is not
            raise InputError(
                "must be a whole number of tokens, got None",
                field="budget_tokens",
                hint="leave it out for the configured budget",
            )
        if k is not None:
            _count("k", k, 1)
        _count("paths", paths, 0)
        if system_prompt is not None:  # "" is the default prompt, as None is
            arguments.text(
                system_prompt, "system_prompt", max_bytes=self.limits.message_bytes, blank=True
            )
        return build_context(
            self,
            query,
            budget_tokens=budget_tokens,
            mode=None if mode is None else self._mode(mode),
            session=_session_name(session, max_bytes=self.limits.name_bytes),
            system_prompt=system_prompt,
            k=k,
            paths=paths,
            context_window=context_window,
            reply_tokens=reply_tokens,
            user=user,
            agent=agent,
        )

    # -- the topic tree -----------------------------------------------------------------------

    def tree(
        self, *, user: str | None = None, agent: str | None = None, messages: bool = True
    ) -> TopicNode:
        """The thread's topic tree under a virtual root (empty if nothing is stored)."""
        arguments.flag(messages, "messages")
        return self.trees.tree(self._thread(self._scope(user, agent)), messages=messages)

    def render_tree(
        self,
        format: str = "text",
        *,
        summaries: bool = False,
        messages: bool = False,
        depth: int | None = None,
        leaves: bool = True,
        user: str | None = None,
        agent: str | None = None,
    ) -> str:
        """The tree as ``text``, ``json``, ``mermaid`` or ``dot``."""
        for field, value in (("summaries", summaries), ("messages", messages), ("leaves", leaves)):
            arguments.flag(value, field)
        if depth is not None:
            _count("depth", depth, 0, MAX_POSITION)
        return self.trees.render(
            self._thread(self._scope(user, agent)),
            format,
            summaries=summaries,
            messages=messages,
            depth=depth,
            leaves=leaves,
        )

    def reorganize(
        self,
        similarity_threshold: float = 0.55,
        prune_trivial_leaves: bool = False,
        *,
        user: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        """Merge related branches of the thread's tree and optionally archive trivial
        exchanges; returns ``{"merged", "pruned", "skipped", "duration_secs", "log_id"}``.

        Every run is logged and can be undone with :meth:`undo_reorganize`.
        Messages are never changed.
        """
        if (
            isinstance(similarity_threshold, bool)
            or not isinstance(similarity_threshold, (int, float))
            or not 0.0 <= similarity_threshold <= 1.0
        ):
            raise InputError(
                f"must be a cosine similarity from 0 to 1, got {similarity_threshold!r}",
                field="similarity_threshold",
            )
        arguments.flag(prune_trivial_leaves, "prune_trivial_leaves")
        thread = self._thread(self._scope(user, agent))
        if thread is None or not self.tree_config.enabled:
            return {"merged": 0, "pruned": 0, "skipped": 0, "duration_secs": 0.0, "log_id": None}
        return self.trees.reorganize(thread, similarity_threshold, prune_trivial_leaves)

    def undo_reorganize(
        self, log_id: int, *, user: str | None = None, agent: str | None = None
    ) -> dict[str, Any]:
        """Put the tree back as it was before reorganisation ``log_id``."""
        _count("log_id", log_id, 0, MAX_POSITION)
        thread = self._thread(self._scope(user, agent))
        if thread is None:
            raise NotFound(f"nothing stored for scope {self._scope(user, agent)}")
        return self.trees.undo(thread, log_id)

    def restore_archived(self, *, user: str | None = None, agent: str | None = None) -> int:
        """Bring every exchange archived by ``reorganize(prune_trivial_leaves=True)``
        back into recall; returns how many messages were restored. Unlike
        :meth:`undo_reorganize` it works after the tree was rebuilt."""
        thread = self._thread(self._scope(user, agent))
        return self.trees.restore_archived(thread) if thread else 0

    def tree_log(
        self, *, user: str | None = None, agent: str | None = None
    ) -> list[dict[str, Any]]:
        """The thread's logged tree operations (reorganisations, rebuilds), newest first."""
        thread = self._thread(self._scope(user, agent))
        return self.trees.log(thread) if thread else []

    def tree_tools(self, *, user: str | None = None, agent: str | None = None) -> TreeNavigator:
        """Tool definitions and handlers that let an LLM walk this scope's tree."""
        return self.trees.tools(self._thread(self._scope(user, agent)))

    def topic_paths(
        self,
        query: str,
        *,
        k: int = 3,
        threshold: float = 0.3,
        user: str | None = None,
        agent: str | None = None,
        all_agents: bool = False,
        drill: bool = True,
    ) -> list[TopicPath]:
        """Multi-path recall: the best ``k`` branches of the tree for ``query``.

        Each path runs from the root to a topic, with names, summaries and dates;
        with ``drill``, a path whose summary does not cover the query carries the
        topic's best turns (multi-resolution).
        """
        _query(query, self.limits.message_bytes)
        _count("k", k, 1)
        arguments.flag(all_agents, "all_agents")
        arguments.flag(drill, "drill")
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not -1.0 <= threshold <= 1.0
        ):
            raise InputError(
                f"must be a similarity from -1 to 1, got {threshold!r}", field="threshold"
            )
        threads = self._threads(self._scope(user, agent), all_agents)
        if not threads or not self.tree_config.enabled:
            return []
        return self.trees.paths(
            threads, query, self.embedder.embed(query), k=k, threshold=threshold, drill=drill
        )

    # -- export and import -------------------------------------------------------------------

    def export(
        self,
        dest: str | os.PathLike[str] | None = None,
        *,
        user: str | None = None,
        agent: str | None = None,
        everything: bool = False,
    ) -> dict[str, Any]:
        """Everything stored for the scope (or the whole store) as a JSON-ready dict.

        With ``dest`` the JSON is also written there (atomically). Vectors are
        not exported: they are derived, and recomputed on import.
        """
        target = None if dest is None else arguments.path(dest, "dest")
        if target is not None and (target.is_dir() or not target.name):
            raise InputError("is a folder", field="dest", hint="give a file path to write to")
        arguments.flag(everything, "everything")
        if target is not None and self.backend.owns_path(target):
            # Replacing the database with its own export destroyed the store.
            raise InputError(
                "is this store's own file", source=str(target), hint="export to another file"
            )
        scope = self._scope(user, agent)  # a blank id is refused, not the default
        if everything:
            threads = self.backend.threads(tenant=self.tenant)
        elif agent is None and user is not None:
            threads = self.backend.threads(user, tenant=self.tenant)
        else:
            threads = self._threads(scope, False)
        out: dict[str, Any] = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "exported_at": format_timestamp(utcnow()),
            "threads": [export_thread(self.backend, t) for t in threads],
        }
        if target is not None:
            path = target
            # A name of its own: a fixed '<dest>.tmp' overwrote any file of that name.
            tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:12]}.tmp")
            try:
                tmp.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
                tmp.replace(path)
            except OSError as exc:
                if tmp.is_file():
                    tmp.unlink()
                raise InputError(
                    f"cannot write the export there: {exc.strerror or exc}",
                    source=str(path),
                    hint="give a file path in a folder that exists and can be written",
                ) from None
        return out

    def import_(self, source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, int]:
        """Restore an export. All or nothing: on any error the store is unchanged.

        Messages whose id is already stored with the same content are skipped,
        so importing the same file twice is harmless; a different message under
        an existing id is an error. Returns ``{"threads", "messages", "skipped",
        "archived", "not_archived", "session_states"}``: messages marked archived
        are archived again by whole exchanges, and ``not_archived`` counts those
        that could not be (the tree is off, or the first imported message joined
        this store's open exchange), with a warning. ``session_states`` counts the
        sessions whose memory mode, tracked state and summary were restored (a
        session that already has one here keeps its own).
        """
        if isinstance(source, Mapping):
            data: Any = source
            name = "<import>"
        else:
            path = arguments.path(source, "source")
            name = str(path)
            data = parse_json(read_bytes_as_text(path), name)
        plan, skipped = plan_import(
            self.backend, data, name, self.max_message_bytes, self.limits, self.tenant
        )
        self.backend.writable()
        vectors = self._embed_new([m for p in plan for m in p.messages])
        added = archived_again = left_live = states_restored = 0
        # Threads that exist are checked before the transaction: a check running in the
        # background must not wait for it (an in-memory store has a single connection).
        for scope, *_ in plan:
            self._thread(scope)
        with self._write_lock, self.grower.dropped_on_failure(), self.backend.transaction():
            # Planned again where no other writer can come in between: another process
            # importing the same file, or adding to one of its threads, since the plan
            # above (its messages are then skipped, or the positions given up). A
            # message embedded for neither plan is stored without a vector, and the
            # first search embeds it.
            plan, skipped = plan_import(
                self.backend, data, name, self.max_message_bytes, self.limits, self.tenant
            )
            for scope, msgs, archived, states in plan:
                thread = self._thread(scope, create=True)
                assert thread is not None
                # Only this thread's vectors: passing all of them made every thread
                # write the whole export's again (quadratic in the number of threads).
                mine = (
                    {m.chash: vectors[m.chash] for m in msgs if m.chash in vectors}
                    if vectors is not None
                    else None
                )
                rows = self.backend.append(thread, msgs, mine, self.embedder.model_id)
                self._after_append(thread, rows, mine)
                marked = [r.rowid for r in rows if r.message.id in archived]
                if marked:
                    done = self.trees.archive(thread, marked)
                    archived_again += done
                    left_live += len(marked) - done
                added += len(rows)
                for key, state in states.items():
                    # A session's own state wins: it may be newer than the export's.
                    if not self.backend.session_state(thread, key):
                        self.backend.put_session_state(thread, key, state)
                        states_restored += 1
        if left_live:
            # An exchange is archived whole or not at all: the tree is off, or an
            # imported message joined an exchange of this store (its open one).
            log.warning(
                "%s: %d message(s) marked archived are back in recall: their exchanges "
                "could not be archived whole%s",
                name,
                left_live,
                " (the topic tree is off)" if not self.tree_config.enabled else "",
            )
        return {
            "threads": len(plan),
            "messages": added,
            "skipped": skipped,
            "archived": archived_again,
            "not_archived": left_live,
            "session_states": states_restored,
        }

    # -- maintenance ----------------------------------------------------------------------------

    def prepare_search(
        self, *, user: str | None = None, agent: str | None = None
    ) -> dict[str, Any]:
        """Build what the first search of a thread would otherwise build on the spot.

        A thread past ``ann_threshold`` turns searches an approximate vector index;
        after a large import, building it takes minutes (about 4.5 at a million
        turns on the reference machine), and the first search used to pay for it
        silently. This builds it now, with the topics' summary vectors, and saves it
        beside the database. Returns ``{"vectors", "approximate", "saved", "topics",
        "duration_secs"}``; ``saved`` is False when the index could not be written (a
        full disk: the next process builds it again). ``arbormem ingest`` calls it
        after storing.
        """
        start = time.perf_counter()
        thread = self._thread(self._scope(user, agent))
        out: dict[str, Any] = {"vectors": 0, "approximate": False, "saved": True, "topics": 0}
        if thread is not None:
            built = self.backend.prepare_nearest(thread, self.embedder)
            out["vectors"], out["approximate"], out["saved"] = (
                built.vectors,
                built.approximate,
                built.saved,
            )
            if self.tree_config.enabled:
                out["topics"] = self.tree_recall.prepare(thread)
        out["duration_secs"] = round(time.perf_counter() - start, 3)
        return out

    def reembed(
        self, *, prune: bool = True, progress: Callable[[int], None] | None = None
    ) -> dict[str, int]:
        """Embed every message lacking a vector of the current model; drop other models'.

        This also happens on its own, lazily, the first time a thread is searched
        after the embedder changed.
        """
        arguments.flag(prune, "prune")
        arguments.callback(progress, "progress")
        self.backend.writable()
        model = self.embedder.model_id
        embedded = 0
        for thread in self.backend.threads(tenant=None):  # the store's vectors, every tenant's
            _, _, _, missing = self.backend.thread_vectors(
                thread, model, dim=self.embedder.dimensions
            )
            for start in range(0, len(missing), 2048):
                chunk = missing[start : start + 2048]
                vecs = self.embedder.embed_many([r.message.text for r in chunk])
                self.backend.put_vectors(model, {r.chash: v for r, v in zip(chunk, vecs)})
                embedded += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        pruned = self.backend.prune_vectors(model) if prune else 0
        return {"embedded": embedded, "pruned": pruned}
