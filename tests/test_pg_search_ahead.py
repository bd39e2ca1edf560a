"""A PostgreSQL search of the turns also answers, in the same statement, the window
and topic-content searches a search asks next (see ``PostgresLexical._search_ahead``),
and all the date spans of a question go in one statement: the hits are exactly
those of the searches sent one by one, and nothing is reused by another search.

Two handles on one database stand for two processes. A search is what
``Memory.search`` does first: look the thread up, then begin the search
(``map_for_search``).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from arbormem.ids import content_hash
from arbormem.store import Backend, NewMessage, NodeRow, Thread, open_store
from arbormem.store.lexical import LexicalIndex
from arbormem.store.postgres import bm25
from arbormem.store.types import Filters
from arbormem.text import analyze

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
WORDS = ["kite", "river", "lake", "garden", "piano", "harbour", "lantern", "meadow"]
#: The turns' terms, rarest first as a search orders them, and the same in another
#: order (as the windows' own counts would order them).
TERMS = ["lantern", "kite", "river"]
OTHER_ORDER = ["river", "lantern", "kite"]


class Statements:
    """Counts the statements this Python thread sends (psycopg's ``execute``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        original = psycopg.Cursor.execute
        mine = threading.get_ident()

        def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == mine:
                self.sent.append(str(query))
            return original(cursor, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)


def _messages(start: int, n: int, session: str) -> list[NewMessage]:
    out = []
    for i in range(start, start + n):
        text = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 5)) + f" n{i}"
        out.append(
            NewMessage(
                id=f"m{i}",
                role="user" if i % 2 else "assistant",
                content=text,
                timestamp=T0 + timedelta(days=i),
                session=session,
                terms=" ".join(analyze(text)),
                chash=content_hash(text),
            )
        )
    return out


def _store_with_topics(store: Backend) -> Thread:
    thread = store.thread("ann", "bot", create=True)
    assert thread is not None
    store.append(thread, _messages(0, 20, "s1"))
    store.append(thread, _messages(20, 20, "s2"))
    with store.transaction():
        topics = [NodeRow(None, None, "topic", 0, i * 10, i * 10 + 9, T0, T0) for i in range(4)]
        store.put_nodes(thread, topics)
        store.index_nodes(
            "segment",
            {t.id: " ".join(analyze(" ".join(WORDS[i : i + 4]))) for i, t in enumerate(topics)},
        )
    return thread


def _search(store: Backend) -> Thread:
    thread = store.thread("ann", "bot")
    assert thread is not None
    store.map_for_search()
    return thread


def _one_by_one(url: str) -> dict[str, Any]:
    """The three searches on a handle of their own, outside any search (a
    statement each, nothing guessed)."""
    store = open_store(url)
    try:
        thread = store.thread("ann", "bot")
        assert thread is not None
        return {
            "turn": store.lexical_search([thread], "turn", TERMS, 10),
            "window": store.lexical_search([thread], "window", OTHER_ORDER, 7),
            "segment": store.node_search([thread], "segment", TERMS, 5),
        }
    finally:
        store.close()


def _searched(store: Backend) -> dict[str, Any]:
    thread = _search(store)
    return {
        "turn": store.lexical_search([thread], "turn", TERMS, 10),
        "window": store.lexical_search([thread], "window", OTHER_ORDER, 7),
        "segment": store.node_search([thread], "segment", TERMS, 5),
    }


def test_the_next_searches_come_with_the_turns_and_are_the_same(
    two: tuple[Backend, Backend], pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = two
    _store_with_topics(store)
    expected = _one_by_one(pg_url)
    assert all(expected.values())  # every search finds something
    first = _searched(store)  # learns how many hits each key's search asks for
    assert first == expected
    counted = Statements(monkeypatch)
    thread = _search(store)
    counted.sent.clear()
    turn = store.lexical_search([thread], "turn", TERMS, 10)
    assert len(counted.sent) == 1
    window = store.lexical_search([thread], "window", OTHER_ORDER, 7)
    segment = store.node_search([thread], "segment", TERMS, 5)
    assert len(counted.sent) == 1  # both answered by the turns' statement
    assert {"turn": turn, "window": window, "segment": segment} == expected
    # Asked otherwise than guessed (other terms, another limit): searched as usual.
    fewer = store.lexical_search([thread], "window", ["kite"], 7)
    assert len(counted.sent) == 2
    assert fewer == _plain(pg_url, "window", ["kite"], 7)


def _plain(url: str, key: str, terms: list[str], limit: int) -> list[tuple[int, float]]:
    store = open_store(url)
    try:
        thread = store.thread("ann", "bot")
        assert thread is not None
        return store.lexical_search([thread], key, terms, limit)
    finally:
        store.close()


def test_what_was_answered_ahead_serves_one_search_only(
    two: tuple[Backend, Backend], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process adds messages after a search read the windows ahead: the
    # next search finds them (nothing answered ahead outlives its search).
    reader, writer = two
    _store_with_topics(writer)
    _searched(reader)
    thread = _search(reader)
    reader.lexical_search([thread], "turn", TERMS, 10)  # the windows come with it
    before = reader.lexical_search([thread], "window", OTHER_ORDER, 7)
    assert all(rid <= 40 * 2 for rid, _ in before)
    added = writer.append(
        thread,
        [
            NewMessage(
                id=f"new{i}",
                role="user",
                content="lantern lantern kite river",
                timestamp=T0 + timedelta(days=100 + i),
                session="s3",
                terms=" ".join(analyze("lantern lantern kite river")),
                chash=content_hash(f"lantern lantern kite river {i}"),
            )
            for i in range(6)
        ],
    )
    new_ids = {r.rowid for r in added}
    thread = _search(reader)
    # The windows asked first this time (a guess of the last search would answer).
    window = reader.lexical_search([thread], "window", OTHER_ORDER, 7)
    assert new_ids & {rid for rid, _ in window}
    assert new_ids & {rid for rid, _ in reader.lexical_search([thread], "turn", TERMS, 10)}


def test_a_commit_of_this_process_within_a_search_is_searched(
    two: tuple[Backend, Backend],
) -> None:
    store, _ = two
    thread = _store_with_topics(store)
    _searched(store)
    seen = _search(store)
    store.lexical_search([seen], "turn", TERMS, 10)
    added = store.append(thread, _messages(40, 4, "s3"))
    window = store.lexical_search([seen], "window", OTHER_ORDER, 7)
    assert window == store.lexical_search([seen], "window", TERMS, 7)
    assert {r.rowid for r in added} & {rid for rid, _ in window}


def test_every_date_span_in_one_statement(
    two: tuple[Backend, Backend], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = two
    thread = _store_with_topics(store)
    spans = [
        (T0 + timedelta(days=2), T0 + timedelta(days=9)),
        (T0 + timedelta(days=30), T0 + timedelta(days=25)),  # empty
        (T0 + timedelta(days=18), T0 + timedelta(days=31)),
        (T0 + timedelta(days=300), T0 + timedelta(days=301)),  # nothing in it
    ]
    filters = Filters(roles=("user",), until=T0 + timedelta(days=29))
    # The capability's default: one search per span.
    expected = LexicalIndex.lexical_search_spans(
        store, [thread], "window", TERMS, 4, spans, filters
    )
    assert expected[0] and expected[2] and not expected[1] and not expected[3]
    counted = Statements(monkeypatch)
    _search(store)
    counted.sent.clear()
    got = store.lexical_search_spans([thread], "window", TERMS, 4, spans, filters)
    assert got == expected
    # (Besides the term counts this search had not read yet.)
    assert len([sql for sql in counted.sent if " AS score" in sql]) == 1


@pytest.mark.parametrize("key", ["turn", "window"])
def test_the_date_spans_score_the_postings_once(
    two: tuple[Backend, Backend], monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    # Every span ranks the same scored documents: they are scored once (the
    # postings read once) and each span takes its own best, ties by id, as its own
    # search would; here with overlapping spans, a sessions filter and a limit
    # that cuts.
    store, _ = two
    thread = _store_with_topics(store)
    spans = [
        (T0 + timedelta(days=1), T0 + timedelta(days=25)),
        (T0 + timedelta(days=10), T0 + timedelta(days=40)),
        (T0 + timedelta(days=0), T0 + timedelta(days=3)),
    ]
    filters = Filters(sessions=("s2", "s1"), since=T0 + timedelta(days=2))
    expected = LexicalIndex.lexical_search_spans(store, [thread], key, TERMS, 3, spans, filters)
    assert all(len(hits) == 3 for hits in expected[:2]) and expected[0] != expected[1]
    assert not expected[2] or len(expected[2]) < 3
    counted = Statements(monkeypatch)
    _search(store)
    counted.sent.clear()
    got = store.lexical_search_spans([thread], key, TERMS, 3, spans, filters)
    assert got == expected
    scored = [sql for sql in counted.sent if " AS score" in sql]
    assert len(scored) == 1 and scored[0].count("turn_postings") == 1


@pytest.mark.parametrize("per_hit", [0, 1000])
def test_the_date_spans_read_their_messages_either_way_with_the_same_hits(
    two: tuple[Backend, Backend], monkeypatch: pytest.MonkeyPatch, per_hit: int
) -> None:
    # The hits' messages are read by id (no span is ever short enough: 0 rows a
    # hit) or through the time index (any span is: 1000), and the plan shows
    # that way taken and the other never run; the hits are the same either way.
    store, _ = two
    thread = _store_with_topics(store)
    spans = [
        (T0 + timedelta(days=1), T0 + timedelta(days=25)),
        (T0 + timedelta(days=10), T0 + timedelta(days=40)),
    ]
    filters = Filters(roles=("user",))
    expected = LexicalIndex.lexical_search_spans(
        store, [thread], "window", TERMS, 3, spans, filters
    )
    assert all(expected)
    monkeypatch.setattr(bm25, "SPAN_ROWS_PER_HIT", per_hit)
    seen: list[str] = []
    original = psycopg.Cursor.execute

    def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(cursor, query, *args, **kwargs)
        if " AS score" in str(query):
            plan = original(cursor, "EXPLAIN (ANALYZE, COSTS OFF) " + str(query), *args)
            seen.append("\n".join(r[0] for r in plan.fetchall()))
            original(cursor, query, *args, **kwargs)
        return out

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    assert store.lexical_search_spans([thread], "window", TERMS, 3, spans, filters) == expected
    lines = seen[-1].splitlines()
    gates = [i for i, line in enumerate(lines) if "One-Time Filter" in line]
    assert len(gates) == 2  # the first way's gate, then the other's (NOT)
    ways = [lines[gates[0] : gates[1]], lines[gates[1] :]]
    skipped = [any("Scan" in x and "never executed" in x for x in way) for way in ways]
    assert skipped == ([True, False] if per_hit == 0 else [False, True])


def test_windows_are_not_guessed_past_the_postings_seen_affordable(
    two: tuple[Backend, Backend], pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only a window search of one rare term was seen asking for everything: a guess
    # for all of TERMS (more window postings) could be one the search cuts, and is
    # not made; the topic contents are still guessed.
    store, _ = two
    _store_with_topics(store)
    thread = _search(store)
    store.lexical_search([thread], "window", ["lantern"], 7)
    store.node_search([thread], "segment", TERMS, 5)
    counted = Statements(monkeypatch)
    thread = _search(store)
    counted.sent.clear()
    store.lexical_search([thread], "turn", TERMS, 10)
    store.node_search([thread], "segment", TERMS, 5)
    assert len([sql for sql in counted.sent if " AS score" in sql]) == 1
    window = store.lexical_search([thread], "window", OTHER_ORDER, 7)
    assert len([sql for sql in counted.sent if " AS score" in sql]) == 2
    assert window == _plain(pg_url, "window", OTHER_ORDER, 7)
