"""Recall through the tree.

* **Topic signals for turns.** Every topic's whole content is indexed as a
  document; a turn inherits the BM25 score of its own topic (``bm_topic``) and of
  its session's topic (``bm_sess``), so a turn that shares few words with
  the question still rises when its topic is about it.
* **Multi-path recall.** Topic summaries are searched (BM25 and cosine); each
  topic above a threshold is walked up to the root, shared ancestors are
  merged, and the best few paths are returned, each with its names, summaries
  and dates, ready to be rendered as a compact block.
* **Multi-resolution.** A path whose deepest summary covers the question's
  terms is returned as a summary; otherwise it drills down to its best turns.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder
from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.sidecar import Sidecar
from arbormem.store.types import NodeBrief, NodeRow, NodeShapes, Thread
from arbormem.text import analyze
from arbormem.timeutil import display

log = logging.getLogger(__name__)


@dataclass
class PathNode:
    id: int
    kind: str
    name: str
    summary: str
    first_index: int
    last_index: int
    first_at: object
    last_at: object


@dataclass
class TopicPath:
    """One branch of the tree, root first, that answers part of a query."""

    nodes: list[PathNode]
    score: float
    #: True when the deepest summary covers the query's terms (no need to drill down).
    sufficient: bool = False
    #: The topic's best turns, when the summary alone does not answer.
    turns: list[Message] = field(default_factory=list)
    #: The scope (user, agent) whose thread the branch belongs to.
    user: str = ""
    agent: str = ""

    @property
    def topic(self) -> PathNode:
        return self.nodes[-1]

    def render(self, max_summary_words: int | None = None) -> str:
        t = self.topic
        names = " › ".join(n.name or "(untitled)" for n in self.nodes)
        when = f"{display(t.first_at, seconds=False)[:10]}"  # type: ignore[arg-type]
        last_day = f"{display(t.last_at, seconds=False)[:10]}"  # type: ignore[arg-type]
        if last_day != when:
            when += f" to {last_day}"
        lines = [f"- {names} ({when}, messages {t.first_index}-{t.last_index})"]
        if t.summary:
            words = t.summary.split()
            if max_summary_words is not None and len(words) > max_summary_words:
                lines.append("  " + " ".join(words[:max_summary_words]) + "…")
            else:
                lines.append(f"  {t.summary}")
        for m in self.turns:
            lines.append(f"  > {m.speaker or m.role}: {m.content}")
        return "\n".join(lines)


_PARENT = NodeBrief._fields.index("parent_id")
#: Topic hits whose shapes :meth:`TreeRecall.expand` reads together.
_EXPAND_AHEAD = 16
#: The searched threads' ids and tree versions, which cached reads hold for.
Versions = tuple[tuple[int, tuple[int, int]], ...]
_KIND = NodeBrief._fields.index("kind")
_FROZEN = NodeBrief._fields.index("frozen")
#: A tree version's low bits count writes; the high bits are its structure epoch on a
#: back-end with ``structure_epochs`` (see arbormem/store/sqlite/tree.py).
_EPOCH_SHIFT = 32


class Outline:
    """A thread's tree as the recall sees it, read lazily.

    The shape of a node (parent, kind, index range, state) is read from the store
    the first time a query needs it, its ancestors with it, one query per level;
    names, summaries and dates only for the nodes a result shows. At a million
    turns a tree has hundreds of thousands of topics, and reading them all (let
    alone their text) took seconds that the first query after opening, and the
    first after every write, paid. A large thread's shapes are read in one pass
    in the background instead (:meth:`add_shapes`, see :meth:`TreeRecall.preload`),
    about 30 MB at a million turns: with a cold page cache, their scattered reads
    were a tenth of a million-turn search's time.

    Shapes keep no content hash (``chash`` is None): nothing that walks an
    outline needs it.
    """

    def __init__(self, backend: Backend, thread: Thread) -> None:
        self.backend = backend
        self.thread = thread
        # Shapes as plain tuples (NodeBrief's fields): a tuple of numbers and strings
        # leaves the garbage collector's view, a named tuple never does, and a large
        # tree's shapes made every full collection pass over hundreds of thousands.
        self._brief: dict[int, tuple[Any, ...]] = {}
        self._absent: set[int] = set()
        self._rows: dict[int, NodeRow] = {}
        #: Every node's shape, read in one pass (see add_shapes).
        self._bulk: NodeShapes | None = None
        #: Parents read from the store for nodes not held above (leaves, mostly), and
        #: the ids found to be no node of this thread.
        self._parent: dict[int, int | None] = {}
        self._elsewhere: set[int] = set()
        #: Each leaf's own topic and its session's (see leaf_topics).
        self._leaf_topics: dict[int, tuple[int, int] | None] = {}

    def carried(self) -> Outline | None:
        """A new outline for the next version of the same structure epoch (see
        ``TreeRecall._nodes``), holding what the tree's growth cannot have changed:
        frozen nodes' shapes and rows, parents, and leaves' topics. The shapes of
        the growing nodes it holds are read again (their ranges move as they grow).
        None when what it holds does not match the store (a fresh outline is due)."""
        new = Outline(self.backend, self.thread)
        # Copies first (each in one step): a search of the old version may still be
        # adding to these, and a dict that grows while it is walked raises.
        brief, rows = dict(self._brief), dict(self._rows)
        growing = [i for i, shape in brief.items() if not shape[_FROZEN]]
        fresh = {b.id: b for b in self.backend.node_briefs(self.thread, ids=growing)}
        for node_id, shape in brief.items():
            if shape[_FROZEN]:
                new._brief[node_id] = shape
                continue
            b = fresh.get(node_id)
            if b is None or b.parent_id != shape[_PARENT] or b.kind != shape[_KIND]:
                return None  # (a change of shape moves the epoch: not expected)
            new._brief[node_id] = (*b[:-1], None)
        new._rows = {i: row for i, row in rows.items() if row.frozen}
        new._parent = dict(self._parent)
        new._leaf_topics = dict(self._leaf_topics)
        return new

    def add_shapes(self, shapes: NodeShapes) -> int:
        """Look shapes up in these (every node's, read in one pass); returns how many."""
        self._bulk = shapes
        return len(shapes)

    def parents(self, ids: Sequence[int]) -> dict[int, int | None]:
        """The parent of each of these nodes of the thread (None at the root level)."""
        out: dict[int, int | None] = {}
        rest: list[int] = []
        for node_id in ids:
            shape = self._brief.get(node_id)
            if shape is None and self._bulk is not None:
                shape = self._bulk.get(node_id)
            if shape is not None:
                out[node_id] = shape[_PARENT]
            elif node_id in self._parent:
                out[node_id] = self._parent[node_id]
            elif node_id not in self._elsewhere:
                rest.append(node_id)
        if rest:
            # Kept for this tree version (an outline's lifetime): each search asks for
            # its candidates' leaves, most of them asked before.
            found = self.backend.parents(self.thread, rest)
            self._parent.update(found)
            self._elsewhere.update(r for r in rest if r not in found)
            out.update(found)
        return out

    def leaf_topics(self, leaf_ids: Sequence[int]) -> dict[int, tuple[int, int] | None]:
        """For each of these leaves of the thread (others are left out): its own
        topic and its session's, the deepest and the highest topic above it (None
        when no topic is), kept for the outline's lifetime like its shapes."""
        known = self._leaf_topics
        rest = [i for i in leaf_ids if i not in known]
        if rest:
            parents = self.parents(rest)
            self.load(parents.values())
            for leaf, parent in parents.items():
                chain = [n for n in self.lineage(parent) if self.kind(n) == "topic"]
                known[leaf] = (chain[-1], chain[0]) if chain else None
        return {i: known[i] for i in leaf_ids if i in known}

    def _held(self, node_id: int) -> bool:
        """Whether the node's shape is held with all its ancestors', taking them
        from the shapes read in one pass when they are there."""
        walked: dict[int, tuple[Any, ...]] = {}
        at: int | None = node_id
        while at is not None and at not in self._brief:
            shape = self._bulk.get(at) if self._bulk is not None else None
            if shape is None or at in walked:  # (a parent cycle ends the walk)
                return False
            walked[at] = shape
            at = shape[_PARENT]
        # Every ancestor is known: hold the walked nodes, nearest the root first (a
        # node is held only once its ancestors are, as load keeps them).
        for n in reversed(walked):
            self._brief[n] = walked[n]
        return True

    def load(self, ids: Iterable[int | None]) -> None:
        """Read the shapes of these nodes and of all their ancestors."""
        todo = {
            i
            for i in ids
            if i is not None
            and i not in self._brief
            and i not in self._absent
            and not self._held(i)
        }
        while todo:
            found = self.backend.node_briefs(self.thread, ids=sorted(todo))
            for b in found:
                self._brief[b.id] = (*b[:-1], None)
            self._absent |= todo - {b.id for b in found}
            todo = {
                b.parent_id
                for b in found
                if b.parent_id is not None
                and b.parent_id not in self._brief
                and b.parent_id not in self._absent
                and not self._held(b.parent_id)
            }

    def __contains__(self, node_id: object) -> bool:
        if isinstance(node_id, int):
            self.load([node_id])
        return node_id in self._brief

    def brief(self, node_id: int) -> NodeBrief:
        """The shape of a loaded node (its ``chash`` None)."""
        return NodeBrief._make(self._brief[node_id])

    def kind(self, node_id: int) -> str:
        """The kind of a loaded node."""
        kind: str = self._brief[node_id][_KIND]
        return kind

    def lineage(self, node_id: int | None) -> list[int]:
        """Ids from the root level down to ``node_id`` (empty when it is unknown)."""
        self.load([node_id])
        chain: list[int] = []
        while node_id is not None and node_id in self._brief and node_id not in chain:
            chain.append(node_id)  # (a parent cycle, which the check repairs, ends the walk)
            node_id = self._brief[node_id][_PARENT]
        chain.reverse()
        return chain

    def rows(self, ids: Sequence[int]) -> list[NodeRow]:
        """The stored nodes with these ids, in the order given (unknown ids skipped)."""
        missing = [i for i in dict.fromkeys(ids) if i not in self._rows]
        if missing:
            for row in self.backend.tree_nodes(self.thread, ids=missing):
                assert row.id is not None
                self._rows[row.id] = row
        return [self._rows[i] for i in ids if i in self._rows]


class SummaryVectors:
    """Topic-summary vectors: one matrix and the row of each content hash."""

    __slots__ = ("matrix", "rows")

    def __init__(self, rows: dict[str, int] | None = None, matrix: np.ndarray | None = None):
        self.rows = rows or {}
        self.matrix = matrix if matrix is not None else np.zeros((0, 0), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.rows)


class _ThreadCache:
    __slots__ = ("matrix", "nodes", "topic_ids", "vectors", "version")

    version: tuple[int, int]

    def __init__(self, nodes: Outline, version: tuple[int, int]) -> None:
        self.version = version
        self.nodes = nodes
        #: The frozen topics' ids and their summary vectors, row for row; None until
        #: a query needs them (multi-path recall does, turn ranking does not).
        self.topic_ids: np.ndarray | None = None
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        #: The vectors by content hash, carried over when the tree changes.
        self.vectors: SummaryVectors | None = None


def _assemble(
    frozen: Sequence[NodeBrief], known: SummaryVectors, fetched: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, SummaryVectors]:
    """The frozen topics that have a vector: their ids, their vectors row for row (one
    gather from the known matrix, then the vectors just read), and those by hash."""
    ids: list[int] = []
    picks: list[int] = []
    hashes: list[str] = []
    new_ids: list[int] = []
    new_hashes: list[str] = []
    for r in frozen:
        assert r.chash is not None
        row = known.rows.get(r.chash)
        if row is not None:
            ids.append(r.id)
            picks.append(row)
            hashes.append(r.chash)
        elif r.chash in fetched:
            new_ids.append(r.id)
            new_hashes.append(r.chash)
    parts = [known.matrix[np.asarray(picks, dtype=np.int64)]] if picks else []
    if new_hashes:
        # (No copy when they came as float32: at a million turns the 293,531 topic
        # vectors are 300 MB, and a copy of them was a fifth of the peak memory.)
        parts.append(np.vstack([fetched[h] for h in new_hashes]).astype(np.float32, copy=False))
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32), SummaryVectors()
    matrix = parts[0] if len(parts) == 1 else np.vstack(parts)
    rows = {h: i for i, h in enumerate(hashes + new_hashes)}
    return np.asarray(ids + new_ids, dtype=np.int64), matrix, SummaryVectors(rows, matrix)


#: Topic vectors read from the store in one go past which the thread's topic
#: vectors are also saved beside the database, so the next process starts fast.
SAVE_AFTER = 5_000


class TreeRecall:
    """Reads the trees of a store for ranking and multi-path recall."""

    def __init__(
        self,
        backend: Backend,
        embedder: Embedder,
        describe: Callable[[Thread, NodeRow], tuple[str, str, list[str]]] | None = None,
        folder: Path | None = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        #: The distinct terms of topics' contents, with the content they were taken
        #: from (a topic's content is read at each search, and split again only when
        #: it differs from the one kept).
        self._term_sets: dict[int, tuple[str, frozenset[str]]] = {}
        #: Whether the back-end's tree versions carry a structure epoch, which the
        #: tree's growth leaves alone (see Outline.carried).
        self._epochs = bool(getattr(backend, "structure_epochs", False))
        #: Where topic vectors are saved between processes (None: not saved).
        self.folder = folder
        #: The folder's lock, shared with other processes (see arbormem.store.sidecar).
        self.files = Sidecar(folder)
        #: Provisional (name, summary, keyphrases) of a topic that is still growing.
        self.describe = describe
        self._cache: dict[int, _ThreadCache] = {}
        self._lock = threading.Lock()
        #: The leaf of each placed message searches asked about, by the searched
        #: threads and the structures they hold for (generation and structure epoch,
        #: or the whole tree version on a back-end without epochs): a placed message
        #: changes leaves only with them (see ``Backend.set_message_leaf``), and a
        #: message not placed yet is asked about again. Several sets of threads at
        #: once: a server's searches go from tenant to tenant.
        self._leaves: dict[Versions, dict[int, int]] = {}

    def _nodes(self, thread: Thread) -> _ThreadCache:
        """The thread's tree as of its current version (a new, empty outline after
        every tree change; summary vectors carried over)."""
        # The thread's generation too: a forgotten thread's id (and its tree's version
        # numbers) can come back with a new thread, possibly written by another process.
        version = (self.backend.state(thread).generation, self.backend.tree_state(thread).version)
        with self._lock:
            cache = self._cache.get(thread.id)
            if cache is not None and cache.version == version:
                return cache
            outline: Outline | None = None
            structure = self._structure(version)
            if cache is not None and structure and self._structure(cache.version) == structure:
                # Only grown since (an add): what the growth leaves alone is kept.
                outline = cache.nodes.carried()
            fresh = _ThreadCache(outline or Outline(self.backend, thread), version)
            fresh.vectors = cache.vectors if cache is not None else None
            self._cache[thread.id] = fresh
            return fresh

    def held(
        self, threads: Sequence[Thread], held: dict[int, _ThreadCache] | None
    ) -> dict[int, _ThreadCache]:
        """The threads' caches for one search: those in ``held`` (a search's own
        dict, filled here), the others as of the threads' current versions. A search
        asks for them two or three times (its topic signals in one or two steps, its
        topics' turns): each asking read the thread's state and tree version again,
        and one tree for the whole search is what :meth:`paths` does too."""
        if held is None:
            return {t.id: self._nodes(t) for t in threads}
        for t in threads:
            if t.id not in held:
                held[t.id] = self._nodes(t)
        return held

    def _structure(self, version: tuple[int, int]) -> tuple[int, int] | None:
        """What of a (generation, tree version) the tree's growth leaves alone: the
        generation and the structure epoch; None without epochs (nothing is)."""
        return (version[0], version[1] >> _EPOCH_SHIFT) if self._epochs else None

    def _topics(self, thread: Thread) -> _ThreadCache:
        """The thread's cache with every frozen topic's summary vector in one matrix."""
        cache = self._nodes(thread)
        with self._lock:
            if cache.topic_ids is not None:
                return cache
            briefs = self.backend.node_briefs(thread, ["topic", "group"])
            frozen = [r for r in briefs if r.frozen and r.chash and not r.archived]
            known = cache.vectors if cache.vectors is not None else self._load_saved(thread)
            missing = list({r.chash for r in frozen if r.chash and r.chash not in known.rows})
            model = self.embedder.model_id
            fetched = self.backend.vectors(model, missing) if missing else {}
            read = len(fetched)
            cache.topic_ids, cache.matrix, cache.vectors = _assemble(frozen, known, fetched)
            del fetched  # one array a topic: let them go before the save copies the matrix
            if read >= SAVE_AFTER:
                self._save(thread, cache.vectors)
            return cache

    def prepare(self, thread: Thread) -> int:
        """Gather every frozen topic's summary vector ahead of the first search (and
        save them when many came from the store); returns how many there are."""
        topic_ids = self._topics(thread).topic_ids
        return 0 if topic_ids is None else len(topic_ids)

    def preload(self, thread: Thread, stop: threading.Event | None = None) -> int:
        """Read the shape of every node of the thread in one pass, for the searches
        of its current tree version (after a change they are read as needed again,
        see :class:`Outline`); returns how many (0 when ``stop`` was set)."""
        outline = self._nodes(thread).nodes
        shapes = self.backend.node_shapes(thread, stop)
        return 0 if shapes is None else outline.add_shapes(shapes)

    # -- topic vectors saved between processes ---------------------------------------------

    def _file(self, thread: Thread) -> Path | None:
        return None if self.folder is None else self.folder / f"topics-{thread.id}.npz"

    def _load_saved(self, thread: Thread) -> SummaryVectors:
        """Topic vectors a previous process saved (empty when none, stale or damaged).

        Reading them back costs one file read; fetching hundreds of thousands of
        them from the store by content hash costs a random read each.
        """
        path = self._file(thread)
        if path is None or not path.exists():
            return SummaryVectors()
        try:
            with self.files.shared(), np.load(path, allow_pickle=False) as saved:
                if str(saved["model"]) != self.embedder.model_id:
                    return SummaryVectors()
                keys, matrix = saved["chash"], saved["matrix"]
            if keys.ndim != 1 or matrix.shape != (len(keys), self.embedder.dimensions):
                raise ValueError(f"{keys.shape} keys for vectors of shape {matrix.shape}")
        except Exception as exc:
            # Only a cache: whatever is wrong with it (a file cut short, bytes failing the
            # zip's checksum, a damaged header read as an unknown compression method or
            # as encrypted), the store has the vectors.
            log.warning("saved topic vectors %s unusable, reading the store: %s", path, exc)
            return SummaryVectors()
        return SummaryVectors({str(k): i for i, k in enumerate(keys.tolist())}, matrix)

    def _save(self, thread: Thread, vectors: SummaryVectors) -> None:
        path = self._file(thread)
        if path is None or not len(vectors) or self.backend.read_only:
            return
        try:
            # A name of its own: two processes saving at once wrote into one file.
            tmp = path.with_name(f"{path.stem}.{uuid.uuid4().hex[:12]}.tmp.npz")
            keys = sorted(vectors.rows, key=vectors.rows.__getitem__)
            at = [vectors.rows[k] for k in keys]
            # The matrix as it is when its rows are the keys' in order (as assembled):
            # a copy of 293,531 topics' vectors was 300 MB more at the peak.
            whole = at == list(range(len(vectors.matrix)))
            matrix = vectors.matrix if whole else vectors.matrix[at]
            with self.files.shared():  # no sweep takes the file before it is in place
                np.savez(
                    tmp,
                    model=np.asarray(self.embedder.model_id),
                    chash=np.asarray(keys),
                    matrix=np.asarray(matrix, dtype=np.float32),
                )
                tmp.replace(path)
        except OSError as exc:  # a read-only folder: recall still works, only slower
            log.warning("could not save topic vectors to %s: %s", path, exc)

    def discard_files(self, thread: Thread) -> None:
        """Delete a thread's saved topic vectors: they may describe forgotten messages."""
        path = self._file(thread)
        if path is not None:
            path.unlink(missing_ok=True)

    def _growing(self, thread: Thread) -> list[NodeRow]:
        """Topics still growing (not yet summarised), with provisional descriptions."""
        if self.describe is None:
            return []
        out = []
        # Usually the active path, but a forget can leave topics unfrozen off it.
        growing = self.backend.tree_nodes(thread, kinds=["topic"], frozen=False)
        for node in growing:
            if node.archived:
                continue
            name, summary, keyphrases = self.describe(thread, node)
            out.append(replace(node, name=name, summary=summary, keyphrases=keyphrases))
        return out

    def invalidate(self, thread: Thread | None = None) -> None:
        with self._lock:
            self._leaves = {}
            self._term_sets = {}
            if thread is None:
                self._cache.clear()
            else:
                self._cache.pop(thread.id, None)

    def ancestry(self, thread: Thread, node_id: int | None) -> list[NodeRow]:
        """The chain of topics from the root level down to ``node_id``."""
        nodes = self._nodes(thread).nodes
        return nodes.rows(nodes.lineage(node_id))

    # -- topic signals for turns ---------------------------------------------------------

    def segment_hits(
        self,
        threads: Sequence[Thread],
        terms: Sequence[str],
        depth: int = 200,
        share: float = 1.0,
    ) -> list[tuple[int, float]]:
        """Topics whose whole content best matches the terms: ``(node id, BM25)``.
        With ``share`` below 1, only about that share of the newest nodes is read."""
        if not terms:
            return []
        after = 0
        if share < 1.0:
            states = [self.backend.tree_state(t) for t in threads]
            newest = [i for st in states for i in (st.leaf_id, st.active_id) if i is not None]
            after = int(max(newest, default=0) * (1.0 - share))
        return self.backend.node_search(threads, "segment", terms, depth, after=after)

    def turn_signals(
        self,
        threads: Sequence[Thread],
        terms: Sequence[str],
        rowids: Sequence[int],
        hits: Sequence[tuple[int, float]],
        coverage: bool | Collection[str] = True,
        held: dict[int, _ThreadCache] | None = None,
    ) -> dict[int, dict[str, float]]:
        """Topic evidence for each turn: ``bm_topic`` and ``bm_sess``, the normalised
        BM25 of the content of its own topic and of its session's topic (from
        ``hits``, see :meth:`segment_hits`), and ``cov_topic`` and ``cov_sess``, the
        share of the query's terms each contains (a multi-part question is often
        answered by a topic, not by one turn). ``coverage=False`` leaves the last
        two out: they read each topic's whole text, which costs most when the
        ranker gives them no weight; a collection of their names keeps only those
        (the topics whose text is read are then only the ones they need).
        ``held``: the search's trees, as :meth:`held` keeps them."""
        if not terms or not rowids:
            return {}
        covered: tuple[str, ...]
        if isinstance(coverage, bool):
            covered = ("cov_topic", "cov_sess") if coverage else ()
        else:
            covered = tuple(c for c in ("cov_topic", "cov_sess") if c in coverage)
        top = hits[0][1] if hits else 1.0
        score = {node: s / top for node, s in hits}
        mine = self.held(threads, held)
        caches = {t.id: mine[t.id].nodes for t in threads}
        structures = tuple(
            (t.id, self._structure(mine[t.id].version) or mine[t.id].version) for t in threads
        )
        leaves = self._leaves_of(structures, rowids)
        wanted = list(set(leaves.values()))
        topics_of: dict[int, tuple[int, int] | None] = {}
        for t in threads:
            topics_of.update(caches[t.id].leaf_topics(wanted))
        chains: dict[int, tuple[int, int]] = {}
        for rowid, leaf_id in leaves.items():
            pair = topics_of.get(leaf_id)
            if pair is not None:
                chains[rowid] = pair
        shares: dict[int, float] = {}
        if covered:
            # The topics whose coverage is asked for: own (first of a pair), session's
            # (second), or both.
            sides = [i for i, c in enumerate(("cov_topic", "cov_sess")) if c in covered]
            nodes = {pair[i] for pair in chains.values() for i in sides}
            wanted_terms = set(terms)
            shares = {
                node: len(wanted_terms.intersection(its)) / len(wanted_terms)
                for node, its in self._topic_terms(sorted(nodes)).items()
            }
        own_cov, sess_cov = "cov_topic" in covered, "cov_sess" in covered
        out: dict[int, dict[str, float]] = {}
        for rowid, (topic, session) in chains.items():
            signals = out[rowid] = {
                "bm_topic": score.get(topic, 0.0),
                "bm_sess": score.get(session, 0.0),
            }
            if own_cov:
                signals["cov_topic"] = shares.get(topic, 0.0)
            if sess_cov:
                signals["cov_sess"] = shares.get(session, 0.0)
        return out

    def _leaves_of(self, structures: Versions, rowids: Sequence[int]) -> dict[int, int]:
        """The leaf of each message that has one, for searched threads at these
        ``structures`` (see ``_leaves``): those not kept from earlier searches under
        the same structures are read (and kept when placed)."""
        with self._lock:
            found = self._leaves.get(structures)
            if found is None or len(found) >= 200_000:
                # Another structure of these threads is never asked about again.
                mine = {tid for tid, _ in structures}
                for key in [k for k in self._leaves if {tid for tid, _ in k} == mine]:
                    del self._leaves[key]
                if len(self._leaves) >= 256:
                    self._leaves.clear()
                found = self._leaves[structures] = {}
            kept = found
        out: dict[int, int] = {}
        missing: list[int] = []
        for r in rowids:
            leaf = kept.get(r)
            if leaf is not None:
                out[r] = leaf
            else:
                missing.append(r)
        if missing:
            # Read after the structures: a change meanwhile moves them, and what is kept
            # here under the old ones is never looked at again.
            read = self.backend.message_leaves(missing)
            out.update(read)
            kept.update(read)
        return out

    def _topic_terms(self, nodes: Sequence[int]) -> dict[int, frozenset[str]]:
        """The distinct terms of each of these topics' content (those indexed). The
        content is read each time (a grown topic is indexed again, with or without a
        new tree version); its terms are split again only when it differs from the
        content they were kept with: a search's topics hold whole sessions, and
        splitting their text each time cost more than a millisecond."""
        read = self.backend.node_docs("segment", nodes)
        out: dict[int, frozenset[str]] = {}
        with self._lock:
            kept = self._term_sets
            if len(kept) >= 4_096:  # topics hold long texts
                kept = self._term_sets = {}
        for n in nodes:
            doc = read.get(n)
            if doc is None:
                continue
            held = kept.get(n)
            if held is None or held[0] != doc:
                held = kept[n] = (doc, frozenset(doc.split()))
            out[n] = held[1]
        return out

    def expand(
        self,
        threads: Sequence[Thread],
        hits: Sequence[tuple[int, float]],
        topics: int,
        per_topic: int = 24,
        held: dict[int, _ThreadCache] | None = None,
    ) -> list[int]:
        """Turns of the topics whose content best matches the query (``hits``):
        candidates a turn-level search can miss when no single turn carries the words.
        ``held``: the search's trees, as :meth:`held` keeps them."""
        if topics <= 0:
            return []
        out: list[int] = []
        mine = self.held(threads, held)
        caches = [(t, mine[t.id].nodes) for t in threads]
        seen = 0
        for i, (node_id, _) in enumerate(hits):
            if i % _EXPAND_AHEAD == 0:
                # Shapes a few hits ahead at a time: the topics wanted are usually among
                # the first, and reading all 200 hits' shapes and ancestors at once cost
                # up to 40 ms at a million turns.
                for _, nodes in caches:
                    nodes.load(n for n, _ in hits[i : i + _EXPAND_AHEAD])
            found = next(((t, nodes) for t, nodes in caches if node_id in nodes), None)
            if found is None:
                continue
            thread, nodes = found
            node = nodes.brief(node_id)
            if node.kind != "topic" or all(
                nodes.kind(a) == "group" for a in nodes.lineage(node.parent_id)
            ):
                continue  # a session's topic (only groups above it): too wide to expand into
            out += self.backend.rowids_between(
                thread, node.first_index, node.last_index + 1, per_topic
            )
            seen += 1
            if seen >= topics:
                break
        return out

    # -- multi-path recall -----------------------------------------------------------------

    def paths(
        self,
        threads: Sequence[Thread],
        query: str,
        qvec: np.ndarray | None,
        *,
        k: int = 3,
        threshold: float = 0.3,
        search_terms: Sequence[str] | None = None,
    ) -> list[TopicPath]:
        """The best ``k`` branches for a query, shared ancestors merged.

        ``search_terms`` are the query's terms worth a full-text search of the
        topics (the caller keeps their postings within a budget); all of them by
        default."""
        terms = list(dict.fromkeys(analyze(query)))
        wanted = terms if search_terms is None else list(search_terms)
        lexical: dict[int, float] = {}
        hits = self.backend.node_search(threads, "topic", wanted, 50) if wanted else []
        if hits:
            top = hits[0][1]
            lexical = {n: s / top for n, s in hits}
        scored: dict[tuple[int, int], float] = {}
        growing: dict[tuple[int, int], NodeRow] = {}
        outlines: dict[int, Outline] = {}
        for thread in threads:
            cache = self._topics(thread)
            outlines[thread.id] = cache.nodes  # one tree version for the whole call
            assert cache.topic_ids is not None
            dense: dict[int, float] = {}
            if qvec is not None and len(cache.topic_ids):
                sims = cache.matrix @ np.asarray(qvec, dtype=np.float32)
                dense = dict(zip(cache.topic_ids.tolist(), sims.tolist()))
            for node in self._growing(thread):
                assert node.id is not None
                growing[(thread.id, node.id)] = node
                text = f"{node.name}: {node.summary} ({', '.join(node.keyphrases)})"
                node_terms = set(analyze(text))
                lexical.setdefault(node.id, len(node_terms & set(terms)) / max(1, len(terms)))
                if qvec is not None:
                    dense[node.id] = float(self.embedder.embed(text) @ qvec)
            cache.nodes.load(lexical)
            for node_id in set(dense) | {n for n in lexical if n in cache.nodes}:
                s = 0.5 * lexical.get(node_id, 0.0) + 0.5 * max(0.0, dense.get(node_id, 0.0))
                if s >= threshold:
                    scored[(thread.id, node_id)] = s
        by_id = {t.id: t for t in threads}
        for t in threads:
            outlines[t.id].load(node for tid, node in scored if tid == t.id)
        # Prefer the most specific topic of a branch: drop a node when a descendant
        # of it also qualified (the descendant's path carries the ancestor anyway).
        chains = {key: outlines[key[0]].lineage(key[1]) for key in scored}
        covered = {(key[0], n) for key, chain in chains.items() for n in chain[:-1]}
        best = sorted((k_ for k_ in scored if k_ not in covered), key=lambda x: -scored[x])[:k]
        query_terms = set(terms)
        out = []
        for key in best:
            rows = outlines[key[0]].rows(chains[key])
            if not rows:
                continue
            chain = [growing.get((key[0], n.id or -1), n) for n in rows]
            node = chain[-1]
            covered_terms = set(analyze(f"{node.name} {node.summary} {' '.join(node.keyphrases)}"))
            out.append(
                TopicPath(
                    nodes=[
                        PathNode(
                            n.id or 0,
                            n.kind,
                            n.name,
                            n.summary,
                            n.first_index,
                            n.last_index,
                            n.first_at,
                            n.last_at,
                        )
                        for n in chain
                    ],
                    score=scored[key],
                    sufficient=bool(query_terms) and query_terms <= covered_terms,
                    user=by_id[key[0]].user,
                    agent=by_id[key[0]].agent,
                )
            )
        return out
