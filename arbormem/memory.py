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
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.config import UNSET, resolve, scope_name, store_settings, whole_at_least
from arbormem.deep import DeepVectors, resolve_deep
from arbormem.embed import CachedEmbedder, Embedder, get_embedder
from arbormem.errors import InputError, NotFound
from arbormem.formats import Record, parse_json, read_bytes_as_text
from arbormem.ingest import (
    MAX_MESSAGE_BYTES,
    Where,
    check_metadata,
    check_name,
    normalize_role,
    prepare,
)
from arbormem.models import Hit, Message, Scope, Session
from arbormem.recall import RecallConfig, Retriever
from arbormem.rerank import Reranker, get_reranker
from arbormem.store import (
    Backend,
    Deleted,
    Filters,
    NewMessage,
    Row,
    Thread,
    open_backend,
)
from arbormem.timeutil import format_timestamp, parse_timestamp, utcnow
from arbormem.transfer import EXPORT_FORMAT, EXPORT_VERSION, export_thread, plan_import
from arbormem.tree.background import IdleReorganizer
from arbormem.tree.check import OpenChecks, TreeProblem
from arbormem.tree.config import TreeConfig
from arbormem.tree.grow import Decision, TreeGrower
from arbormem.tree.navigate import TreeNavigator
from arbormem.tree.recall import TopicPath, TreeRecall
from arbormem.tree.service import Trees
from arbormem.tree.view import TopicNode
from arbormem.vectors import ANN_THRESHOLD, AnnIndex, VectorCache

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


def _query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InputError("must be a non-empty string", field="query")
    return query


def _count(name: str, value: Any, low: int, high: int = MAX_RESULTS) -> int:
    """A whole-number argument within [low, high], or an InputError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {value!r}", field=name)
    if not low <= value <= high:
        raise InputError(f"must be from {low} to {high:,}, got {value}", field=name)
    return value


def _session_name(value: Any, where: Where = Where()) -> str | None:
    """A session name as add stores it and import reads it back: stripped, never
    blank (a padded name found nothing once add began to strip it)."""
    if value is None:
        return None
    return check_name(value if isinstance(value, str) else str(value), "session", where)


def _sessions(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    names = _as_tuple(value, "session")
    return None if names is None else tuple(str(_session_name(n)) for n in names)


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
    ``"onnx:FOLDER"`` or a :class:`~arbormem.rerank.Reranker`; ``None`` for none):
    better first hits for about 25 ms per reordered turn (see :mod:`arbormem.rerank`).
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
        synchronous: str = "NORMAL",
        tree: TreeConfig | bool | None = None,
        llm: Any = UNSET,
        ann_threshold: int | Any = UNSET,
        read_only: bool | None = None,
        reranker: str | Reranker | Any | None = UNSET,
        deep_embedder: str | Embedder | Any | None = UNSET,
    ) -> None:
        if read_only is not None and not isinstance(read_only, bool):
            raise InputError(
                f"must be True, False or None, got {type(read_only).__name__}", field="read_only"
            )
        settings = store_settings(
            db=os.fspath(path) if isinstance(path, (str, os.PathLike)) else path,
            user=user,
            agent=agent,
            embedder=embedder.model_id if isinstance(embedder, Embedder) else embedder,
        )
        self.scope = Scope(settings.user, settings.agent)
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
        ann_threshold = resolve(
            ann_threshold,
            "ARBORMEM_ANN_THRESHOLD",
            "ann_threshold",
            ANN_THRESHOLD,
            whole_at_least(0),
            field="ann_threshold",
        )
        # Every setting is read before the store opens: one that is refused leaves
        # no new file behind and no connection open.
        inner = embedder if isinstance(embedder, Embedder) else get_embedder(settings.embedder)
        second_stage = get_reranker(
            None if reranker is UNSET else "none" if reranker is None else reranker
        )
        deep = resolve_deep(deep_embedder, inner)
        if llm is UNSET:
            from arbormem.llm import get_llm, resolve_llm_config

            llm = get_llm(resolve_llm_config())
        if backend is not None and read_only is not None and read_only != backend.read_only:
            raise InputError(
                f"the back-end given is {'' if backend.read_only else 'not '}read-only: "
                "open it read-only (or not) itself",
                field="read_only",
            )
        self.backend = backend or open_backend(
            settings.db, synchronous=synchronous, read_only=read_only
        )
        self.path = getattr(self.backend, "path", settings.db)
        self.embedder = inner if isinstance(inner, CachedEmbedder) else CachedEmbedder(inner)
        folder = None if self.path == ":memory:" else Path(f"{self.path}.ann")
        self.vectors = VectorCache(self.backend, self.embedder, folder, ann_threshold)
        if isinstance(tree, TreeConfig):
            self.tree_config = tree
        else:
            self.tree_config = TreeConfig(enabled=tree is not False)
        self.tree_recall = TreeRecall(self.backend, self.embedder, folder=folder)
        self._write_lock = threading.RLock()
        #: The background embedder's vectors (see :mod:`arbormem.deep`), or None.
        self.deep: DeepVectors | None = None
        if deep is not None:
            self.deep = DeepVectors(
                self.backend,
                deep if isinstance(deep, CachedEmbedder) else CachedEmbedder(deep),
                None if folder is None else folder / "deep",
                ann_threshold,
                self._write_lock,
            )
        self.retriever = Retriever(
            self.backend,
            self.embedder,
            self.vectors,
            recall,
            tree=self.tree_recall if self.tree_config.enabled else None,
            reranker=second_stage,
            deep=self.deep,
        )
        self.llm = llm
        self.grower = TreeGrower(self.backend, self.embedder, self.tree_config, llm)
        self._checks = OpenChecks(self.grower, self._write_lock)
        self.trees = Trees(
            self.backend,
            self.grower,
            self.tree_recall,
            self.vectors,
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
            if self.deep is not None:
                self.deep.close()
            if self._working is not None:
                self._working.close()
            try:
                self.vectors.save()
            except Exception as exc:  # a cache: losing it only costs a rebuild
                log.warning("could not save the vector index: %s", exc)
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
        for field, value in (("user", user), ("agent", agent)):
            if value is not None and not isinstance(value, str):
                raise InputError(f"must be text, got {type(value).__name__}", field=field)
        return Scope(user or self.scope.user, agent or self.scope.agent)

    def _thread(self, scope: Scope, *, create: bool = False, wait: bool = True) -> Thread | None:
        """The scope's thread, its tree checked once per process (see
        :class:`~arbormem.tree.check.OpenChecks`); ``wait=False`` for reads, which
        do not wait for the check."""
        thread = self.backend.thread(scope.user, scope.agent)
        if thread is None and create:
            # New ids must be names; threads stored under blank or padded ids by
            # earlier versions stay readable, and can be forgotten.
            for field, value in (("user", scope.user), ("agent", scope.agent)):
                try:
                    scope_name(value)
                except ValueError as exc:
                    raise InputError(str(exc), field=field) from None
            thread = self.backend.thread(scope.user, scope.agent, create=True)
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
                for t in self.backend.threads(scope.user)
                if self._thread(Scope(t.user, t.agent), wait=wait) is not None
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
            metadata=dict(metadata or {}),
            session=session,
            id=id,
        )
        return self._add_records([record], user=user, agent=agent)[0]

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
                    metadata=check_metadata(item.get("metadata"), Where(prefix=f"messages[{i}].")),
                    session=item.get("session"),
                    id=item.get("id"),
                    where=Where(prefix=f"messages[{i}]."),
                )
            )
        return self._add_records(
            records, session=session, user=user, agent=agent, progress=progress
        )

    def _add_records(
        self,
        records: Sequence[Record],
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[Message]:
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
            )
            for r in records
        ]
        if not prepared:
            return []
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
        explicit = [
            _session_name(r.session if r.session is not None else session, r.where) for r in records
        ]
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
            self._assign_sessions(thread, prepared, explicit)
            decisions = self._llm_decisions(thread, prepared)
            with self.grower.dropped_on_failure(), self.backend.transaction():
                self._assign_sessions(thread, prepared, explicit)
                rows = self.backend.append(
                    thread, prepared, vectors, self.embedder.model_id, defer_tail=live
                )
                # The tree grows a part at a time, so a caller's progress bar moves
                # while a large file goes in. Every row is stored first: names weigh
                # terms by the store's counts, which then include the whole batch.
                step = PROGRESS_STEP if progress is not None else len(rows)
                for start in range(0, len(rows), step):
                    part = rows[start : start + step]
                    self._after_append(thread, part, vectors, decisions)
                    if progress is not None:
                        progress(len(part))
            if vectors is not None and all(r.chash in vectors for r in rows):
                try:
                    self.vectors.appended(
                        thread,
                        [r.rowid for r in rows],
                        np.vstack([vectors[r.chash] for r in rows]),
                    )
                except Exception as exc:  # the messages are stored: the index catches up later
                    log.warning("vector index not extended, rebuilt on next search: %s", exc)
                    self.vectors.invalidate(thread)
        if self._idle is not None:
            self._idle.touch(thread, wrote=True)
        if self.deep is not None:
            self.deep.notify(thread, wrote=True)
        self.trees.name_with_llm(thread)
        # After a reply, the session's tracker and rolling summary catch up in the
        # background. Bulk loads skip this; the next live reply catches them up.
        if live:
            for session in dict.fromkeys(r.message.session for r in rows):
                self._schedule_upkeep(thread, session)
        return [r.message for r in rows]

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
        self, thread: Thread, prepared: Sequence[NewMessage], explicit: Sequence[str | None]
    ) -> None:
        """Name the session of each message: given, or by the idle-gap rule."""
        last = self.backend.last_session(thread)
        current = last.id if last else None
        current_at = last.last_at if last else None
        # The thread's session names are read only when a new one must be named: read
        # on every add, they made each add slower as the sessions grew (2.2 -> 24.7 ms
        # at 2,000 sessions in a review's measurement).
        stored: set[str] | None = None
        named: set[str] = set()  # the sessions of this batch so far
        for message, name in zip(prepared, explicit):
            if name is not None:
                message.session = str(name)
            else:
                if (
                    current is None
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
    ) -> list[Hit]:
        """The ``k`` messages that best answer ``query``, best first.

        Confined to one scope (``user`` with ``agent``); ``all_agents=True``
        widens it to every agent of that user, never to another user.
        ``neighbors=n`` attaches the n turns before and after each hit.
        """
        _query(query)
        _count("k", k, 1)
        _count("neighbors", neighbors, 0, MAX_NEIGHBORS)
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
            sessions=_sessions(session),
            since=parse_timestamp(since, field="since") if since is not None else None,
            until=parse_timestamp(until, field="until") if until is not None else None,
            roles=_roles(role),
        )
        threads = self._threads(scope, all_agents)
        if self._idle is not None:
            for thread in threads:
                self._idle.touch(thread, wrote=False)
        return self.retriever.search(threads, query, k, filters, neighbors=neighbors)

    def get(self, message_id: str, *, user: str | None = None, agent: str | None = None) -> Message:
        """One message by id; :class:`NotFound` when it is not in this scope."""
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
        session = _session_name(session)
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
        return [Scope(t.user, t.agent) for t in self.backend.threads(user)]

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
    ) -> dict[str, int]:
        """Delete for good, with everything derived (index rows, vectors, caches).

        * ``forget(message_id)``: one message of the scope;
        * ``forget(session="s1")``: one session of the scope;
        * ``forget(user="alice", agent="bot")``: that whole thread;
        * ``forget(user="alice")``: everything of that user, across agents.

        Returns counts of what went.
        """
        session = _session_name(session)
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
                self._forgotten([thread], deleted)
                return deleted.to_dict()
            if user is None and agent is None:
                raise InputError(
                    "say what to forget: a message id, session=..., agent=... or user=...",
                    field="forget",
                )
            threads = (
                self.backend.threads(scope.user)
                if agent is None
                else self._threads(scope, False, wait=True)
            )
            if not threads:
                raise NotFound(
                    f"nothing stored for {'user ' + scope.user if agent is None else scope}"
                )
            if self._working is not None:
                self._working.wait()  # no upkeep may save state for a deleted thread
            total = Deleted()
            for thread in threads:
                deleted = self.backend.delete_thread(thread)
                self._forgotten([thread], deleted)
                total.messages += deleted.messages
                total.sessions += deleted.sessions
                total.threads += deleted.threads
            return total.to_dict()

    def _forgotten(self, threads: Sequence[Thread], deleted: Deleted) -> None:
        unused = self.backend.purge()
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.discard([*deleted.chashes, *unused])
        for thread in threads:
            self.vectors.invalidate(thread)
            self.vectors.discard_files(thread)
            if self.deep is not None:
                self.deep.forget(thread)
            self.tree_recall.invalidate(thread)
            self.tree_recall.discard_files(thread)
            self.trees.forget_descriptions(thread)
            self.retriever.forget(thread)
            self.grower.forget_cursor(thread)

    # -- working memory and context --------------------------------------------------------------

    @property
    def working(self) -> Any:
        """Per-session working memory (modes, tracked state, rolling summaries)."""
        if self._working is None:
            from arbormem.session import WorkingMemory

            self._working = WorkingMemory(self.backend, self.llm)
        return self._working

    def _schedule_upkeep(self, thread: Thread, session: str) -> None:
        from arbormem.modes import resolve_mode

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
        session = _session_name(session)
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
        from arbormem.session import build_context

        return build_context(
            self,
            query,
            budget_tokens=budget_tokens,
            mode=mode,
            session=_session_name(session),
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
        thread = self._thread(self._scope(user, agent))
        if thread is None or not self.tree_config.enabled:
            return {"merged": 0, "pruned": 0, "skipped": 0, "duration_secs": 0.0, "log_id": None}
        return self.trees.reorganize(thread, similarity_threshold, prune_trivial_leaves)

    def undo_reorganize(
        self, log_id: int, *, user: str | None = None, agent: str | None = None
    ) -> dict[str, Any]:
        """Put the tree back as it was before reorganisation ``log_id``."""
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
        _query(query)
        _count("k", k, 1)
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

    def _store_file(self, path: Path) -> bool:
        """Whether ``path`` is the database or one of its companions (WAL, index folder)."""
        store = getattr(self.backend, "path", None)
        if not isinstance(store, (str, os.PathLike)) or str(store) == ":memory:":
            return False
        base = Path(store).resolve()
        target = path.resolve()
        companions = {base, *(base.with_name(base.name + s) for s in ("-wal", "-shm", "-journal"))}
        return target in companions or base.with_name(base.name + ".ann") in target.parents

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
        if dest is not None and self._store_file(Path(dest).expanduser()):
            # Replacing the database with its own export destroyed the store.
            raise InputError(
                "is this store's own file",
                source=str(Path(dest).expanduser()),
                hint="export to another file",
            )
        if everything:
            threads = self.backend.threads()
        elif agent is None and user is not None:
            threads = self.backend.threads(user)
        else:
            threads = self._threads(self._scope(user, agent), False)
        out: dict[str, Any] = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "exported_at": format_timestamp(utcnow()),
            "threads": [export_thread(self.backend, t) for t in threads],
        }
        if dest is not None:
            path = Path(dest).expanduser()
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
        "archived", "not_archived"}``: messages marked archived are archived again
        by whole exchanges, and ``not_archived`` counts those that could not be
        (the tree is off, or the first imported message joined this store's open
        exchange), with a warning.
        """
        if isinstance(source, Mapping):
            data: Any = source
            name = "<import>"
        else:
            name = os.fspath(source)
            data = parse_json(read_bytes_as_text(Path(name)), name)
        plan, skipped = plan_import(self.backend, data, name, self.max_message_bytes)
        self.backend.writable()
        vectors = self._embed_new([m for _, msgs, _ in plan for m in msgs])
        added = archived_again = left_live = 0
        # Threads that exist are checked before the transaction: a check running in the
        # background must not wait for it (an in-memory store has a single connection).
        for scope, _, _ in plan:
            self._thread(scope)
        with self._write_lock, self.grower.dropped_on_failure(), self.backend.transaction():
            # Planned again where no other writer can come in between: another process
            # importing the same file, or adding to one of its threads, since the plan
            # above (its messages are then skipped, or the positions given up). A
            # message embedded for neither plan is stored without a vector, and the
            # first search embeds it.
            plan, skipped = plan_import(self.backend, data, name, self.max_message_bytes)
            for scope, msgs, archived in plan:
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
        for scope, _, _ in plan:
            thread = self._thread(scope)
            if thread:
                self.vectors.invalidate(thread)
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
            index, out["saved"] = self.vectors.prepare(thread)
            out["vectors"] = len(index)
            out["approximate"] = isinstance(index, AnnIndex)
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
        self.backend.writable()
        model = self.embedder.model_id
        embedded = 0
        for thread in self.backend.threads():
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
            self.vectors.invalidate(thread)
        # The deep embedder's vectors are the store's too (see arbormem.deep).
        deep = [self.deep.model_id] if self.deep is not None else []
        pruned = self.backend.prune_vectors(model, *deep) if prune else 0
        return {"embedded": embedded, "pruned": pruned}
