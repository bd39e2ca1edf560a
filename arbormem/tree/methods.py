"""The topic-tree methods of :class:`~arbormem.Memory`, kept out of ``memory.py``.

:class:`TreeMethods` is a base of :class:`~arbormem.Memory`: each method checks its
arguments and the scope and hands the work to the engine's
:class:`~arbormem.tree.service.Trees` (see docs/tree.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arbormem import arguments
from arbormem.arguments import MAX_POSITION, MAX_RESULTS
from arbormem.errors import InputError, NotFound
from arbormem.models import Message, Scope
from arbormem.results import Reorganized, TreeLogEntry, Undone
from arbormem.store import Backend
from arbormem.store.types import Thread
from arbormem.timeutil import format_timestamp
from arbormem.tree.config import TreeConfig
from arbormem.tree.navigate import TreeNavigator
from arbormem.tree.recall import TopicPath
from arbormem.tree.view import TopicNode

if TYPE_CHECKING:
    from arbormem.embed import Embedder
    from arbormem.engine import Engine

__all__ = ["TreeMethods"]


class TreeMethods:
    """The thread's topic tree: :meth:`tree`, :meth:`render_tree`, :meth:`reorganize`,
    :meth:`undo_reorganize`, :meth:`restore_archived`, :meth:`tree_log`,
    :meth:`tree_tools`, :meth:`topic_paths`."""

    _engine: Engine

    @property
    def backend(self) -> Backend:
        raise NotImplementedError

    @property
    def embedder(self) -> Embedder:
        raise NotImplementedError

    @property
    def tree_config(self) -> TreeConfig:
        raise NotImplementedError

    def _scope(self, user: str | None, agent: str | None) -> Scope:
        raise NotImplementedError

    def _thread(self, scope: Scope, *, create: bool = False, wait: bool = True) -> Thread | None:
        raise NotImplementedError

    def _threads(self, scope: Scope, all_agents: bool, *, wait: bool = False) -> list[Thread]:
        raise NotImplementedError

    def _query(self, query: Any) -> str:
        raise NotImplementedError

    def get(self, message_id: str, *, user: str | None = None, agent: str | None = None) -> Message:
        raise NotImplementedError

    def tree(
        self,
        *,
        user: str | None = None,
        agent: str | None = None,
        messages: bool = True,
        depth: int | None = None,
        node: int | None = None,
        open_at: str | None = None,
    ) -> TopicNode:
        """The thread's topic tree under a virtual root (empty if nothing is stored), or part:
        ``depth`` levels under the root or topic ``node``, opened down to message ``open_at``."""
        arguments.flag(messages, "messages")
        at = None if open_at is None else self.get(open_at, user=user, agent=agent)
        th = self._thread(self._scope(user, agent))
        return self._engine.trees.tree(th, messages=messages, depth=depth, node=node, open_at=at)

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
            arguments.count(depth, "depth", 0, MAX_POSITION)
        return self._engine.trees.render(
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
    ) -> Reorganized:
        """Merge related branches of the thread's tree and optionally archive trivial
        exchanges.

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
            return Reorganized()
        return Reorganized.from_mapping(
            self._engine.trees.reorganize(thread, similarity_threshold, prune_trivial_leaves)
        )

    def undo_reorganize(
        self, log_id: int, *, user: str | None = None, agent: str | None = None
    ) -> Undone:
        """Put the tree back as it was before reorganisation ``log_id``."""
        arguments.count(log_id, "log_id", 0, MAX_POSITION)
        thread = self._thread(self._scope(user, agent))
        if thread is None:
            raise NotFound(f"nothing stored for scope {self._scope(user, agent)}")
        done = self._engine.trees.undo(thread, log_id)
        return Undone(undone=int(done.get("undone", 0)), already=bool(done.get("already")))

    def restore_archived(self, *, user: str | None = None, agent: str | None = None) -> int:
        """Bring every exchange archived by ``reorganize(prune_trivial_leaves=True)``
        back into recall; returns how many messages were restored. Unlike
        :meth:`undo_reorganize` it works after the tree was rebuilt."""
        thread = self._thread(self._scope(user, agent))
        return self._engine.trees.restore_archived(thread) if thread else 0

    def tree_log(self, *, user: str | None = None, agent: str | None = None) -> list[TreeLogEntry]:
        """The thread's logged tree operations (reorganisations, rebuilds), newest first."""
        thread = self._thread(self._scope(user, agent))
        if thread is None:
            return []
        return [
            TreeLogEntry(
                id=e.id,
                kind=e.kind,
                at=format_timestamp(e.at),
                stats=dict(e.stats),
                undone_at=format_timestamp(e.undone_at) if e.undone_at else None,
            )
            for e in self.backend.tree_log(thread)
        ]

    def tree_tools(self, *, user: str | None = None, agent: str | None = None) -> TreeNavigator:
        """Tool definitions and handlers that let an LLM walk this scope's tree."""
        return self._engine.trees.tools(self._thread(self._scope(user, agent)))

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
        self._query(query)
        arguments.count(k, "k", 1, MAX_RESULTS)
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
        return self._engine.trees.paths(
            threads, query, self.embedder.embed(query), k=k, threshold=threshold, drill=drill
        )
