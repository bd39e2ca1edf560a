"""Tree upkeep reads back from the store only what its grow did not make: a batch's
term counts are read once, and the topics the grow made are named, and make room,
from the children it holds. What it holds is what the store holds (checked at every
use), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from arbormem import Memory
from arbormem.bench.synth import generate_turns
from arbormem.store import Backend, NodeRow
from arbormem.tree.grow import TreeGrower
from arbormem.tree.naming import TopicNaming


def _turns(n: int, seed: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "content": t.content,
            "role": t.role,
            "speaker": t.speaker,
            "timestamp": t.timestamp,
            "session": t.session,
        }
        for t in generate_turns(n, seed=seed)
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "t.db")
    url: str = request.getfixturevalue("pg_url")
    return url


def _counting(
    monkeypatch: pytest.MonkeyPatch, backend: Backend, name: str, calls: list[Any]
) -> None:
    method: Callable[..., Any] = getattr(backend, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return method(*args, **kwargs)

    monkeypatch.setattr(backend, name, counted)


def test_an_import_reads_term_counts_once_and_no_children_it_made(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(where, user="ann", agent="bot", embedder="hash", llm=None) as mem:
        mem.add_many(_turns(40))  # a session begins before the batch measured
        counts: list[Any] = []
        reads: list[Any] = []
        _counting(monkeypatch, mem.backend, "term_frequencies", counts)
        _counting(monkeypatch, mem.backend, "tree_nodes", reads)
        turns = _turns(640)[40:]
        mem.add_many(turns)
        sessions = len({t["session"] for t in turns})
        thread = mem.backend.thread("ann", "bot")
        assert thread is not None
        frozen = mem.backend.tree_nodes(thread, kinds=["topic"], frozen=True)
    assert sessions >= 15 and len(frozen) > 100  # many topics froze and were named
    # Each topic named read its new terms' counts, and a session's topic its children.
    assert len(counts) <= 1
    children = [kw for _, kw in reads if kw.get("parent", ...) is not ...]
    # The session the batch continued, and the root's children when it is full.
    assert len(children) <= 2 + sessions // 4, children


def test_what_the_grow_holds_is_what_the_store_holds(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = {"children": 0, "counts": 0, "room": 0}
    digest = TopicNaming.digest
    read_frequencies = TopicNaming._read_frequencies
    groupable = TreeGrower._groupable_run
    grower: TreeGrower | None = None

    def shape(nodes: Sequence[NodeRow]) -> list[tuple[Any, ...]]:
        return [
            (n.id, n.parent_id, n.kind, n.seq, n.level, n.name, n.keyphrases, n.frozen)
            for n in nodes
        ]

    def stored_children(self: TopicNaming, parent: int | None) -> list[NodeRow]:
        self._place_messages()
        thread = self.backend.thread("ann", "bot")
        assert thread is not None
        return self.backend.tree_nodes(thread, parent=parent)

    def digest_checked(  # type: ignore[no-untyped-def]
        self, thread, node, children=None, messages=None, *, holds_leaf=False
    ):
        if children is not None and children and children[0].parent_id == node.id:
            assert shape(children) == shape(stored_children(self, node.id)), node.id
            checked["children"] += 1
        return digest(self, thread, node, children, messages, holds_leaf=holds_leaf)

    def counts_checked(self: TopicNaming, missing: Sequence[str]) -> tuple[dict[str, int], int]:
        found = read_frequencies(self, missing)
        assert found == self.backend.term_frequencies(missing)
        checked["counts"] += 1
        return found

    def room_checked(children: Sequence[NodeRow], active: set[int | None]) -> list[NodeRow]:
        assert grower is not None
        parent = children[0].parent_id
        stored = stored_children(grower, parent)
        # The store has what the grow wrote; rows it changes as it goes (counts,
        # ranges) are written at its end, so only what width control reads is compared.
        assert [(n.id, n.kind, n.level, n.frozen) for n in children] == [
            (n.id, n.kind, n.level, n.frozen) for n in stored
        ]
        checked["room"] += 1
        return groupable(children, active)

    monkeypatch.setattr(TopicNaming, "digest", digest_checked)
    monkeypatch.setattr(TopicNaming, "_read_frequencies", counts_checked)
    monkeypatch.setattr(TreeGrower, "_groupable_run", staticmethod(room_checked))
    with Memory(where, user="ann", agent="bot", embedder="hash", llm=None) as mem:
        grower = mem.engine.grower
        turns = _turns(1500, seed=3)
        for start in range(0, len(turns), 370):
            mem.add_many(turns[start : start + 370])
        thread = mem.backend.thread("ann", "bot")
        assert thread is not None
        assert mem.backend.check_tree(thread, 1_000_000) == []
    assert checked["children"] > 20 and checked["counts"] >= 4 and checked["room"] > 5, checked
