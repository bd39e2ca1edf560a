"""The window lists of schema 5 (``turn_windows``, one row per message) and the
migration that moves a store of schema 4 (the lists on every turn posting) to it.

A store of schema 4 is made from one of schema 5 by writing its tables back as
schema 4 kept them (arbormem of schema 4 wrote every posting of a message with
that message's lists); reopened, it is migrated, and it answers every search
with the same hits and scores as before.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from arbormem.store import Backend, NodeRow, Thread, open_store
from arbormem.store.postgres import schema as pg_schema
from arbormem.text import analyze

from .pg_downgrades import downgrade
from .test_pg_message_leaves import TO_SCHEMA_5
from .test_postgres_ranking import T0, WORDS, _message

QUERIES = [
    ["kite", "river", "paint", "group", "support", "lake", "tea", "novel"],
    ["dog", "dog", "walk"],
    ["guitar", "piano", "music", "sister"],
]

#: Schema 5's tables written back as schema 4 kept them.
TO_SCHEMA_4 = """
CREATE TABLE turn_postings_v4 (
    scope_id bigint NOT NULL, thread_id bigint NOT NULL, term text NOT NULL,
    doc bigint NOT NULL, tf integer NOT NULL, len integer NOT NULL,
    wids bigint[] NOT NULL, wlens integer[] NOT NULL,
    PRIMARY KEY (scope_id, thread_id, term, doc) INCLUDE (tf, len, wids, wlens));
INSERT INTO turn_postings_v4 SELECT p.scope_id, p.thread_id, p.term, p.doc, p.tf, p.len,
    w.wids, w.wlens FROM turn_postings p JOIN turn_windows w
    ON w.scope_id = p.scope_id AND w.doc = p.doc;
DROP TABLE turn_postings;
DROP TABLE turn_windows;
ALTER TABLE turn_postings_v4 RENAME TO turn_postings;
CREATE TABLE node_postings_v4 (
    scope_id bigint NOT NULL, key smallint NOT NULL, thread_id bigint NOT NULL,
    term text NOT NULL, node bigint NOT NULL, tf integer NOT NULL, len integer NOT NULL,
    PRIMARY KEY (scope_id, key, thread_id, term, node) INCLUDE (tf, len));
INSERT INTO node_postings_v4 SELECT scope_id, key, thread_id, term, node, tf, len
    FROM node_postings;
DROP TABLE node_postings;
ALTER TABLE node_postings_v4 RENAME TO node_postings;
DELETE FROM schema_migrations WHERE version >= 5
"""


def _history(store: Backend, seed: int) -> Thread:
    """Appends (deferred tails too), archives and restores, forgets."""
    rng = random.Random(seed)
    thread = store.thread("u", "a", create=True)
    assert thread is not None
    n = leaves = 0
    for _ in range(30):
        batch = []
        for _ in range(rng.randint(1, 6)):
            batch.append(_message(rng, n, f"s{rng.randint(0, 3)}"))
            n += 1
        defer = rng.random() < 0.4
        rows = store.append(thread, batch, defer_tail=defer)
        if defer and rng.random() < 0.5:
            store.write_tail_windows(thread, batch[-1].session)
        if rng.random() < 0.25:
            leaves += 1
            chosen = rng.sample(rows, k=min(2, len(rows)))
            store.set_message_leaf([r.rowid for r in chosen], leaves)
            store.set_archived(thread, [leaves], True)
            if rng.random() < 0.5:
                store.set_archived(thread, [leaves], False)
        if rng.random() < 0.2:
            uids = [r.message.id for r in store.messages(thread)]
            store.delete_messages(rng.sample(uids, k=min(2, len(uids))), thread)
    # Topics with names and contents (the node postings).
    nodes = [NodeRow(None, None, "topic", i, i, i, T0, T0) for i in range(20)]
    store.put_nodes(thread, nodes)
    for key in ("topic", "segment"):
        docs = {}
        for i, node in enumerate(nodes):
            assert node.id is not None
            words = " ".join(rng.choice(WORDS) for _ in range(1 + i % 9))
            docs[node.id] = " ".join(analyze(words))
        store.index_nodes(key, docs)
    return thread


def _answers(store: Backend, thread: Thread) -> dict[str, Any]:
    """Every lexical figure the ranking reads of the turn and window keys."""
    out: dict[str, Any] = {}
    for key in ("turn", "window"):
        out[f"stats {key}"] = store.lexical_stats(key)
        out[f"df {key}"] = store.doc_frequencies(key, WORDS)
        for terms in QUERIES:
            for after in (0, 40):
                out[f"{key} {terms} {after}"] = store.lexical_search(
                    [thread], key, terms, 200, after=after
                )
    for key in ("topic", "segment"):
        out[f"stats {key}"] = store.lexical_stats(key)
        for terms in QUERIES:
            out[f"{key} {terms}"] = store.node_search([thread], key, terms, 50)
    first = analyze(" ".join(WORDS[:12]))
    out["pairs"] = store.pair_frequencies([f"{x}_{y}" for x in first for y in first])
    return out


def _tables(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {
            "postings": conn.execute(
                "SELECT scope_id, thread_id, term, doc, tf, len, ends FROM arbormem.turn_postings"
                " ORDER BY 1, 2, 3, 4"
            ).fetchall(),
            "nodes": conn.execute(
                "SELECT scope_id, key, thread_id, term, node, tf, len FROM arbormem.node_postings"
                " ORDER BY 1, 2, 3, 4, 5"
            ).fetchall(),
            "windows": conn.execute(
                "SELECT scope_id, doc, thread_id, wids, wlens FROM arbormem.turn_windows"
                " ORDER BY 1, 2"
            ).fetchall(),
        }


def _kept_history(url: str, seed: int) -> tuple[dict[str, Any], dict[str, list[tuple[Any, ...]]]]:
    """A store at ``url`` with :func:`_history`, closed; its answers and its tables."""
    store = open_store(url)
    try:
        before = _answers(store, _history(store, seed))
    finally:
        store.close()
    return before, _tables(url)


@pytest.mark.parametrize("seed", [5, 9])
def test_a_store_of_schema_4_is_migrated_and_searches_the_same(pg_url: str, seed: int) -> None:
    before, tables = _kept_history(pg_url, seed)
    # Every message with terms has its row of lists, and only those.
    with psycopg.connect(pg_url) as conn:
        docs = conn.execute(
            "SELECT count(DISTINCT doc), (SELECT count(*) FROM arbormem.messages"
            " WHERE terms <> '') FROM arbormem.turn_postings"
        ).fetchone()
    assert docs is not None and docs[0] == docs[1] == len(tables["windows"]) > 50
    assert len(tables["nodes"]) > 100
    assert any(len(w[3]) == 5 for w in tables["windows"])  # full windows were written

    assert downgrade(pg_url, TO_SCHEMA_5 + ";" + TO_SCHEMA_4) == 4
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('arbormem.turn_windows')").fetchone() == (None,)

    store = open_store(pg_url)  # migrated on opening
    try:
        with psycopg.connect(pg_url) as conn:
            conn.execute("SET search_path TO arbormem")
            assert pg_schema.current_version(conn) == pg_schema.LATEST
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema"
                    " = 'arbormem' AND table_name = 'turn_postings' ORDER BY ordinal_position"
                ).fetchall()
            ]
            assert columns == ["scope_id", "thread_id", "term", "doc", "tf", "len", "ends"]
        # The same postings, flagged by the migration as the writes flag them.
        assert _tables(pg_url) == tables
        again = store.thread("u", "a")
        assert again is not None
        assert _answers(store, again) == before  # the same hits, scores to the last bit
        # And it goes on: an append after the migration is searched with the rest.
        rng = random.Random(seed + 1)
        rows = store.append(again, [_message(rng, 1000 + i, "s1") for i in range(6)])
        new = {r.rowid for r in rows if r.message.content}
        for key in ("turn", "window"):
            found = {rid for rid, _ in store.lexical_search([again], key, WORDS, 1000)}
            assert new and new <= found, key
    finally:
        store.close()


def test_growing_a_session_rewrites_its_window_rows_not_its_postings(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        thread = store.thread("u", "a", create=True)
        assert thread is not None
        rng = random.Random(2)
        store.append(thread, [_message(rng, i, "s") for i in range(3)])
        with psycopg.connect(pg_url) as conn:
            first = conn.execute(
                "SELECT doc, wids FROM arbormem.turn_windows ORDER BY doc"
            ).fetchall()
            postings = conn.execute("SELECT ctid, * FROM arbormem.turn_postings").fetchall()
        store.append(thread, [_message(rng, i, "s") for i in range(3, 5)])
        with psycopg.connect(pg_url) as conn:
            grown = dict(conn.execute("SELECT doc, wids FROM arbormem.turn_windows").fetchall())
            # The earlier messages' postings are where they were (none rewritten).
            assert set(postings) <= set(
                conn.execute("SELECT ctid, * FROM arbormem.turn_postings").fetchall()
            )
        # The last earlier message now also belongs to the windows of the new ones.
        doc, wids = first[-1]
        assert len(grown[doc]) > len(wids)
    finally:
        store.close()
