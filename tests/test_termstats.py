"""Document frequencies kept between searches (arbormem.recall.termstats)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import arbormem.recall.termstats as termstats
from arbormem.ids import content_hash
from arbormem.recall.termstats import TermStats
from arbormem.store import NewMessage, SQLiteBackend
from arbormem.text import analyze

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


class Counting(SQLiteBackend):
    """A real store that counts the frequency reads it is asked for."""

    reads: list[list[str]]

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        self.reads.append(list(terms))
        return super().doc_frequencies(key, terms)


def add(store: SQLiteBackend, texts: list[str], start: int) -> None:
    thread = store.thread("u", "a", create=True)
    assert thread is not None
    store.append(
        thread,
        [
            NewMessage(
                id=f"m{start + i}",
                role="user",
                content=text,
                timestamp=T0 + timedelta(minutes=start + i),
                session="s",
                terms=" ".join(analyze(text)),
                chash=content_hash(text),
            )
            for i, text in enumerate(texts)
        ],
    )


def test_frequencies_are_exact_while_the_store_is_unchanged_then_scaled_then_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(termstats, "SCALED_FROM", 4)  # scaled from 4 documents on
    store = Counting(tmp_path / "s.db")
    store.reads = []
    add(store, ["kite flying", "kite repair", "sailing boat", "boat repair"], 0)
    stats = TermStats(store)
    assert stats.doc_frequencies("turn", ["kite", "boat"]) == {"kite": 2, "boat": 2}
    assert stats.doc_frequencies("turn", ["kite", "repair"]) == {"kite": 2, "repair": 2}
    assert store.reads == [["kite", "boat"], ["repair"]]  # each term read once
    # Grown by half: the cached share is scaled, not read again.
    add(store, ["kite shop", "garden", "more garden"], 4)
    got = stats.doc_frequencies("turn", ["kite", "garden"])
    assert got == {"kite": round(2 * 7 / 4), "garden": 2} and store.reads[-1] == ["garden"]
    # Past double the size it reads again, and exactly.
    add(store, [f"filler {i}" for i in range(8)], 7)
    assert stats.doc_frequencies("turn", ["kite"]) == {"kite": 3} and store.reads[-1] == ["kite"]
    # Fewer documents (a forget) also reads again.
    store.delete_messages(["m4"])  # "kite shop"
    assert stats.doc_frequencies("turn", ["kite"]) == {"kite": 2}
    store.close()


def test_a_change_that_keeps_the_document_count_still_reads_again(tmp_path: Path) -> None:
    store = Counting(tmp_path / "s.db")
    store.reads = []
    add(store, ["kite flying", "kite repair", "boat"], 0)
    stats = TermStats(store)
    assert stats.doc_frequencies("turn", ["kite"]) == {"kite": 2}
    assert stats.pair_frequencies(["kite_repair"]) == {"kite_repair": 3}  # every window
    store.delete_messages(["m1"])  # "kite repair" goes, "bike repair" comes: still 3
    add(store, ["bike repair"], 3)
    assert store.lexical_stats("turn")[0] == 3
    assert stats.doc_frequencies("turn", ["kite"]) == {"kite": 1}
    assert stats.pair_frequencies(["kite_repair"]) == {"kite_repair": 0}
    store.close()


def test_a_small_store_reads_again_whenever_it_changed(tmp_path: Path) -> None:
    store = Counting(tmp_path / "s.db")
    store.reads = []
    add(store, ["kite flying", "kite repair"], 0)
    stats = TermStats(store)
    assert stats.doc_frequencies("turn", ["kite"]) == {"kite": 2}
    add(store, ["garden"], 2)
    assert stats.doc_frequencies("turn", ["kite"]) == {"kite": 2} and len(store.reads) == 2
    store.close()


def test_preloaded_counts_are_the_ones_a_search_would_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(termstats, "PRELOAD_MIN_DOCS", 2)
    store = Counting(tmp_path / "s.db")
    store.reads = []
    add(store, ["kite flying", "kite repair", "sailing boat", "boat repair", "kite boat"], 0)
    stats = TermStats(store)
    assert stats.preload(["turn", "window"]) > 0
    # The common terms come from the one pass; a rare one is read when asked.
    assert stats.doc_frequencies("turn", ["kite", "boat", "repair"]) == {
        "kite": 3,
        "boat": 3,
        "repair": 2,
    }
    assert store.reads == []
    (sail,) = analyze("sailing")
    assert stats.doc_frequencies("turn", [sail]) == {sail: 1}
    assert store.reads == [[sail]]
    # A write makes them stale like any other count: a small store reads again.
    add(store, ["kite festival"], 10)
    assert stats.doc_frequencies("turn", ["kite"]) == {"kite": 4}


def test_a_stopped_preload_remembers_nothing(tmp_path: Path) -> None:
    import threading

    store = SQLiteBackend(tmp_path / "s.db")
    add(store, [f"kite number {i}" for i in range(3000)], 0)
    stop = threading.Event()
    stop.set()
    stats = TermStats(store)
    assert stats.preload(["turn"], stop) == 0
    assert stats._df == {}


def test_a_large_store_preloads_on_its_first_search_and_close_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import threading
    import time

    import arbormem.recall.retriever as recall
    from arbormem import Memory

    monkeypatch.setattr(recall, "PRELOAD_FROM", 50)
    notes = [{"role": "user", "content": f"kite repair note {i}"} for i in range(40)]
    before = set(threading.enumerate())
    with Memory(tmp_path / "m.db", user="u", agent="a") as mem:
        mem.add_many(notes)
        mem.search("kite repair")
        assert not mem.engine.retriever._terms_started  # 40 turns: below the mark
        mem.add_many(notes)
        mem.search("kite repair")
        assert mem.engine.retriever._terms_started
        deadline = time.monotonic() + 30
        while (
            "turn",
            "kite",
        ) not in mem.engine.retriever.stats._df and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ("turn", "kite") in mem.engine.retriever.stats._df
        assert mem.wait(timeout=30)
        gc.collect()
        mem.search("kite repair")
        # Readers are this thread's and, at most, one per background worker.
        workers = {t.ident for t in threading.enumerate() if t.name.startswith("arbormem")}
        readers = [t for _, t in mem.backend._readers.values()]
        assert threading.get_ident() in readers
        assert set(readers) <= workers | {threading.get_ident()}
    left = [t.name for t in set(threading.enumerate()) - before if t.name.startswith("arbormem")]
    assert not left, left


def test_no_preload_for_an_in_memory_store_or_without_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In memory, the pass would hold every read and write up to save no disk read.
    # A thread that cannot start (a thread limit, interpreter exit) costs the search
    # nothing, and close() still closes the store.
    import threading

    import arbormem.recall.retriever as recall
    from arbormem import Memory

    monkeypatch.setattr(recall, "PRELOAD_FROM", 10)
    notes = [{"role": "user", "content": f"kite repair note {i}"} for i in range(20)]
    with Memory(":memory:", user="u", agent="a") as mem:
        mem.add_many(notes)
        assert mem.search("kite repair")
        assert not mem.engine.retriever._terms_started
    start = threading.Thread.start

    def refuse(self: threading.Thread) -> None:
        if self.name == "arbormem-preload":
            raise RuntimeError("can't start new thread")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", refuse)
    mem = Memory(tmp_path / "m.db", user="u", agent="a")
    mem.add_many(notes)
    assert mem.search("kite repair")
    mem.close()
    assert mem.backend._closed


def test_preloading_inside_a_write_transaction_and_in_memory(tmp_path: Path) -> None:
    for store in (SQLiteBackend(tmp_path / "t.db"), SQLiteBackend(":memory:")):
        add(store, ["kite flying", "kite repair"], 0)
        with store.transaction():
            read = store.frequent_terms("turn", 2)
        assert read is not None and read[0] == {"kite": 2}
        read = store.frequent_terms("turn", 2)
        assert read is not None and read[0] == {"kite": 2}
        store.close()


def test_a_search_view_reads_the_statistics_once_and_shares_the_counts(tmp_path: Path) -> None:
    class Stats(Counting):
        asked: list[str]

        def lexical_stats(self, key: str) -> tuple[int, float]:
            self.asked.append(key)
            return super().lexical_stats(key)

    store = Stats(tmp_path / "s.db")
    store.reads, store.asked = [], []
    add(store, ["kite flying", "kite repair", "boat"], 0)
    expected = store.lexical_stats("turn")
    store.asked = []
    stats = TermStats(store)
    view = stats.for_search()
    for _ in range(3):
        assert view.doc_frequencies("turn", ["kite"]) == {"kite": 2}
        assert view.lexical_stats("turn") == expected
    assert store.asked == ["turn"] and store.reads == [["kite"]]
    # The count it read is the store-wide cache's: the next search reads nothing.
    assert stats.for_search().doc_frequencies("turn", ["kite"]) == {"kite": 2}
    assert store.reads == [["kite"]]
    # A write seen by the next search's view reads the count again.
    add(store, ["kite shop"], 3)
    assert stats.for_search().doc_frequencies("turn", ["kite"]) == {"kite": 3}
    assert store.reads == [["kite"], ["kite"]]
    store.close()
