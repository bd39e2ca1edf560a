"""The Memory API as a user meets it."""

from __future__ import annotations

import ast
import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem import AsyncMemory, InputError, Memory, NotFound
from arbormem.embed import HashingEmbedder

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def test_add_keeps_messages_verbatim_with_stable_ids(memory: Memory) -> None:
    text = "  Exact   text,\twith odd   spacing and émojis 🎉\n"
    m = memory.add(text, role="user", speaker="Zoë", metadata={"k": [1, 2]}, timestamp=T0)
    again = memory.get(m.id)
    assert again == m
    assert again.content == text and again.speaker == "Zoë" and again.metadata == {"k": [1, 2]}
    assert again.timestamp == T0 and again.index == 0


def test_positions_grow_by_one_and_sessions_follow_the_idle_gap(memory: Memory) -> None:
    a = memory.add("first", timestamp=T0)
    b = memory.add("second", timestamp=T0 + timedelta(minutes=5))
    c = memory.add("much later", timestamp=T0 + timedelta(hours=3))
    d = memory.add("named", session="planning", timestamp=T0 + timedelta(hours=3, minutes=1))
    assert [a.index, b.index, c.index, d.index] == [0, 1, 2, 3]
    assert a.session == b.session == "session-1"
    assert c.session == "session-2"
    assert d.session == "planning"
    assert [s.id for s in memory.sessions()] == ["session-1", "session-2", "planning"]
    assert [s.message_count for s in memory.sessions()] == [2, 1, 1]


def test_current_time_is_used_when_no_timestamp(memory: Memory) -> None:
    before = datetime.now(timezone.utc)
    m = memory.add("now")
    assert before - timedelta(seconds=1) <= m.timestamp <= datetime.now(timezone.utc)


def test_search_finds_the_buried_fact(memory: Memory) -> None:
    for i in range(60):
        memory.add(f"small talk number {i} about the weather and traffic")
    fact = memory.add("Sarah is allergic to peanuts", speaker="Tom")
    hits = memory.search("what is Sarah allergic to?", k=3)
    assert hits[0].message.id == fact.id
    assert set(hits[0].signals) >= {"bm_t", "de_t"}
    assert hits[0].message_ids == [fact.id]


def test_a_term_past_the_posting_budget_is_searched_in_the_newest_rows(db_path: Path) -> None:
    from arbormem.recall.retriever import RecallConfig

    # Lexical search only (no vectors, no tree): each of its searches may read about
    # 10 postings, and "pancakes" has 80.
    config = RecallConfig(posting_budget=10, dense=False)
    with Memory(db_path, embedder=HashingEmbedder(64), tree=False, recall=config) as mem:
        mem.add_many([{"content": f"pancakes with topping {i}"} for i in range(80)])
        hits = mem.search("pancakes", k=30)
        assert hits and min(h.message.index for h in hits) >= 60
        # A rare term beside it still finds its turn wherever it is.
        mem.add_many([{"content": f"note {i}"} for i in range(5)])
        assert mem.search("topping 3 pancakes", k=5)[0].message.index == 3


def test_a_date_the_question_names_does_not_override_the_search_filters(
    memory: Memory,
) -> None:
    memory.add(
        "we flew to Lisbon in March",
        session="a",
        timestamp=datetime(2025, 3, 5, tzinfo=timezone.utc),
    )
    memory.add(
        "in July we painted the fence",
        session="b",
        timestamp=datetime(2025, 7, 9, tzinfo=timezone.utc),
    )
    hits = memory.search(
        "what did we do in March?", since=datetime(2025, 7, 1, tzinfo=timezone.utc)
    )
    assert hits and all(h.message.session == "b" for h in hits)
    hits = memory.search(
        "what did we do in March?", until=datetime(2025, 7, 1, tzinfo=timezone.utc)
    )
    assert [h.message.session for h in hits] == ["a"]


def test_a_named_month_finds_history_stored_after_newer_history(memory: Memory) -> None:
    # An old export loaded after recent talk: the thread's years come from the
    # messages' times, not from which were stored first.
    start = datetime(2025, 6, 1, tzinfo=timezone.utc)
    recent = [
        {
            "content": f"trip {i}",
            "timestamp": start + timedelta(hours=7 * i),
        }
        for i in range(400)
    ]
    memory.add_many(recent, session="recent")
    old = [
        {
            "content": f"chores of the day {i}",
            "timestamp": datetime(2023, 2, 1, tzinfo=timezone.utc) + timedelta(days=i),
        }
        for i in range(40)
    ]
    old[39]["content"] = "the long trip to Lisbon by train with grandma and the kids"  # 12 March
    memory.add_many(old, session="old")
    hits = memory.search("which trip did we take in March?", k=10)
    assert any("Lisbon" in h.message.content for h in hits)


def _date_limits(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(limit, spans) of each date search the memory's searches make from now on."""
    limits: list[tuple[int, int]] = []
    spans_search = memory.backend.lexical_search_spans

    def spy(threads, key, terms, limit, spans, filters=None):  # type: ignore[no-untyped-def]
        limits.append((limit, len(spans)))
        return spans_search(threads, key, terms, limit, spans, filters)

    monkeypatch.setattr(memory.backend, "lexical_search_spans", spy)
    return limits


def test_a_month_named_without_a_year_shares_its_date_candidates_among_the_years(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "in May" is a May in each year of the thread: one pool for all of them, or an
    # old thread's searches would read more candidates with every year it spans.
    for year in (2022, 2023, 2024):
        memory.add_many(
            [
                {
                    "content": f"we planted tomatoes in the garden, row {i}",
                    "timestamp": datetime(year, 5, 3, tzinfo=timezone.utc) + timedelta(hours=i),
                }
                for i in range(30)
            ],
            session=f"may-{year}",
        )
    limits = _date_limits(memory, monkeypatch)
    hits = memory.search("what did we plant in the garden in May?", k=10)
    assert hits and all("tomatoes" in h.message.content for h in hits)
    pool = memory.engine.retriever.config.date_candidates
    assert limits == [(-(-pool // 3), 3)]


def test_hits_carry_neighbours_on_request(memory: Memory) -> None:
    msgs = memory.add_many(
        [{"content": t} for t in ["alpha one", "beta two", "gamma three"]], session="s"
    )
    hit = memory.search("beta", k=1, neighbors=1)[0]
    assert hit.message.id == msgs[1].id
    assert [n.id for n in hit.neighbors] == [msgs[0].id, msgs[2].id]
    assert hit.message_ids == [m.id for m in msgs]


def test_filters_session_time_and_role(memory: Memory) -> None:
    memory.add("deploy the api", session="a", role="user", timestamp=T0)
    memory.add(
        "deploy the frontend", session="b", role="assistant", timestamp=T0 + timedelta(days=2)
    )
    assert {h.message.session for h in memory.search("deploy", session="b")} == {"b"}
    assert {h.message.role for h in memory.search("deploy", role="user")} == {"user"}
    assert [h.message.session for h in memory.search("deploy", since=T0 + timedelta(days=1))] == [
        "b"
    ]
    assert [h.message.session for h in memory.search("deploy", until=T0 + timedelta(days=1))] == [
        "a"
    ]


def test_k_limits_results_and_bad_queries_are_refused(memory: Memory) -> None:
    for i in range(20):
        memory.add(f"note {i} about gardening")
    assert len(memory.search("gardening", k=7)) == 7
    with pytest.raises(InputError):
        memory.search("   ")
    with pytest.raises(InputError):
        memory.search("x", k=0)


def test_scopes_never_leak_between_users(memory: Memory) -> None:
    memory.add("alice's secret is the blue door", user="alice")
    memory.add("bob's secret is the red door", user="bob")
    memory.add("alice tells her coach about the blue door", user="alice", agent="coach")
    assert [h.message.user for h in memory.search("secret door", user="bob")] == ["bob"]
    alice = memory.search("secret door", user="alice")
    assert {h.message.agent for h in alice} == {"default"}
    wide = memory.search("door", user="alice", all_agents=True)
    assert {h.message.user for h in wide} == {"alice"}
    assert {h.message.agent for h in wide} == {"default", "coach"}
    bob_msg = memory.search("red door", user="bob")[0].message
    with pytest.raises(NotFound):
        memory.get(bob_msg.id, user="alice")


def test_forget_message_session_thread_and_user(memory: Memory) -> None:
    keep = memory.add("keep this about rivers", session="s1")
    gone = memory.add("forget this about mountains", session="s1")
    memory.add("whole session about oceans", session="s2")
    assert memory.forget(gone.id).messages == 1
    with pytest.raises(NotFound):
        memory.get(gone.id)
    assert not [h for h in memory.search("mountains") if h.message.id == gone.id]
    assert memory.forget(session="s2").to_dict() == {
        "messages": 1,
        "sessions": 1,
        "threads": 0,
        "purged": True,
        "purge_pending": None,
    }
    assert [s.id for s in memory.sessions()] == ["s1"]
    memory.add("other agent", agent="x")
    memory.add("other user", user="carol")
    assert memory.forget(user="default", agent="x").threads == 1
    assert memory.forget(user="default").messages == 1
    with pytest.raises(NotFound):
        memory.get(keep.id)
    assert memory.scopes() == [memory.scope.__class__("carol", "default")]
    with pytest.raises(NotFound):
        memory.forget("no-such-id", user="carol")


def test_forget_removes_derived_data(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        secret = mem.add("the vault code is zebra-4417")
        mem.add("unrelated note about lunch")
        mem.search("vault code")
        mem.forget(secret.id)
        assert mem.search("zebra") == []
        assert mem.backend.vector_models() == {"hash/32": 1}
    raw = db_path.read_bytes() + (
        db_path.with_name(db_path.name + "-wal").read_bytes()
        if db_path.with_name(db_path.name + "-wal").exists()
        else b""
    )
    assert b"zebra-4417" not in raw
    assert b"zebra" not in raw


def test_forgetting_a_thread_leaves_no_session_state_behind(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        mem.engine.working.interval = 60.0  # the exchange's upkeep is still waiting
        mem.add_many(
            [
                {"role": "user", "content": "what is the vault code?"},
                {"role": "assistant", "content": "it is zebra-4417"},
            ],
            session="s1",
        )
        assert mem.engine.working.busy
        mem.forget(user="default", agent="default")
        again = mem.backend.thread("default", "default", create=True)  # the id, reused
        assert again is not None
    # Closing ran any upkeep still waiting: none may have saved state for the new thread.
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        assert mem.backend.session_state(again, "s1") == {}
        rows = mem.backend._writer.execute("SELECT COUNT(*) FROM session_state").fetchone()
        assert rows[0] == 0


def test_forgetting_a_user_leaves_no_vector_behind(db_path: Path) -> None:
    # Topic summaries are embedded too: their vectors must go with the topics.
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        for day in range(3):
            mem.add_many(
                [
                    {"role": "user", "content": f"Where should we hike on day {day}?"},
                    {"role": "assistant", "content": "The ridge trail above the lake."},
                    {"role": "user", "content": "And what about lunch after the hike?"},
                    {"role": "assistant", "content": "A picnic of bread and cheese."},
                ],
                session=f"s{day}",
                user="ann",
            )
        mem.add("someone else's note", user="bob")
        summaries = mem.backend._writer.execute(
            "SELECT COUNT(*) FROM vectors WHERE chash IN (SELECT chash FROM tree_nodes)"
        ).fetchone()[0]
        assert summaries > 0
        mem.forget(user="ann")
        assert mem.backend.vector_models() == {"hash/32": 1}  # bob's note only


def test_export_import_round_trip_is_lossless(memory: Memory, tmp_path: Path) -> None:
    memory.add_many(
        [
            {"content": "hello", "speaker": "Ann", "metadata": {"a": 1}, "timestamp": T0},
            {"content": "hi there", "role": "assistant", "timestamp": T0 + timedelta(seconds=3)},
        ],
        session="s1",
    )
    memory.add("elsewhere", user="u2", agent="a2", session="x", timestamp=T0)
    dump = memory.export(tmp_path / "dump.json", everything=True)
    with Memory(tmp_path / "other.db", embedder=HashingEmbedder(64)) as other:
        counts = other.import_(tmp_path / "dump.json")
        assert counts.to_dict() == {
            "threads": 2,
            "messages": 3,
            "skipped": 0,
            "archived": 0,
            "not_archived": 0,
            "session_states": 0,
            "records": 0,
            "images": 0,
        }
        again = other.export(everything=True)
        assert again.document["threads"] == dump.document["threads"]
        assert other.search("hello")[0].message.speaker == "Ann"
        # Importing twice is harmless.
        assert other.import_(dump).skipped == 3
        assert other.export(everything=True).document["threads"] == dump.document["threads"]


def test_an_export_is_of_the_thread_as_it_was_when_it_began(
    memory: Memory, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process adding a message in a new session while an export reads the
    rows: the export failed with KeyError (the CLI with a traceback) in most runs."""
    memory.add_many([{"content": f"note {n}", "session": "s1"} for n in range(3)])
    backend = memory.backend
    rows = backend.iter_rows

    def meanwhile(thread, batch=5000):  # type: ignore[no-untyped-def]
        for n, row in enumerate(rows(thread, batch)):
            if n == 1:
                with Memory(db_path, embedder=HashingEmbedder(64)) as other:
                    other.add("written meanwhile", session="s2")
            yield row

    monkeypatch.setattr(backend, "iter_rows", meanwhile)
    data = memory.export()
    (thread,) = data.document["threads"]
    assert [m["content"] for s in thread["sessions"] for m in s["messages"]] == [
        "note 0",
        "note 1",
        "note 2",
    ]
    monkeypatch.undo()
    assert [m.content for m in memory.messages()][-1] == "written meanwhile"


def test_session_names_are_ones_an_export_can_bring_back(memory: Memory, tmp_path: Path) -> None:
    # A blank name used to be stored as given, and its export could not be imported
    # ("must be a non-empty string"); padding came back stripped.
    for blank in ("", "   "):
        with pytest.raises(InputError, match=r"session.*non-empty"):
            memory.add("hello", session=blank)
        with pytest.raises(InputError, match=r"messages\[1\]\.session"):
            memory.add_many([{"content": "a"}, {"content": "b", "session": blank}])
    assert memory.messages() == []  # nothing of a refused batch was stored
    memory.add("padded", session=" trip ", timestamp=T0)
    memory.add("numbered", session=7, timestamp=T0)  # type: ignore[arg-type]
    assert [m.session for m in memory.messages()] == ["trip", "7"]
    with Memory(tmp_path / "back.db", embedder=HashingEmbedder(64)) as other:
        other.import_(memory.export())
        assert other.export().document["threads"] == memory.export().document["threads"]


def test_one_file_may_list_a_scope_twice(memory: Memory, tmp_path: Path) -> None:
    # Two exports of one scope merged into one file: both entries kept index 0 and the
    # import failed on the store's own check, naming no file or field.
    memory.add("first", session="a", timestamp=T0)
    first = memory.export()
    with Memory(tmp_path / "b.db", embedder=HashingEmbedder(64)) as other:
        other.add("second", session="b", timestamp=T0)
        second = other.export()
    merged = {**first.document, "threads": first.document["threads"] + second.document["threads"]}
    with Memory(tmp_path / "c.db", embedder=HashingEmbedder(64)) as target:
        counts = target.import_(merged)
        assert (counts.threads, counts.messages, counts.skipped) == (2, 2, 0)
        assert [(m.content, m.index) for m in target.messages()] == [("first", 0), ("second", 1)]


def test_a_padded_session_name_finds_what_add_stored_under_it(memory: Memory) -> None:
    # add strips names; every other session argument must too (" trip " found nothing).
    memory.add("Leo loves the Lisbon tram", session=" trip ", timestamp=T0)
    memory.add("Noted: trams in Lisbon", role="assistant", session="trip", timestamp=T0)
    assert len(memory.messages(session=" trip ")) == 2
    assert memory.search("Lisbon tram", session=[" trip"])
    assert memory.context("tram?", session="trip ").section("window").items == 2
    assert memory.set_mode("code", session=" trip ") == "trip"
    with pytest.raises(InputError, match="session"):
        memory.search("Lisbon", session=["trip", "  "])
    assert memory.forget(session=" trip ").messages == 2 and memory.messages() == []


def test_import_keeps_positions_after_forgetting(memory: Memory, tmp_path: Path) -> None:
    msgs = memory.add_many([{"content": f"m{i}", "timestamp": T0} for i in range(4)], session="s")
    memory.forget(msgs[1].id)
    dump = memory.export()
    with Memory(tmp_path / "b.db", embedder=HashingEmbedder(64)) as other:
        other.import_(dump)
        assert [m.index for m in other.messages()] == [0, 2, 3]
        nxt = other.add("next", session="s", timestamp=T0)
        assert nxt.index == 4


def test_embedder_change_never_mixes_models(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        mem.add("the lighthouse keeper writes poems")
        mem.search("lighthouse")
    with Memory(db_path, embedder=HashingEmbedder(48)) as mem:
        # The 32-d vectors are ignored; the message is embedded with the new model on search.
        hits = mem.search("lighthouse poems")
        assert hits and hits[0].signals.get("de_t", 0) > 0
        assert mem.backend.vector_models() == {"hash/32": 1, "hash/48": 1}
        assert mem.reembed().to_dict() == {"embedded": 0, "pruned": 1}
        assert mem.backend.vector_models() == {"hash/48": 1}


def test_reembed_embeds_what_is_missing(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        mem.add_many([{"content": f"fact {i}"} for i in range(5)])
    with Memory(db_path, embedder=HashingEmbedder(16)) as mem:
        assert mem.reembed(prune=False).to_dict() == {"embedded": 5, "pruned": 0}
        assert mem.backend.vector_models() == {"hash/32": 5, "hash/16": 5}


def test_concurrent_readers_and_a_writer(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(32)) as mem:
        mem.add("seed message about kites")
        errors: list[BaseException] = []
        stop = threading.Event()

        def reader() -> None:
            try:
                while not stop.is_set():
                    hits = mem.search("kites", k=5)
                    assert hits and all("kites" in h.message.content for h in hits)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for i in range(100):
            mem.add(f"message {i} about kites and wind")
        stop.set()
        for t in threads:
            t.join()
        assert not errors
        assert len(mem.messages()) == 101
        assert len(mem.search("kites", k=200)) == 101


def test_two_processes_worth_of_memories_stay_in_step(db_path: Path) -> None:
    with (
        Memory(db_path, embedder=HashingEmbedder(32)) as a,
        Memory(db_path, embedder=HashingEmbedder(32)) as b,
    ):
        a.add("first about comets")
        assert len(b.search("comets")) == 1
        b.add("second about comets")
        assert len(a.search("comets")) == 2
        gone = a.search("first comets")[0].message
        b.forget(gone.id)
        assert [h.message.content for h in a.search("comets")] == ["second about comets"]


def test_async_memory(db_path: Path) -> None:
    async def main() -> list[str]:
        async with AsyncMemory(db_path, embedder=HashingEmbedder(32)) as mem:
            await mem.add("async hello world")
            await asyncio.gather(*(mem.search("hello") for _ in range(5)))
            return [h.message.content for h in await mem.search("hello")]

    assert asyncio.run(main()) == ["async hello world"]


def test_db_path_comes_from_environment_then_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ARBORMEM_DB", str(tmp_path / "env.db"))
    with Memory(embedder="hash") as mem:
        assert Path(mem.path) == tmp_path / "env.db"
    monkeypatch.delenv("ARBORMEM_DB")
    with Memory(embedder="hash") as mem:
        assert Path(mem.path).name == "memory.db" and "arbormem" in str(mem.path)


def test_update_marking_needs_an_update_phrase_and_compares_agents_by_time(
    memory: Memory,
) -> None:
    memory.add("The party cake is chocolate with three layers.")
    memory.add("Good choice.", role="assistant")
    memory.add("The party playlist should be longer than the cake speech.")
    hits = memory.search("what is the party cake?", k=3)
    assert all(h.superseded_by is None for h in hits)  # "longer" is no update
    memory.add("The party cake is no longer chocolate: lemon it is.")
    hits = memory.search("what is the party cake?", k=4)
    chocolate = next(h for h in hits if "three layers" in h.message.content)
    assert chocolate.superseded_by == hits[0].message.id and "lemon" in hits[0].message.content
    # Two agents number their messages apart: a position in one says nothing of the other.
    memory.add("Leo's peanut allergy changed, he is fine.", agent="planner", timestamp="2025-01-10")
    for i in range(3):
        memory.add(f"weather note {i}", agent="chef", timestamp=f"2026-05-0{i + 1}")
    memory.add("Leo is allergic to peanuts.", agent="chef", timestamp="2026-06-01")
    hits = memory.search("is Leo allergic to peanuts?", agent="chef", all_agents=True, k=5)
    allergic = next(h for h in hits if h.message.content == "Leo is allergic to peanuts.")
    assert allergic.superseded_by is None


def test_a_speakers_name_does_not_make_two_turns_one_fact(memory: Memory) -> None:
    """Every turn of John's holds his name: a later one sharing it and one more word
    with the question is no update of what he said before."""
    memory.add("My goal is to win a basketball title.", speaker="John")
    memory.add("Good luck!", role="assistant", speaker="Tim")
    memory.add("I switched gyms, basketball practice is closer now.", speaker="John")
    hits = memory.search("What is John's goal in his basketball career?", k=3)
    goal = next(h for h in hits if "title" in h.message.content)
    assert goal.superseded_by is None


def test_the_role_filter_takes_the_aliases_add_takes(memory: Memory) -> None:
    memory.add("I like green tea", role="human")
    memory.add("Green tea noted", role="AI")
    for role in ("human", "User", " user "):
        assert [h.message.role for h in memory.search("green tea", role=role)] == ["user"]
    assert [h.message.role for h in memory.search("green tea", role=["bot"])] == ["assistant"]


def _conversation(mem: Memory) -> None:
    topics = [
        "the garden and tomatoes",
        "a trip to Lisbon",
        "the new bike",
        "Sarah's peanut allergy",
    ]
    for i in range(120):
        mem.add(f"turn {i} about {topics[i % 4]} and day {i % 9}", speaker=["Ana", "Bo"][i % 2])


@pytest.fixture
def pooled(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Memory]:
    """A memory of a short conversation whose searches use the worker pool."""
    import arbormem.recall.retriever as recall

    monkeypatch.setattr(recall, "PARALLEL_FROM", 0)
    with Memory(db_path, embedder=HashingEmbedder(64)) as mem:
        _conversation(mem)
        yield mem


def test_candidate_sources_side_by_side_rank_exactly_as_one_after_another(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import arbormem.recall.retriever as recall

    with Memory(db_path, embedder=HashingEmbedder(64)) as mem:
        _conversation(mem)
        queries = ["peanut allergy", "what did Ana say about Lisbon on day 4?", "bike"]
        threads = [mem.backend.thread(mem.scope.user, mem.scope.agent)]

        def candidates(q: str) -> tuple[list[int], list[list[float]]]:
            _, rowids, X, _, _ = mem.engine.retriever.candidates(threads, q)  # type: ignore[arg-type]
            return rowids, X.tolist()

        monkeypatch.setattr(recall, "PARALLEL_FROM", 10**12)
        alone = [[(h.message.id, h.score) for h in mem.search(q, k=10)] for q in queries]
        pools = [candidates(q) for q in queries]
        monkeypatch.setattr(recall, "PARALLEL_FROM", 0)
        assert [candidates(q) for q in queries] == pools
        used: set[tuple[str, str]] = set()

        def spy(f: Any) -> Any:
            def wrapped(*args: object, **kwargs: object) -> object:
                name = threading.current_thread().name
                used.add((f.__name__, name.split("_")[0]))
                return f(*args, **kwargs)

            return wrapped

        monkeypatch.setattr(mem.engine.retriever, "_dense", spy(mem.engine.retriever._dense))
        monkeypatch.setattr(mem.backend, "lexical_search", spy(mem.backend.lexical_search))
        together = [[(h.message.id, h.score) for h in mem.search(q, k=10)] for q in queries]
        assert together == alone
        # The query's vector on the worker; the store's searches on the searching thread.
        assert used == {
            ("_dense", "arbormem-recall"),
            ("lexical_search", threading.current_thread().name),
        }


def test_a_failing_source_fails_the_search_after_the_others_finish(
    pooled: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arbormem.errors import StoreError

    mem = pooled
    finished: list[str] = []
    search = mem.backend.lexical_search

    def flaky(threads: object, key: str, *args: object, **kwargs: object) -> object:
        if key == "turn":
            raise StoreError("disk went away")
        time.sleep(0.2)
        finished.append(key)
        return search(threads, key, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mem.backend, "lexical_search", flaky)
    with pytest.raises(StoreError, match="disk went away"):
        mem.search("peanut allergy", k=5)
    assert finished == ["window"]


def test_a_search_inside_a_write_transaction_sees_its_uncommitted_rows(db_path: Path) -> None:
    import arbormem.recall.retriever as recall

    with Memory(db_path, embedder=HashingEmbedder(64)) as mem:
        _conversation(mem)
        old, recall.PARALLEL_FROM = recall.PARALLEL_FROM, 0
        try:
            with mem.backend.transaction():
                assert not mem.backend.concurrent_reads()
                fact = mem.add("the spare key is under the blue flowerpot")
                assert mem.search("spare key flowerpot", k=3)[0].message.id == fact.id
        finally:
            recall.PARALLEL_FROM = old
        assert mem.backend.concurrent_reads()


def _bulk(n: int) -> list[dict[str, object]]:
    subjects = ["the garden", "a trip to Lisbon", "the new bike", "the peanut allergy"]
    return [
        {
            "content": f"message {i} about {subjects[(i // 10) % 4]}",
            "role": "user" if i % 2 == 0 else "assistant",
            "timestamp": T0 + timedelta(minutes=3 * i + 200 * (i // 40)),
        }
        for i in range(n)
    ]


def test_a_progress_callback_sees_a_bulk_add_part_by_part_and_changes_nothing_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import arbormem.ingest.pipeline as pipeline_module
    from arbormem.bench.synth import generate_turns

    turns = [
        {"content": t.content, "role": t.role, "speaker": t.speaker, "timestamp": t.timestamp}
        for t in generate_turns(530, seed=3)
    ]
    with Memory(tmp_path / "whole.db", embedder=HashingEmbedder(64)) as mem:
        mem.add_many(turns)
        whole = (mem.tree(messages=False).to_dict(), mem.search("the vet and the dog", k=10))
    monkeypatch.setattr(pipeline_module, "PROGRESS_STEP", 100)
    seen: list[int] = []
    with Memory(tmp_path / "parts.db", embedder=HashingEmbedder(64)) as mem:
        mem.add_many(turns, progress=seen.append)
        parts = (mem.tree(messages=False).to_dict(), mem.search("the vet and the dog", k=10))
    assert seen == [100, 100, 100, 100, 100, 30]
    # Names included: they weigh terms by the store's counts, whole batch or parts.
    assert parts[0] == whole[0]
    assert [(h.message.index, h.score) for h in parts[1]] == [
        (h.message.index, h.score) for h in whole[1]
    ]


def test_a_bulk_add_failing_part_way_stores_no_part(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import arbormem.ingest.pipeline as pipeline_module
    from arbormem.errors import StoreError

    monkeypatch.setattr(pipeline_module, "PROGRESS_STEP", 25)
    grow = memory.engine.grower.grow
    calls = []

    def failing(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 3:  # the third part's tree growth
            raise StoreError("disk full")
        return grow(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memory.engine.grower, "grow", failing)
    with pytest.raises(StoreError, match="disk full"):
        memory.add_many(_bulk(130), progress=lambda n: None)
    monkeypatch.undo()
    assert memory.messages() == []
    assert memory.tree().children == []


def test_prepare_search_on_a_scope_with_nothing_stored(memory: Memory) -> None:
    out = memory.prepare_search(user="nobody")
    assert {k: out.to_dict()[k] for k in ("vectors", "approximate", "topics")} == {
        "vectors": 0,
        "approximate": False,
        "topics": 0,
    }
    assert memory.backend.thread("nobody", memory.scope.agent) is None  # nothing created


def test_the_first_failing_source_in_order_is_the_error_raised(
    pooled: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = pooled

    def turn_fails(*args: object, **kwargs: object) -> object:
        time.sleep(0.1)  # finishes after the dense source (run on this thread)
        raise ValueError("turn search failed")

    def dense_fails(*args: object, **kwargs: object) -> object:
        raise KeyError("dense search failed")

    monkeypatch.setattr(mem.backend, "lexical_search", turn_fails)
    monkeypatch.setattr(mem.engine.retriever, "_dense", dense_fails)
    with pytest.raises(ValueError, match="turn search failed"):
        mem.search("peanut allergy", k=5)


_RACE = """
import os, sys, tempfile, threading, time
import arbormem.recall.retriever as recall
from arbormem import Memory, StoreError
from arbormem.embed import HashingEmbedder
import arbormem.store.sqlite.connection as sqlite_store
recall.PARALLEL_FROM = int(sys.argv[1])
sqlite_store.CLOSE_WAIT = float(sys.argv[2])  # 0: as if a read outlasted the wait
tmp = tempfile.mkdtemp()
outcomes = set()
for trial in range(15):
    mem = Memory(os.path.join(tmp, f"m{trial}.db"), embedder=HashingEmbedder(64), tree=False)
    mem.add_many([{"content": f"message {i} about the blue kite"} for i in range(30)])
    go = threading.Event()
    def loop():
        go.wait()
        try:
            for _ in range(300):
                mem.search("blue kite", k=3)
            outcomes.add("done")
        except StoreError as exc:
            outcomes.add("closed" if "is closed" in str(exc) else repr(exc))
    threads = [threading.Thread(target=loop) for _ in range(3)]
    for t in threads:
        t.start()
    go.set()
    time.sleep(0.003 * (trial % 5))
    mem.close()
    for t in threads:
        t.join()
print(sorted(outcomes))
print(sum(t.name.startswith("arbormem-recall") for t in threading.enumerate()))
"""


@pytest.mark.parametrize(("parallel_from", "close_wait"), [(0, 10), (10**9, 10), (0, 0)])
def test_closing_while_other_threads_search_refuses_them_cleanly(
    parallel_from: int, close_wait: float
) -> None:
    # close() used to close reader connections under running searches: the
    # interpreter crashed (SIGSEGV) in a few trials out of ten.
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _RACE, str(parallel_from), str(close_wait)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    outcomes, workers = out.stdout.strip().splitlines()
    assert set(ast.literal_eval(outcomes)) <= {"done", "closed"}, outcomes
    assert workers == "0"  # no worker pool outlives close()


def test_a_search_on_a_thread_outliving_the_main_thread_still_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = """
import sys, threading, time
import arbormem.recall.retriever as recall
from arbormem import Memory
from arbormem.embed import HashingEmbedder
recall.PARALLEL_FROM = 0
mem = Memory(sys.argv[1], embedder=HashingEmbedder(64), tree=False)
mem.add_many([{"content": f"message {i} about the blue kite"} for i in range(30)])
def late():
    time.sleep(0.3)  # after the main thread has returned
    print(len(mem.search("blue kite", k=3)), flush=True)
threading.Thread(target=late).start()
"""
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "m.db")], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "3"


def test_an_interrupt_is_never_swallowed_by_a_failing_source(
    pooled: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = pooled

    def failing(*args: object, **kwargs: object) -> object:
        raise ValueError("turn search failed")

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt  # Ctrl-C while this thread runs its source

    monkeypatch.setattr(mem.backend, "lexical_search", failing)
    monkeypatch.setattr(mem.engine.retriever, "_dense", interrupted)
    # The turn search comes first in job order, but an interrupt is not a failure
    # to rank: it used to be logged at debug level and the ValueError raised.
    with pytest.raises(KeyboardInterrupt):
        mem.search("peanut allergy", k=5)
    monkeypatch.undo()
    assert mem.search("peanut allergy", k=3)


def test_an_interrupt_does_not_wait_for_the_query_embedding(
    pooled: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The query is embedded on the worker; Ctrl-C during the store's searches used
    # to wait for the whole embedding (a remote model, a re-embedding catch-up).
    mem = pooled
    release = threading.Event()
    dense = mem.engine.retriever._dense
    running: list[bool] = []
    finished: list[bool] = []

    def slow_dense(*args: object, **kwargs: object) -> object:
        running.append(True)
        release.wait(5)
        finished.append(True)
        return dense(*args, **kwargs)  # type: ignore[arg-type]

    def interrupted(*args: object, **kwargs: object) -> object:
        while not running:  # the embedding is under way
            time.sleep(0.001)
        raise KeyboardInterrupt

    monkeypatch.setattr(mem.engine.retriever, "_dense", slow_dense)
    monkeypatch.setattr(mem.backend, "lexical_search", interrupted)
    with pytest.raises(KeyboardInterrupt):
        mem.search("peanut allergy", k=5)
    assert not finished  # raised while the embedding still ran
    release.set()


def test_a_search_embeds_on_its_own_thread_while_the_worker_is_busy(
    pooled: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One worker serves every searching thread: a second search does not queue
    # behind the first one's embedding.
    mem = pooled
    release = threading.Event()
    dense = mem.engine.retriever._dense
    where: list[str] = []

    def spy(*args: object, **kwargs: object) -> object:
        where.append(threading.current_thread().name)
        if len(where) == 1:
            release.wait(30)
        return dense(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mem.engine.retriever, "_dense", spy)
    first = threading.Thread(target=mem.search, args=("peanut allergy",), name="first")
    first.start()
    while not where:
        time.sleep(0.001)
    assert mem.search("the new bike", k=3)  # answered while the worker waits
    release.set()
    first.join()
    assert where[0].startswith("arbormem-recall")
    assert where[1] == threading.current_thread().name


def test_a_named_month_shares_its_pool_only_among_years_the_thread_lived(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # November 2021 to February 2023: "in May" can only be May 2022.
    start = datetime(2021, 11, 1, tzinfo=timezone.utc)
    memory.add_many(
        [
            {
                "content": f"we planted tomatoes in the garden, row {i}",
                "timestamp": start + timedelta(days=3 * i),
            }
            for i in range(160)
        ]
    )
    limits = _date_limits(memory, monkeypatch)
    assert memory.search("what did we plant in the garden in May?", k=10)
    assert limits == [(memory.engine.retriever.config.date_candidates, 1)]


def test_two_imports_of_one_file_at_once(tmp_path: Path) -> None:
    """An import planned positions and skips before its transaction: another process
    importing the same file meanwhile made it fail ("index 0 is taken"). Importing a
    file twice is harmless, at once too."""
    with Memory(tmp_path / "src.db", embedder=HashingEmbedder(64)) as src:
        src.add_many([{"content": f"note {n}"} for n in range(5)], session="s1")
        data = src.export()
    db = tmp_path / "dst.db"

    class Meanwhile(HashingEmbedder):
        armed = True

        def embed_batch(self, texts):  # type: ignore[no-untyped-def]
            if Meanwhile.armed:
                Meanwhile.armed = False
                with Memory(db, embedder=HashingEmbedder(64)) as other:
                    assert other.import_(data).messages == 5
            return super().embed_batch(texts)

    with Memory(db, embedder=Meanwhile(64)) as mem:
        counts = mem.import_(data)
        assert not Meanwhile.armed
        assert (counts.messages, counts.skipped) == (0, 5)
        assert [m.content for m in mem.messages()] == [f"note {n}" for n in range(5)]
