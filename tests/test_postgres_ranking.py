"""PostgreSQL ranks as SQLite does: for a store of one scope, the same documents,
statistics and BM25 scores under every key, through appends (deferred tails
included), archiving, restoring and deleting.

SQLite's figures come from FTS5 itself (``bm25()``, ``fts5vocab``, phrase
queries); PostgreSQL's from its own postings. Row numbers differ between the two
after deletions (SQLite reuses the highest), so rows are compared by message id.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem.ids import content_hash
from arbormem.store import Backend, NewMessage, NodeRow, SQLiteBackend, Thread, open_store
from arbormem.text import analyze, pairs

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
WORDS = [
    "kite",
    "river",
    "garden",
    "dog",
    "walk",
    "paint",
    "class",
    "support",
    "group",
    "lake",
    "hill",
    "tea",
    "bread",
    "rain",
    "sun",
    "music",
    "guitar",
    "piano",
    "friend",
    "sister",
    "brother",
    "trip",
    "beach",
    "mountain",
    "book",
    "novel",
    "cook",
    "pasta",
]


@pytest.fixture
def pair(tmp_path: Path, pg_url: str) -> Iterator[tuple[Backend, Backend]]:
    lite = SQLiteBackend(tmp_path / "ref.db")
    pg = open_store(pg_url)
    yield lite, pg
    lite.close()
    pg.close()


def _message(rng: random.Random, n: int, session: str) -> NewMessage:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9)))
    return NewMessage(
        id=f"m{n}",
        role=rng.choice(["user", "assistant"]),
        content=text,
        timestamp=T0 + timedelta(minutes=n),
        session=session,
        terms=" ".join(analyze(text)),
        chash=content_hash(text),
    )


def _uids(store: Backend, thread: Thread) -> dict[int, str]:
    return {r.rowid: r.message.id for r in store.messages(thread)}


def _compare(lite: Backend, pg: Backend, a: Thread, b: Thread) -> None:
    query = ["kite", "river", "paint", "group", "support", "lake", "tea", "novel"]
    for key in ("turn", "window"):
        n_lite, mean_lite = lite.lexical_stats(key)
        n_pg, mean_pg = pg.lexical_stats(key)
        assert n_pg == n_lite and mean_pg == pytest.approx(mean_lite, rel=1e-12), key
        assert pg.doc_frequencies(key, WORDS) == lite.doc_frequencies(key, WORDS), key
        one, two = _uids(lite, a), _uids(pg, b)
        for terms in (query, query[:2], ["dog", "dog", "walk"]):
            got = [(two[r], s) for r, s in pg.lexical_search([b], key, terms, 200)]
            want = [(one[r], s) for r, s in lite.lexical_search([a], key, terms, 200)]
            assert {u for u, _ in got} == {u for u, _ in want}, (key, terms)
            scores = dict(want)
            for uid, score in got:
                assert score == pytest.approx(scores[uid], rel=1e-9, abs=1e-12), (key, uid)
    first = analyze(" ".join(WORDS[:12]))
    every = [f"{x}_{y}" for x in first for y in first]
    assert pg.pair_frequencies(every) == lite.pair_frequencies(every)
    one, two = _uids(lite, a), _uids(pg, b)
    near_lite = lite.around(sorted(one), 2)
    near_pg = pg.around(sorted(two), 2)
    assert {one[r]: [(one[x], i, t) for x, i, t in v] for r, v in near_lite.items()} == {
        two[r]: [(two[x], i, t) for x, i, t in v] for r, v in near_pg.items()
    }


@pytest.mark.parametrize("seed", [7, 11])
def test_random_histories_give_the_same_statistics_and_scores(
    pair: tuple[Backend, Backend], seed: int
) -> None:
    lite, pg = pair
    rng = random.Random(seed)
    a = lite.thread("u", "a", create=True)
    b = pg.thread("u", "a", create=True)
    assert a is not None and b is not None
    n = 0
    leaves = 0
    for step in range(40):
        batch = []
        for _ in range(rng.randint(1, 6)):
            batch.append(_message(rng, n, f"s{rng.randint(0, 3)}"))
            n += 1
        defer = rng.random() < 0.4
        rows_a = lite.append(a, batch, defer_tail=defer)
        rows_b = pg.append(b, batch, defer_tail=defer)
        if defer and rng.random() < 0.5:
            session = batch[-1].session
            assert pg.write_tail_windows(b, session) == lite.write_tail_windows(a, session)
        if rng.random() < 0.25:  # archive (or restore) a few messages through a leaf
            leaves += 1
            chosen = rng.sample(range(len(rows_a)), k=min(2, len(rows_a)))
            lite.set_message_leaf([rows_a[i].rowid for i in chosen], leaves)
            pg.set_message_leaf([rows_b[i].rowid for i in chosen], leaves)
            lite.set_archived(a, [leaves], True)
            pg.set_archived(b, [leaves], True)
            if rng.random() < 0.5:
                lite.set_archived(a, [leaves], False)
                pg.set_archived(b, [leaves], False)
        if rng.random() < 0.2:  # forget a few
            uids = [r.message.id for r in lite.messages(a)]
            gone = rng.sample(uids, k=min(2, len(uids)))
            assert lite.delete_messages(gone, a).messages == pg.delete_messages(gone, b).messages
        if step % 8 == 7:
            _compare(lite, pg, a, b)
    _compare(lite, pg, a, b)
    assert pg.archived_matches([b], ["kite", "lake"]) == lite.archived_matches(
        [a], ["kite", "lake"]
    )


@pytest.mark.parametrize("together", [False, True], ids=["apart", "one-transaction"])
def test_topic_and_segment_keys_score_as_fts5(
    pair: tuple[Backend, Backend], together: bool
) -> None:
    # ``together``: every write in one transaction, as tree upkeep does (PostgreSQL
    # then writes each node's last document once, at the commit or before a delete).
    lite, pg = pair
    rng = random.Random(3)
    scored = []
    for store in (lite, pg):
        thread = store.thread("u", "a", create=True)
        assert thread is not None
        nodes = [NodeRow(None, None, "topic", i, i, i, T0, T0) for i in range(30)]
        store.put_nodes(thread, nodes)
        docs = {}
        for i, node in enumerate(nodes):
            assert node.id is not None
            docs[node.id] = " ".join(analyze(" ".join(rng.choice(WORDS) for _ in range(i % 11))))
        with store.transaction() if together else contextlib.nullcontext():
            for key in ("topic", "segment"):
                store.index_nodes(key, docs)
                store.index_nodes(key, {nodes[3].id: "kite kite lake"} if nodes[3].id else {})
            store.delete_nodes(thread, [n.id for n in nodes[5:8] if n.id is not None])
            for key in ("topic", "segment"):
                store.index_nodes(key, {nodes[9].id: "tea lake"} if nodes[9].id else {})
        rng = random.Random(3)
        seqs = {n.id: n.seq for n in nodes}
        scored.append(
            {
                key: [
                    (seqs[i], s)
                    for i, s in store.node_search([thread], key, ["kite", "lake", "tea"], 50)
                ]
                for key in ("topic", "segment")
            }
        )
    for key in ("topic", "segment"):
        assert [s for s, _ in scored[1][key]] == [s for s, _ in scored[0][key]]
        for (_, x), (_, y) in zip(scored[1][key], scored[0][key]):
            assert x == pytest.approx(y, rel=1e-9)


def _append_turns(pair: tuple[Backend, Backend], texts: list[str], per_session: int) -> None:
    """The same user turns, a minute apart, in both stores, ``per_session`` a session."""
    for store in pair:
        thread = store.thread("u", "a", create=True)
        assert thread is not None
        store.append(
            thread,
            [
                NewMessage(
                    id=f"p{i}",
                    role="user",
                    content=t,
                    timestamp=T0 + timedelta(minutes=i),
                    session=f"s{i // per_session}",
                    terms=" ".join(analyze(t)),
                    chash=content_hash(t),
                )
                for i, t in enumerate(texts)
            ],
        )


def test_pairs_span_two_turns_of_a_window(pair: tuple[Backend, Backend]) -> None:
    lite, pg = pair
    texts = ["we walked to the lake", "support group tonight", "group", "support", "lake tea"]
    _append_turns(pair, texts, per_session=len(texts))
    wanted = pairs(analyze(" ".join(texts)))
    assert pg.pair_frequencies(wanted) == lite.pair_frequencies(wanted)


def test_pair_counts_are_the_same_led_by_either_term(pair: tuple[Backend, Backend]) -> None:
    # PostgreSQL counts a pair from the postings of its rarer term: "dog" is in most
    # turns here and "kite" in few, so "dog_kite" is led by its second term and
    # "kite_dog" by its first. Both must count what SQLite counts: the pair inside a
    # turn, and across two turns with a turn of no terms between them.
    lite, pg = pair
    texts = [
        "dog",
        "the and of",
        "kite dog",
        "dog kite",
        "dog dog walk",
        "kite",
        "dog",
        "walk the dog",
        "dog",
        "of the",
        "kite river",
    ]
    _append_turns(pair, texts, per_session=6)
    words = ["dog", "kite", "walk", "river"]
    wanted = [f"{x}_{y}" for x in words for y in words]
    got = pg.pair_frequencies(wanted)
    assert got == lite.pair_frequencies(wanted)
    assert got["dog_kite"] > 0 and got["kite_dog"] > 0


def test_idf_survives_counts_read_while_another_process_writes() -> None:
    # The number of documents is read before a term's count; another process's commit
    # in between can make the count the larger (a search failed with a math error).
    from arbormem.store.postgres.common import IDF_FLOOR, fts5_idf

    assert fts5_idf(10, 12) == fts5_idf(10, 10) == IDF_FLOOR
    assert fts5_idf(10, 1) > fts5_idf(10, 4) > 0
