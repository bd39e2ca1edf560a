"""A PostgreSQL tree's versions carry a structure epoch, as SQLite's do: growing the
tree keeps it, every other change moves it, and what searches keep of the tree
(arbormem.tree.recall) never outlives the write that changes it, in this process
or another.

The tests of tests/test_recall_caches.py run here on a PostgreSQL store (the
``mem`` fixture below), and the tests of this module's own write from another
handle on the same database, standing for another process.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.tree.recall import TreeRecall

from .test_recall_caches import (
    GARDEN,
    KAYAK,
    _fresh,
    _rows,
    _signals,
    _thread,
)
from .test_recall_caches import (
    test_a_forget_leaves_no_stale_topic_signals as test_a_forget_leaves_no_stale_topic_signals,
)
from .test_recall_caches import (
    test_a_growing_topic_held_by_a_search_is_read_again_after_an_add as test_a_growing_topic_held_by_a_search_is_read_again_after_an_add,
)
from .test_recall_caches import (
    test_a_leaf_given_another_parent_has_its_topics_at_the_next_search as test_a_leaf_given_another_parent_has_its_topics_at_the_next_search,
)
from .test_recall_caches import (
    test_a_message_moved_to_another_leaf_has_that_leafs_topics_at_the_next_search as test_a_message_moved_to_another_leaf_has_that_leafs_topics_at_the_next_search,
)
from .test_recall_caches import (
    test_a_renamed_topic_has_its_new_name_at_the_next_read as test_a_renamed_topic_has_its_new_name_at_the_next_read,
)
from .test_recall_caches import (
    test_a_reorganisation_leaves_no_stale_topic_signals as test_a_reorganisation_leaves_no_stale_topic_signals,
)
from .test_recall_caches import (
    test_an_add_keeps_what_searches_read_of_the_settled_tree as test_an_add_keeps_what_searches_read_of_the_settled_tree,
)
from .test_recall_caches import (
    test_placing_a_new_message_keeps_the_epoch_and_moving_a_placed_one_moves_it as test_placing_a_new_message_keeps_the_epoch_and_moving_a_placed_one_moves_it,
)


def _filled(url: str) -> Memory:
    m = Memory(url, embedder=HashingEmbedder(64), llm=None)
    for session, texts in (("s1", KAYAK), ("s2", GARDEN)):
        for i, text in enumerate(texts):
            m.add(text, role=("user", "assistant")[i % 2], session=session)
    m.wait()
    return m


@pytest.fixture
def mem(pg_url: str) -> Iterator[Memory]:
    with _filled(pg_url) as m:
        yield m


@pytest.fixture
def other(mem: Memory, pg_url: str) -> Iterator[Memory]:
    """Another handle on the same store: another process's."""
    with Memory(pg_url, embedder=HashingEmbedder(64), llm=None) as m:
        yield m


def test_the_store_has_structure_epochs(mem: Memory) -> None:
    assert getattr(mem.backend, "structure_epochs", False)


def test_a_message_another_process_moves_has_its_new_leafs_topics(
    mem: Memory, other: Memory
) -> None:
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    rows = _rows(mem)
    watering = rows[len(KAYAK) + 4]  # a garden turn, in the second session's topic
    before = _signals(mem, tree)
    assert before[watering.rowid]["bm_sess"] == 0.0
    epoch = mem.backend.tree_state(thread).version >> 32
    kayak_leaf = other.backend.message_leaves([rows[0].rowid])[rows[0].rowid]
    other.backend.set_message_leaf([watering.rowid], kayak_leaf)
    # (Read by the writer: this process may reuse its own reads for a moment.)
    assert other.backend.tree_state(thread).version >> 32 > epoch
    after = _signals(mem, tree)
    assert after == _fresh(mem)
    assert after[watering.rowid]["bm_sess"] > 0.0


def test_a_leaf_another_process_moves_under_another_topic_is_seen(
    mem: Memory, other: Memory
) -> None:
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    rows = _rows(mem)
    watering = rows[len(KAYAK) + 4]
    leaf_id = mem.backend.message_leaves([watering.rowid])[watering.rowid]
    kayak_leaf = mem.backend.message_leaves([rows[0].rowid])[rows[0].rowid]
    (kayak,) = mem.backend.tree_nodes(thread, ids=[kayak_leaf])
    before = _signals(mem, tree)
    (leaf,) = other.backend.tree_nodes(thread, ids=[leaf_id])
    with other.backend.transaction():
        other.backend.put_nodes(thread, [replace(leaf, parent_id=kayak.parent_id)])
        other.backend.set_tree_state(thread, other.backend.tree_state(thread))
    after = _signals(mem, tree)
    assert after == _fresh(mem)
    assert after[watering.rowid] != before[watering.rowid]


def test_another_process_growing_the_tree_keeps_the_epoch(mem: Memory, other: Memory) -> None:
    tree = TreeRecall(mem.backend, mem.embedder)
    thread = _thread(mem)
    first = _signals(mem, tree)
    epoch = mem.backend.tree_state(thread).version >> 32
    other.add("Basil needs water in the evening too", role="user", session="s2")
    other.add("Water it with the tomatoes.", role="assistant", session="s2")
    other.wait()
    assert other.backend.tree_state(thread).version >> 32 == epoch
    after = _signals(mem, tree)
    assert after == _fresh(mem)
    assert len(after) == len(first) + 2
