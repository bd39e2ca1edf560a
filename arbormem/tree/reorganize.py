"""Reorganising a tree at rest: merging related branches, archiving trivial leaves.

Phases:

1. gather the frozen topics that hold exchanges (off the active path);
2. give any that lack one a summary and a summary vector;
3. find candidate pairs whose summary vectors are at least
   ``similarity_threshold`` apart, blockwise with matrix products (never a
   Python loop over all pairs);
4. merge a pair (the newer topic becomes a child of the older) only when all
   four rules hold: the older absorbs the newer; neither is on the active
   path; the similarity clears the threshold; and a veto passes: the LLM's
   when one is configured, otherwise a stricter check that the two share key
   entities and at least two key terms;
5. on request, soft-archive trivial leaves (user and assistant messages all
   under 20 words and stating no fact: see :mod:`arbormem.tree.trivial`): kept
   and restorable, left out of recall.

Planning happens outside the write lock; the changes land in one transaction
and only if the tree did not change in between, so a concurrent ``add`` is
never raced. Every run is logged with what it takes to undo it. Raw messages
are never touched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from arbormem.errors import LLMError, NotFound, TreeError
from arbormem.models import Message
from arbormem.store.types import NodeRow, Thread, TreeState
from arbormem.text import term_of
from arbormem.tree.grow import TreeGrower
from arbormem.tree.trivial import is_trivial

log = logging.getLogger(__name__)


@dataclass
class _Plan:
    merges: list[tuple[int, int, float]]  # (older id, newer id, similarity)
    skipped: int
    archive: list[int]
    version: int


def _stems(phrases: list[str]) -> set[str]:
    return {t for p in phrases for w in p.split() if (t := term_of(w))}


def _entities(phrases: list[str]) -> set[str]:
    return {t for p in phrases for w in p.split() if w[:1].isupper() and (t := term_of(w))}


def heuristic_veto(a: NodeRow, b: NodeRow) -> bool:
    """True when the merge must NOT happen: the topics share too little.

    Without an LLM to judge meaning, two topics pass only when their key terms
    overlap substantially (at least two shared, and a third of the smaller set)
    and, whenever either names something (a capitalised keyphrase), they name
    the same thing. Two topics that merely share one word ("Python" the snake
    and "Python" the language) fail.
    """
    ka, kb = _stems(a.keyphrases), _stems(b.keyphrases)
    shared = ka & kb
    if len(shared) < 2 or len(shared) < min(len(ka), len(kb)) / 3:
        return True
    ea, eb = _entities(a.keyphrases), _entities(b.keyphrases)
    return bool(ea or eb) and not (ea & eb)


class Reorganizer:
    """Runs and undoes reorganisations of one store's trees."""

    def __init__(self, grower: TreeGrower) -> None:
        self.grower = grower
        self.backend = grower.backend

    def _active_ids(self, thread: Thread, state: TreeState) -> set[int]:
        ids: set[int] = set()
        node_id = state.active_id
        while node_id is not None:
            ids.add(node_id)
            found = self.backend.tree_nodes(thread, ids=[node_id])
            node_id = found[0].parent_id if found else None
        if state.leaf_id is not None:
            ids.add(state.leaf_id)
        return ids

    def _llm_veto(self, a: NodeRow, b: NodeRow) -> bool | None:
        llm = self.grower.llm
        if llm is None:
            return None

        def validate(value: Any) -> bool:
            if not isinstance(value, Mapping) or not isinstance(value.get("merge"), bool):
                raise ValueError('expected {"merge": true|false}')
            return not value["merge"]

        prompt = [
            {
                "role": "system",
                "content": (
                    "Two topics from one person's conversation history may be about the same "
                    "subject. Merge them only if they are about the same thing (not merely sharing "
                    'a word). Answer JSON only: {"merge": true} or {"merge": false}.'
                ),
            },
            {
                "role": "user",
                "content": (
                    f"Topic A: {a.name}: {a.summary} ({', '.join(a.keyphrases)})\n"
                    f"Topic B: {b.name}: {b.summary} ({', '.join(b.keyphrases)})"
                ),
            },
        ]
        try:
            vetoed: bool = llm.complete_json(
                prompt, validate=validate, feature="merge_veto", max_tokens=20
            )
            return vetoed
        except LLMError as exc:
            log.info("LLM veto unusable, the stricter heuristic decides: %s", exc)
            return None

    # -- planning ---------------------------------------------------------------------------

    def plan(
        self, thread: Thread, similarity_threshold: float, prune_trivial_leaves: bool
    ) -> _Plan:
        state = self.backend.tree_state(thread)
        active = self._active_ids(thread, state)
        topics = [
            n
            for n in self.backend.tree_nodes(thread, kinds=["topic"], frozen=True)
            if n.id not in active and not n.archived
        ]
        holders = {n.parent_id for n in self.backend.tree_nodes(thread, kinds=["leaf"])}
        segments = [n for n in topics if n.id in holders]
        for node in segments:
            if not node.summary or not node.chash:
                self.grower.name_node(thread, node)
                self.backend.put_nodes(thread, [node])
        model = self.grower.embedder.model_id
        vectors = self.backend.vectors(model, [n.chash for n in segments if n.chash])
        missing = [n for n in segments if n.chash not in vectors]
        for node in missing:
            self.grower.index_summary(thread, node)
        if missing:
            vectors = self.backend.vectors(model, [n.chash for n in segments if n.chash])
        usable = [n for n in segments if n.chash in vectors]
        merges: list[tuple[int, int, float]] = []
        skipped = 0
        if len(usable) >= 2:
            matrix = np.vstack([vectors[n.chash] for n in usable if n.chash]).astype(np.float32)
            order = np.argsort([n.seq for n in usable])
            usable = [usable[i] for i in order]
            matrix = matrix[order]
            pairs: list[tuple[float, int, int]] = []
            for start in range(0, len(usable), 1024):
                block = matrix[start : start + 1024] @ matrix.T
                rows, cols = np.nonzero(block >= similarity_threshold)
                for r, c in zip(rows.tolist(), cols.tolist()):
                    i = start + r
                    if c > i:  # each unordered pair once, older first
                        pairs.append((float(block[r, c]), i, c))
            pairs.sort(key=lambda p: -p[0])
            moved: set[int] = set()
            # A topic is not moved out of a parent it is the last child of: that would
            # leave an empty topic behind (a session with nothing in it).
            structure = {n.id: n for n in self.backend.tree_nodes(thread, kinds=["topic", "group"])}
            siblings: dict[int | None, int] = {}
            for n in structure.values():
                siblings[n.parent_id] = siblings.get(n.parent_id, 0) + 1

            def ancestors(node_id: int | None) -> set[int]:
                out: set[int] = set()
                while node_id is not None and node_id in structure and node_id not in out:
                    out.add(node_id)
                    node_id = structure[node_id].parent_id
                return out

            for sim, i, j in pairs:
                older, newer = usable[i], usable[j]
                assert older.id is not None and newer.id is not None
                mover = newer
                wrapper = structure.get(newer.parent_id) if newer.parent_id is not None else None
                if wrapper is not None and siblings.get(wrapper.id, 0) <= 1:
                    # The newer topic is all its session holds: move the session's topic
                    # instead of leaving it empty.
                    if wrapper.kind != "topic" or wrapper.id in active:
                        skipped += 1
                        continue
                    mover = wrapper
                assert mover.id is not None
                if mover.parent_id is not None and siblings.get(mover.parent_id, 0) <= 1:
                    # Nor is a session's topic moved out of a width group it is the last
                    # child of: the group would be deleted, and no undo could bring it back.
                    skipped += 1
                    continue
                if (
                    mover.id in moved
                    or older.id in moved
                    or mover.parent_id == older.id
                    or mover.id in ancestors(older.id)
                ):
                    continue
                vetoed = self._llm_veto(older, newer)
                if vetoed is None:
                    vetoed = heuristic_veto(older, newer)
                if vetoed:
                    skipped += 1
                    continue
                merges.append((older.id, mover.id, sim))
                moved.add(mover.id)
                siblings[mover.parent_id] = siblings.get(mover.parent_id, 0) - 1
                siblings[older.id] = siblings.get(older.id, 0) + 1
                structure[mover.id].parent_id = older.id
        archive: list[int] = []
        if prune_trivial_leaves:
            archive = self._trivial_leaves(thread, active)
        return _Plan(merges, skipped, archive, state.version)

    def _trivial_leaves(self, thread: Thread, active: set[int]) -> list[int]:
        out = []
        leaves = [
            n
            for n in self.backend.tree_nodes(thread, kinds=["leaf"])
            if not n.archived and n.id not in active
        ]
        by_leaf: dict[int, list[Message]] = {}
        rows = list(self.backend.iter_rows(thread))
        owner = self.backend.message_leaves([r.rowid for r in rows])
        for r in rows:
            leaf_id = owner.get(r.rowid)
            if leaf_id is not None:
                by_leaf.setdefault(leaf_id, []).append(r.message)
        for leaf in leaves:
            assert leaf.id is not None
            if is_trivial(by_leaf.get(leaf.id, [])):
                out.append(leaf.id)
        return out

    # -- applying ---------------------------------------------------------------------------

    def run(
        self,
        thread: Thread,
        *,
        similarity_threshold: float = 0.55,
        prune_trivial_leaves: bool = False,
    ) -> dict[str, Any]:
        """Plan, then apply in one transaction if nothing changed meanwhile."""
        started = time.perf_counter()
        plan = self.plan(thread, similarity_threshold, prune_trivial_leaves)
        undo: list[dict[str, Any]] = []
        merged = 0
        with self.backend.transaction():
            state = self.backend.tree_state(thread)
            current = self.backend.thread(thread.user, thread.agent, tenant=thread.tenant)
            changed = None
            if current is None or current.id != thread.id:
                changed = "the thread was forgotten"
            elif state.version != plan.version:
                changed = "the tree changed while planning"
            if changed:
                return {
                    "merged": 0,
                    "pruned": 0,
                    "skipped": len(plan.merges) + plan.skipped,
                    "duration_secs": round(time.perf_counter() - started, 3),
                    "log_id": None,
                    "aborted": changed,
                }
            touched: set[int] = set()
            for older_id, newer_id, _ in plan.merges:
                found = {n.id: n for n in self.backend.tree_nodes(thread, ids=[older_id, newer_id])}
                older, newer = found.get(older_id), found.get(newer_id)
                if older is None or newer is None:
                    continue
                undo.extend(self._make_room(thread, older))
                undo.append({"op": "move", "node": newer_id, "parent": newer.parent_id})
                if newer.parent_id is not None:
                    touched.add(newer.parent_id)
                newer.parent_id = older_id
                self.backend.put_nodes(thread, [newer])
                touched.add(older_id)
                merged += 1
            if plan.archive:
                self.backend.set_archived(thread, plan.archive, True)
                undo.append({"op": "archive", "leaves": plan.archive})
                parents = self.backend.tree_nodes(thread, ids=plan.archive)
                touched.update(n.parent_id for n in parents if n.parent_id is not None)
            self.grower._refresh_upwards(thread, touched)
            # Undo needs the messages that are here now: a forget in between may give the
            # ids of the nodes named here to others. Only a forget lowers the number of
            # messages up to the last row (archiving and restoring do not; they raise the
            # generation, which used to be the mark and refused those undos).
            upto = self.backend.state(thread).max_rowid
            undo.insert(
                0,
                {
                    "op": "since",
                    "upto": upto,
                    "count": self.backend.count(thread, upto=upto),
                    "seqs": self._seqs(thread, undo),
                },
            )
            stats = {
                "merged": merged,
                "pruned": len(plan.archive),
                "skipped": plan.skipped,
                "duration_secs": round(time.perf_counter() - started, 3),
            }
            log_id = self.backend.log_tree(thread, "reorganize", stats, undo)
            self.backend.set_tree_state(thread, state)
        self.grower.forget_cursor(thread)
        return {**stats, "log_id": log_id}

    def _make_room(self, thread: Thread, parent: NodeRow) -> list[dict[str, Any]]:
        """Group the oldest children of a full node so it can take one more."""
        assert parent.id is not None
        children = self.backend.tree_nodes(thread, parent=parent.id)
        if len(children) < self.grower.config.max_children:
            return []
        run = TreeGrower._groupable_run(children, set())
        if len(run) < 2:
            return []
        group = NodeRow(
            id=None,
            parent_id=parent.id,
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
        self.backend.put_nodes(thread, run)
        self.grower.name_node(thread, group, run)
        self.backend.put_nodes(thread, [group])
        return [
            {"op": "group", "node": group.id, "parent": parent.id, "children": [n.id for n in run]}
        ]

    def _seqs(self, thread: Thread, ops: list[dict[str, Any]]) -> dict[str, int]:
        """The creation number of every node the undo operations name, by id."""
        ids: set[int] = set()
        for op in ops:
            for key in ("node", "parent"):
                if op.get(key) is not None:
                    ids.add(int(op[key]))
            ids.update(int(i) for i in op.get("children", []) + op.get("leaves", []))
        found = self.backend.tree_nodes(thread, ids=sorted(ids)) if ids else []
        return {str(n.id): n.seq for n in found}

    def _forgotten_since(self, thread: Thread, ops: list[dict[str, Any]]) -> bool:
        """Whether messages the logged operations relied on were forgotten since."""
        marks = [op for op in ops if op["op"] == "since"]
        if not marks:
            return False
        mark = marks[0]
        if "upto" not in mark:  # logs written before: any change of generation counts
            return bool(mark["generation"] != self.backend.state(thread).generation)
        if self.backend.count(thread, upto=mark["upto"]) != mark["count"]:
            return True
        # Ids are reused once the newest rows go: forgetting the newest sessions and adding
        # as many messages again gave the nodes named here to new ones, which undo then
        # moved. A node's seq is never reused.
        return "seqs" in mark and self._seqs(thread, ops) != mark["seqs"]

    def undo(self, thread: Thread, log_id: int) -> dict[str, Any]:
        """Put the tree back as it was before a logged reorganisation."""
        entries = self.backend.tree_log(thread, log_id)
        if not entries or entries[0].kind != "reorganize":
            raise NotFound(f"no reorganisation {log_id} in this thread's log")
        entry = entries[0]
        if entry.undone_at is not None:
            return {"undone": 0, "already": True}
        if any(e.kind == "rebuild" and e.id > log_id for e in self.backend.tree_log(thread)):
            # Its operations name nodes of a tree that no longer exists (ids may be reused).
            raise TreeError(
                f"reorganisation {log_id} cannot be undone: the tree was rebuilt from the "
                "messages since; restore archived exchanges with Memory.restore_archived()"
            )
        if self._forgotten_since(thread, entry.undo):
            raise TreeError(
                f"reorganisation {log_id} cannot be undone: messages were forgotten since, "
                "and the nodes it moved may no longer be the same"
            )
        touched: set[int] = set()
        with self.backend.transaction():
            for op in reversed(entry.undo):
                if op["op"] == "move":
                    nodes = self.backend.tree_nodes(thread, ids=[op["node"]])
                    if nodes:
                        node = nodes[0]
                        if node.parent_id is not None:
                            touched.add(node.parent_id)
                        node.parent_id = op["parent"]
                        self.backend.put_nodes(thread, [node])
                        if op["parent"] is not None:
                            touched.add(op["parent"])
                elif op["op"] == "group":
                    kids = self.backend.tree_nodes(thread, ids=op["children"])
                    for kid in kids:
                        kid.parent_id = op["parent"]
                    self.backend.put_nodes(thread, kids)
                    self.backend.delete_nodes(thread, [op["node"]])
                    touched.add(op["parent"])
                elif op["op"] == "archive":
                    self.backend.set_archived(thread, op["leaves"], False)
                    parents = self.backend.tree_nodes(thread, ids=op["leaves"])
                    touched.update(n.parent_id for n in parents if n.parent_id is not None)
            self.grower._refresh_upwards(thread, touched)
            problems = self.backend.check_tree(thread, self.grower.config.max_children)
            if problems:
                # Exchanges added since can leave no room where a topic came from, or
                # no time order to put it back in: refuse (the transaction rolls back).
                at, what = problems[0]
                self.grower.forget_cursor(thread)
                raise TreeError(
                    f"reorganisation {log_id} cannot be undone: the tree changed since, and "
                    f"putting it back would break it (node {at}: {what})"
                )
            self.backend.mark_undone(log_id)
            state = self.backend.tree_state(thread)
            self.backend.set_tree_state(thread, state)
        self.grower.forget_cursor(thread)
        return {"undone": sum(op["op"] != "since" for op in entry.undo), "already": False}
