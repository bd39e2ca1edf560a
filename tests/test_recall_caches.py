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
