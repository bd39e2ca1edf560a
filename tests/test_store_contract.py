"""The contract every storage back-end must honour: SQLite (a file, in memory) and
PostgreSQL (a throwaway server, see tests/pg_fixtures.py)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from arbormem.errors import SchemaError, StoreError
from arbormem.ids import content_hash
from arbormem.store import Backend, Filters, NewMessage, SQLiteBackend
from arbormem.store.sqlite.schema import LATEST
from arbormem.store.types import PURGE_PENDING, NodeRow, TreeState
from arbormem.text import analyze

from .backends import backend
from .conftest import UNDO_SCHEMA_FROM_13

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

__all__ = ["backend"]  # the fixture: every back-end


def msg(
    text: str, session: str = "s1", i: int = 0, role: str = "user", uid: str | None = None
) -> NewMessage:
    return NewMessage(
        id=uid or f"id-{text[:20]}-{i}",
        role=role,
        content=text,
        timestamp=T0 + timedelta(minutes=i),
        session=session,
        terms=" ".join(analyze(text)),
        chash=content_hash(text),
    )


def test_threads_are_per_user_and_agent(backend: Backend) -> None:
    a = backend.thread("alice", "bot", create=True)
    assert backend.thread("alice", "bot") == a
    assert backend.thread("alice", "other") is None
    b = backend.thread("bob", "bot", create=True)
    assert a is not None and b is not None and a.id != b.id
    assert [t.user for t in backend.threads("alice")] == ["alice"]


def test_threads_are_per_tenant_and_one_tenant_reaches_no_other(backend: Backend) -> None:
    mine = backend.thread("alice", "bot", create=True, tenant="acme")
    theirs = backend.thread("alice", "bot", create=True, tenant="globex")
    assert mine is not None and theirs is not None and mine.id != theirs.id
    assert (mine.tenant, theirs.tenant) == ("acme", "globex")
    assert backend.thread("alice", "bot") is None  # the default tenant has none
    assert backend.thread("alice", "bot", tenant="acme") == mine
    assert backend.threads("alice", tenant="acme") == [mine]
    assert backend.threads(tenant="globex") == [theirs]
    assert backend.threads() == []
    assert backend.threads("alice", tenant=None) == [mine, theirs]
    backend.append(mine, [msg("acme secret plans", "s1", 0)])
    backend.append(theirs, [msg("globex public notes", "s1", 0)])
    assert [r.message.content for r in backend.messages(theirs)] == ["globex public notes"]
    # Every row names its thread's tenant, whichever query read it.
    assert [r.message.tenant for r in backend.messages(mine)] == ["acme"]
    found = backend.lexical_search([theirs], "turn", analyze("secret plans notes"), 10)
    rows = backend.rows([rowid for rowid, _ in found])
    assert [rows[rowid].message.content for rowid, _ in found] == ["globex public notes"]


def test_append_assigns_positions_and_sessions(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    rows = backend.append(t, [msg("one", "s1", 0), msg("two", "s1", 1), msg("three", "s2", 2)])
    assert [r.message.index for r in rows] == [0, 1, 2]
    assert [s.id for s in backend.sessions(t)] == ["s1", "s2"]
    assert backend.last_session(t).id == "s2"  # type: ignore[union-attr]
    assert backend.count(t) == 3 and backend.state(t).next_index == 3
    assert len(backend.sessions(t)) == 2
    assert [r.message.content for r in backend.messages(t, session="s1")] == ["one", "two"]
    assert [r.message.index for r in backend.messages(t, start=1, end=3)] == [1, 2]
    assert [r.message.content for r in backend.messages(t, last=2)] == ["two", "three"]
    assert [r.message.content for r in backend.messages(t, session="s1", last=5)] == [
        "one",
        "two",
    ]


def test_messages_by_content_hash_stay_in_their_thread_and_order(backend: Backend) -> None:
    a = backend.thread("alice", "bot", create=True)
    b = backend.thread("bob", "bot", create=True)
    assert a is not None and b is not None
    backend.append(a, [msg("ok", i=0), msg("hello", i=1), msg("ok", "s2", i=2), msg("bye", i=3)])
    backend.append(b, [msg("ok", i=0, uid="bob-ok")])
    found = backend.with_hashes(a, [content_hash("ok"), content_hash("bye"), content_hash("x")])
    assert [(r.message.content, r.message.index) for r in found] == [
        ("ok", 0),
        ("ok", 2),
        ("bye", 3),
    ]
    # The reference version every back-end inherits gives the same answer.
    assert Backend.with_hashes(backend, a, [content_hash("ok"), content_hash("bye")]) == found
    assert backend.with_hashes(b, []) == []


def test_time_span_is_by_time_not_position(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t and backend.time_span(t) is None
    backend.append(t, [msg("recent", "new", 500), msg("later", "new", 900)])
    backend.append(t, [msg("backfilled", "old", 0), msg("old reply", "old", 3)])
    assert backend.time_span(t) == (T0, T0 + timedelta(minutes=900))
    assert Backend.time_span(backend, t) == backend.time_span(t)


def test_leaf_messages_are_taken_by_leaf_in_thread_order(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    rows = backend.append(t, [msg(w, "s1", i) for i, w in enumerate(["a b", "c d", "e f", "g h"])])
    backend.set_message_leaf([rows[3].rowid, rows[0].rowid], 7)
    backend.set_message_leaf([rows[1].rowid], 8)
    assert [r.message.content for r in backend.leaf_messages(t, [7])] == ["a b", "g h"]
    assert [r.message.index for r in backend.leaf_messages(t, [8, 7])] == [0, 1, 3]
    assert backend.leaf_messages(t, []) == []


def test_moving_messages_to_a_leaf_moves_their_trees_version_and_no_other(
    backend: Backend,
) -> None:
    # Searches keep the leaf of each message under its tree's version (tree/recall.py).
    t, other = backend.thread("u", "a", create=True), backend.thread("v", "a", create=True)
    assert t and other
    mine = backend.append(t, [msg("a b", "s1", 0), msg("c d", "s1", 1)])
    backend.append(other, [msg("e f", "s1", 0)])
    for thread in (t, other):
        backend.set_tree_state(thread, TreeState())
    before = backend.tree_state(t).version, backend.tree_state(other).version
    backend.set_message_leaf([mine[1].rowid], 9)
    assert backend.tree_state(t).version > before[0]
    assert backend.tree_state(other).version == before[1]
    assert backend.message_leaves([r.rowid for r in mine]) == {mine[1].rowid: 9}
    # Several leaves at once, as tree upkeep places them: the same.
    moved = backend.tree_state(t).version
    backend.set_message_leaves({10: [mine[0].rowid], 11: [mine[1].rowid]})
    assert backend.tree_state(t).version > moved
    assert backend.tree_state(other).version == before[1]
    assert backend.message_leaves([r.rowid for r in mine]) == {mine[0].rowid: 10, mine[1].rowid: 11}


def test_around_gives_each_message_its_live_session_neighbours_in_order(
    backend: Backend,
) -> None:
    t, other = backend.thread("u", "a", create=True), backend.thread("v", "a", create=True)
    assert t and other
    words = [
        "apple",
        "bread",
        "cheese",
        "dough",
        "egg",
        "flour",
        "grape",
        "honey",
        "ice",
        "jam",
        "kale",
        "lemon",
        "mint",
        "nut",
        "oat",
    ]
    layout = ["s1"] * 8 + ["s2"] * 2 + ["s3"] * 5
    rows = []
    for i, (word, session) in enumerate(zip(words, layout)):
        rows += backend.append(t, [msg(f"{word} talk", session, i)])
        backend.append(other, [msg(f"{word} noise", "s1", i)])  # rowids interleave
    backend.set_message_leaf([rows[11].rowid], 41)
    backend.set_archived(t, [41], True)
    live = [r for r in rows if r.rowid != rows[11].rowid]
    # Alone in the middle of a session, at its edges, side by side, archived, twice.
    anchors = [rows[i].rowid for i in (0, 4, 8, 9, 11, 12, 14)] + [rows[4].rowid]
    got = backend.around(anchors, 2)
    for rowid in anchors:
        me = next(r for r in rows if r.rowid == rowid).message
        want = [
            (r.rowid, r.message.index, " ".join(analyze(r.message.content)))
            for r in live
            if r.message.session == me.session and abs(r.message.index - me.index) <= 2
        ]
        assert got[rowid] == want, (me.index, me.session)
    assert set(got) == set(anchors)
    assert backend.around([], 2) == {}


def test_session_members_follow_membership(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    rows = backend.append(t, [msg("one", "s1", 0), msg("two", "s1", 1), msg("three", "s2", 2)])
    members = backend.session_members(t, ["s1", "s2", "nope"])
    assert members == {"s1": [rows[0].rowid, rows[1].rowid], "s2": [rows[2].rowid], "nope": []}
    more = backend.append(t, [msg("four", "s1", 3)])
    assert backend.session_members(t, ["s1"])["s1"][-1] == more[0].rowid


def test_lexical_keys_and_filters(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    backend.append(
        t,
        [
            msg("the red kite flew", "s1", 0),
            msg("it was windy", "s1", 1),
            msg("kite repair shop", "s2", 2, role="assistant"),
        ],
    )
    turn = backend.lexical_search([t], "turn", ["kite"], 10)
    assert len(turn) == 2 and all(score > 0 for _, score in turn)
    window = {r for r, _ in backend.lexical_search([t], "window", ["windi"], 10)}
    assert len(window) == 2  # "it was windy" and its neighbour "the red kite flew"
    only_s2 = backend.lexical_search([t], "turn", ["kite"], 10, Filters(sessions=("s2",)))
    assert len(only_s2) == 1
    roles = backend.lexical_search([t], "turn", ["kite"], 10, Filters(roles=("user",)))
    assert len(roles) == 1
    later = backend.lexical_search(
        [t], "turn", ["kite"], 10, Filters(since=T0 + timedelta(minutes=1))
    )
    assert len(later) == 1


def test_span_search_equals_one_search_per_span_inside_the_filters(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    texts = ["kite flying day", "kite kite repair", "lost the kite", "new kite string"]
    backend.append(t, [msg(text, "s1", 60 * i) for i, text in enumerate(texts * 3)])
    hour = timedelta(hours=1)
    spans = [(T0, T0 + 3 * hour), (T0 + 2 * hour, T0 + 7 * hour), (T0 + 20 * hour, T0 + 30 * hour)]
    for filters in (None, Filters(since=T0 + 2 * hour), Filters(until=T0 + 5 * hour)):
        for limit in (1, 2, 10):
            got = backend.lexical_search_spans([t], "turn", ["kite"], limit, spans, filters)
            expected = Backend.lexical_search_spans(
                backend, [t], "turn", ["kite"], limit, spans, filters
            )
            assert got == expected
            assert sum(map(len, got)) > 0


def test_pair_frequencies_count_windows_with_the_two_terms_side_by_side(
    backend: Backend,
) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    texts = ["support group tonight", "a quiet evening", "more quiet days", "group support"]
    texts += [f"filler number {i}" for i in range(6)] + ["the support group again"]
    backend.append(t, [msg(text, "s1", i) for i, text in enumerate(texts)])
    # Windows span two turns each side: "support group" (turn 0) lies in the windows
    # of turns 0-2, and turn 10's in those of turns 8-10. "group support" is another
    # pair, in the windows of turns 1-5; "quiet evening" in those of turns 0-3.
    counts = backend.pair_frequencies(["support_group", "group_support", "quiet_evening", "x_y"])
    assert counts == {"support_group": 6, "group_support": 5, "quiet_evening": 4, "x_y": 0}
    backend.delete_messages([backend.messages(t)[-1].message.id])
    assert backend.pair_frequencies(["support_group"]) == {"support_group": 3}


def test_node_search_keeps_to_its_threads_and_leaves_archived_nodes_out(
    backend: Backend,
) -> None:
    from arbormem.store import NodeRow

    def topic(seq: int, archived: bool = False) -> NodeRow:
        return NodeRow(None, None, "topic", seq, seq, seq, T0, T0, archived=archived)

    mine = backend.thread("u", "a", create=True)
    assert mine
    kept, hidden = topic(0), topic(1, archived=True)
    backend.put_nodes(mine, [kept, hidden])
    assert kept.id is not None and hidden.id is not None
    backend.index_nodes("segment", {kept.id: "kite repair", hidden.id: "kite shop"})
    # Alone in the store, then with another thread beside it: the same answer.
    assert [n for n, _ in backend.node_search([mine], "segment", ["kite"], 10)] == [kept.id]
    other = backend.thread("v", "a", create=True)
    assert other
    theirs = topic(0)
    backend.put_nodes(other, [theirs])
    assert theirs.id is not None
    backend.index_nodes("segment", {theirs.id: "kite flying"})
    assert [n for n, _ in backend.node_search([mine], "segment", ["kite"], 10)] == [kept.id]
    both = {n for n, _ in backend.node_search([mine, other], "segment", ["kite"], 10)}
    assert both == {kept.id, theirs.id}


def test_searches_after_a_row_are_the_unbounded_ones_past_it(backend: Backend) -> None:
    from arbormem.store import NodeRow

    a = backend.thread("u", "a", create=True)
    b = backend.thread("u", "b", create=True)
    assert a and b
    words = ["kite flying day", "kite kite repair", "lost the kite", "new kite string"]
    rows = [
        backend.append(a if i % 3 else b, [msg(f"{words[i % 4]} {i}", f"s{i // 8}", i)])[0]
        for i in range(40)
    ]
    after = rows[25].rowid
    for threads in ([a], [a, b]):
        for f in (None, Filters(roles=("user",))):
            full = backend.lexical_search(threads, "turn", ["kite"], 100, f)
            want = [hit for hit in full if hit[0] > after][:4]
            assert backend.lexical_search(threads, "turn", ["kite"], 4, f, after=after) == want
            assert len(want) == 4
    nodes = [NodeRow(None, None, "topic", i, i, i, T0, T0) for i in range(6)]
    backend.put_nodes(a, nodes)
    backend.index_nodes("segment", {n.id: f"kite {i}" for i, n in enumerate(nodes) if n.id})
    assert nodes[2].id is not None
    found = backend.node_search([a], "segment", ["kite"], 10, after=nodes[2].id)
    assert sorted(n for n, _ in found) == [n.id for n in nodes[3:]]


def test_date_bounded_searches_by_row_range_match_the_unbounded_ones(tmp_path: Path) -> None:
    store = SQLiteBackend(tmp_path / "ranges.db")
    a = store.thread("u", "a", create=True)
    b = store.thread("u", "b", create=True)
    assert a and b
    words = ["kite flying day", "kite kite repair", "lost the kite", "new kite string", "rain"]
    for i in range(40):  # the two threads' row numbers interleave
        store.append(a if i % 3 else b, [msg(f"{words[i % 5]} {i}", f"s{i // 8}", 30 * i)])
    hour = timedelta(hours=1)
    spans = [(T0, T0 + 3 * hour), (T0 + 2 * hour, T0 + 7 * hour), (T0 + 90 * hour, T0 + 99 * hour)]
    filters = [None, Filters(since=T0 + 2 * hour), Filters(until=T0 + 5 * hour)]

    def searches() -> list[object]:
        out: list[object] = []
        for threads in ([a], [b], [a, b]):
            for f in filters:
                out.append(store.lexical_search(threads, "window", ["kite"], 3, f))
                for limit in (1, 2, 10):
                    out.append(
                        store.lexical_search_spans(threads, "turn", ["kite"], limit, spans, f)
                    )
        return out

    conn = store._writer
    assert store._rowid_range(conn, [a, b], "", None) is not None  # the bounded path runs
    bounded = searches()
    conn.execute("UPDATE threads SET time_ordered = 0")
    assert store._rowid_range(conn, [a], "", None) is None
    assert searches() == bounded
    assert any(bounded) and bounded[-1] != bounded[-4]  # the filters changed something
    store.close()


def test_a_message_stored_out_of_time_order_turns_off_row_ranges(tmp_path: Path) -> None:
    store = SQLiteBackend(tmp_path / "order.db")
    t = store.thread("u", "a", create=True)
    assert t
    store.append(t, [msg("kite one", "new", 500), msg("kite two", "new", 500)])  # ties are fine
    assert store._rowid_range(store._writer, [t], "", None) == (1, 2)
    backfilled = store.append(t, [msg("old kite story", "old", 10)])
    assert store._rowid_range(store._writer, [t], "", None) is None
    span = [(T0, T0 + timedelta(minutes=20))]
    assert [r for r, _ in store.lexical_search_spans([t], "turn", ["kite"], 5, span)[0]] == [
        backfilled[0].rowid
    ]
    store.close()
    # An existing file learns its threads' order when it is upgraded.
    conn = sqlite3.connect(tmp_path / "order.db")
    conn.execute("UPDATE threads SET time_ordered = 1")
    conn.execute("ALTER TABLE threads DROP COLUMN time_ordered")
    conn.executescript(UNDO_SCHEMA_FROM_13)
    conn.execute("DELETE FROM schema_migrations WHERE version >= 12")
    conn.commit()
    conn.close()
    store = SQLiteBackend(tmp_path / "order.db")
    assert store._rowid_range(store._writer, [t], "", None) is None
    store.close()


def test_searches_fill_their_limit_past_many_archived_matches(tmp_path: Path) -> None:
    from arbormem.store import NodeRow

    store = SQLiteBackend(tmp_path / "one.db")  # one thread: the searches' fast path
    t = store.thread("u", "a", create=True)
    assert t
    hidden = [NodeRow(None, None, "topic", i, i, i, T0, T0, archived=True) for i in range(30)]
    live = [NodeRow(None, None, "topic", 30 + i, 0, 0, T0, T0) for i in range(10)]
    store.put_nodes(t, hidden + live)
    # The archived topics match best (short documents, all about kites).
    store.index_nodes("segment", {n.id: "kite" for n in hidden if n.id is not None})
    store.index_nodes("segment", {n.id: "kite " + "other " * 20 for n in live if n.id})
    found = [n for n, _ in store.node_search([t], "segment", ["kite"], 10)]
    assert sorted(found) == sorted(n.id for n in live)
    rows = store.append(
        t,
        [msg(f"kite {i}" if i < 30 else f"kite and {'more ' * 20}{i}", "s", i) for i in range(40)],
    )
    store.set_message_leaf([r.rowid for r in rows[:30]], 999)
    store.set_archived(t, [999], True)
    turns = {r for r, _ in store.lexical_search([t], "turn", ["kite"], 10)}
    assert len(turns) == 10 and turns <= {r.rowid for r in rows[30:]}
    store.close()


def test_session_vector_sums_follow_appends_and_are_dropped_when_members_change(
    backend: Backend,
) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    rng = np.random.default_rng(0)
    first = [msg("alpha river", "s1", 0), msg("beta hill", "s1", 1), msg("gamma lake", "s2", 2)]
    vecs = {m.chash: rng.normal(size=4).astype(np.float32) for m in first}
    backend.append(t, first, vecs, "model-a")
    sums = backend.session_vector_sums(t, ["s1", "s2", "nope"], "model-a")
    assert sorted(sums) == ["s1", "s2"]
    assert np.allclose(sums["s1"], vecs[first[0].chash] + vecs[first[1].chash], atol=1e-6)
    assert backend.session_vector_sums(t, ["s1"], "model-b") == {}
    more = msg("delta dune", "s1", 3)
    vecs[more.chash] = rng.normal(size=4).astype(np.float32)
    backend.append(t, [more], {more.chash: vecs[more.chash]}, "model-a")
    expected = sum(vecs[m.chash] for m in [*first[:2], more])
    assert np.allclose(backend.session_vector_sums(t, ["s1"], "model-a")["s1"], expected, atol=1e-6)
    # A message stored without a vector: the sum would miss it, so it goes, and the
    # session's next append does not start a partial one.
    bare = msg("epsilon cove", "s2", 4)
    backend.append(t, [bare])
    assert backend.session_vector_sums(t, ["s2"], "model-a") == {}
    later = msg("eta reef", "s2", 6)
    backend.append(t, [later], {later.chash: rng.normal(size=4).astype(np.float32)}, "model-a")
    assert backend.session_vector_sums(t, ["s2"], "model-a") == {}
    # Nor does another model's first vectors in an old session.
    other = msg("theta isle", "s2", 7)
    backend.append(t, [other], {other.chash: np.ones(4, np.float32)}, "model-b")
    assert backend.session_vector_sums(t, ["s2"], "model-b") == {}
    # Forgetting a member drops the sum; the session's next append sums it all again.
    backend.delete_messages([first[1].id])
    assert backend.session_vector_sums(t, ["s1"], "model-a") == {}
    last = msg("zeta bay", "s1", 5)
    vecs[last.chash] = rng.normal(size=4).astype(np.float32)
    backend.append(t, [last], {last.chash: vecs[last.chash]}, "model-a")
    expected = sum(vecs[m.chash] for m in [first[0], more, last])
    assert np.allclose(backend.session_vector_sums(t, ["s1"], "model-a")["s1"], expected, atol=1e-6)


def test_every_session_sum_in_one_pass_and_the_sessions_written_from_a_position(
    backend: Backend,
) -> None:
    t, other = backend.thread("u", "a", create=True), backend.thread("v", "a", create=True)
    assert t and other
    rng = np.random.default_rng(1)
    first = [msg("alpha river", "s1", 0), msg("beta hill", "s1", 1), msg("gamma lake", "s2", 2)]
    vecs = {m.chash: rng.normal(size=4).astype(np.float32) for m in first}
    backend.append(t, first, vecs, "model-a")
    backend.append(
        other,
        [msg("omega sea", "s9", 0)],
        {content_hash("omega sea"): vecs[first[0].chash]},
        "model-a",
    )
    read = backend.every_session_vector_sum(t, "model-a", 4)
    if read is None:  # a back-end that keeps no sums
        assert backend.session_vector_sums(t, ["s1", "s2"], "model-a") == {}
        return
    keys, matrix = read
    one = backend.session_vector_sums(t, ["s1", "s2"], "model-a")
    assert sorted(keys) == ["s1", "s2"] and matrix.shape == (2, 4) and matrix.dtype == np.float32
    assert all(np.allclose(matrix[i], one[k]) for i, k in enumerate(keys))
    for model, dims in (("model-b", 4), ("model-a", 8)):  # nothing under another model or size
        none = backend.every_session_vector_sum(t, model, dims)
        assert none is not None and none[0] == [] and none[1].shape == (0, dims)
    stop = threading.Event()
    stop.set()
    assert backend.every_session_vector_sum(t, "model-a", 4, stop) is None
    assert not matrix.flags.writeable  # shared by every search
    assert backend.sessions_written_from(t, 3) == []
    backend.append(t, [msg("delta dune", "s1", 3), msg("eps cove", "s3", 4)])
    backend.append(other, [msg("zeta bay", "s8", 1)])
    assert sorted(backend.sessions_written_from(t, 3)) == ["s1", "s3"]
    assert backend.sessions_written_from(t, 4) == ["s3"] and not backend.sessions_written_from(t, 5)


def test_deferred_tail_windows_end_up_as_an_undeferred_append_writes_them(
    tmp_path: Path,
) -> None:
    texts = [f"turn {i} about kites and {w}" for i, w in enumerate("abcdefghij")]

    def windows(store: SQLiteBackend) -> dict[int, str]:
        return dict(store._writer.execute("SELECT id, c0 FROM window_fts_content").fetchall())

    plain = SQLiteBackend(tmp_path / "plain.db")
    deferred = SQLiteBackend(tmp_path / "deferred.db")
    for store, defer in ((plain, False), (deferred, True)):
        t = store.thread("u", "a", create=True)
        assert t
        for i in range(0, len(texts), 2):  # one exchange at a time
            store.append(
                t, [msg(texts[i], "s1", i), msg(texts[i + 1], "s1", i + 1)], defer_tail=defer
            )
    t = deferred.thread("u", "a")
    assert t
    # The two newest turns wait for their neighbours; the others are final already.
    assert len(windows(deferred)) == len(texts) - 2
    assert deferred.lexical_stats("window")[0] == len(texts) - 2
    assert deferred.write_tail_windows(t, "s1") == 2
    assert deferred.write_tail_windows(t, "s1") == 0
    assert windows(deferred) == windows(plain)
    assert deferred.lexical_stats("window") == plain.lexical_stats("window")
    # The next exchange brings the tail written meanwhile up to date.
    for store, defer in ((plain, False), (deferred, True)):
        t = store.thread("u", "a")
        assert t
        store.append(t, [msg("more kites", "s1", 10), msg("even more", "s1", 11)], defer_tail=defer)
        assert store.write_tail_windows(t, "s1") == (2 if defer else 0)
    assert windows(deferred) == windows(plain)
    plain.close()
    deferred.close()


def test_vectors_are_per_model(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    m = msg("vector text")
    v = np.ones(4, dtype=np.float32) / 2
    backend.append(t, [m], {m.chash: v}, "model-a")
    ids, sessions, matrix, missing = backend.thread_vectors(t, "model-a")
    assert len(ids) == 1 and np.allclose(matrix[0], v) and not missing
    assert sessions == ["s1"]
    ids, _, matrix, missing = backend.thread_vectors(t, "model-b")
    assert len(ids) == 0 and [r.message.content for r in missing] == ["vector text"]
    backend.put_vectors("model-b", {m.chash: np.zeros(8, dtype=np.float32)})
    assert backend.vector_models() == {"model-a": 1, "model-b": 1}
    assert backend.prune_vectors("model-b") == 1


def test_deletes_remove_rows_index_entries_and_orphan_vectors(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    ms = [msg("alpha river", "s1", 0), msg("beta mountain", "s1", 1), msg("gamma lake", "s1", 2)]
    backend.append(t, ms, {m.chash: np.ones(2, dtype=np.float32) for m in ms}, "m")
    gen = backend.state(t).generation
    result = backend.delete_messages([ms[1].id], t)
    assert result.messages == 1 and result.chashes == [ms[1].chash]
    assert backend.state(t).generation > gen
    assert backend.lexical_search([t], "turn", ["mountain"], 5) == []
    # The window of 'alpha' no longer includes the deleted turn, and now reaches 'gamma'.
    assert backend.lexical_search([t], "window", ["mountain"], 5) == []
    assert len(backend.lexical_search([t], "window", ["lake"], 5)) == 2
    assert backend.vector_models() == {"m": 2}
    assert backend.delete_session(t, "s1").messages == 2
    assert backend.sessions(t) == []
    assert backend.delete_thread(t).threads == 1
    assert backend.threads() == []


def test_a_purge_after_a_forget_says_whether_anything_is_left(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    ms = [msg("alpha river", "s1", 0), msg("beta mountain", "s1", 1)]
    backend.append(t, ms, {m.chash: np.ones(2, dtype=np.float32) for m in ms}, "m")
    backend.delete_messages([ms[1].id], t)
    # A small store is rewritten: nothing of the deleted rows is left, nothing pending.
    done = backend.purge(wait=5.0)
    assert (done.purged, done.pending) == (True, None)
    assert backend.vectors("m", [ms[1].chash]) == {} and backend.vectors("m", [ms[0].chash])
    assert [r.message.id for r in backend.messages(t)] == [ms[0].id]
    backend.delete_messages([ms[0].id], t)
    kept = backend.purge(wait=5.0, rewrite=False)
    assert kept.purged or kept.pending in PURGE_PENDING


def test_failed_transaction_leaves_nothing(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    assert t
    backend.append(t, [msg("kept", uid="x1")])
    with pytest.raises(StoreError):
        backend.append(t, [msg("new one", uid="x2"), msg("clash", uid="x1")])
    assert [r.message.content for r in backend.messages(t)] == ["kept"]
    assert backend.lexical_search([t], "turn", ["new"], 5) == []
    with pytest.raises(RuntimeError), backend.transaction():
        backend.append(t, [msg("inside", uid="x3")])
        raise RuntimeError("boom")
    assert backend.get("x3") is None


def test_schema_version_is_recorded_and_newer_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SQLiteBackend(path).close()
    import sqlite3

    conn = sqlite3.connect(path)
    assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] == LATEST
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 'x')", (LATEST + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="upgrade arbormem"):
        SQLiteBackend(path)


def test_speakers_of_a_thread(backend: Backend) -> None:
    t = backend.thread("u", "a", create=True)
    other = backend.thread("u", "b", create=True)
    assert t is not None and other is not None
    said = [("Mia", "hello"), (None, "system note"), ("Leo", "hi Mia"), ("Mia", "how are you")]
    rows = []
    for i, (speaker, text) in enumerate(said):
        m = msg(text, i=i)
        m.speaker = speaker
        rows += backend.append(t, [m])
    x = msg("elsewhere", uid="x")
    x.speaker = "Zed"
    backend.append(other, [x])
    assert sorted(backend.speakers(t)) == ["Leo", "Mia"]
    assert backend.speakers(t, after_rowid=rows[2].rowid) == ["Mia"]
    assert backend.speakers(other) == ["Zed"]


def test_a_store_from_before_the_vector_table_change_keeps_its_vectors(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    store = SQLiteBackend(path)
    t = store.thread("u", "a", create=True)
    assert t is not None
    store.append(t, [msg("hello there"), msg("general kenobi")])
    store.put_vectors("m", {"h1": np.arange(4, dtype=np.float32), "h2": np.ones(3, np.float32)})
    store.close()
    # Put the store back at schema version 6: the old vector layout, nothing added since.
    conn = sqlite3.connect(path)
    conn.executescript(UNDO_SCHEMA_FROM_13)
    conn.executescript(
        """
        CREATE TABLE old (model TEXT NOT NULL, chash TEXT NOT NULL, dim INTEGER NOT NULL,
                          vec BLOB NOT NULL, PRIMARY KEY (model, chash)) WITHOUT ROWID;
        INSERT INTO old SELECT model, chash, dim, vec FROM vectors;
        DROP TABLE vectors;
        ALTER TABLE old RENAME TO vectors;
        DROP INDEX messages_by_speaker;
        ALTER TABLE tree_state DROP COLUMN checked_version;
        DROP TABLE session_vectors;
        ALTER TABLE threads DROP COLUMN time_ordered;
        DELETE FROM schema_migrations WHERE version >= 7;
        """
    )
    conn.close()
    store = SQLiteBackend(path)
    layout = store._writer.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'")
    assert "WITHOUT ROWID" not in layout.fetchone()[0]
    got = store.vectors("m", ["h1", "h2", "h3"])
    assert sorted(got) == ["h1", "h2"]
    assert got["h1"].tolist() == [0.0, 1.0, 2.0, 3.0] and got["h2"].tolist() == [1.0] * 3
    store.put_vectors("m", {"h1": np.zeros(4, np.float32)})  # already there: kept as it was
    assert store.vectors("m", ["h1"])["h1"].tolist() == [0.0, 1.0, 2.0, 3.0]
    t = store.thread("u", "a")
    assert t is not None
    assert [r.message.content for r in store.messages(t)] == ["hello there", "general kenobi"]
    store.close()


def test_a_store_with_the_old_pair_index_drops_it_and_keeps_counting_pairs(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    store = SQLiteBackend(path)
    t = store.thread("u", "a", create=True)
    assert t is not None
    store.append(t, [msg("support group tonight"), msg("a quiet evening", i=1)])
    store.close()
    # Put the store back at schema version 9, with the pair index it had then.
    conn = sqlite3.connect(path)
    conn.executescript(UNDO_SCHEMA_FROM_13)
    conn.executescript(
        """
        CREATE VIRTUAL TABLE pair_fts USING fts5 (terms, tokenize = "unicode61 tokenchars '_'");
        CREATE VIRTUAL TABLE pair_vocab USING fts5vocab (pair_fts, 'row');
        INSERT INTO pair_fts (rowid, terms) SELECT id, 'support_group' FROM messages;
        INSERT INTO lexicon_stats VALUES ('pair', 2, 2);
        DROP TABLE session_vectors;
        ALTER TABLE threads DROP COLUMN time_ordered;
        DELETE FROM schema_migrations WHERE version >= 10;
        """
    )
    conn.close()
    store = SQLiteBackend(path)
    names = {r[0] for r in store._writer.execute("SELECT name FROM sqlite_master")}
    assert not {n for n in names if n.startswith("pair_")}
    keys = {r[0] for r in store._writer.execute("SELECT key FROM lexicon_stats")}
    assert keys == {"turn", "window"}
    assert store.pair_frequencies(["support_group"]) == {"support_group": 2}
    store.close()


def test_a_file_that_is_not_a_database_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some text, certainly not sqlite " * 100)
    with pytest.raises(StoreError, match=r"notes\.txt"):
        SQLiteBackend(path)


def test_wal_mode_on_disk(tmp_path: Path) -> None:
    store = SQLiteBackend(tmp_path / "w.db")
    mode = store._writer.execute("PRAGMA journal_mode").fetchone()[0]
    store.close()
    assert mode == "wal"


def test_a_migration_another_process_applied_meanwhile_is_skipped(tmp_path: Path) -> None:
    from arbormem.store.sqlite.schema import _apply

    store = SQLiteBackend(tmp_path / "m.db")
    store.close()
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    # As a process that read the version before another one upgraded the file.
    _apply(conn, "m.db", LATEST - 2)
    versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, LATEST + 1))
    conn.close()


def test_processes_opening_a_new_store_together_all_open_it(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\n"
        "from arbormem.store.sqlite import SQLiteBackend\n"
        "while time.time() < float(sys.argv[2]): pass\n"
        "SQLiteBackend(sys.argv[1]).close()\n"
    )
    start = str(time.time() + 2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "new.db"), start],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors


def test_a_write_the_file_refuses_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteBackend(tmp_path / "full.db")
    thread = store.thread("u", "a", create=True)
    assert thread
    pages = store._writer.execute("PRAGMA page_count").fetchone()[0]
    store._writer.execute(f"PRAGMA max_page_count = {pages}")  # as a full disk answers
    with pytest.raises(StoreError, match="the write failed: database or disk is full"):
        store.append(thread, [msg(f"kite {i} " + "long words " * 200, i=i) for i in range(50)])
    store._writer.execute("PRAGMA max_page_count = 1073741823")
    assert len(store.append(thread, [msg("kite")])) == 1  # nothing half-done is left behind
    assert store.state(thread).max_rowid == 1
    store.close()


def test_the_sqlite351_driver_is_opt_in_and_reads_the_same_files(tmp_path: Path) -> None:
    # Two SQLite copies in one process drop each other's locks, so the newer one is
    # used only when asked for; a file written by one driver is read by the other.
    pytest.importorskip("pysqlite3")
    script = """
import sys
from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.store.sqlite.driver import sqlite3
print(sqlite3.__name__)
with Memory(sys.argv[1], embedder=HashingEmbedder(64)) as mem:
    if sys.argv[2] == "write":
        mem.add("the spare key is under the blue flowerpot")
    print(mem.search("spare key", k=1)[0].message.content)
"""
    db = tmp_path / "m.db"
    runs = [
        ({}, "write", "sqlite3"),
        ({"ARBORMEM_SQLITE_DRIVER": "pysqlite3"}, "read", "pysqlite3.dbapi2"),
    ]
    for extra, mode, module in runs:
        out = subprocess.run(
            [sys.executable, "-c", script, str(db), mode],
            capture_output=True,
            text=True,
            env={**os.environ, **extra},
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split("\n")[:2] == [
            module,
            "the spare key is under the blue flowerpot",
        ]
    bad = subprocess.run(
        [sys.executable, "-c", "import arbormem.store.sqlite"],
        capture_output=True,
        text=True,
        env={**os.environ, "ARBORMEM_SQLITE_DRIVER": "sqlite4"},
    )
    assert bad.returncode != 0 and "ARBORMEM_SQLITE_DRIVER='sqlite4'" in bad.stderr


def test_the_change_mark_moves_with_every_add_and_forget_and_not_otherwise(
    backend: Backend,
) -> None:
    a = backend.thread("alice", "bot", create=True)
    b = backend.thread("bob", "bot", create=True)
    assert a is not None and b is not None
    marks = [backend.change_mark()]
    rows = backend.append(a, [msg("kite one", "s1", 0), msg("kite two", "s1", 60)])
    backend.append(b, [msg("boat one", "s1", 0)])
    marks.append(backend.change_mark())
    assert backend.lexical_search([a], "turn", ["kite"], 5)
    assert backend.change_mark() == marks[-1]  # reading changes nothing
    backend.delete_messages([rows[1].message.id], a)  # the newest row of a thread: max id drops
    marks.append(backend.change_mark())
    backend.delete_thread(b)
    marks.append(backend.change_mark())
    backend.thread("carol", "bot", create=True)  # an empty new thread adds no document
    assert backend.change_mark() == marks[-1]
    assert len(set(marks)) == len(marks), marks


def test_migration_scripts_split_around_trigger_bodies() -> None:
    from arbormem.store.sqlite.schema import _statements

    script = """
    CREATE TABLE t (x INTEGER);
    -- a comment line
    CREATE TRIGGER t_added AFTER INSERT ON t
    BEGIN
        UPDATE t SET x = x + 1 WHERE x < 0;
        DELETE FROM t WHERE x > 10;
    END;
    INSERT INTO t VALUES (1)
    """
    statements = _statements(script)
    assert len(statements) == 3
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END")


def test_close_lets_a_write_under_way_on_another_thread_finish(tmp_path: Path) -> None:
    import threading
    import time

    store = SQLiteBackend(tmp_path / "m.db")
    t = store.thread("u", "a", create=True)
    assert t is not None
    result: dict[str, object] = {}
    inside = threading.Event()

    def write() -> None:
        try:
            with store.transaction():
                store.append(t, [msg("kite one")])
                inside.set()
                time.sleep(0.3)  # close() begins meanwhile
                with store.transaction():  # a nested part of the same write
                    store.append(t, [msg("kite two", i=1)])
                result["count"] = store.count(t)  # a read inside its own transaction
        except Exception as exc:
            result["error"] = exc

    worker = threading.Thread(target=write)
    worker.start()
    inside.wait()
    store.close()
    worker.join()
    assert result == {"count": 2}
    reopened = SQLiteBackend(tmp_path / "m.db")
    again = reopened.thread("u", "a")
    assert again is not None and reopened.count(again) == 2
    reopened.close()


def test_a_thread_that_ends_takes_its_reader_connection_with_it(tmp_path: Path) -> None:
    import gc
    import threading

    store = SQLiteBackend(tmp_path / "m.db")
    t = store.thread("u", "a", create=True)
    assert t is not None
    store.append(t, [msg("kite one")])
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("counts open files through /proc")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):  # a server running each request on a new thread
        worker = threading.Thread(target=lambda: store.lexical_search([t], "turn", ["kite"], 3))
        worker.start()
        worker.join()
    gc.collect()
    # Each reader connection holds the database and its WAL open: 50 threads used to
    # leave about 100 more open files until close().
    assert len(os.listdir("/proc/self/fd")) <= before + 4
    assert store.lexical_search([t], "turn", ["kite"], 3)
    store.close()


_GC_CLOSE = """
import gc, os, sys, tempfile, threading
from arbormem.store.sqlite import SQLiteBackend

class Job(threading.Thread):  # keeps its error: traceback -> frame -> self, a cycle
    def run(self):
        try:
            store.thread("u", "a")
            raise ValueError("x")
        except ValueError as exc:
            self.error = exc

for k in range(1, 16):  # when the collector runs inside close() depends on k
    store = SQLiteBackend(os.path.join(tempfile.mkdtemp(), "m.db"))
    store.thread("u", "a")
    gc.collect()
    gc.disable()
    job = Job()
    job.start()
    job.join()
    del job  # dead, and freed only by the cyclic collector
    gc.set_threshold(gc.get_count()[0] + k)
    gc.enable()
    store.close()
print("closed")
"""


def test_close_survives_the_collector_freeing_a_reader_thread_inside_it() -> None:
    # The finalizer that closes an ended thread's connection took the store's reader
    # lock; run by the collector inside close(), which held it, it hung for ever.
    out = subprocess.run(
        [sys.executable, "-c", _GC_CLOSE], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "closed"


def test_threads_python_did_not_start_keep_no_connection_between_reads(
    tmp_path: Path,
) -> None:
    import _thread
    import threading

    store = SQLiteBackend(tmp_path / "m.db")
    store.thread("u", "a", create=True)
    for _ in range(20):  # threads a C extension or server might start
        done = threading.Event()

        def read(done: threading.Event = done) -> None:
            store.thread("u", "a")
            done.set()

        _thread.start_new_thread(read, ())
        assert done.wait(10)
    assert len(store._readers) <= 1  # used to keep all 20 open until close()
    store.close()


def test_replacing_a_nodes_documents_moves_the_change_mark(backend: Backend) -> None:
    # Searches keep topics' documents under it (tree/recall.py).
    t = backend.thread("u", "a", create=True)
    assert t
    backend.append(t, [msg("a b", "s1", 0)])
    node = NodeRow(None, None, "topic", 0, 0, 0, T0, T0)
    backend.put_nodes(t, [node])
    assert node.id is not None
    before = backend.change_mark()
    backend.index_nodes("segment", {node.id: "kayak trip"})
    assert backend.change_mark() != before
    assert backend.node_docs("segment", [node.id]) == {node.id: "kayak trip"}
