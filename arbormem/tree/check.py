"""Checking a tree on open, and rebuilding it from the messages when it is unsound.

The messages are the truth; the tree is derived. A tree that fails a
consistency check (dangling parents, the width rule, index ranges, child
counts, messages outside the tree) is reported with the node at fault, logged,
and rebuilt from scratch by replaying the thread's messages through the
grower.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from arbormem.store.base import Row, Thread, TreeState
from arbormem.tree.grow import TreeGrower

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TreeProblem:
    """One inconsistency: which node (None when it is about the thread) and what."""

    thread: str
    node: int | None
    reason: str

    def __str__(self) -> str:
        where = f"node {self.node}" if self.node is not None else "the tree"
        return f"{self.thread}: {where}: {self.reason}"


def check(grower: TreeGrower, thread: Thread) -> list[TreeProblem]:
    """Problems of one thread's tree (empty when sound)."""
    found = grower.backend.check_tree(thread, grower.config.max_children)
    return [TreeProblem(f"{thread.user}/{thread.agent}", node, reason) for node, reason in found]


def rebuild(grower: TreeGrower, thread: Thread, batch: int = 2000) -> int:
    """Throw the thread's tree away and grow it again from its messages.

    Runs in one transaction: either the new tree replaces the old one or
    nothing changes. Returns the number of messages replayed.
    """
    backend = grower.backend
    model = grower.embedder.model_id
    replayed = 0
    with backend.transaction():
        backend.delete_nodes(thread)
        backend.set_tree_state(thread, TreeState())
        grower.forget_cursor(thread)
        chunk: list[Row] = []
        for row in backend.iter_rows(thread):
            chunk.append(row)
            if len(chunk) >= batch:
                grower.grow(thread, chunk, backend.vectors(model, [r.chash for r in chunk]))
                replayed += len(chunk)
                chunk = []
        if chunk:
            grower.grow(thread, chunk, backend.vectors(model, [r.chash for r in chunk]))
            replayed += len(chunk)
        # Exchanges archived by an earlier reorganisation stay archived in the new tree.
        archived = backend.archived_leaves(thread)
        if archived:
            backend.set_archived(thread, archived, True)
    return replayed


def check_and_repair(grower: TreeGrower, thread: Thread) -> list[TreeProblem]:
    """Check a thread's tree; if unsound, report each problem and rebuild it."""
    problems = check(grower, thread)
    if problems:
        for problem in problems:
            log.warning("topic tree inconsistent, rebuilding from the messages: %s", problem)
        replayed = rebuild(grower, thread)
        grower.backend.log_tree(
            thread,
            "rebuild",
            {"problems": [str(p) for p in problems], "messages": replayed},
            [],
        )
    return problems
