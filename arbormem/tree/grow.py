"""Growing a thread's topic tree, one message at a time.

Shape: the thread's (virtual) root holds one topic per session; a session
topic holds the topics found inside it; topics hold leaves, one leaf per
exchange (a ``user`` message opens an exchange once the previous one has a
reply; everything else joins the open exchange). New topics always hang from
the active topic or one of its ancestors, so time runs down the tree.

Each new message either continues the active topic or opens a new one. With
no LLM the boundary decision of :mod:`arbormem.tree.segment` weighs the
message against the active topic's last messages and the whole topic, with
the dialogue's shape (questions and their answers, greetings, farewells);
silence and the topic's size can also close a topic. Any user or assistant
message may open a topic, a reply included: it then starts a leaf of its
own. With an LLM configured the LLM decides at each new exchange instead
(and replies stay with their exchange); its JSON answer is validated and the
heuristic decides whenever the call fails or the answer is unusable.

Width control: before a node gets a child beyond ``max_children``, its
oldest run of frozen children of the same kind and level is moved under a
new *group* node, so every layer stays narrow and the depth grows with the
logarithm of the thread's length.

A topic that leaves the active path is *frozen*: it gets its name, summary
and keyphrases (:mod:`arbormem.tree.summarize`), its summary is embedded and
indexed for lexical search, and its content stays indexed as a segment.

Everything here runs inside the caller's write transaction: the tree lands
with the messages or not at all. The tree is never the only copy of anything;
it can always be rebuilt from the messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder
from arbormem.errors import LLMError
from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.types import NodeRow, Row, Thread, TreeState
from arbormem.text import analyze_message
from arbormem.tree.config import TreeConfig
from arbormem.tree.naming import TopicNaming
from arbormem.tree.segment import TopicState, opens_topic
from arbormem.tree.summarize import (
    clean_llm_name,
)

log = logging.getLogger(__name__)


#: A growing topic's content is indexed again (as its segment) once it has grown by
#: this share since it was last indexed. Rewriting it on every exchange would cost
#: each exchange the whole topic so far: quadratic in a long session. The index of
#: a topic still growing misses at most this share of its newest terms, which its
#: turns' own keys carry meanwhile; it is exact from when the topic freezes, and
#: :meth:`TreeGrower.flush_segments` (on close) catches the rest up.
SEGMENT_GROWTH = 0.25


#: Most topics on a path from the root level down (the session's topic included).
MAX_DEPTH = 8

#: Characters of each message a topic decision's prompt shows.
DECISION_MESSAGE_CHARS = 1_000


@dataclass
class Decision:
    """Where the next exchange goes: ``parent`` is an index into the active path
    (-1 for the root), or None to continue the active topic."""

    new_topic: bool
    parent: int | None = None
    origin: str = "heuristic"
    name: str | None = None


@dataclass
class Cursor:
    """The growing edge of one thread's tree, cached between writes."""

    thread: Thread | None = None
    version: int = -1
    path: list[NodeRow] = field(default_factory=list)
    leaf: NodeRow | None = None
    leaf_has_reply: bool = False
    session: str | None = None
    last_at: datetime | None = None
    root_children: int = 0
    next_seq: int = 0
    #: What the boundary decision knows of the active topic, and its exchange count.
    topic: TopicState = field(default_factory=TopicState)
    exchanges: int = 0
    #: Indexed terms of every message under each node of the active path (its documents).
    docs: dict[int, list[str]] = field(default_factory=dict)
    #: How many of those terms each node's indexed segment holds (see SEGMENT_GROWTH).
    indexed: dict[int, int] = field(default_factory=dict)
    #: The live messages under the active topic (the path's last node, which exchanges
    #: join), in thread order, by its id: what naming it reads when it freezes, without
    #: reading them back from the store. Only its own: a session's topic is named from
    #: its topics' names, and a topic that gets a topic below it reads the store.
    messages: dict[int, list[Message]] = field(default_factory=dict)


class TreeGrower(TopicNaming):
    """Maintains the trees of all threads of one store."""

    def __init__(
        self,
        backend: Backend,
        embedder: Embedder,
        config: TreeConfig,
        llm: Any = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.config = config
        self.llm = llm
        self._cursors: dict[int, Cursor] = {}
        # Document frequencies only weight words, so slightly stale ones are fine: they
        # are cached and the cache is dropped now and then instead of queried per exchange.
        #: term -> (document frequency, store size when it was read); see ``frequencies``.
        self._df: dict[str, tuple[int, int]] = {}
        self._n_docs = 0
        #: Messages added by this process since ``_n_docs`` was read.
        self._added = 0
        #: Topics frozen since the owner last took this list (for LLM naming off the write path).
        self.frozen_since_naming: list[int] = []
        #: Summaries named during a ``grow``, embedded together at its end (hash -> text).
        self._unembedded: dict[str, str] | None = None
        #: Leaf of each message placed by a ``grow`` and not yet written (leaf id -> rowids).
        self._unplaced: dict[int, list[int]] = {}
        #: Threads whose growing topics' content index lags behind (see SEGMENT_GROWTH).
        self._lagging: dict[int, Thread] = {}
        #: The children of each topic a ``grow`` made (or read once), in order, as the
        #: very rows it keeps up to date, by parent id (ROOT for the root's): what
        #: naming a session's topic and width control read, without reading them
        #: back (see _adopt). Only for the ``grow`` under way.
        self._children: dict[int, list[NodeRow]] = {}

    # -- cursor -------------------------------------------------------------------------

    def cursor(self, thread: Thread) -> Cursor:
        state = self.backend.tree_state(thread)
        cur = self._cursors.get(thread.id)
        if cur is None or cur.version != state.version:
            cur = self._load_cursor(thread, state)
            self._cursors[thread.id] = cur
        return cur

    def forget_cursor(self, thread: Thread | None = None) -> None:
        if thread is None:
            self._cursors.clear()
        else:
            self._cursors.pop(thread.id, None)

    @contextmanager
    def dropped_on_failure(self) -> Iterator[None]:
        """Wrap a transaction that grows trees. Cursors change in memory as a tree
        grows; if the transaction fails and rolls back they describe a tree that was
        never stored, and one whose version another process then reaches was taken
        as current (a review's repro: a corrupt tree). They are dropped instead, and
        the next write reads them from the store."""
        try:
            yield
        except BaseException:
            self.forget_cursor()
            raise

    def _load_cursor(self, thread: Thread, state: TreeState) -> Cursor:
        cur = Cursor(thread=thread, version=state.version, next_seq=state.next_seq)
        cur.root_children = len(self.backend.tree_nodes(thread, parent=None))
        if state.active_id is None:
            return cur
        path: list[NodeRow] = []
        node_id: int | None = state.active_id
        while node_id is not None:
            found = self.backend.tree_nodes(thread, ids=[node_id])
            if not found:
                return Cursor(
                    thread=thread,
                    version=state.version,
                    next_seq=state.next_seq,
                    root_children=cur.root_children,
                )
            path.append(found[0])
            node_id = found[0].parent_id
        cur.path = list(reversed(path))
        if state.leaf_id is not None:
            leaves = self.backend.tree_nodes(thread, ids=[state.leaf_id])
            cur.leaf = leaves[0] if leaves else None
        active = cur.path[-1]
        rows = self.backend.messages(thread, start=active.first_index, end=active.last_index + 1)
        if rows:
            last = rows[-1].message
            cur.session, cur.last_at = last.session, last.timestamp
        if cur.leaf is not None:
            cur.leaf_has_reply = any(
                r.message.role == "assistant" and r.message.index >= cur.leaf.first_index
                for r in rows
            )
        cur.exchanges = len(self.backend.tree_nodes(thread, parent=active.id, kinds=["leaf"]))
        mine = self.node_messages(thread, active)
        ids = {m.id for m in mine}
        vectors = self.backend.vectors(self.embedder.model_id, [r.chash for r in rows])
        cur.topic = TopicState.of(
            (r.message.content, vectors.get(r.chash)) for r in rows if r.message.id in ids
        )
        for node in cur.path:
            assert node.id is not None
            live = self.node_messages(thread, node, live=True)
            cur.docs[node.id] = [t for m in live for t in analyze_message(m.content, m.speaker)]
            if node is active:
                cur.messages = {node.id: live}
        return cur

    # -- decisions ------------------------------------------------------------------------

    def heuristic_decision(
        self, cur: Cursor, message: Message, vec: np.ndarray | None, *, opening: bool = True
    ) -> Decision:
        """Continue the active topic or start a sibling of it. ``opening``: the message
        opens an exchange; a reply is judged on its content alone (silence and size
        never part a question from its answer)."""
        cfg = self.config
        sibling = Decision(True, len(cur.path) - 2)
        if opening:
            if cur.exchanges >= cfg.max_exchanges:
                return sibling
            silence = message.timestamp - cur.last_at if cur.last_at is not None else None
            if silence is not None and silence > timedelta(minutes=cfg.gap_minutes):
                return sibling
        if cur.exchanges < cfg.min_exchanges:
            return Decision(False)
        if opens_topic(
            cur.topic,
            message.content,
            vec,
            split_threshold=cfg.split_threshold,
            dense_weight=cfg.dense_weight,
        ):
            return sibling
        return Decision(False)

    def llm_decision(self, thread: Thread, message: Message) -> Decision | None:
        """Ask the LLM where the exchange opened by ``message`` belongs (None on failure)."""
        if self.llm is None or not self.config.llm_decisions:
            return None
        cur = self.cursor(thread)
        if not cur.path or message.session != cur.session:
            return None  # session boundaries are structural, not a judgement call
        options: list[dict[str, Any]] = [{"id": "root", "name": "(the whole conversation)"}]
        options += [
            {"id": n.id, "name": n.name or "(active topic, unnamed)", "summary": n.summary}
            for n in cur.path
        ]
        active = cur.path[-1]
        recent = self.backend.messages(
            thread, start=max(active.first_index, active.last_index - 5), end=active.last_index + 1
        )
        prompt = [
            {
                "role": "system",
                "content": (
                    "You organise a conversation into a tree of topics. Given the active path "
                    "of topics (outermost first) and the newest message, decide whether the "
                    'message continues the active topic. Answer JSON only: {"decision": '
                    '"continue"} or {"decision": "new", "parent": <id of the topic on the path '
                    'the new topic belongs under, or "root">, "name": "<2-5 words>"}.'
                ),
            },
            {
                "role": "user",
                "content": (
                    f"Active path: {options}\nRecent messages of the active topic:\n"
                    + "\n".join(f"- {_clip(r.message.text)}" for r in recent)
                    + f"\nNewest message: {_clip(message.text)}"
                ),
            },
        ]
        ids = [n.id for n in cur.path]

        def validate(value: Any) -> Decision:
            if not isinstance(value, Mapping) or value.get("decision") not in ("continue", "new"):
                raise ValueError("'decision' must be 'continue' or 'new'")
            if value["decision"] == "continue":
                return Decision(False, origin="llm")
            parent = value.get("parent")
            if parent == "root":
                index = -1
            elif parent in ids:
                index = ids.index(parent)
            else:
                raise ValueError(f"parent {parent!r} is not a topic on the active path")
            try:
                name: str | None = clean_llm_name(value.get("name"))
            except ValueError:
                name = None  # the extractive name will do
            return Decision(True, index, origin="llm", name=name)

        try:
            decision: Decision = self.llm.complete_json(
                prompt, validate=validate, feature="topic_decisions", max_tokens=80
            )
            return decision
        except LLMError as exc:
            log.info("LLM topic decision unusable, the heuristic decides: %s", exc)
            return None

    # -- growth -----------------------------------------------------------------------------

    def grow(
        self,
        thread: Thread,
        rows: Sequence[Row],
        vectors: Mapping[str, np.ndarray] | None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> None:
        """Place newly stored messages in the tree (inside the caller's transaction)."""
        if not self.config.enabled or not rows:
            return
        cur = self.cursor(thread)
        dirty: dict[int, NodeRow] = {}
        self._added += len(rows)
        self._unembedded, self._unplaced, self._children = {}, {}, {}
        try:
            with self.frequencies_ahead(r.message.content for r in rows):
                self._grow(thread, cur, rows, vectors, decisions, dirty)
            self._place_messages()
        finally:
            pending, self._unembedded, self._unplaced = self._unembedded, None, {}
            self._children = {}
        self._embed_summaries(pending)
        self.backend.put_nodes(thread, list(dirty.values()))
        active = cur.path[-1]
        assert active.id is not None
        self._index_segments(cur)
        state = self.backend.set_tree_state(
            thread, TreeState(0, active.id, cur.leaf.id if cur.leaf else None, cur.next_seq)
        )
        cur.version = state.version

    def _index_segments(self, cur: Cursor, *, every: bool = False) -> bool:
        """Index the content of the active path's topics that have grown enough since
        they were last indexed (``every``: that have grown at all). True if any was."""
        due: dict[int, str] = {}
        for node in cur.path:
            assert node.id is not None
            doc = cur.docs.get(node.id, [])
            done = cur.indexed.get(node.id)
            if done is None or len(doc) - done >= (1 if every else max(1, done * SEGMENT_GROWTH)):
                due[node.id] = " ".join(doc)
                cur.indexed[node.id] = len(doc)
        if due:
            self.backend.index_nodes("segment", due)
        if cur.thread is not None:
            if any(
                cur.indexed.get(n.id or 0, 0) < len(cur.docs.get(n.id or 0, [])) for n in cur.path
            ):
                self._lagging[cur.thread.id] = cur.thread
            else:
                self._lagging.pop(cur.thread.id, None)
        return bool(due)

    def flush_segments(self, thread: Thread | None = None) -> None:
        """Index the whole content of the active topics whose index this process left
        behind (in every thread, or in one). The caller holds the store's write lock."""
        for lagging in list(self._lagging.values()):
            if thread is not None and lagging.id != thread.id:
                continue
            with self.backend.transaction():
                # The cursor is read again if anything moved the tree meanwhile (a
                # forget, a rename): its documents then come from the stored messages.
                cur = self.cursor(lagging)
                self._index_segments(cur, every=True)
            self._lagging.pop(lagging.id, None)

    def _grow(
        self,
        thread: Thread,
        cur: Cursor,
        rows: Sequence[Row],
        vectors: Mapping[str, np.ndarray] | None,
        decisions: Mapping[str, Decision] | None,
        dirty: dict[int, NodeRow],
    ) -> None:
        for row in rows:
            m = row.message
            vec = vectors.get(row.chash) if vectors else None
            if not cur.path or m.session != cur.session:
                self._freeze_path(thread, cur, 0, dirty)
                session_topic = self._new_topic(thread, cur, None, m, dirty)
                cur.path = [session_topic]
                cur.path.append(self._new_topic(thread, cur, session_topic, m, dirty))
                self._reset_active(cur)
                self._open_leaf(thread, cur, m, dirty)
            else:
                opening = cur.leaf is None or (m.role == "user" and cur.leaf_has_reply)
                if opening:
                    decision = (decisions or {}).get(m.id) or self.heuristic_decision(cur, m, vec)
                    if decision.parent is not None and decision.parent >= len(cur.path):
                        decision = self.heuristic_decision(cur, m, vec)
                elif m.role in ("user", "assistant") and not self._llm_decides():
                    # A reply (or a second user message) can change the subject too: it
                    # then opens a leaf of its own in the new topic.
                    decision = self.heuristic_decision(cur, m, vec, opening=False)
                else:
                    decision = Decision(False)
                if decision.new_topic:
                    keep = decision.parent + 1 if decision.parent is not None else len(cur.path) - 1
                    # At most MAX_DEPTH topics deep: a model that always answers "under
                    # the active topic" nested one level per exchange, past what views
                    # and recall can walk.
                    keep = max(0, min(keep, len(cur.path), MAX_DEPTH - 1))
                    self._freeze_path(thread, cur, keep, dirty)
                    parent = cur.path[-1] if cur.path else None
                    topic = self._new_topic(
                        thread,
                        cur,
                        parent,
                        m,
                        dirty,
                        origin=decision.origin,
                        name=decision.name or "",
                    )
                    cur.path.append(topic)
                    self._reset_active(cur)
                if opening or decision.new_topic:
                    self._open_leaf(thread, cur, m, dirty)
            self._attach(cur, row, vec, dirty)
            assert cur.leaf is not None and cur.leaf.id is not None
            self._unplaced.setdefault(cur.leaf.id, []).append(row.rowid)

    def _llm_decides(self) -> bool:
        """With an LLM deciding topics, a topic changes only where an exchange opens."""
        return self.llm is not None and self.config.llm_decisions

    def _place_messages(self) -> None:
        """Write the leaf of the messages placed so far (before anything reads them back)."""
        if self._unplaced:
            self.backend.set_message_leaves(self._unplaced)
        self._unplaced = {}

    def _reset_active(self, cur: Cursor) -> None:
        cur.topic.reset()
        cur.exchanges = 0
        cur.leaf, cur.leaf_has_reply = None, False

    def _new_node(
        self, cur: Cursor, parent: NodeRow | None, kind: str, m: Message, **extra: Any
    ) -> NodeRow:
        node = NodeRow(
            id=None,
            parent_id=parent.id if parent else None,
            kind=kind,
            seq=cur.next_seq,
            first_index=m.index,
            last_index=m.index,
            first_at=m.timestamp,
            last_at=m.timestamp,
            **extra,
        )
        cur.next_seq += 1
        return node

    def _new_topic(
        self,
        thread: Thread,
        cur: Cursor,
        parent: NodeRow | None,
        m: Message,
        dirty: dict[int, NodeRow],
        origin: str = "heuristic",
        name: str = "",
    ) -> NodeRow:
        self._make_room(thread, cur, parent, dirty)
        topic = self._new_node(cur, parent, "topic", m, origin=origin, name=name)
        self.backend.put_nodes(thread, [topic])
        self._count_child(cur, parent, dirty)
        assert topic.id is not None
        self._adopt(parent, topic)
        self._children[topic.id] = []
        cur.docs[topic.id] = []
        cur.messages = {topic.id: []}  # the topic above it, if on the path, reads the store
        return topic

    def _open_leaf(
        self, thread: Thread, cur: Cursor, m: Message, dirty: dict[int, NodeRow]
    ) -> None:
        parent = cur.path[-1]
        self._make_room(thread, cur, parent, dirty)
        leaf = self._new_node(cur, parent, "leaf", m)
        self.backend.put_nodes(thread, [leaf])
        self._count_child(cur, parent, dirty)
        self._adopt(parent, leaf)
        cur.leaf, cur.leaf_has_reply = leaf, False
        cur.exchanges += 1

    def _adopt(self, parent: NodeRow | None, child: NodeRow) -> None:
        """Count a new child among its parent's known children, if they are known: a
        topic made by this ``grow`` got every child it has from it, in order of
        ``seq`` (the order the store gives them in)."""
        kids = self._children.get(_key(parent))
        if kids is not None:
            kids.append(child)

    def _count_child(self, cur: Cursor, parent: NodeRow | None, dirty: dict[int, NodeRow]) -> None:
        if parent is None:
            cur.root_children += 1
        else:
            parent.child_count += 1
            assert parent.id is not None
            dirty[parent.id] = parent

    def _attach(
        self, cur: Cursor, row: Row, vec: np.ndarray | None, dirty: dict[int, NodeRow]
    ) -> None:
        m = row.message
        assert cur.leaf is not None
        for node in [*cur.path, cur.leaf]:
            # A live message makes an archived topic (all of whose exchanges had been
            # archived) live again: it kept recall from finding the new exchange's topic.
            node.archived = False
            node.last_index = max(node.last_index, m.index)
            node.first_index = min(node.first_index, m.index)
            node.last_at = max(node.last_at, m.timestamp)
            node.first_at = min(node.first_at, m.timestamp)
            node.message_count += 1
            assert node.id is not None
            dirty[node.id] = node
        if m.role == "assistant":
            cur.leaf_has_reply = True
        cur.session, cur.last_at = m.session, m.timestamp
        cur.topic.add(m.content, vec)
        indexed = analyze_message(m.content, m.speaker)
        for node in cur.path:
            assert node.id is not None
            cur.docs.setdefault(node.id, []).extend(indexed)
        mine = cur.messages.get(cur.path[-1].id or 0)
        if mine is not None:
            mine.append(m)

    # -- width control ------------------------------------------------------------------------

    def _make_room(
        self, thread: Thread, cur: Cursor, parent: NodeRow | None, dirty: dict[int, NodeRow]
    ) -> None:
        count = cur.root_children if parent is None else parent.child_count
        if count < self.config.max_children:
            return
        known = self._children.get(_key(parent))
        if known is None:
            # Read once per grow, then kept as the grow changes them. Each row this
            # grow holds (the active path's, and those it changed) is the held row
            # itself: the freshest state, which later changes keep fresh.
            held = {n.id: n for n in [*cur.path, *dirty.values()]}
            known = self._children[_key(parent)] = [
                held.get(child.id) or child
                for child in self.backend.tree_nodes(thread, parent=parent.id if parent else None)
            ]
        children = list(known)
        pinned = {n.id for n in cur.path} | ({cur.leaf.id} if cur.leaf else set())
        run = self._groupable_run(children, pinned)
        if len(run) < 2:
            return
        group = NodeRow(
            id=None,
            parent_id=parent.id if parent else None,
            kind="group",
            seq=run[0].seq,
            first_index=min(n.first_index for n in run),
            last_index=max(n.last_index for n in run),
            first_at=min(n.first_at for n in run),
            last_at=max(n.last_at for n in run),
            level=1 + max((n.level if n.kind == "group" else 0) for n in run),
            message_count=sum(n.message_count for n in run),
            child_count=len(run),
            frozen=True,
        )
        self.backend.put_nodes(thread, [group])
        for n in run:
            n.parent_id = group.id
            assert n.id is not None
            dirty[n.id] = n
        self.backend.put_nodes(thread, run)
        self.name_node(thread, group, run)
        self.backend.put_nodes(thread, [group])
        # The group takes the run's place (and its first child's seq).
        first = next(i for i, n in enumerate(known) if n is run[0])
        known[first : first + len(run)] = [group]
        if parent is None:
            cur.root_children = count - len(run) + 1
        else:
            parent.child_count = count - len(run) + 1
            assert parent.id is not None
            dirty[parent.id] = parent

    @staticmethod
    def _groupable_run(children: Sequence[NodeRow], active: set[int | None]) -> list[NodeRow]:
        """The run of consecutive frozen children to group when a node is full.

        Among the runs of two or more consecutive movable children of the same
        kind and level, the lowest level wins (plain children before groups),
        then the oldest. Groups thus fill up like the digits of a counter, and
        the depth grows with the logarithm of the number of children.
        """

        def level(n: NodeRow) -> int:
            return n.level if n.kind == "group" else 0

        runs: list[list[NodeRow]] = []
        run: list[NodeRow] = []
        for child in children:
            movable = child.id not in active and (child.frozen or child.kind == "leaf")
            if movable and run and level(run[-1]) == level(child):
                run.append(child)
                continue
            if len(run) >= 2:
                runs.append(run)
            run = [child] if movable else []
        if len(run) >= 2:
            runs.append(run)
        if runs:
            return min(runs, key=lambda r: level(r[0]))  # min keeps the oldest on ties
        # No two neighbours share a level: join the adjacent pair with the lowest
        # levels (a carry, as in counting), which keeps the tree from turning into a chain.
        pairs = [
            (max(level(a), level(b)), i)
            for i, (a, b) in enumerate(pairwise(children))
            if a.id not in active and b.id not in active
        ]
        if not pairs:
            return []
        _, i = min(pairs)
        return [children[i], children[i + 1]]

    # -- freezing and naming ---------------------------------------------------------------------

    def _freeze_path(
        self, thread: Thread, cur: Cursor, keep: int, dirty: dict[int, NodeRow]
    ) -> None:
        """Freeze the active path below its first ``keep`` nodes, deepest first."""
        for node in reversed(cur.path[keep:]):
            assert node.id is not None
            doc = cur.docs.pop(node.id, None)
            if doc is not None and len(doc) != cur.indexed.get(node.id):
                self.backend.index_nodes("segment", {node.id: " ".join(doc)})
            cur.indexed.pop(node.id, None)
            node.frozen = True
            # The open exchange's leaf hangs from the active topic (a new topic always
            # opens one, and width control never moves it): that topic is named from
            # the messages the cursor holds, without reading its children.
            self.name_node(
                thread,
                node,
                self._children.pop(node.id, None),
                messages=cur.messages.pop(node.id, None),
                holds_leaf=cur.leaf is not None and cur.leaf.parent_id == node.id,
            )
            # Stored now: the parent frozen next is named from its children's rows.
            self.backend.put_nodes(thread, [node])
            dirty.pop(node.id, None)
            if self.llm is not None:
                self.frozen_since_naming.append(node.id)
        del cur.path[keep:]


#: The key of the root's children in TreeGrower._children (node ids are positive).
ROOT = -1


def _key(parent: NodeRow | None) -> int:
    return ROOT if parent is None else (parent.id or 0)


def _clip(text: str) -> str:
    return text if len(text) <= DECISION_MESSAGE_CHARS else text[:DECISION_MESSAGE_CHARS] + "…"
