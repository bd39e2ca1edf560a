"""The candidate pool read while the worker embeds the query (arbormem.recall.pool):
the full-text candidates are read meanwhile, the ranking is the one read in one
step, and an embedder or a read that fails leaves nothing behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arbormem.recall.retriever as recall
from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import EmbedderError, StoreError
from arbormem.store.types import Thread

QUERIES = ["peanut allergy", "what did Ana say about Lisbon on day 4?", "the new bike", "garden"]


def _conversation(mem: Memory) -> None:
    topics = [
        "the garden and tomatoes",
        "a trip to Lisbon",
        "the new bike",
        "Sarah's peanut allergy",
    ]
    for i in range(120):
        mem.add(
            f"turn {i} about {topics[i % 4]} and day {i % 9}",
            speaker=["Ana", "Bo"][i % 2],
            session=f"s{i // 12}",
        )


@pytest.fixture
def mem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Memory]:
    """A memory whose searches embed the query on the worker thread."""
    monkeypatch.setattr(recall, "PARALLEL_FROM", 0)
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as m:
        _conversation(m)
        yield m


def _threads(m: Memory) -> list[Thread]:
    thread = m.backend.thread(m.scope.user, m.scope.agent)
    assert thread is not None
    return [thread]


def _candidates(m: Memory, query: str) -> tuple[list[int], list[list[float]]]:
    _, rowids, X, _, _ = m.engine.retriever.candidates(_threads(m), query)
    return rowids, X.tolist()


def _on_this_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def test_full_text_candidates_are_read_while_the_query_is_embedded(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = mem.engine.retriever
    # Read in one step (the embedding on this thread, before any candidate is read).
    monkeypatch.setattr(recall, "PARALLEL_FROM", 10**12)
    alone = [_candidates(mem, q) for q in QUERIES]
    monkeypatch.setattr(recall, "PARALLEL_FROM", 0)

    read = threading.Event()
    around = retriever.reads.around

    def reading(*args: Any, **kwargs: Any) -> Any:
        if _on_this_thread():
            read.set()
        return around(*args, **kwargs)

    dense = retriever._dense
    overlapped: list[bool] = []

    def embedding(*args: Any, **kwargs: Any) -> Any:
        # The worker holds the embedding back until the searching thread has read
        # the full-text candidates' neighbourhoods (it did so only after the join).
        overlapped.append(read.wait(10))
        return dense(*args, **kwargs)

    monkeypatch.setattr(retriever.reads, "around", reading)
    monkeypatch.setattr(retriever, "_dense", embedding)
    for query, expected in zip(QUERIES, alone):
        read.clear()
        assert _candidates(mem, query) == expected
    assert overlapped == [True] * len(QUERIES)


def test_an_embedder_failing_on_the_worker_ranks_as_without_dense_recall(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = mem.engine.retriever
    threads = _threads(mem)
    lexical_only = replace(retriever.config, dense=False)
    expected = [
        [
            (row.rowid, score)
            for row, score, _ in retriever.rank(threads, q, 10, config=lexical_only)
        ]
        for q in QUERIES
    ]

    calls: list[str] = []

    def failing(text: Any) -> np.ndarray:
        calls.append(threading.current_thread().name)
        raise EmbedderError("the embedding endpoint is down")

    monkeypatch.setattr(retriever.embedder, "embed", failing)
    # The vectors read meanwhile for the full-text candidates are left out.
    got = [
        [(row.rowid, score) for row, score, _ in retriever.rank(threads, q, 10)] for q in QUERIES
    ]
    assert got == expected
    assert all(got)
    assert len(calls) == len(QUERIES) and all(c.startswith("arbormem-recall") for c in calls)


def test_a_read_failing_meanwhile_fails_the_search_after_the_embedding_ends(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = mem.engine.retriever
    dense = retriever._dense
    release = threading.Event()
    finished: list[bool] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        out = dense(*args, **kwargs)
        finished.append(True)
        return out

    rows = retriever.reads.rows

    def failing(*args: Any, **kwargs: Any) -> Any:
        if _on_this_thread() and not release.is_set():
            release.set()  # the worker goes on while this read fails
            raise StoreError("disk went away")
        return rows(*args, **kwargs)

    monkeypatch.setattr(retriever, "_dense", slow)
    monkeypatch.setattr(retriever.reads, "rows", failing)
    with pytest.raises(StoreError, match="disk went away"):
        mem.search("peanut allergy", k=5)
    assert finished == [True]  # the worker's job had ended when the search raised
    monkeypatch.undo()
    # The worker is free again: the next search embeds there and succeeds.
    used: list[str] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        used.append(threading.current_thread().name)
        return dense(*args, **kwargs)

    monkeypatch.setattr(recall, "PARALLEL_FROM", 0)
    monkeypatch.setattr(retriever, "_dense", spy)
    assert mem.search("peanut allergy", k=5)
    assert used and used[0].startswith("arbormem-recall")


def test_a_full_text_source_failing_skips_the_reads_meanwhile(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = mem.engine.retriever
    read: list[int] = []
    around = retriever.reads.around

    def counting(*args: Any, **kwargs: Any) -> Any:
        read.append(1)
        return around(*args, **kwargs)

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("index is corrupt")

    monkeypatch.setattr(retriever.reads, "around", counting)
    monkeypatch.setattr(mem.backend, "lexical_search", failing)
    with pytest.raises(StoreError, match="index is corrupt"):
        mem.search("peanut allergy", k=5)
    assert read == []


def test_kept_contents_are_tested_as_afresh_whatever_was_asked_before() -> None:
    from arbormem.recall.features import _NUMBER, _PROPER, _TIME, DocStats

    docs = DocStats(max_docs=3)
    contents = ["We met Anna in May", "two cats", "no", "Yesterday at 5", "Ok Bob, 3 pm"]
    expected = {
        "when": lambda c: bool(_TIME.search(c)),
        "count": lambda c: bool(_NUMBER.search(c)),
        "who": lambda c: bool(_PROPER.search(c[1:])),
    }
    # Each content asked one test, then the others (kept, or cleared when full).
    for order in (["when", "count", "who"], ["who", "when", "count"], ["count", "who"]):
        for content in contents:
            for kind in order:
                assert docs.says(kind, content) == expected[kind](content), (kind, content)
        assert len(docs._says) <= 3


def test_kept_counts_stay_out_of_the_collectors_view_and_agree_with_the_text() -> None:
    import gc

    from arbormem.recall.features import DocStats

    docs = DocStats(max_docs=3)
    texts = ["cat sat cat", "", "dog", "a b a b a", "cat"]
    for _ in range(2):
        for text in texts:
            size, tally = docs.counts(text)
            words = text.split()
            assert size == len(words)
            assert tally == {w: words.count(w) for w in set(words)}
            # Neither the counts nor the lengths are containers the collector walks.
            assert not gc.is_tracked(tally)
            assert not gc.is_tracked(docs.kept_lengths)
            assert docs.kept_counts[text] is tally and docs.kept_lengths[text] == size
        assert len(docs.kept_counts) <= 3 and docs.kept_counts.keys() == docs.kept_lengths.keys()
    # What matters: keeping many documents adds nothing per document for a collection
    # to walk (a (length, counts) tuple per document would add a thousand here).
    many = DocStats()
    gc.collect()
    before = len(gc.get_objects())
    for i in range(1000):
        many.counts(f"word{i} other{i} word{i}")
    gc.collect()
    assert len(many.kept_counts) == 1000
    assert len(gc.get_objects()) - before < 100


def test_steps_a_call_leaves_are_taken_by_the_next_with_the_same_values(mem: Memory) -> None:
    from arbormem.recall.pool import CandidatePool
    from arbormem.text import query_terms

    retriever = mem.engine.retriever
    assert retriever.tree is not None
    threads = _threads(mem)
    terms = query_terms("Ana peanut allergy trip to Lisbon")
    rowids, _ = _candidates(mem, "Ana peanut allergy trip to Lisbon")
    hits = retriever.tree.segment_hits(threads, terms)
    mark = retriever.reads.begin()

    def pool() -> CandidatePool:
        made = CandidatePool(
            retriever.reads, mark, threads, retriever.tree, terms, vectors=retriever.dense
        )
        made.set_topics(hits)
        return made

    whole = pool()
    whole.add(rowids)
    parts = pool()
    parts.add(rowids[:10], more=lambda: False)
    assert parts.rowids == rowids[:10] and parts.signals == {}
    parts.add(rowids[5:])
    assert parts.rowids == whole.rowids and parts.signals == whole.signals
    assert any(whole.signals.values())
    (v1, c1), (v2, c2) = whole.row_vectors(), parts.row_vectors()
    for a, b in ((v1, v2), (c1, c2)):
        assert a.at.keys() == b.at.keys() and len(a.at) > 0
        for r in a.at:
            assert np.array_equal(a.matrix[a.at[r]], b.matrix[b.at[r]])


def test_time_and_number_tests_on_lowered_text_answer_as_the_case_blind_patterns() -> None:
    from arbormem.recall.features import (
        _NUMBER,
        _NUMBER_LOWERED,
        _TIME,
        _TIME_LOWERED,
        _found,
    )

    # Their letters are lower-case ASCII: what lowering the text relies on.
    assert _TIME.pattern == _TIME.pattern.lower() and _TIME.pattern.isascii()
    assert _NUMBER.pattern == _NUMBER.pattern.lower() and _NUMBER.pattern.isascii()
    texts = [
        "We went YESTERDAY",
        "see you Tonight 🙂",
        "back in 2019!!",
        "back in 20199",
        "Last Week was fun",
        "last  week",
        "on Thursday morning",
        "Thursdays",
        "ONE more thing",
        "someone often listens",
        "3pm or 15:30",
        "٣ days",  # a digit beyond ASCII
        "yeſterday",  # a long s: matches s without regard to case
        "tonıght",  # a dotless i
        "\u212a ONE",  # the Kelvin sign, a k
        "İstanbul twice",
        "café ten",
        "naïve 🎉🎉 Friday",
        "",
    ]
    for text in texts:
        for pattern, lowered in ((_TIME, _TIME_LOWERED), (_NUMBER, _NUMBER_LOWERED)):
            assert _found(pattern, lowered, text) == (pattern.search(text) is not None), text


def test_a_search_begun_beside_another_reads_in_one_step_on_its_own_thread(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another search of the process is under way, the query is embedded on the
    searching thread and nothing is read meanwhile; the candidates and their
    features are those of a search that ran alone."""
    retriever = mem.engine.retriever
    alone = [_candidates(mem, q) for q in QUERIES]
    embedded_on: list[str] = []
    dense = retriever._dense
    stepped = threading.Event()

    def spy(*args: Any, **kwargs: Any) -> Any:
        embedded_on.append(threading.current_thread().name)
        if not _on_this_thread():
            stepped.wait(10)  # on the worker: until the candidates were read meanwhile
        return dense(*args, **kwargs)

    steps: list[int] = []
    add = recall.CandidatePool.add

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        steps.append(1)
        stepped.set()
        return add(self, *args, **kwargs)

    monkeypatch.setattr(retriever, "_dense", spy)
    monkeypatch.setattr(recall.CandidatePool, "add", counting)
    # Alone, the worker embeds the query while this thread reads: two steps.
    assert _candidates(mem, QUERIES[0]) == alone[0]
    assert embedded_on[0].startswith("arbormem-recall") and len(steps) == 2
    with retriever.sources.searching() as first:
        assert first  # nothing else was under way
        embedded_on.clear()
        steps.clear()
        crowded = [_candidates(mem, q) for q in QUERIES]
    assert embedded_on == [threading.current_thread().name] * len(QUERIES)
    assert len(steps) == len(QUERIES)
    assert crowded == alone
