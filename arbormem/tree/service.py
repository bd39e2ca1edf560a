"""The tree operations :class:`arbormem.Memory` offers, on resolved threads.

Memory resolves the caller's scope to a thread and delegates here, so the
facade stays a table of contents and the tree logic stays in ``tree/``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

from arbormem import arguments
from arbormem.arguments import MAX_POSITION
from arbormem.errors import InputError, NotFound
from arbormem.jobs import Jobs
from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.types import Filters, NodeRow, Thread
from arbormem.text import analyze
from arbormem.timeutil import format_timestamp
from arbormem.tree.grow import TreeGrower
from arbormem.tree.naming import TOPIC_KINDS
from arbormem.tree.navigate import TreeNavigator
from arbormem.tree.recall import TopicPath, TreeRecall
from arbormem.tree.reorganize import Reorganizer
from arbormem.tree.summarize import digest_children
from arbormem.tree.view import TopicNode, load_part, load_tree, render_text, to_dot, to_mermaid

log = logging.getLogger(__name__)

EMPTY_ROOT = ("root", "ROOT", "", 0, -1, None, None, 0, False)


class Trees:
    """Reading, rendering, reorganising and navigating the trees of one store."""

    def __init__(
        self,
        backend: Backend,
        grower: TreeGrower,
        recall: TreeRecall,
        retriever: Any,
        write_lock: threading.RLock,
        jobs: Jobs | None = None,
    ) -> None:
        self.backend = backend
        self.grower = grower
        self.recall = recall
        self.retriever = retriever
        self.reorganizer = Reorganizer(grower)
        self._write_lock = write_lock
        #: Where LLM naming runs (see :mod:`arbormem.jobs`).
        self.jobs = jobs if jobs is not None else Jobs()
        self._naming_lock = threading.Lock()
        #: (thread id, generation, node id, message count, last index) -> description.
        self._provisional: dict[
            tuple[int, int, int | None, int, int], tuple[str, str, list[str]]
        ] = {}
        recall.describe = self.describe_growing

    @property
    def enabled(self) -> bool:
        return self.grower.config.enabled

    def tree(
        self,
        thread: Thread | None,
        *,
        messages: bool = True,
        depth: int | None = None,
        node: int | None = None,
        open_at: Message | None = None,
    ) -> TopicNode:
        """The whole tree, or part of it (see :func:`arbormem.tree.view.load_part`)
        with the topics down to the message ``open_at`` opened."""
        # Memory checks its arguments; these two are only passed on, so they are here.
        if depth is not None:
            arguments.count(depth, "depth", 1, MAX_POSITION)
        if node is not None:
            arguments.count(node, "node", 0, MAX_POSITION)
        if thread is None:
            if node is not None:
                raise NotFound(f"no topic {node} in this scope's tree")
            return TopicNode(0, *EMPTY_ROOT)
        if depth is None and node is None and open_at is None:
            root = load_tree(self.backend, thread, messages=messages)
        else:
            at = self.backend.get(open_at.id) if open_at is not None else None
            leaf = self.backend.message_leaves([at.rowid]).get(at.rowid) if at else None
            root = load_part(self.backend, thread, depth=depth, node=node, open_leaf=leaf)
            if messages:
                leaves = {n.id: n for n in root.walk() if n.kind == "leaf"}
                placed = self.backend.leaf_messages(thread, list(leaves)) if leaves else []
                leaf_of = self.backend.message_leaves([r.rowid for r in placed])
                for r in placed:
                    found = leaves.get(leaf_of.get(r.rowid, -1))
                    if found is not None:
                        found.messages.append(r.message)
        # Topics still growing are named when they freeze; show a provisional name now.
        active = [n for n in root.walk() if n.kind == "topic" and not n.frozen and not n.name]
        if active:
            rows = {r.id: r for r in self.backend.tree_nodes(thread, ids=[n.id for n in active])}
            for growing in active:
                if growing.id in rows:
                    growing.name, growing.summary, growing.keyphrases = self.describe_growing(
                        thread, rows[growing.id]
                    )
        return root

    def render(
        self,
        thread: Thread | None,
        format: str,
        *,
        summaries: bool,
        messages: bool,
        depth: int | None,
        leaves: bool,
    ) -> str:
        if format not in ("text", "json", "mermaid", "dot"):
            raise InputError(
                f"unknown format {format!r}", field="format", hint="use text, json, mermaid or dot"
            )
        root = self.tree(thread, messages=messages or leaves)
        if format == "text":
            return render_text(
                root, summaries=summaries, messages=messages, max_depth=depth, leaves=leaves
            )
        if format == "json":
            return json.dumps(root.to_dict(messages=messages), ensure_ascii=False, indent=1)
        if format == "mermaid":
            return to_mermaid(root, leaves=leaves)
        return to_dot(root, leaves=leaves)

    def reorganize(
        self, thread: Thread, similarity_threshold: float = 0.55, prune_trivial_leaves: bool = False
    ) -> dict[str, Any]:
        if self.enabled:
            with self._write_lock:  # a quiet moment: catch the growing topics' index up
                self.grower.flush_segments(thread)
        result = self.reorganizer.run(
            thread,
            similarity_threshold=similarity_threshold,
            prune_trivial_leaves=prune_trivial_leaves,
        )
        self.recall.invalidate(thread)
        return result

    def undo(self, thread: Thread, log_id: int) -> dict[str, Any]:
        with self._write_lock:
            result = self.reorganizer.undo(thread, log_id)
        self.recall.invalidate(thread)
        return result

    def archive(self, thread: Thread, rowids: Sequence[int]) -> int:
        """Archive the exchanges all of whose messages are among ``rowids`` (an import
        restoring what was archived); returns how many messages were archived."""
        with self._write_lock, self.backend.transaction():
            wanted = set(rowids)
            leaves = sorted(set(self.backend.message_leaves(list(wanted)).values()))
            whole = [
                leaf
                for leaf in leaves
                if all(r.rowid in wanted for r in self.backend.leaf_messages(thread, [leaf]))
            ]
            archived = self.backend.set_archived(thread, whole, True) if whole else 0
            self.grower.reindex_above(thread, whole)
        # The cursor holds copies of the active path's nodes, whose flags just changed:
        # written back by the next add, they undid this.
        self.grower.forget_cursor(thread)
        self.recall.invalidate(thread)
        return archived

    def restore_archived(self, thread: Thread) -> int:
        """Bring every archived exchange of the thread back into recall."""
        with self._write_lock, self.backend.transaction():
            # Partly archived leaves too: a store written before rebuilds mended them.
            leaves = self.backend.archived_leaves(thread, which="any")
            restored = self.backend.set_archived(thread, leaves, False) if leaves else 0
            self.grower.reindex_above(thread, leaves)
        self.grower.forget_cursor(thread)  # see archive()
        self.recall.invalidate(thread)
        return restored

    def log(self, thread: Thread) -> list[dict[str, Any]]:
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

    def tools(self, thread: Thread | None) -> TreeNavigator:
        def messages(start: int, end: int) -> list[Message]:
            if thread is None:
                return []
            return [r.message for r in self.backend.messages(thread, start=start, end=end)]

        return TreeNavigator(lambda: self.tree(thread, messages=False), messages)

    def paths(
        self,
        threads: list[Thread],
        query: str,
        qvec: Any,
        *,
        k: int,
        threshold: float,
        drill: bool = True,
    ) -> list[TopicPath]:
        # A long query of common words would read most of the topic index: frozen
        # topics are found (and their BM25 taken) by the terms that fit the search's
        # posting budget, rarest first; growing topics and the dense side use them all.
        terms = self.retriever.affordable_terms("turn", analyze(query), threads)
        paths = self.recall.paths(
            threads, query, qvec, k=k, threshold=threshold, search_terms=terms
        )
        # A thread forgotten while this ran can pass its row id, and so its topics, to
        # another scope's new thread (see Retriever.candidates): such paths are dropped.
        gone = set()
        for t in threads:
            now = self.backend.thread(t.user, t.agent, tenant=t.tenant)
            if now is None or now.id != t.id:
                gone.add((t.user, t.agent))
        paths = [p for p in paths if (p.user, p.agent) not in gone]
        hits = None
        for path in paths:
            if path.sufficient or not drill:
                continue
            topic = path.topic
            if hits is None:
                hits = self.retriever.search(threads, query, 10, Filters())
            path.turns = [
                h.message
                for h in hits
                if (h.message.user, h.message.agent) == (path.user, path.agent)
                and topic.first_index <= h.message.index <= topic.last_index
            ][:2]
        return paths

    def forget_descriptions(self, thread: Thread) -> None:
        """Drop the thread's provisional topic descriptions: they may quote messages
        that were just forgotten."""
        for key in [k for k in self._provisional if k[0] == thread.id]:
            self._provisional.pop(key, None)

    def describe_growing(self, thread: Thread, node: NodeRow) -> tuple[str, str, list[str]]:
        """A provisional name, summary and keyphrases for a topic still growing
        (cached until the topic changes)."""
        # The tree's version would do too, but it changes with every exchange; the
        # thread's generation tells a forgotten thread from the next one with its id.
        generation = self.backend.state(thread).generation
        key = (thread.id, generation, node.id, node.message_count, node.last_index)
        found = self._provisional.get(key)
        if found is None:
            kids = self.backend.tree_nodes(thread, parent=node.id)
            topics = [k for k in kids if k.kind in TOPIC_KINDS and not k.archived]
            if topics:
                # A topic with subtopics is described by them (a growing subtopic by its
                # own provisional description), as it will be once frozen: re-reading
                # every message of a long session on each query would cost more the
                # longer the session runs.
                described = [
                    (k.name, k.keyphrases) if k.frozen else self.describe_growing(thread, k)[::2]
                    for k in topics
                ]
                digest = digest_children(
                    described,
                    max_words=self.grower.config.summary_words,
                    group=node.kind == "group",
                )
            else:
                digest = self.grower.digest(thread, node, kids)
            found = (digest.name, digest.summary, digest.keyphrases)
            if len(self._provisional) > 256:
                self._provisional.clear()
            self._provisional[key] = found
        return found

    def name_with_llm(self, thread: Thread) -> None:
        """Have the LLM rename newly frozen topics, off the caller's path."""
        if self.grower.llm is None or not self.grower.frozen_since_naming:
            return
        pending = self.grower.frozen_since_naming
        self.grower.frozen_since_naming = []

        def work() -> None:
            with self._naming_lock:  # one at a time: each reads what the last one named
                name(pending)

        def name(pending: list[int]) -> None:
            renamed = 0
            for node in self.backend.tree_nodes(thread, ids=pending):
                if not node.frozen or node.origin == "llm":
                    continue
                described = self.grower.llm_describe(thread, node)  # no lock while it waits
                if described is not None:
                    with self._write_lock:
                        renamed += self.grower.apply_description(thread, node, *described)
            if renamed:
                with self._write_lock:
                    self.backend.set_tree_state(thread, self.backend.tree_state(thread))
                self.recall.invalidate(thread)

        self.jobs.submit("tree-naming", work)

    def drain(self) -> None:
        """Wait for background naming submitted so far."""
        self.jobs.wait(kind="tree-naming")

    def close(self) -> None:
        self.drain()
        if self.enabled:
            with self._write_lock:
                try:
                    self.grower.flush_segments()
                except Exception as exc:  # derived index: the next writer catches it up
                    log.warning("could not index the growing topics: %s", exc)
