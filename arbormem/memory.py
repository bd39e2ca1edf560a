"""`Memory`: the public, synchronous API. Everything else calls through it.

>>> from arbormem import Memory
>>> with Memory(":memory:", embedder="hash") as mem:
...     _ = mem.add("Sarah is allergic to peanuts.", speaker="Tom")
...     mem.search("what is Sarah allergic to?")[0].message.content
'Sarah is allergic to peanuts.'
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.config import UNSET, resolve, store_settings
from arbormem.embed import CachedEmbedder, Embedder, get_embedder
from arbormem.errors import ArbormemError, InputError, NotFound
from arbormem.formats import Record, parse_json, read_bytes_as_text
from arbormem.ingest import MAX_MESSAGE_BYTES, Where, check_metadata, prepare
from arbormem.models import Hit, Message, Scope, Session
from arbormem.recall import RecallConfig, Retriever
from arbormem.store import (
    Backend,
    Deleted,
    Filters,
    NewMessage,
    NodeRow,
    Row,
    Thread,
    open_backend,
)
from arbormem.timeutil import format_timestamp, parse_timestamp, utcnow
from arbormem.transfer import EXPORT_FORMAT, EXPORT_VERSION, export_thread, plan_import
from arbormem.tree.background import IdleReorganizer
from arbormem.tree.check import TreeProblem, check_and_repair
from arbormem.tree.config import TreeConfig
from arbormem.tree.grow import Decision, TreeGrower
from arbormem.tree.navigate import TreeNavigator
from arbormem.tree.recall import TopicPath, TreeRecall
from arbormem.tree.reorganize import Reorganizer
from arbormem.tree.view import TopicNode, load_tree, render_text, to_dot, to_mermaid
from arbormem.vectors import VectorCache

log = logging.getLogger(__name__)

#: A message arriving more than this long after the previous one opens a new
#: session, unless the caller names the session.
DEFAULT_SESSION_GAP = timedelta(minutes=30)


def _as_tuple(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


class Memory:
    """Long-term memory of conversations, stored in one database.

    ``path`` is a SQLite file (created if missing), ``":memory:"``, or omitted
    for ``ARBORMEM_DB``, the config file's ``db``, or the per-user default.
    ``user`` and ``agent`` set the default scope of every call; each call can
    name another. ``embedder`` is a spec such as ``"wordllama"`` (the default),
    ``"minilm"``, ``"openai:text-embedding-3-small"`` or an :class:`Embedder`.
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
    ) -> None:
        settings = store_settings(
            db=os.fspath(path) if isinstance(path, (str, os.PathLike)) else path,
            user=user,
            agent=agent,
            embedder=embedder.model_id if isinstance(embedder, Embedder) else embedder,
        )
        self.scope = Scope(settings.user, settings.agent)
        gap = resolve(
            session_gap,
            "ARBORMEM_SESSION_GAP",
            "session_gap",
            DEFAULT_SESSION_GAP,
            lambda v: v if isinstance(v, timedelta) else timedelta(seconds=float(v)),
        )
        self.session_gap: timedelta = gap
        self.max_message_bytes: int = resolve(
            max_message_bytes,
            "ARBORMEM_MAX_MESSAGE_BYTES",
            "max_message_bytes",
            MAX_MESSAGE_BYTES,
            int,
        )
        self.backend = backend or open_backend(settings.db, synchronous=synchronous)
        self.path = getattr(self.backend, "path", settings.db)
        inner = embedder if isinstance(embedder, Embedder) else get_embedder(settings.embedder)
        self.embedder = inner if isinstance(inner, CachedEmbedder) else CachedEmbedder(inner)
        self.vectors = VectorCache(self.backend, self.embedder)
        if isinstance(tree, TreeConfig):
            self.tree_config = tree
        else:
            self.tree_config = TreeConfig(enabled=tree is not False)
        self.tree_recall = TreeRecall(self.backend, self.embedder, self._describe_growing)
        self.retriever = Retriever(
            self.backend,
            self.embedder,
            self.vectors,
            recall,
            tree=self.tree_recall if self.tree_config.enabled else None,
        )
        if llm is UNSET:
            from arbormem.llm import get_llm, resolve_llm_config

            llm = get_llm(resolve_llm_config())
        self.llm = llm
        self.grower = TreeGrower(self.backend, self.embedder, self.tree_config, llm)
        self.reorganizer = Reorganizer(self.grower)
        #: Inconsistencies found (and repaired) in trees opened by this instance.
        self.tree_problems: list[TreeProblem] = []
        self._checked: set[int] = set()
        self._write_lock = threading.RLock()
        self._closed = False
        self._naming: Any = None
        idle = self.tree_config.reorganize_idle_seconds
        self._idle: IdleReorganizer | None = (
            IdleReorganizer(idle, self._reorganize_thread)
            if idle is not None and self.tree_config.enabled
            else None
        )

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Close the store. Safe to call twice."""
        if not self._closed:
            self._closed = True
            if self._idle is not None:
                self._idle.stop()
            if self._naming is not None:
                self._naming.shutdown(wait=True)
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
        return Scope(user or self.scope.user, agent or self.scope.agent)

    def _thread(self, scope: Scope, *, create: bool = False) -> Thread | None:
        thread = self.backend.thread(scope.user, scope.agent, create=create)
        if thread is not None and thread.id not in self._checked:
            self._checked.add(thread.id)
            if self.tree_config.enabled:
                with self._write_lock:
                    self.tree_problems.extend(check_and_repair(self.grower, thread))
        return thread

    def _threads(self, scope: Scope, all_agents: bool) -> list[Thread]:
        if all_agents:
            return [
                t
                for t in self.backend.threads(scope.user)
                if self._thread(Scope(t.user, t.agent)) is not None
            ]
        thread = self._thread(scope)
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
        explicit = [r.session if r.session is not None else session for r in records]
        vectors = self._embed_new(prepared)
        with self._write_lock:
            thread = self._thread(scope, create=True)
            assert thread is not None
            decisions = self._llm_decisions(thread, prepared)
            with self.backend.transaction():
                self._assign_sessions(thread, prepared, explicit)
                rows = self.backend.append(thread, prepared, vectors, self.embedder.model_id)
                self._after_append(thread, rows, vectors, decisions)
            if vectors is not None and all(r.chash in vectors for r in rows):
                self.vectors.appended(
                    thread,
                    [r.rowid for r in rows],
                    np.vstack([vectors[r.chash] for r in rows]),
                )
        if self._idle is not None:
            self._idle.touch(thread, wrote=True)
        self._name_with_llm(thread)
        if progress is not None:
            progress(len(rows))
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
            have = self.backend.vectors(model, list(texts))
            todo = [h for h in texts if h not in have]
            if todo:
                fresh = self.embedder.embed_many([texts[h] for h in todo])
                have.update(zip(todo, fresh))
            return have
        except ArbormemError as exc:
            log.warning("embedding failed, storing messages without vectors for now: %s", exc)
            return None

    def _assign_sessions(
        self, thread: Thread, prepared: Sequence[NewMessage], explicit: Sequence[str | None]
    ) -> None:
        """Name the session of each message: given, or by the idle-gap rule."""
        last = self.backend.last_session(thread)
        current = last.id if last else None
        current_at = last.last_at if last else None
        taken = (
            {s.id for s in self.backend.sessions(thread)}
            if any(e is None for e in explicit)
            else set()
        )
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
                    n = len(taken) + 1
                    while f"session-{n}" in taken:
                        n += 1
                    current = f"session-{n}"
                message.session = current
            taken.add(message.session)
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
        if not isinstance(query, str) or not query.strip():
            raise InputError("must be a non-empty string", field="query")
        if k <= 0:
            raise InputError(f"must be positive, got {k}", field="k")
        scope = self._scope(user, agent)
        filters = Filters(
            sessions=_as_tuple(session),
            since=parse_timestamp(since, field="since") if since is not None else None,
            until=parse_timestamp(until, field="until") if until is not None else None,
            roles=_as_tuple(role),
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
        thread = self._thread(self._scope(user, agent))
        if thread is None:
            return []
        rows = self.backend.messages(thread, session=session, start=start, end=end, limit=limit)
        return [r.message for r in rows]

    def sessions(self, *, user: str | None = None, agent: str | None = None) -> list[Session]:
        """Sessions of the thread in order of their first message."""
        thread = self._thread(self._scope(user, agent))
        return self.backend.sessions(thread) if thread else []

    def scopes(self, user: str | None = None) -> list[Scope]:
        """Every scope in the store (or one user's), for administration."""
        return [Scope(t.user, t.agent) for t in self.backend.threads(user)]

    def stats(self, *, user: str | None = None, agent: str | None = None) -> dict[str, Any]:
        """Counts for the scope's thread, and the vector models stored."""
        scope = self._scope(user, agent)
        thread = self._thread(scope)
        state = self.backend.state(thread) if thread else None
        return {
            "scope": str(scope),
            "messages": state.count if state else 0,
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
        if message_id is not None and session is not None:
            raise InputError("give a message id or a session, not both", field="forget")
        scope = self._scope(user, agent)
        with self._write_lock:
            if message_id is not None or session is not None:
                thread = self._thread(scope)
                if thread is None:
                    raise NotFound(f"nothing stored for scope {scope}")
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
                self._forgotten([thread], deleted)
                return deleted.to_dict()
            if user is None and agent is None:
                raise InputError(
                    "say what to forget: a message id, session=..., agent=... or user=...",
                    field="forget",
                )
            threads = (
                self.backend.threads(scope.user) if agent is None else self._threads(scope, False)
            )
            if not threads:
                raise NotFound(
                    f"nothing stored for {'user ' + scope.user if agent is None else scope}"
                )
            total = Deleted()
            for thread in threads:
                deleted = self.backend.delete_thread(thread)
                self._forgotten([thread], deleted)
                total.messages += deleted.messages
                total.sessions += deleted.sessions
                total.threads += deleted.threads
            return total.to_dict()

    def _forgotten(self, threads: Sequence[Thread], deleted: Deleted) -> None:
        self.backend.purge()
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.discard(deleted.chashes)
        for thread in threads:
            self.vectors.invalidate(thread)
            self.grower.forget_cursor(thread)

    # -- the topic tree -----------------------------------------------------------------------

    def tree(
        self, *, user: str | None = None, agent: str | None = None, messages: bool = True
    ) -> TopicNode:
        """The thread's topic tree under a virtual root (empty if nothing is stored)."""
        thread = self._thread(self._scope(user, agent))
        if thread is None:
            return TopicNode(0, "root", "ROOT", "", 0, -1, None, None, 0, False)
        root = load_tree(self.backend, thread, messages=messages)
        # Topics still growing are named when they freeze; show a provisional name now.
        active = [n for n in root.walk() if n.kind == "topic" and not n.frozen and not n.name]
        if active:
            rows = {r.id: r for r in self.backend.tree_nodes(thread, ids=[n.id for n in active])}
            for node in active:
                if node.id in rows:
                    digest = self.grower.digest(thread, rows[node.id])
                    node.name, node.summary = digest.name, digest.summary
                    node.keyphrases = digest.keyphrases
        return root

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
        root = self.tree(user=user, agent=agent, messages=messages or leaves)
        if format == "text":
            return render_text(
                root, summaries=summaries, messages=messages, max_depth=depth, leaves=leaves
            )
        if format == "json":
            return json.dumps(root.to_dict(messages=messages), ensure_ascii=False, indent=1)
        if format == "mermaid":
            return to_mermaid(root, leaves=leaves)
        if format == "dot":
            return to_dot(root, leaves=leaves)
        raise InputError(
            f"unknown format {format!r}", field="format", hint="use text, json, mermaid or dot"
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
        thread = self._thread(self._scope(user, agent))
        if thread is None or not self.tree_config.enabled:
            return {"merged": 0, "pruned": 0, "skipped": 0, "duration_secs": 0.0, "log_id": None}
        return self._reorganize_thread(thread, similarity_threshold, prune_trivial_leaves)

    def _reorganize_thread(
        self,
        thread: Thread,
        similarity_threshold: float = 0.55,
        prune_trivial_leaves: bool = False,
    ) -> dict[str, Any]:
        result = self.reorganizer.run(
            thread,
            similarity_threshold=similarity_threshold,
            prune_trivial_leaves=prune_trivial_leaves,
        )
        self.tree_recall.invalidate(thread)
        if result.get("pruned"):
            self.vectors.invalidate(thread)
        return result

    def undo_reorganize(
        self, log_id: int, *, user: str | None = None, agent: str | None = None
    ) -> dict[str, Any]:
        """Put the tree back as it was before reorganisation ``log_id``."""
        thread = self._thread(self._scope(user, agent))
        if thread is None:
            raise NotFound(f"nothing stored for scope {self._scope(user, agent)}")
        with self._write_lock:
            result = self.reorganizer.undo(thread, log_id)
        self.tree_recall.invalidate(thread)
        self.vectors.invalidate(thread)
        return result

    def tree_log(
        self, *, user: str | None = None, agent: str | None = None
    ) -> list[dict[str, Any]]:
        """The thread's logged tree operations, newest first."""
        thread = self._thread(self._scope(user, agent))
        if thread is None:
            return []
        return [
            {
                "id": e.id,
                "kind": e.kind,
                "at": format_timestamp(e.at),
                "stats": e.stats,
                "undone_at": format_timestamp(e.undone_at) if e.undone_at else None,
            }
            for e in self.backend.tree_log(thread)
        ]

    def tree_tools(self, *, user: str | None = None, agent: str | None = None) -> TreeNavigator:
        """Tool definitions and handlers that let an LLM walk this scope's tree."""
        scope = self._scope(user, agent)
        return TreeNavigator(
            lambda: self.tree(user=scope.user, agent=scope.agent, messages=False),
            lambda start, end: self.messages(
                start=start, end=end, user=scope.user, agent=scope.agent
            ),
        )

    def topic_paths(
        self,
        query: str,
        *,
        k: int = 3,
        threshold: float = 0.3,
        user: str | None = None,
        agent: str | None = None,
        all_agents: bool = False,
    ) -> list[TopicPath]:
        """Multi-path recall: the best ``k`` branches of the tree for ``query``.

        Each path runs from the root to a topic, with names, summaries and dates;
        paths whose summary does not cover the query carry the topic's best turns.
        """
        threads = self._threads(self._scope(user, agent), all_agents)
        if not threads or not self.tree_config.enabled:
            return []
        qvec = self.embedder.embed(query)
        paths = self.tree_recall.paths(threads, query, qvec, k=k, threshold=threshold)
        for path in paths:
            if path.sufficient:
                continue
            topic = path.topic
            hits = self.retriever.search(threads, query, 3, Filters())
            path.turns = [
                h.message for h in hits if topic.first_index <= h.message.index <= topic.last_index
            ][:2]
        return paths

    def _describe_growing(self, thread: Thread, node: NodeRow) -> tuple[str, str, list[str]]:
        digest = self.grower.digest(thread, node)
        return digest.name, digest.summary, digest.keyphrases

    def _name_with_llm(self, thread: Thread) -> None:
        """Have the LLM rename newly frozen topics, off the caller's path."""
        if self.llm is None or not self.grower.frozen_since_naming:
            return
        pending = self.grower.frozen_since_naming
        self.grower.frozen_since_naming = []
        if self._naming is None:
            from concurrent.futures import ThreadPoolExecutor

            self._naming = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arbormem-names")

        def work() -> None:
            renamed = 0
            for node in self.backend.tree_nodes(thread, ids=pending):
                if node.frozen and node.origin != "llm" and self.grower.llm_rename(thread, node):
                    renamed += 1
            if renamed:
                with self._write_lock:
                    self.backend.set_tree_state(thread, self.backend.tree_state(thread))
                self.tree_recall.invalidate(thread)

        self._naming.submit(work)

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
            path = Path(dest)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
            tmp.replace(path)
        return out

    def import_(self, source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, int]:
        """Restore an export. All or nothing: on any error the store is unchanged.

        Messages whose id is already stored with the same content are skipped,
        so importing the same file twice is harmless; a different message under
        an existing id is an error.
        """
        if isinstance(source, Mapping):
            data: Any = source
            name = "<import>"
        else:
            name = os.fspath(source)
            data = parse_json(read_bytes_as_text(Path(name)), name)
        plan, skipped = plan_import(self.backend, data, name, self.max_message_bytes)
        vectors = self._embed_new([m for _, msgs in plan for m in msgs])
        added = 0
        with self._write_lock, self.backend.transaction():
            for scope, msgs in plan:
                thread = self._thread(scope, create=True)
                assert thread is not None
                rows = self.backend.append(thread, msgs, vectors, self.embedder.model_id)
                self._after_append(thread, rows, vectors)
                added += len(rows)
        for scope, _ in plan:
            thread = self._thread(scope)
            if thread:
                self.vectors.invalidate(thread)
        return {"threads": len(plan), "messages": added, "skipped": skipped}

    # -- maintenance ----------------------------------------------------------------------------

    def reembed(
        self, *, prune: bool = True, progress: Callable[[int], None] | None = None
    ) -> dict[str, int]:
        """Embed every message lacking a vector of the current model; drop other models'.

        This also happens on its own, lazily, the first time a thread is searched
        after the embedder changed.
        """
        model = self.embedder.model_id
        embedded = 0
        for thread in self.backend.threads():
            _, _, missing = self.backend.thread_vectors(thread, model)
            for start in range(0, len(missing), 2048):
                chunk = missing[start : start + 2048]
                vecs = self.embedder.embed_many([r.message.text for r in chunk])
                self.backend.put_vectors(model, {r.chash: v for r, v in zip(chunk, vecs)})
                embedded += len(chunk)
                if progress is not None:
                    progress(len(chunk))
            self.vectors.invalidate(thread)
        pruned = self.backend.prune_vectors(model) if prune else 0
        return {"embedded": embedded, "pruned": pruned}
