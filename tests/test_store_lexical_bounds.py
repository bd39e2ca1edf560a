"""Full-text searches of some threads of a SQLite store of many: the match is bounded
by the searched threads' row numbers (messages) or node ids (tree nodes), and
finds exactly the rows and bm25 scores the unbounded query finds, whatever order
the threads' rows were written in."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem.ids import content_hash
from arbormem.store import NewMessage, NodeRow
from arbormem.store.sqlite import SQLiteBackend
from arbormem.store.types import Thread
from arbormem.text import analyze

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)

WORDS = ["kite", "boat", "garden", "harbour", "river", "lamp"]


def text_of(i: int) -> str:
    # Each term in some turns only, a few turns with repeats (bm25 ties and spreads).
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 4))


def reference(
    path: Path, key: str, threads: list[Thread], terms: list[str], limit: int, after: int = 0
) -> list[tuple[int, float]]:
    """The unbounded query, read apart from the store: live rows of these threads."""
    table = f"{key}_fts"
    rows_of = "tree_nodes" if key in ("topic", "segment") else "messages"
    query = " OR ".join(f'"{t}"' for t in terms)
    marks = ",".join(str(int(t.id)) for t in threads)
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            f"SELECT f.rowid, bm25({table}) AS r FROM {table} f JOIN {rows_of} m ON m.id = f.rowid"
            f" WHERE {table} MATCH ? AND f.rowid > ? AND m.thread_id IN ({marks})"
            " AND m.archived = 0 ORDER BY r LIMIT ?",
            (query, after, limit),
        ).fetchall()
    finally:
        conn.close()
    return [(int(r), -float(s)) for r, s in rows if s < 0]


def interleaved(
    path: Path, users: list[str], rounds: int, batch: int, start: int = 0
) -> list[Thread]:
    """A store whose threads were written a few messages at a time in turn, so
    their row numbers interleave."""
    store = SQLiteBackend(path)
    threads = [store.thread(u, "a", create=True) for u in users]
    n = start
    for r in range(rounds):
        for thread in threads:
            assert thread is not None
            msgs = []
            for _ in range(batch):
                n += 1
                text = text_of(n)
                msgs.append(
                    NewMessage(
                        id=f"m{n}",
                        role="user",
                        content=text,
                        timestamp=T0 + timedelta(minutes=n),
                        session=f"s{r % 3}",
                        terms=" ".join(analyze(text)),
                        chash=content_hash(f"{n} {text}"),
                    )
                )
            store.append(thread, msgs)
    store.close()
    return [t for t in threads if t is not None]


@pytest.mark.parametrize("key", ["turn", "window"])
def test_interleaved_threads_find_every_row_of_their_own(tmp_path: Path, key: str) -> None:
    path = tmp_path / "s.db"
    threads = interleaved(path, ["ann", "bob", "cy"], rounds=6, batch=3)
    store = SQLiteBackend(path)
    ann, bob, cy = threads
    # Ann's rows are the first and the last few of the store's and Bob's lie
    # between Ann's: a bound that left out either end, or assumed a thread's rows
    # run together, would lose some.
    for searched in ([ann], [bob], [cy], [ann, cy], [bob, cy]):
        for terms in (["kite"], ["boat", "lamp"], WORDS, ["absent"]):
            for limit in (1, 5, 200):
                for after in (0, 4, 40):
                    got = store.lexical_search(searched, key, terms, limit, after=after)
                    want = reference(path, key, searched, terms, limit, after)
                    assert got == want, (searched, terms, limit, after)
    # Every row of the thread is found when the limit allows it.
    everyone = store.lexical_search([ann], key, WORDS, 1000)
    assert len(everyone) == 18
    store.close()


def test_the_bounds_follow_new_and_forgotten_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ann, bob = interleaved(path, ["ann", "bob"], rounds=3, batch=2)
    store = SQLiteBackend(path)
    for key in ("turn", "window"):  # searched once before the changes
        assert store.lexical_search([bob], key, WORDS, 100)
    # Bob's first two messages and Ann's last forgotten, then one more each: both
    # threads' spans move at both ends.
    store.delete_messages(["m3", "m4", "m10"])
    store.close()
    more = interleaved(path, ["bob", "ann"], rounds=1, batch=1, start=100)
    assert [t.id for t in more] == [bob.id, ann.id]
    store = SQLiteBackend(path)
    for searched in ([ann], [bob]):
        for key in ("turn", "window"):
            for terms in (["kite"], WORDS):
                got = store.lexical_search(searched, key, terms, 100)
                assert got == reference(path, key, searched, terms, 100)
    assert len(store.lexical_search([bob], "turn", WORDS, 100)) == 5
    store.close()


def test_a_searched_thread_with_no_messages_finds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    interleaved(path, ["ann", "bob"], rounds=2, batch=2)
    store = SQLiteBackend(path)
    empty = store.thread("cy", "a", create=True)
    assert empty is not None
    for key in ("turn", "window"):
        assert store.lexical_search([empty], key, WORDS, 10) == []
    assert store.node_search([empty], "segment", WORDS, 10) == []
    store.close()


def test_a_thread_that_is_not_stored_brings_in_no_other(tmp_path: Path) -> None:
    # Searching a stored thread with one that is gone (forgotten meanwhile): the
    # store holds as many threads as are searched, but not only those.
    path = tmp_path / "s.db"
    ann, bob = interleaved(path, ["ann", "bob"], rounds=2, batch=2)
    store = SQLiteBackend(path)
    gone = Thread(id=max(ann.id, bob.id) + 12345, user="gone", agent="a")
    for key in ("turn", "window"):
        got = store.lexical_search([ann, gone], key, WORDS, 100)
        assert got == reference(path, key, [ann], WORDS, 100)
        assert got
    store.close()


def _nodes(store: SQLiteBackend, plan: list[tuple[Thread, str, bool]]) -> list[int]:
    """Nodes written one at a time in this order: (thread, kind, frozen)."""
    ids = []
    for seq, (thread, kind, frozen) in enumerate(plan):
        node = NodeRow(None, None, kind, seq, seq, seq, T0, T0, frozen=frozen)
        store.put_nodes(thread, [node])
        assert node.id is not None
        ids.append(int(node.id))
    return ids


def test_node_searches_of_interleaved_trees_find_every_node_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    ann = store.thread("ann", "a", create=True)
    bob = store.thread("bob", "a", create=True)
    assert ann is not None and bob is not None
    # Ann's first node is a leaf and her last a frozen group, her topics between:
    # the kinds and states sort otherwise than the ids, and Bob's nodes interleave.
    plan = [
        (ann, "leaf", False),
        (bob, "topic", True),
        (ann, "topic", True),
        (bob, "leaf", False),
        (ann, "topic", False),
        (bob, "group", True),
        (ann, "group", False),
        (bob, "topic", False),
        (ann, "group", True),
    ]
    ids = _nodes(store, plan)
    docs = {node: text_of(i + 1) + " kite" for i, node in enumerate(ids)}
    store.index_nodes("segment", docs)
    store.index_nodes("topic", docs)
    for key in ("segment", "topic"):
        for searched in ([ann], [bob], [ann, bob]):
            for terms in (["kite"], ["boat", "lamp"], WORDS):
                for limit in (1, 3, 50):
                    for after in (0, ids[0], ids[3]):
                        got = store.node_search(searched, key, terms, limit, after=after)
                        want = reference(path, key, searched, terms, limit, after)
                        assert got == want, (key, searched, terms, limit, after)
        mine = {n for n, _ in store.node_search([ann], key, ["kite"], 50)}
        assert mine == {n for n, (t, _, _) in zip(ids, plan) if t is ann}
    store.close()
