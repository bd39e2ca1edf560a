"""What searches keep between them about the topic tree (arbormem.tree.recall) never
outlives the write that changes it: after each kind of write, the topic signals
are the ones a recall opened afresh on the same store reads."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.store.types import Row, Thread
from arbormem.text import query_terms
from arbormem.tree.recall import TreeRecall

KAYAK = [
    "We are planning a kayak trip for the spring",
    "A spring kayak trip sounds lovely.",
    "I still need paddles for the kayak",
    "Light paddles pack well.",
    "The river is calm in April",
    "Then April it is for the kayak trip",
]
GARDEN = [
    "My tomatoes are finally ripe",
    "Ripe tomatoes from the garden are the best.",
    "The basil is growing fast too",
    "Basil and tomatoes go well together.",
    "I should water the garden tonight",
    "Evening watering is good for the garden.",
]
TERMS = query_terms("kayak trip paddles")


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as m:
        for session, texts in (("s1", KAYAK), ("s2", GARDEN)):
            for i, text in enumerate(texts):
                m.add(text, role=("user", "assistant")[i % 2], session=session)
        yield m


def _thread(m: Memory) -> Thread:
    thread = m.backend.thread(m.scope.user, m.scope.agent)
    assert thread is not None
    return thread


def _signals(m: Memory, tree: TreeRecall) -> dict[int, dict[str, float]]:
    thread = _thread(m)
    rowids = [r.rowid for r in m.backend.messages(thread)]
    hits = tree.segment_hits([thread], TERMS)
    return tree.turn_signals([thread], TERMS, rowids, hits)


def _fresh(m: Memory) -> dict[int, dict[str, float]]:
    return _signals(m, TreeRecall(m.backend, m.embedder))


def _rows(m: Memory) -> list[Row]:
    return m.backend.messages(_thread(m))


def test_a_message_moved_to_another_leaf_has_that_leafs_topics_at_the_next_search(
    mem: Memory,
) -> None:
    tree = mem.engine.tree_recall
    rows = _rows(mem)
    watering = rows[len(KAYAK) + 4]  # a garden turn, in the second session's topic
    before = _signals(mem, tree)
    assert before[watering.rowid]["bm_sess"] == 0.0
    kayak_leaf = mem.backend.message_leaves([rows[0].rowid])[rows[0].rowid]
    # The store's write alone, as the tree's grower makes it.
    mem.backend.set_message_leaf([watering.rowid], kayak_leaf)
    after = _signals(mem, tree)
    assert after == _fresh(mem)
    assert after[watering.rowid]["bm_sess"] > 0.0


def test_a_leaf_given_another_parent_has_its_topics_at_the_next_search(mem: Memory) -> None:
    tree = mem.engine.tree_recall
    thread = _thread(mem)
    rows = _rows(mem)
    watering = rows[len(KAYAK) + 4]
    leaf_id = mem.backend.message_leaves([watering.rowid])[watering.rowid]
    kayak_leaf = mem.backend.message_leaves([rows[0].rowid])[rows[0].rowid]
    (kayak,) = mem.backend.tree_nodes(thread, ids=[kayak_leaf])
    before = _signals(mem, tree)
    (leaf,) = mem.backend.tree_nodes(thread, ids=[leaf_id])
    # As every change to the tree's shape does: the nodes, then the tree's state.
    with mem.backend.transaction():
        mem.backend.put_nodes(thread, [replace(leaf, parent_id=kayak.parent_id)])
        mem.backend.set_tree_state(thread, mem.backend.tree_state(thread))
    after = _signals(mem, tree)
    assert after == _fresh(mem)
    assert after[watering.rowid] != before[watering.rowid]


def test_a_topic_whose_content_is_indexed_again_has_its_new_coverage_at_the_next_search(
    mem: Memory,
) -> None:
    tree = mem.engine.tree_recall
    rows = _rows(mem)
    watering = rows[len(KAYAK) + 4]
    before = _signals(mem, tree)
    assert before[watering.rowid]["cov_sess"] == 0.0
    leaf = mem.backend.message_leaves([watering.rowid])[watering.rowid]
    topics = mem.engine.tree_recall._nodes(_thread(mem)).nodes.leaf_topics([leaf])[leaf]
    assert topics is not None
    session_topic = topics[1]
    # As a growing topic's index catching up does (no message added, no tree change).
    mem.backend.index_nodes("segment", {session_topic: " ".join([*TERMS, "garden"])})
    after = _signals(mem, tree)
    assert after == _fresh(mem)
    assert after[watering.rowid]["cov_sess"] == 1.0


def test_searches_that_alternate_between_users_keep_each_users_leaves(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server's searches go from tenant to tenant: each one's message leaves stay
    # kept while its tree is unchanged, instead of the last searched thread's only.
    for i, text in enumerate(KAYAK):
        mem.add(text, role=("user", "assistant")[i % 2], session="b1", user="bob")
    mem.wait()
    tree = mem.engine.tree_recall
    alice, other = _thread(mem), mem.backend.thread("bob", mem.scope.agent)
    assert other is not None

    def signals(thread: Thread) -> dict[int, dict[str, float]]:
        rowids = [r.rowid for r in mem.backend.messages(thread)]
        return tree.turn_signals([thread], TERMS, rowids, tree.segment_hits([thread], TERMS))

    first = (signals(alice), signals(other))
    real = mem.backend.message_leaves
    asked: list[list[int]] = []

    def counting(rowids: list[int]) -> dict[int, int]:
        asked.append(list(rowids))
        return real(rowids)

    monkeypatch.setattr(mem.backend, "message_leaves", counting)
    assert (signals(alice), signals(other)) == first
    assert asked == []
    assert any(first[0].values()) and any(first[1].values())


def _counting(
    monkeypatch: pytest.MonkeyPatch, backend: object, name: str, asked: list[int]
) -> None:
    real = getattr(backend, name)

    def counting(*args: object) -> object:
        asked.extend(args[-1])  # type: ignore[arg-type]
        return real(*args)

    monkeypatch.setattr(backend, name, counting)


def test_an_add_keeps_what_searches_read_of_the_settled_tree(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Held apart from the Memory's own, as in another process: nothing invalidates it.
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    first = _signals(mem, tree)
    old = {r.rowid for r in _rows(mem)}
    epoch = mem.backend.tree_state(thread).version >> 32
    mem.add("Basil needs water in the evening too", role="user", session="s2")
    mem.add("Water it with the tomatoes.", role="assistant", session="s2")
    mem.wait()
    state = mem.backend.tree_state(thread)
    assert state.version >> 32 == epoch  # the tree grew: its structure epoch stays
    leaves: list[int] = []
    parents: list[int] = []
    _counting(monkeypatch, mem.backend, "message_leaves", leaves)
    _counting(monkeypatch, mem.backend, "parents", parents)
    after = _signals(mem, tree)
    monkeypatch.undo()
    new = {r.rowid for r in _rows(mem)} - old
    assert len(new) == 2
    # Only the new messages' leaves are read, and only the new leaves' parents.
    assert set(leaves) == new
    placed = set(mem.backend.message_leaves(sorted(new)).values())
    assert set(parents) <= placed
    assert after == _fresh(mem)
    assert after.keys() - first.keys() == new


def test_a_growing_topic_held_by_a_search_is_read_again_after_an_add(mem: Memory) -> None:
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    _signals(mem, tree)
    growing = [
        n.id for n in mem.backend.tree_nodes(thread) if n.kind != "leaf" and not n.frozen and n.id
    ]
    assert growing
    outline = tree._nodes(thread).nodes
    outline.load(growing)
    mem.add("One more word about the basil", role="user", session="s2")
    mem.wait()
    outline = tree._nodes(thread).nodes
    for node in mem.backend.node_briefs(thread, ids=growing):
        assert node.id in outline
        assert outline.brief(node.id)[:-1] == node[:-1]


def test_a_forget_leaves_no_stale_topic_signals(mem: Memory) -> None:
    tree = TreeRecall(mem.backend, mem.embedder)
    _signals(mem, tree)
    gone = _rows(mem)[len(KAYAK) + 2]
    mem.forget(gone.message.id)
    after = _signals(mem, tree)
    assert gone.rowid not in after
    assert after == _fresh(mem)


def test_a_reorganisation_leaves_no_stale_topic_signals(mem: Memory) -> None:
    for session, texts in (("s3", KAYAK[:4]), ("s4", GARDEN[:4])):
        for i, text in enumerate(texts):
            mem.add(text, role=("user", "assistant")[i % 2], session=session)
    mem.wait()
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    before = _signals(mem, tree)
    # Merges move whole sessions' topics under others: their turns' session topic changes.
    assert mem.engine.trees.reorganize(thread, similarity_threshold=0.0)["merged"] > 0
    after = _signals(mem, tree)
    assert after == _fresh(mem)
    assert after != before


def test_a_renamed_topic_has_its_new_name_at_the_next_read(mem: Memory) -> None:
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    frozen = [n for n in mem.backend.tree_nodes(thread) if n.kind == "topic" and n.frozen]
    assert frozen
    node = frozen[0]
    assert node.id is not None
    assert tree.ancestry(thread, node.id)[-1].name == node.name
    epoch = mem.backend.tree_state(thread).version >> 32
    # As a rename writes it: the node, then the tree's state.
    with mem.backend.transaction():
        mem.backend.put_nodes(thread, [replace(node, name="Paddling plans")])
        mem.backend.set_tree_state(thread, mem.backend.tree_state(thread))
    assert mem.backend.tree_state(thread).version >> 32 > epoch
    assert tree.ancestry(thread, node.id)[-1].name == "Paddling plans"


def test_placing_a_new_message_keeps_the_epoch_and_moving_a_placed_one_moves_it(
    mem: Memory,
) -> None:
    thread = _thread(mem)
    rows = _rows(mem)
    (placed, leaf), (other, elsewhere) = list(
        mem.backend.message_leaves([rows[0].rowid, rows[-1].rowid]).items()
    )
    state = mem.backend.tree_state(thread)
    mem.backend.set_message_leaf([placed], leaf)  # where it already is
    now = mem.backend.tree_state(thread).version
    assert now > state.version and now >> 32 == state.version >> 32
    mem.backend.set_message_leaf([other], leaf)
    moved = mem.backend.tree_state(thread).version
    assert moved >> 32 > now >> 32
    assert elsewhere != leaf


def test_coverage_asked_of_session_topics_alone_reads_only_theirs(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ranker may weigh one coverage and not the other: a search then reads
    # only the topics that one needs, and every other signal is as with both.
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    rowids = [r.rowid for r in _rows(mem)]
    hits = tree.segment_hits([thread], TERMS)
    both = tree.turn_signals([thread], TERMS, rowids, hits)
    asked: list[list[int]] = []
    real = tree._topic_terms

    def recorded(nodes: list[int]) -> dict[int, frozenset[str]]:
        asked.append(list(nodes))
        return real(nodes)

    monkeypatch.setattr(tree, "_topic_terms", recorded)
    alone = tree.turn_signals([thread], TERMS, rowids, hits, coverage=["cov_sess"])
    assert alone == {r: {k: v for k, v in s.items() if k != "cov_topic"} for r, s in both.items()}
    assert any(s["cov_sess"] for s in alone.values())
    leaves = mem.backend.message_leaves(rowids)
    pairs = tree._nodes(thread).nodes.leaf_topics(list(leaves.values()))
    assert asked == [sorted({p[1] for p in pairs.values() if p is not None})]
    none = tree.turn_signals([thread], TERMS, rowids, hits, coverage=False)
    assert none == {r: {k: s[k] for k in ("bm_topic", "bm_sess")} for r, s in both.items()}
    assert len(asked) == 1
