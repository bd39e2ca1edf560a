"""Reading part of a topic tree (``Memory.tree(depth=, node=, open_at=)``): the same
nodes, names and paths as the whole tree, and only the levels asked for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.bench.synth import generate_turns
from arbormem.errors import InputError, NotFound
from arbormem.tree.view import TopicNode, find


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    db = tmp_path_factory.mktemp("part") / "t.db"
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with Memory(db, embedder="hash", llm=None) as m:
        m.add_many(
            {"content": t.content, "role": t.role, "speaker": t.speaker,
             "timestamp": t.timestamp, "session": t.session}
            for t in generate_turns(600, seed=5, start=start, end=start + timedelta(days=90))
        )  # fmt: skip
        m.wait()
        yield m


def _fields(n: TopicNode) -> tuple[object, ...]:
    return (n.id, n.kind, n.name, n.summary, n.first_index, n.last_index, n.first_at,
            n.last_at, n.message_count, n.archived, n.path)  # fmt: skip


def test_depth_reads_only_the_levels_asked_for(mem: Memory) -> None:
    whole = mem.tree(messages=False)
    assert max(len(n.path) for n in whole.walk()) >= 3  # deep enough to tell levels apart
    top = mem.tree(messages=False, depth=1)
    assert [_fields(c) for c in top.children] == [_fields(c) for c in whole.children]
    assert all(not c.children for c in top.children)
    assert (top.message_count, top.first_at, top.last_at) == (
        whole.message_count, whole.first_at, whole.last_at
    )  # fmt: skip
    two = mem.tree(messages=False, depth=2)
    for mine, full in zip(two.children, whole.children, strict=True):
        assert [_fields(c) for c in mine.children] == [_fields(c) for c in full.children]
        assert all(not c.children for c in mine.children)


def test_a_node_comes_with_its_children_and_its_path_from_the_root(mem: Memory) -> None:
    whole = mem.tree(messages=False)
    deep = next(n for n in whole.walk() if len(n.path) == 2 and n.kind != "leaf")
    part = mem.tree(messages=False, node=deep.id, depth=1)
    assert _fields(part) == _fields(deep)
    assert [_fields(c) for c in part.children] == [_fields(c) for c in deep.children]
    assert find(whole, part.children[-1].path).id == part.children[-1].id
    leaf = next(n for n in whole.walk() if n.kind == "leaf")
    with_messages = mem.tree(node=leaf.id, depth=1)
    assert [m.index for m in with_messages.messages] == list(
        range(leaf.first_index, leaf.last_index + 1)
    )
    with pytest.raises(NotFound):
        mem.tree(node=10**9, depth=1)


def test_open_at_opens_every_topic_down_to_the_message(mem: Memory) -> None:
    whole = mem.tree(messages=False)
    message = mem.messages(start=300, end=301)[0]
    part = mem.tree(messages=False, depth=1, open_at=message.id)
    node, chain = part, []
    while True:
        inside = [c for c in node.children if c.first_index <= message.index <= c.last_index]
        if not inside:
            break
        node = inside[0]
        chain.append(node)
    assert node.kind == "leaf" and len(chain) >= 3
    for step in chain:
        assert find(whole, step.path).id == step.id
    # Off the way down, nothing is read below the top level.
    assert all(not c.children for c in part.children if c.id != chain[0].id)
    with pytest.raises(NotFound):
        mem.tree(open_at="no-such-message")


@pytest.mark.parametrize("kwargs", [{"depth": 0}, {"depth": -1}, {"depth": "2"},
                                    {"node": -1}, {"node": True}])  # fmt: skip
def test_bad_depth_or_node_is_refused(mem: Memory, kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        mem.tree(**kwargs)  # type: ignore[arg-type]


def test_an_empty_scope_has_an_empty_part(tmp_path: Path) -> None:
    with Memory(tmp_path / "e.db", embedder="hash") as m:
        assert m.tree(depth=1).children == []
        with pytest.raises(NotFound):
            m.tree(node=1, depth=1)


def test_parts_read_from_postgresql_match_its_whole_tree(pg_url: str) -> None:
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with Memory(pg_url, embedder="hash", llm=None) as m:
        m.add_many(
            {"content": t.content, "role": t.role, "speaker": t.speaker,
             "timestamp": t.timestamp, "session": t.session}
            for t in generate_turns(300, seed=7, start=start, end=start + timedelta(days=45))
        )  # fmt: skip
        m.wait()
        whole = m.tree(messages=False)
        top = m.tree(messages=False, depth=1)
        assert [_fields(c) for c in top.children] == [_fields(c) for c in whole.children]
        deep = next(n for n in whole.walk() if len(n.path) == 2 and n.kind != "leaf")
        part = m.tree(messages=False, node=deep.id, depth=1)
        assert [_fields(c) for c in part.children] == [_fields(c) for c in deep.children]
        message = m.messages(start=150, end=151)[0]
        opened = m.tree(messages=False, depth=1, open_at=message.id)
        node = opened
        while inside := [
            c for c in node.children if c.first_index <= message.index <= c.last_index
        ]:
            node = inside[0]
            assert find(whole, node.path).id == node.id
        assert node.kind == "leaf"
