"""Full-text tables held in memory (arbormem.store.sqlite.postings): a search
answered from the copy gives FTS5's own rows and bm25 scores, to the last bit,
and the copy follows every change to the table (appends here or in another
process, forgets, rolled-back writes), or is not used."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem.ids import content_hash
from arbormem.store import NewMessage
from arbormem.store.sqlite import SQLiteBackend, postings
from arbormem.store.sqlite.postings import TablePostings, Tokenizer, plain
from arbormem.store.types import Filters, Thread
from arbormem.text import analyze

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)

TEXTS = [
    "kite repair kite repair kite",
    "sailing boat on the lake, boat repair",
    "garden kite garden",
    "café crème at the Café",
    "東京 trip with 😀 emoji and e-mail",
    "the Kelvin sign \u212a and ǅungla",
    "kite",
    "boat boat boat boat boat boat boat boat",
    "",
    "repair the garden shed before the rain",
]


def message(i: int, text: str, terms: str | None = None, session: str = "s") -> NewMessage:
    return NewMessage(
        id=f"m{i}",
        role="user",
        content=text or "(empty)",
        timestamp=T0 + timedelta(minutes=i),
        session=session,
        terms=" ".join(analyze(text)) if terms is None else terms,
        chash=content_hash(f"{i} {text}"),
    )


def add(store: SQLiteBackend, texts: list[str], start: int, user: str = "u") -> Thread:
    thread = store.thread(user, "a", create=True)
    assert thread is not None
    store.append(thread, [message(start + i, t) for i, t in enumerate(texts)])
    return thread


def fts(
    path: Path, key: str, terms: list[str], limit: int, after: int = 0, thread: int | None = None
) -> list[tuple[int, float]]:
    """FTS5's answer, read apart from the store: live rows (of one thread), best first."""
    table = f"{key}_fts"
    rows_of = "tree_nodes" if key in ("topic", "segment") else "messages"
    query = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    mine = "" if thread is None else f" AND m.thread_id = {int(thread)}"
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            f"SELECT f.rowid, bm25({table}) AS r FROM {table} f"
            f" LEFT JOIN {rows_of} m ON m.id = f.rowid WHERE {table} MATCH ?"
            f" AND f.rowid > ? AND coalesce(m.archived, 0) = 0{mine} ORDER BY r LIMIT ?",
            (query, after, limit),
        ).fetchall()
    finally:
        conn.close()
    return [(int(r), -float(s)) for r, s in rows]


def held(store: SQLiteBackend, table: str) -> bool:
    """Whether the store holds an in-memory copy of ``table``."""
    copies = store._held._copies if store._held is not None else {}
    return table in copies


QUERIES = [
    ["kite"],
    ["kite", "repair"],
    ["repair", "kite", "repair"],  # a repeated phrase counts twice, as in FTS5
    ["boat", "garden", "emoji", "東京"],
    ["café", "caf", "kelvink", "k"],
    ["absent"],
    ["the", "kite", "absent", "boat"],
]


@pytest.mark.parametrize("key", ["turn", "window"])
def test_searches_equal_fts5_to_the_last_bit(tmp_path: Path, key: str) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    # Terms as written too (not only analysed): case, accents, emoji, joined words.
    thread = add(store, TEXTS, 0)
    odd = "Café KELVIN\u212a e-mail 東京😀kite kite_boat ǅx Kite"
    store.append(thread, [message(100, odd, terms=odd)])
    for terms in QUERIES:
        for limit in (1, 3, 50):
            for after in (0, 4):
                got = store.lexical_search([thread], key, terms, limit, after=after)
                assert got == fts(path, key, terms, limit, after), (terms, limit, after)
    # The plain queries were answered from the copy.
    assert held(store, f"{key}_fts")
    assert store.doc_frequencies(key, ["kite", "boat", "absent", "café"]) == {
        t: n
        for t, n in sqlite3.connect(path)
        .execute(f"SELECT term, doc FROM {key}_vocab WHERE term IN ('kite','boat','absent','café')")
        .fetchall()
    }
    store.close()


def test_ties_fall_by_row_number_as_in_fts5(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, ["kite boat", "boat kite", "kite", "kite", "kite boat"] * 5, 0)
    for limit in (1, 2, 7, 30):
        for terms in (["kite"], ["kite", "boat"], ["boat"]):
            got = store.lexical_search([thread], "turn", terms, limit)
            assert got == fts(path, "turn", terms, limit)
    assert held(store, "turn_fts")
    store.close()


def test_many_threads(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    one = add(store, TEXTS[:5], 0, user="u1")
    two = add(store, TEXTS[5:], 5, user="u2")
    for terms in QUERIES:
        # One thread of two: the joined query answers, with both threads' statistics.
        assert store.lexical_search([one], "turn", terms, 10) == fts(
            path, "turn", terms, 10, thread=one.id
        )
    # Nor do the term statistics build a copy for themselves.
    assert store.doc_frequencies("turn", ["kite", "boat"]) == {"kite": 3, "boat": 2}
    assert not held(store, "turn_fts")
    for terms in QUERIES:
        assert store.lexical_search([one, two], "turn", terms, 10) == fts(path, "turn", terms, 10)
    assert held(store, "turn_fts")
    assert store.doc_frequencies("turn", ["kite", "boat"]) == {"kite": 3, "boat": 2}
    store.close()


def test_appends_are_added_to_the_copy(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS[:4], 0)
    for key in ("turn", "window"):
        assert store.lexical_search([thread], key, ["kite"], 10) == fts(path, key, ["kite"], 10)
    before = store._held._copies["turn_fts"] if store._held else None
    # (The new turns' neighbours have new windows: not an append to the window key.)
    add(store, ["kite and more kite", "boat"], 4)
    for key in ("turn", "window"):
        for terms in QUERIES:
            assert store.lexical_search([thread], key, terms, 10) == fts(path, key, terms, 10)
    after = store._held._copies["turn_fts"] if store._held else None
    assert before is not None and after is not None and after.docs == before.docs + 2
    store.close()


def test_a_forget_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS, 0)
    for key in ("turn", "window"):
        assert store.lexical_search([thread], key, ["kite"], 10) == fts(path, key, ["kite"], 10)
    store.delete_messages(["m0", "m6"])
    for key in ("turn", "window"):
        for terms in QUERIES:
            assert store.lexical_search([thread], key, terms, 10) == fts(path, key, terms, 10)
        # Dropped, and built again once a second search found the table unchanged.
        assert held(store, f"{key}_fts")
    store.close()


def test_a_table_rewritten_between_searches_is_built_again_once_it_rests(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS[:3], 0)
    assert store.lexical_search([thread], "window", ["kite"], 10) == fts(
        path, "window", ["kite"], 10
    )
    assert held(store, "window_fts")
    for i in range(3):
        # Each append rewrites its neighbours' windows: no copy is built meanwhile.
        add(store, [f"kite boat {i}"], 10 + i)
        assert store.lexical_search([thread], "window", ["kite"], 10) == fts(
            path, "window", ["kite"], 10
        )
        assert not held(store, "window_fts")
    assert store.lexical_search([thread], "window", ["boat"], 10) == fts(
        path, "window", ["boat"], 10
    )
    assert held(store, "window_fts")
    store.close()


def test_another_process_write_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS[:5], 0)
    for key in ("turn", "window"):
        assert store.lexical_search([thread], key, ["kite"], 10) == fts(path, key, ["kite"], 10)
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        from arbormem.store import SQLiteBackend
        from test_store_postings import add
        other = SQLiteBackend(Path({str(path)!r}))
        add(other, ["kite kite garden", "a boat"], 50)
        other.delete_messages(["m1"])
        add(other, ["kite again"], 60)
        other.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    for key in ("turn", "window"):
        for terms in QUERIES:
            assert store.lexical_search([thread], key, terms, 10) == fts(path, key, terms, 10)
    store.close()


def test_a_rolled_back_write_leaves_the_committed_table(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS[:5], 0)
    assert store.lexical_search([thread], "turn", ["kite"], 10) == fts(path, "turn", ["kite"], 10)
    with pytest.raises(RuntimeError), store.transaction():
        add(store, ["kite kite kite", "kite boat"], 5)
        # Inside its own write the store sees its uncommitted rows (through SQL).
        inside = store.lexical_search([thread], "turn", ["kite"], 10)
        assert len(inside) == 4
        raise RuntimeError("the caller gives up")
    for key in ("turn", "window"):
        for terms in QUERIES:
            assert store.lexical_search([thread], key, terms, 10) == fts(path, key, terms, 10)
    add(store, ["kite"], 5)
    assert store.lexical_search([thread], "turn", ["kite"], 10) == fts(path, "turn", ["kite"], 10)
    store.close()


def test_archived_rows_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, ["kite " * (i % 5 + 1) for i in range(40)], 0)
    assert store.lexical_search([thread], "turn", ["kite"], 3) == fts(path, "turn", ["kite"], 3)
    # The best thirty archived: the spare taken first is not enough, more are read.
    best = [r for r, _ in fts(path, "turn", ["kite"], 30)]
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(f"UPDATE messages SET archived = 1 WHERE id IN ({','.join(map(str, best))})")
    conn.close()
    got = store.lexical_search([thread], "turn", ["kite"], 3)
    assert got == fts(path, "turn", ["kite"], 3) and len(got) == 3
    assert not {r for r, _ in got} & set(best)
    assert held(store, "turn_fts")
    store.close()


def test_node_searches_equal_fts5(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS[:2], 0)
    docs = {i + 1: " ".join(analyze(t)) for i, t in enumerate(TEXTS)}
    store.index_nodes("topic", docs)
    for terms in QUERIES:
        assert store.node_search([thread], "topic", terms, 5) == fts(path, "topic", terms, 5)
    assert held(store, "topic_fts")
    # A document replaced by one as long: the table holds as many documents and
    # tokens as before, but the store's clock moved.
    store.index_nodes("topic", {1: "boat boat boat boat boat"})
    for terms in QUERIES:
        assert store.node_search([thread], "topic", terms, 5) == fts(path, "topic", terms, 5)
    # One taken out: the copy is built again.
    store.index_nodes("topic", {3: ""})
    for terms in QUERIES:
        assert store.node_search([thread], "topic", terms, 5) == fts(path, "topic", terms, 5)
    store.close()


def test_a_copy_that_disagrees_with_fts5_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Naive(Tokenizer):
        """Words as tokens: wrong for "e-mail", which FTS5 splits."""

        def tokens(self, text: str) -> list[str]:
            return text.split()

    monkeypatch.setattr(postings, "TOKENIZER", Naive())
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = store.thread("u", "a", create=True)
    assert thread is not None
    store.append(thread, [message(i, t, terms=t) for i, t in enumerate(["e-mail kite", "kite"])])
    assert store.lexical_search([thread], "turn", ["kite"], 10) == fts(path, "turn", ["kite"], 10)
    assert not held(store, "turn_fts")
    store.close()


def test_what_the_copy_cannot_answer_goes_through_sql(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS, 0)
    # A term that is not one plain token, and a filter.
    assert not plain("café") and not plain("e-mail")
    for terms in (["café", "kite"], ["e-mail"]):
        assert store.lexical_search([thread], "turn", terms, 10) == fts(path, "turn", terms, 10)
    assert not held(store, "turn_fts")
    since = Filters(since=T0 + timedelta(minutes=3))
    got = store.lexical_search([thread], "turn", ["kite"], 10, filters=since)
    assert [r for r, _ in got] == [r for r, _ in fts(path, "turn", ["kite"], 10) if r > 4]
    assert not held(store, "turn_fts")
    store.close()


def test_a_table_past_the_limit_is_not_held(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS, 0)
    store._held = TablePostings(max_tokens=10)
    assert store.lexical_search([thread], "turn", ["kite"], 10) == fts(path, "turn", ["kite"], 10)
    assert not held(store, "turn_fts")
    store.close()


def test_a_large_table_is_built_once_two_searches_found_it_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = add(store, TEXTS, 0)
    store._held = TablePostings(at_once=0)
    for built in (False, True):
        assert store.lexical_search([thread], "turn", ["kite"], 10) == fts(
            path, "turn", ["kite"], 10
        )
        assert held(store, "turn_fts") is built
    add(store, ["kite"], 20)  # appended: the copy follows at once
    assert store.lexical_search([thread], "turn", ["kite"], 10) == fts(path, "turn", ["kite"], 10)
    assert held(store, "turn_fts")
    store.close()


def test_the_tokenizer_splits_as_fts5() -> None:
    words = [
        "Café",
        "KELVIN\u212a",
        "e-mail",
        "東京😀kite",
        "ǅx",
        "a_b",
        "x" * 300,
        "İstanbul",
        "ß",
    ]
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = 'unicode61 remove_diacritics 0')"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
    text = " ".join(words) + " plain words 42"
    conn.execute("INSERT INTO t (rowid, x) VALUES (1, ?)", (text,))
    expected = [
        t for t, _ in sorted(conn.execute("SELECT term, offset FROM v"), key=lambda r: r[1])
    ]
    assert Tokenizer().tokens(text) == expected
    assert Tokenizer().tokens("plain words  42") == ["plain", "words", "42"]


def test_date_spans_equal_fts5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arbormem.timeutil import format_timestamp

    path = tmp_path / "s.db"
    store = SQLiteBackend(path)
    thread = store.thread("u", "a", create=True)
    assert thread is not None
    texts = [TEXTS[i % len(TEXTS)] + (" kite" * (i % 3)) for i in range(60)]
    store.append(
        thread,
        [
            NewMessage(
                id=f"m{i}",
                role="user",
                content=t or "(empty)",
                timestamp=T0 + timedelta(hours=7 * i),
                session=f"s{i // 10}",
                terms=" ".join(analyze(t)),
                chash=content_hash(f"{i} {t}"),
            )
            for i, t in enumerate(texts)
        ],
    )
    conn = sqlite3.connect(path)
    with conn:  # archived rows stay out of every span
        conn.execute("UPDATE messages SET archived = 1 WHERE id IN (3, 11, 12)")
    conn.close()
    spans = [
        (T0, T0 + timedelta(days=2)),
        (T0 + timedelta(days=3), T0 + timedelta(days=9)),
        (T0 - timedelta(days=30), T0 - timedelta(days=20)),
        (T0 + timedelta(days=1, hours=3), T0 + timedelta(days=1, hours=4)),
    ]

    def truth(terms: list[str], limit: int) -> list[list[tuple[int, float]]]:
        query = " OR ".join(f'"{t}"' for t in terms)
        out = []
        conn = sqlite3.connect(path)
        for lo, hi in spans:
            rows = conn.execute(
                "SELECT f.rowid, bm25(window_fts) AS r FROM window_fts f"
                " JOIN messages m ON m.id = f.rowid WHERE window_fts MATCH ? AND m.archived = 0"
                " AND m.ts >= ? AND m.ts < ? ORDER BY r LIMIT ?",
                (query, format_timestamp(lo), format_timestamp(hi), limit),
            ).fetchall()
            out.append([(int(r), -float(s)) for r, s in rows])
        conn.close()
        return out

    held_spans = []
    original = SQLiteBackend._spans_held

    def spy(*args: object, **kwargs: object) -> list[list[tuple[int, float]]]:
        held_spans.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SQLiteBackend, "_spans_held", staticmethod(spy))
    for terms in (["kite"], ["kite", "boat", "repair"], ["absent"], ["garden", "kite", "garden"]):
        for limit in (1, 3, 40):
            got = store.lexical_search_spans([thread], "window", terms, limit, spans)
            assert got == truth(terms, limit), (terms, limit)
        # The window key's copy, built by a search, answers the next spans.
        store.lexical_search([thread], "window", terms, 5)
    assert held_spans
    store.close()
