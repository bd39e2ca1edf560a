"""The synthetic conversation generator: deterministic, varied, bounded, obedient."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from datetime import datetime, timedelta, timezone
from itertools import groupby, islice, pairwise

import pytest

from arbormem.bench import synth
from arbormem.bench.synth import (
    MAX_WORDS,
    MIN_WORDS,
    NAMES,
    TOPICS,
    SynthTurn,
    generate_queries,
    generate_turns,
)

START = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
END = datetime(2024, 9, 1, 18, 0, tzinfo=timezone.utc)


def turns(n: int, **kwargs: object) -> list[SynthTurn]:
    kwargs.setdefault("start", START)
    kwargs.setdefault("end", END)
    return list(generate_turns(n, **kwargs))  # type: ignore[arg-type]


def test_same_seed_same_turns_other_seed_other_turns() -> None:
    assert turns(500, seed=3) == turns(500, seed=3)
    other = turns(500, seed=4)
    assert sum(a.content == b.content for a, b in zip(turns(500, seed=3), other)) < 10


def test_a_prefix_does_not_depend_on_the_total() -> None:
    """Fewer turns are the start of the same stream (the last session is cut short)."""
    short = turns(300, seed=1)
    complete = [t for t in short if t.session != short[-1].session]
    longer = islice(generate_turns(3000, seed=1, start=START, end=END), len(complete))
    assert [(t.speaker, t.content) for t in complete] == [(t.speaker, t.content) for t in longer]


def test_turns_are_varied() -> None:
    sample = turns(20_000, seed=0)
    distinct = {t.content for t in sample}
    assert len(distinct) > 0.97 * len(sample)
    assert {t.topic for t in sample} == {topic.name for topic in TOPICS}
    assert len({t.speaker for t in sample}) > 200
    words = Counter(w.strip(".,!?").lower() for t in sample for w in t.content.split())
    assert len(words) > 4000
    assert any("?" in t.content for t in sample[:50])
    assert any(re.search(r"\d", t.content) for t in sample[:50])
    # No template dominates: the most frequent turn is rare.
    assert Counter(t.content for t in sample).most_common(1)[0][1] < 10


def test_turn_lengths_are_those_of_chat() -> None:
    lengths = [len(t.content.split()) for t in turns(20_000, seed=2)]
    assert min(lengths) >= MIN_WORDS and max(lengths) <= MAX_WORDS
    assert 18 <= statistics.mean(lengths) <= 26
    assert sum(n <= 10 for n in lengths) > 0.05 * len(lengths)
    assert sum(n >= 35 for n in lengths) > 0.02 * len(lengths)


def test_sessions_alternate_two_speakers_as_user_then_assistant() -> None:
    sample = turns(2_000, seed=5)
    sessions = [list(g) for _, g in groupby(sample, key=lambda t: t.session)]
    assert len({s[0].session for s in sessions}) == len(sessions)  # each session is contiguous
    for i, session in enumerate(sessions):
        if i < len(sessions) - 1:
            assert 20 <= len(session) <= 40
        assert len({t.speaker for t in session}) == 2
        for j, t in enumerate(session):
            assert t.role == ("user" if j % 2 == 0 else "assistant")
            assert t.speaker == session[j % 2].speaker


def test_timestamps_stay_within_the_span_in_order() -> None:
    for n in (1, 37, 5_000):
        sample = turns(n, seed=n)
        stamps = [t.timestamp for t in sample]
        assert len(sample) == n
        assert stamps == sorted(stamps)
        assert stamps[0] >= START and stamps[-1] <= END
    spread = turns(5_000, seed=1)
    # Sessions are spread over the whole span, not bunched at its start.
    assert spread[-1].timestamp - START > (END - START) * 0.95
    gaps = [b.timestamp - a.timestamp for a, b in pairwise(spread) if a.session == b.session]
    assert max(gaps) <= timedelta(minutes=3)
    instant = turns(50, start=START, end=START)
    assert {t.timestamp for t in instant} == {START}


def test_excluded_names_never_speak_and_are_never_mentioned() -> None:
    excluded = ["Caroline", "melanie", *NAMES[::7], "Lisbon", "Sunday"]
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, excluded)) + r")\b", re.IGNORECASE)
    sample = turns(20_000, seed=9, exclude_names=excluded)
    lowered = {n.lower() for n in excluded}
    assert not [t for t in sample if t.speaker.lower() in lowered]
    offending = [t.content for t in sample if pattern.search(t.content)]
    assert offending == []
    queries = generate_queries(500, exclude_names=excluded)
    assert not [q for q in queries if pattern.search(q)]


def test_given_speakers_are_the_only_speakers() -> None:
    sample = turns(300, speakers=["Ana", "Ben", "Caro"], exclude_names=["Caro"])
    assert {t.speaker for t in sample} == {"Ana", "Ben"}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="end"):
        turns(10, start=END, end=START)
    with pytest.raises(ValueError, match="two speakers"):
        turns(10, speakers=["Ana"])
    with pytest.raises(ValueError, match="non-negative"):
        turns(-1)
    assert turns(0) == []


def test_queries_are_deterministic_questions_about_the_speakers() -> None:
    names = ["Priya", "Tomas", "Wanjiru"]
    queries = generate_queries(200, seed=1, names=names)
    assert queries == generate_queries(200, seed=1, names=names)
    assert len(queries) == 200 and len(set(queries)) == 200
    assert sum(q.endswith("?") for q in queries) > 100
    mentioned = {n for q in queries for n in names if n in q}
    assert mentioned == set(names)


def test_queries_never_repeat_and_an_impossible_count_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two people leave the fewest different questions; a latency run must still
    # time as many different searches as it reports.
    pair = ["Priya", "Tomas"]
    queries = generate_queries(1_000, seed=3, names=pair)
    assert len(set(queries)) == 1_000
    assert generate_queries(10, seed=3, names=pair) == queries[:10]
    # Templates that can make only two queries: asking for three is refused.
    monkeypatch.setattr(synth, "_QUERY_TEMPLATES", ("vet appointment", "vet bill"))
    assert sorted(generate_queries(2, names=pair)) == ["vet appointment", "vet bill"]
    with pytest.raises(ValueError, match="only 2 different queries"):
        generate_queries(3, names=pair)
    with pytest.raises(ValueError, match="non-negative"):
        generate_queries(-1)
    assert generate_queries(0) == []


@pytest.mark.slow
def test_a_million_turns_are_mostly_distinct_and_fast() -> None:
    import time

    t0 = time.perf_counter()
    distinct = {t.content for t in generate_turns(1_000_000)}
    assert time.perf_counter() - t0 < 60
    assert len(distinct) > 850_000
