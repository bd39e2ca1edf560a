"""Tree upkeep's writes held in a PostgreSQL transaction (node rows, messages'
leaves) are sent before anything reads them: the same tree as SQLite's, and every
read in the transaction sees the writes before it."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from arbormem import Memory
from arbormem.ids import content_hash
from arbormem.store import Backend, NewMessage, NodeRow, Thread, open_store
from arbormem.text import analyze

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
SUBJECTS = [
    "my sister bought a red kite for the beach trip",
    "the guitar lesson moved to thursday evening",
    "we baked sourdough bread with rye flour",
    "the mountain hike needs new boots and a map",
    "our book club is reading a long russian novel",
    "the garden tomatoes need water every morning",
]


def _history(seed: int) -> list[list[dict[str, Any]]]:
    """Batches of turns: sessions, changes of subject, replies, single adds."""
    rng = random.Random(seed)
    batches: list[list[dict[str, Any]]] = []
    n = 0
    for session in range(6):
        turns = []
        for _ in range(rng.randint(6, 40)):
            subject = rng.choice(SUBJECTS)
            words = subject.split()
            rng.shuffle(words)
            turns.append(
                {
                    "content": " ".join(words[: rng.randint(3, len(words))]),
                    "role": "user" if n % 2 == 0 else "assistant",
                    "timestamp": T0 + timedelta(days=session, minutes=n),
                    "session": f"s{session}",
                }
            )
            n += 1
        cut = rng.randint(1, len(turns))
        batches.append(turns[:cut])
        batches.extend([t] for t in turns[cut : cut + 3])  # a few one at a time
        if turns[cut + 3 :]:
            batches.append(turns[cut + 3 :])
    return batches


def _tree(store: Backend, thread: Thread) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """The tree with node ids replaced by their order, and each message's leaf."""
    nodes = store.tree_nodes(thread)
    order = {n.id: i for i, n in enumerate(sorted(nodes, key=lambda n: (n.seq, n.kind)))}
    shape = sorted(
        (
            order[n.id],
            None if n.parent_id is None else order[n.parent_id],
            n.kind,
            n.level,
            n.name,
            n.summary,
            tuple(n.keyphrases),
            n.first_index,
            n.last_index,
            n.message_count,
            n.child_count,
            n.frozen,
            n.archived,
            n.chash,
        )
        for n in nodes
    )
    rows = store.messages(thread)
    leaves = store.message_leaves([r.rowid for r in rows])
    return shape, [order.get(leaves.get(r.rowid)) for r in rows]


def test_the_tree_grows_as_on_sqlite(tmp_path: Path, pg_url: str) -> None:
    stores = {"sqlite": str(tmp_path / "ref.db"), "postgres": pg_url}
    trees = {}
    for name, where in stores.items():
        with Memory(where, user="ann", agent="bot", embedder="hash", llm=None) as mem:
            for batch in _history(3):
                mem.add_many(batch)
        store = open_store(where)
        try:
            thread = store.thread("ann", "bot")
            assert thread is not None
            assert store.check_tree(thread, 1_000_000) == []
            trees[name] = _tree(store, thread)
        finally:
            store.close()
    assert len(trees["postgres"][0]) > 20  # topics, leaves and groups were made
    assert None not in trees["postgres"][1]  # every message is in a leaf
    assert trees["postgres"] == trees["sqlite"]


def _new(n: int) -> NewMessage:
    text = f"turn {n} about kites"
    return NewMessage(
        id=f"m{n}",
        role="user",
        content=text,
        timestamp=T0 + timedelta(minutes=n),
        session="s",
        terms=" ".join(analyze(text)),
        chash=content_hash(text),
    )


def _node(kind: str, parent: int | None, first: int, last: int) -> NodeRow:
    return NodeRow(
        id=None,
        parent_id=parent,
        kind=kind,
        seq=first,
        first_index=first,
        last_index=last,
        first_at=T0,
        last_at=T0,
    )


def test_reads_in_the_transaction_see_the_held_writes(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        thread = store.thread("ann", "bot", create=True)
        assert thread is not None
        with store.transaction():
            rows = store.append(thread, [_new(i) for i in range(4)])
            topic = _node("topic", None, 0, 3)
            store.put_nodes(thread, [topic])
            one, two = _node("leaf", topic.id, 0, 1), _node("leaf", topic.id, 2, 3)
            store.put_nodes(thread, [one, two])
            assert topic.id is not None and one.id is not None and two.id is not None
            store.set_message_leaves({one.id: [rows[0].rowid, rows[1].rowid]})
            # A node made and changed before anything was sent is made as changed.
            topic.child_count, topic.message_count = 2, 4
            store.put_nodes(thread, [topic])
            kids = store.tree_nodes(thread, parent=topic.id)
            assert [k.id for k in kids] == [one.id, two.id]
            assert store.tree_nodes(thread, ids=[topic.id])[0].child_count == 2
            # Leaves answered from the messages just read, then after other writes.
            read = store.messages(thread)
            assert store.message_leaves([r.rowid for r in read]) == {
                rows[0].rowid: one.id,
                rows[1].rowid: one.id,
            }
            store.set_message_leaves({two.id: [rows[2].rowid, rows[3].rowid]})
            assert store.message_leaves([rows[3].rowid]) == {rows[3].rowid: two.id}
            store.set_message_leaf([rows[3].rowid], one.id)
            assert store.message_leaves([r.rowid for r in rows]) == {
                rows[0].rowid: one.id,
                rows[1].rowid: one.id,
                rows[2].rowid: two.id,
                rows[3].rowid: one.id,
            }
            # A node already stored, changed twice: its last version is kept.
            two.name = "first"
            store.put_nodes(thread, [two])
            two.name = "second"
            store.put_nodes(thread, [two])
        assert store.tree_nodes(thread, ids=[two.id])[0].name == "second"
        # The direct placement after the held one wins once committed too.
        assert store.message_leaves([rows[3].rowid]) == {rows[3].rowid: one.id}
        # A write that fails drops what the transaction held with everything else.
        try:
            with store.transaction():
                store.put_nodes(thread, [_node("leaf", topic.id, 4, 4)])
                raise RuntimeError("abandoned")
        except RuntimeError:
            pass
        assert len(store.tree_nodes(thread)) == 3
    finally:
        store.close()
