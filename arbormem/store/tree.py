"""The tree capability: each thread's topic tree, its cursor and its log.

Nodes are topics, width-control groups and leaves (one exchange each); a message
points at its leaf. See :mod:`arbormem.tree` for what grows and reads them.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from arbormem.store.core import StoreCore
from arbormem.store.types import (
    NodeBrief,
    NodeRow,
    NodeShapes,
    Row,
    Thread,
    TreeLogEntry,
    TreeState,
)


class TreeStore(StoreCore):
    """Topic-tree nodes, the tree's cursor and check marks, and its operation log."""

    @abc.abstractmethod
    def tree_state(self, thread: Thread) -> TreeState:
        """The thread's tree cursor (an empty state when it has no tree yet)."""

    @abc.abstractmethod
    def set_tree_state(self, thread: Thread, state: TreeState) -> TreeState:
        """Store the cursor and bump ``version``; returns the stored state."""

    @abc.abstractmethod
    def tree_nodes(
        self,
        thread: Thread,
        *,
        ids: Sequence[int] | None = None,
        parent: int | object | None = ...,
        kinds: Sequence[str] | None = None,
        frozen: bool | None = None,
    ) -> list[NodeRow]:
        """Nodes of a thread, by id, by parent (``None`` = root level), kind or state,
        ordered by ``seq``."""

    @abc.abstractmethod
    def node_briefs(
        self,
        thread: Thread,
        kinds: Sequence[str] | None = None,
        ids: Sequence[int] | None = None,
    ) -> list[NodeBrief]:
        """The shape of the thread's nodes of these kinds, or with these ids (no
        names, summaries or dates): cheap even for hundreds of thousands of topics."""

    def node_shapes(self, thread: Thread, stop: threading.Event | None = None) -> NodeShapes | None:
        """The shape of every node of the thread, read in one pass (see
        :meth:`node_briefs`); None when ``stop`` was set before it ended."""
        return NodeShapes.of(self.node_briefs(thread))

    @abc.abstractmethod
    def tree_checked(self, thread: Thread) -> tuple[int, int | None]:
        """The tree's version, and the version that last passed the consistency
        check (None: never, or the tree changed since: every tree write clears it)."""

    @abc.abstractmethod
    def mark_tree_checked(self, thread: Thread, version: int) -> bool:
        """Record that the tree passed the check at ``version``; False (and nothing
        recorded) when the tree has changed since."""

    @abc.abstractmethod
    def put_nodes(self, thread: Thread, nodes: Sequence[NodeRow]) -> None:
        """Insert nodes whose ``id`` is None (assigning it) and update the others."""

    @abc.abstractmethod
    def delete_nodes(self, thread: Thread, ids: Sequence[int] | None = None) -> int:
        """Delete nodes (all of the thread's when ``ids`` is None) and their index rows."""

    @abc.abstractmethod
    def set_message_leaf(self, rowids: Sequence[int], leaf_id: int | None) -> None:
        """Record which leaf each message belongs to; the version of each of their
        threads' trees moves (what searches keep of message leaves is kept under it)."""

    def set_message_leaves(self, leaves: Mapping[int, Sequence[int]]) -> None:
        """:meth:`set_message_leaf` for several leaves (leaf id -> row ids) at once; a
        back-end where each call is a round trip to a server writes them together.
        Like it, moves the tree version of every thread whose messages it moves."""
        for leaf_id, rowids in leaves.items():
            self.set_message_leaf(rowids, leaf_id)

    @abc.abstractmethod
    def set_archived(self, thread: Thread, leaf_ids: Sequence[int], archived: bool) -> int:
        """Soft-archive (or restore) leaves and their messages: kept, but out of recall.
        Returns how many messages changed."""

    @abc.abstractmethod
    def message_leaves(self, rowids: Sequence[int]) -> dict[int, int]:
        """Leaf id of each message that has one."""

    @abc.abstractmethod
    def parents(self, thread: Thread, ids: Sequence[int]) -> dict[int, int | None]:
        """The parent of each node (``None`` at the root level), without the rest."""

    @abc.abstractmethod
    def rowids_between(self, thread: Thread, start: int, end: int, limit: int) -> list[int]:
        """Row numbers of the thread's live (not archived) messages at positions
        [start, end), at most ``limit``, in order."""

    @abc.abstractmethod
    def check_tree(self, thread: Thread, max_children: int) -> list[tuple[int | None, str]]:
        """Consistency problems of a thread's tree as ``(node id, what is wrong)``:
        dangling parents, the width rule, index ranges, child counts, messages
        outside the tree. Empty when the tree is sound."""

    @abc.abstractmethod
    def log_tree(self, thread: Thread, kind: str, stats: Mapping[str, Any], undo: list[Any]) -> int:
        """Record a tree operation (with what it takes to undo it); returns its id."""

    @abc.abstractmethod
    def tree_log(self, thread: Thread, entry_id: int | None = None) -> list[TreeLogEntry]:
        """A thread's tree operations, newest first (or one of them)."""

    @abc.abstractmethod
    def mark_undone(self, entry_id: int) -> None:
        """Note that a logged operation was undone."""

    @abc.abstractmethod
    def leaf_messages(self, thread: Thread, leaf_ids: Sequence[int]) -> list[Row]:
        """The messages placed in these leaves (archived ones too), in thread order."""

    @abc.abstractmethod
    def archived_rowids(self, thread: Thread) -> set[int]:
        """Row numbers of the thread's archived messages."""

    @abc.abstractmethod
    def archived_leaves(self, thread: Thread, *, which: str = "whole") -> list[int]:
        """Leaves with archived messages: ``"whole"`` all of them archived, ``"partly"``
        some but not all (which only replaying messages into new leaves can leave
        behind), ``"any"`` either."""
