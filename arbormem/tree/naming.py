"""Naming, indexing and repairing the topics of a tree.

A topic that leaves the active path is frozen and named here: its name, summary and
keyphrases come from its messages (or from its children's names, for a node whose
children are all named topics; :mod:`arbormem.tree.summarize` does the wording), with
words weighted by their document frequencies over the store (:meth:`TopicNaming.frequencies`,
cached); the summary is indexed for lexical search and embedded. With an LLM, a frozen
topic can be described again off the write path (:meth:`TopicNaming.llm_describe`, then
:meth:`TopicNaming.apply_description`). When messages are forgotten or archived the
topics above them are counted, indexed and named again, so no summary keeps quoting
what is gone.

:class:`TopicNaming` is a base of :class:`~arbormem.tree.grow.TreeGrower`, which owns
the state these methods read (the store, the embedder, the configuration, the caches).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from arbormem.embed.base import Embedder
from arbormem.errors import LLMError
from arbormem.ids import content_hash
from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.types import NodeRow, Thread, TreeState
from arbormem.text import analyze, analyze_message
from arbormem.tree.config import TreeConfig
from arbormem.tree.summarize import (
    LLM_SUMMARY_PROMPT,
    Digest,
    digest_children,
    digest_messages,
    validate_digest,
)

__all__ = ["TOPIC_KINDS", "TopicNaming", "summary_text"]

log = logging.getLogger(__name__)

TOPIC_KINDS = ("topic", "group")


def summary_text(node: NodeRow) -> str:
    """What is embedded and indexed for a topic: its name, summary and keyphrases."""
    keys = ", ".join(node.keyphrases)
    return f"{node.name}: {node.summary} ({keys})" if keys else f"{node.name}: {node.summary}"


@dataclass
class FrequenciesAhead:
    """The document frequencies of a batch's terms, read with the first read of
    frequencies while its tree grows (see :meth:`TopicNaming.frequencies_ahead`)."""

    #: Terms to read with the first read (the batch's, not freshly cached).
    wanted: set[str]
    #: What the read found, zeros included.
    counts: dict[str, int] = field(default_factory=dict)
    #: The store's size it found (None: nothing read yet).
    n_docs: int | None = None


class TopicNaming:
    """Naming, indexing and repair of topics (see the module docs); a base of
    :class:`~arbormem.tree.grow.TreeGrower`."""

    backend: Backend
    embedder: Embedder
    config: TreeConfig
    llm: Any
    _df: dict[str, tuple[int, int]]
    _n_docs: int
    _added: int
    _unembedded: dict[str, str] | None
    _ahead: FrequenciesAhead | None = None

    def _place_messages(self) -> None:
        raise NotImplementedError

    def forget_cursor(self, thread: Thread | None = None) -> None:
        raise NotImplementedError

    def frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Document frequencies of terms over the store, cached.

        Reading a common term's frequency means walking its whole posting list,
        which grows with the store, so each term is read once and then scaled
        with the store's size; it is read again once the store has doubled.
        """
        cache = self._df
        if len(cache) > 200_000:
            cache.clear()
        n_now = self._n_docs + self._added
        # Read again: a term not read yet, or read before the store was half its size.
        stale = (n_now - 100) / 2
        missing = [t for t in set(terms) if (known := cache.get(t)) is None or known[1] < stale]
        if missing or not self._n_docs:
            found, self._n_docs = self._read_frequencies(missing)
            self._added = 0
            n_now = self._n_docs
            for t in missing:
                cache[t] = (found.get(t, 0), self._n_docs)
        scale = {}
        for t in terms:
            df, n_then = cache[t]
            scale[t] = round(df * n_now / n_then) if n_then else df
        return scale, n_now

    @contextmanager
    def frequencies_ahead(self, contents: Iterable[str]) -> Iterator[None]:
        """Within the block, the first read of frequencies also reads those of every
        term of ``contents`` (a batch's messages, all stored before its tree grows)
        that is not freshly cached, and later reads are answered from it.

        An import freezes about one topic per four turns, and naming each one read
        its new terms in a round trip of its own. The counts cannot move meanwhile:
        the batch's messages are all stored, in the transaction, before its tree
        grows, and growing writes none; so the names are those of one read per topic.
        """
        cache = self._df
        stale = (self._n_docs + self._added - 100) / 2
        wanted = {
            t
            for text in contents
            for t in analyze(text)
            if (known := cache.get(t)) is None or known[1] < stale
        }
        self._ahead = FrequenciesAhead(wanted)
        try:
            yield
        finally:
            self._ahead = None

    def _read_frequencies(self, missing: Sequence[str]) -> tuple[dict[str, int], int]:
        """The store's counts of ``missing`` and its size (see frequencies_ahead)."""
        ahead = self._ahead
        if ahead is None:
            return self.backend.term_frequencies(missing)
        unread = [t for t in missing if t not in ahead.counts]
        if unread or ahead.n_docs is None:
            asked = list(dict.fromkeys([*unread, *(ahead.wanted - ahead.counts.keys())]))
            ahead.wanted = set()
            found, ahead.n_docs = self.backend.term_frequencies(asked)
            ahead.counts.update((t, found.get(t, 0)) for t in asked)
        return {t: n for t in missing if (n := ahead.counts[t])}, ahead.n_docs

    def subtree_leaves(
        self,
        thread: Thread,
        node: NodeRow,
        *,
        live: bool = False,
        children: Sequence[NodeRow] | None = None,
    ) -> list[int]:
        """Ids of the leaves under a node; with ``live``, archived ones left out.
        ``children``: the node's children as stored, when the caller has read them."""
        assert node.id is not None
        if node.kind == "leaf":
            return [node.id]
        out: list[int] = []
        frontier = [node.id]
        known = {node.id: children} if children is not None else {}
        while frontier:
            parent = frontier.pop()
            kids = known.pop(parent, None)
            for child in (
                kids if kids is not None else self.backend.tree_nodes(thread, parent=parent)
            ):
                assert child.id is not None
                if child.kind == "leaf":
                    if not (live and child.archived):
                        out.append(child.id)
                else:
                    frontier.append(child.id)
        return out

    def node_messages(
        self,
        thread: Thread,
        node: NodeRow,
        *,
        live: bool = False,
        children: Sequence[NodeRow] | None = None,
    ) -> list[Message]:
        """The messages under a node, in thread order, archived leaves included
        unless ``live``; ``children`` as for :meth:`subtree_leaves`.

        A node's index range can span other branches after a reorganisation, so
        messages are taken by leaf membership, not by range alone.
        """
        leaves = set(self.subtree_leaves(thread, node, live=live, children=children))
        if node.last_index - node.first_index + 1 <= 2 * max(node.message_count, 1):
            # A compact range (no reorganisation spread it): read it and keep our leaves'.
            rows = self.backend.messages(thread, start=node.first_index, end=node.last_index + 1)
            owner = self.backend.message_leaves([r.rowid for r in rows])
            return [r.message for r in rows if owner.get(r.rowid) in leaves]
        return [r.message for r in self.backend.leaf_messages(thread, sorted(leaves))]

    def digest(
        self,
        thread: Thread,
        node: NodeRow,
        children: Sequence[NodeRow] | None = None,
        messages: Sequence[Message] | None = None,
        *,
        holds_leaf: bool = False,
    ) -> Digest:
        """The heuristic name, summary and keyphrases of a node. ``messages``: its live
        messages in thread order, when the caller holds them (the grower's cursor);
        ``holds_leaf``: the caller knows an exchange hangs right under the node."""
        assert node.id is not None
        if messages and holds_leaf:
            # A node with a leaf among its children is named from its messages
            # whatever its other children are: reading them (a round trip per
            # topic frozen by an import) would decide nothing.
            return self._digest_messages(messages)
        kids = (
            list(children)
            if children is not None
            else self.backend.tree_nodes(thread, parent=node.id)
        )
        topic_kids = [k for k in kids if k.kind in TOPIC_KINDS]
        if topic_kids and len(topic_kids) == len(kids) and all(k.name for k in topic_kids):
            return digest_children(
                [(k.name, k.keyphrases) for k in topic_kids],
                max_words=self.config.summary_words,
                group=node.kind == "group",
            )
        # Archived exchanges are out of recall, and a summary is recalled: they name a
        # topic only when it holds nothing else (it is then archived itself).
        if not messages:
            messages = self.node_messages(
                thread, node, live=True, children=kids
            ) or self.node_messages(thread, node, children=kids)
        return self._digest_messages(messages)

    def _digest_messages(self, messages: Sequence[Message]) -> Digest:
        terms = {t for m in messages for t in analyze(m.content)}
        df, n_docs = self.frequencies(list(terms))
        return digest_messages(messages, df, n_docs, max_words=self.config.summary_words)

    def name_node(
        self,
        thread: Thread,
        node: NodeRow,
        children: Sequence[NodeRow] | None = None,
        messages: Sequence[Message] | None = None,
        *,
        holds_leaf: bool = False,
    ) -> None:
        """Give a node its name, summary and keyphrases, and index and embed them
        (``messages`` and ``holds_leaf`` as for :meth:`digest`)."""
        self._place_messages()
        digest = self.digest(thread, node, children, messages, holds_leaf=holds_leaf)
        node.keyphrases = digest.keyphrases
        if node.origin == "llm" and node.name:
            node.summary = digest.summary  # the LLM's name stays; summary is extractive for now
        else:
            node.name, node.summary = digest.name, digest.summary
        self.index_summary(thread, node)

    def index_summary(self, thread: Thread, node: NodeRow) -> None:
        assert node.id is not None
        text = summary_text(node)
        node.chash = content_hash(text)
        self.backend.index_nodes("topic", {node.id: " ".join(analyze(text))})
        if self._unembedded is not None:
            self._unembedded[node.chash] = text  # embedded with the others at the end of grow
        else:
            self._embed_summaries({node.chash: text})

    def _embed_summaries(self, texts: Mapping[str, str]) -> None:
        """Embed and store summary texts (by content hash) that have no vector yet."""
        if not texts:
            return
        model = self.embedder.model_id
        known = self.backend.vectors(model, list(texts))
        todo = [h for h in texts if h not in known]
        if not todo:
            return
        try:
            vecs = self.embedder.embed_many([texts[h] for h in todo])
        except Exception as exc:  # the summary vector is derived; recall copes without it
            log.warning("cannot embed topic summaries: %s", exc)
            return
        self.backend.put_vectors(model, dict(zip(todo, vecs)))

    def reindex_above(self, thread: Thread, leaf_ids: Sequence[int]) -> None:
        """Index again the content of every topic above these leaves (after they were
        archived or restored), leaving names and summaries as they are."""
        pending = {n.parent_id for n in self.backend.tree_nodes(thread, ids=list(leaf_ids))}
        seen: set[int] = set()
        while pending:
            ids = sorted(i for i in pending if i is not None and i not in seen)
            seen.update(ids)
            pending = set()
            for node in self.backend.tree_nodes(thread, ids=ids) if ids else []:
                if node.kind == "topic":
                    self._index_segment(thread, node)
                    self._mark_archived(thread, node)
                pending.add(node.parent_id)

    def _all_archived(self, thread: Thread, node: NodeRow) -> bool:
        """A topic is archived when every exchange under it is: recall then leaves out
        its name and summary too (they quoted the archived words)."""
        return not self.subtree_leaves(thread, node, live=True)

    def _mark_archived(self, thread: Thread, node: NodeRow) -> None:
        archived = self._all_archived(thread, node)
        if node.archived != archived:
            node.archived = archived
            self.backend.put_nodes(thread, [node])

    def _index_segment(self, thread: Thread, node: NodeRow) -> None:
        """Index the whole content of a topic that holds leaves, for turn ranking
        (archived exchanges left out: search does not reach them)."""
        assert node.id is not None
        messages = self.node_messages(thread, node, live=True)
        terms = " ".join(t for m in messages for t in analyze_message(m.content, m.speaker))
        self.backend.index_nodes("segment", {node.id: terms})

    def llm_describe(self, thread: Thread, node: NodeRow) -> tuple[str, str] | None:
        """The LLM's name and summary for a frozen topic (None if it failed). Writes
        nothing: the answer can take seconds, and the tree may change meanwhile."""
        if self.llm is None or node.kind == "leaf":
            return None
        digest_source = self.node_messages(thread, node)
        text = "\n".join(m.text for m in digest_source)[-12000:]
        validate = validate_digest(self.config.summary_words)
        try:
            described: tuple[str, str] = self.llm.complete_json(
                [
                    {"role": "system", "content": LLM_SUMMARY_PROMPT % self.config.summary_words},
                    {"role": "user", "content": text},
                ],
                validate=validate,
                feature="topic_summaries",
                max_tokens=200,
            )
        except LLMError as exc:
            log.info("LLM summary unusable, keeping the extractive one: %s", exc)
            return None
        return described

    def apply_description(self, thread: Thread, node: NodeRow, name: str, summary: str) -> bool:
        """Give a topic the LLM's name and summary, if it is still the topic they
        describe: read again in the write, and only its description changed (writing
        back the row read before the LLM answered undid any move made meanwhile)."""
        with self.backend.transaction():
            fresh = self.backend.tree_nodes(thread, ids=[node.id]) if node.id else []
            if not fresh or not fresh[0].frozen or fresh[0].chash != node.chash:
                return False
            current = fresh[0]
            current.name, current.summary, current.origin = name, summary, "llm"
            self.index_summary(thread, current)
            self.backend.put_nodes(thread, [current])
        return True

    # -- forgetting ---------------------------------------------------------------------------

    def forgotten(self, thread: Thread, leaf_ids: set[int]) -> None:
        """Repair the tree after messages of these leaves were deleted.

        Emptied leaves and topics go; every ancestor of what changed has its
        counts and ranges recomputed and, if frozen, its name, summary and
        indexes redone, so no summary keeps quoting forgotten text.
        """
        if not leaf_ids:
            return
        touched: set[int] = set()
        gone: list[int] = []
        for leaf in self.backend.tree_nodes(thread, ids=sorted(leaf_ids)):
            assert leaf.id is not None
            rows = self.backend.messages(thread, start=leaf.first_index, end=leaf.last_index + 1)
            owner = self.backend.message_leaves([r.rowid for r in rows])
            mine = [r.message for r in rows if owner.get(r.rowid) == leaf.id]
            if not mine:
                gone.append(leaf.id)
            else:
                leaf.first_index, leaf.last_index = mine[0].index, mine[-1].index
                leaf.first_at = min(m.timestamp for m in mine)
                leaf.last_at = max(m.timestamp for m in mine)
                leaf.message_count = len(mine)
                self.backend.put_nodes(thread, [leaf])
            if leaf.parent_id is not None:
                touched.add(leaf.parent_id)
        if gone:
            self.backend.delete_nodes(thread, gone)
        self._refresh_upwards(thread, touched)
        state = self.backend.tree_state(thread)
        alive = {
            n.id
            for n in self.backend.tree_nodes(
                thread, ids=[i for i in (state.active_id, state.leaf_id) if i is not None]
            )
        }
        if state.active_id not in alive or (
            state.leaf_id is not None and state.leaf_id not in alive
        ):
            # The growing edge was forgotten: the next message starts a fresh topic.
            state = TreeState(0, None, None, state.next_seq)
        self.backend.set_tree_state(thread, state)
        self.forget_cursor(thread)

    def _refresh_upwards(self, thread: Thread, node_ids: set[int]) -> None:
        """Recompute nodes from their children, deepest first, then their parents."""
        pending = set(node_ids)
        while pending:
            nodes = self.backend.tree_nodes(thread, ids=sorted(pending))
            pending = set()
            # Deepest first is not known without walking; a node refreshed before a child
            # is simply refreshed again when the child's parent comes round.
            for node in nodes:
                assert node.id is not None
                kids = self.backend.tree_nodes(thread, parent=node.id)
                if node.parent_id is not None:
                    pending.add(node.parent_id)
                if not kids:
                    self.backend.delete_nodes(thread, [node.id])
                    continue
                node.first_index = min(k.first_index for k in kids)
                node.last_index = max(k.last_index for k in kids)
                node.first_at = min(k.first_at for k in kids)
                node.last_at = max(k.last_at for k in kids)
                node.message_count = sum(k.message_count for k in kids)
                node.child_count = len(kids)
                if node.kind == "topic":
                    self._index_segment(thread, node)
                    node.archived = self._all_archived(thread, node)
                if node.frozen:
                    node.origin = "heuristic"  # an LLM summary may quote what was forgotten
                    self.name_node(thread, node, kids)
                self.backend.put_nodes(thread, [node])
