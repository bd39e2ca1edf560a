"""The contract of the records capability (:class:`arbormem.store.records.RecordStore`).

Every test runs over the in-memory reference store and every back-end in
``STORES``. A back-end for PostgreSQL joins by adding itself there, e.g.
``"postgres": lambda request, tmp: open_store(request.getfixturevalue("pg_url"))``;
tests that need messages beside records (forgetting) take the ``backend``
fixture, which runs over the back-ends only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem.errors import StoreError
from arbormem.records.model import Composite, Record, record_id
from arbormem.store import Backend, SQLiteBackend, open_store
from arbormem.store.records import RecordStore, thread_scope
from arbormem.store.records_memory import MemoryRecordStore
from arbormem.store.types import Thread

T0 = datetime(2024, 1, 8, 9, 0, tzinfo=timezone.utc)

STORES: dict[str, Callable[[pytest.FixtureRequest, Path], RecordStore]] = {
    "memory": lambda request, tmp: MemoryRecordStore(),
    "sqlite-file": lambda request, tmp: SQLiteBackend(tmp / "store.db"),
    "sqlite-memory": lambda request, tmp: SQLiteBackend(":memory:"),
    "postgres": lambda request, tmp: open_store(request.getfixturevalue("pg_url")),
}
BACKENDS = sorted(name for name in STORES if name != "memory")
_thread_ids = itertools.count(1)


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RecordStore]:
    opened = STORES[request.param](request, tmp_path)
    yield opened
    opened.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    opened = STORES[request.param](request, tmp_path)
    assert isinstance(opened, Backend)
    yield opened
    opened.close()


def open_thread(
    store: RecordStore, user: str = "sam", agent: str = "bot", tenant: str = ""
) -> Thread:
    """A thread of ``store``: a back-end's own, or a made-up one for the memory store."""
    if isinstance(store, Backend):
        thread = store.thread(user, agent, create=True, tenant=tenant)
        assert thread is not None
        return thread
    return Thread(next(_thread_ids), user, agent, tenant)


def rec(
    thread: Thread,
    text: str,
    *,
    day: float = 0,
    kind: str = "fact",
    subject: str | None = None,
    attribute: str | None = None,
    value: str | None = None,
    sources: tuple[str, ...] = (),
    **fields: object,
) -> Record:
    at = T0 + timedelta(days=day)
    return Record(
        id=record_id(thread_scope(thread), text),
        kind=kind,
        text=text,
        subject=subject,
        attribute=attribute,
        value=value,
        sources=sources,
        valid_from=at,
        created_at=at,
        updated_at=at,
        scope=thread_scope(thread),
        **fields,  # type: ignore[arg-type]
    )


def home(thread: Thread, who: str, city: str, day: float, *sources: str) -> Record:
    return rec(
        thread,
        f"{who} lives in {city}.",
        day=day,
        subject=who,
        attribute="home",
        value=city,
        sources=sources or (f"m-{city}",),
        tags=("home",),
    )


def chain(store: RecordStore, thread: Thread, *cities: str) -> list[Record]:
    """Sam's home moving through ``cities``, each record closing the one before, as
    the resolver writes them."""
    out: list[Record] = []
    for day, city in enumerate(cities):
        new = home(thread, "Sam", city, 10 * day)
        if out:
            out[-1] = replace(out[-1], valid_to=new.valid_from, superseded_by=new.id)
            new = replace(new, supersedes=out[-1].id)
        out.append(new)
    store.write_records(thread, out)
    return [store.record(thread, r.id) for r in out]  # type: ignore[misc]


# --------------------------------------------------------------------------- reading back


def test_a_record_comes_back_as_it_was_written(store: RecordStore) -> None:
    t = open_thread(store)
    full = rec(
        t,
        "To reset the router, hold the button for ten seconds.",
        kind="procedure",
        subject="router",
        tags=("howto", "network"),
        entities=("router", "Ana"),
        sources=("m2", "m1"),
        negated=True,
        valid_to=T0 + timedelta(days=3, microseconds=7),
        superseded_by="rec-later",
        supersedes="rec-earlier",
        confidence=0.83,
        importance=0.25,
        recall_count=4,
        mentions=3,
        intent="reset the router",
        body="1. Hold the button.\n2. Wait — ten seconds.",
    )
    bare = Record(id="rec-bare", kind="event", text="Something happened.", scope=thread_scope(t))
    store.write_records(t, [full, bare])
    assert store.record(t, full.id) == full
    assert store.record(t, full.id).to_dict() == full.to_dict()  # type: ignore[union-attr]
    assert store.record(t, "rec-bare") == bare
    assert store.record(t, "rec-none") is None


def test_threads_do_not_see_each_others_records(store: RecordStore) -> None:
    a, b = open_thread(store, "sam"), open_thread(store, "ana")
    mine = home(a, "Sam", "Paris", 0, "m1")
    store.write_records(a, [mine])
    store.replace_composites(a, [Composite("cmp-1", 1, "x", (mine.id,), scope=thread_scope(a))])
    store.set_records_cursor(a, 5)
    assert store.record(b, mine.id) is None
    assert store.records_about(b, "Sam", "home") == []
    assert store.similar_records(b, "fact", "Sam lives in Paris") == []
    assert store.record_candidates(b, ["pari"], ["home"]) == []
    assert store.list_records(b, current=False) == []
    assert store.record_subjects(b) == []
    assert store.records_for_messages(b, ["m1"]) == []
    assert store.composites(b) == [] and store.records_cursor(b) == 0
    assert store.forget_record_sources(b, ["m1"]) == [] and store.delete_records(b, [mine.id]) == []
    assert store.record(a, mine.id) == mine


def test_two_tenants_users_of_one_name_keep_records_apart(store: RecordStore) -> None:
    plain, acme = open_thread(store), open_thread(store, tenant="acme")
    assert thread_scope(plain) == "sam/bot" and thread_scope(acme) == "acme:sam/bot"
    theirs = home(acme, "Sam", "Oslo", 0, "m1")
    assert theirs.id != home(plain, "Sam", "Oslo", 0, "m1").id  # the id hashes the scope
    store.write_records(acme, [theirs])
    assert store.record(acme, theirs.id) == theirs and theirs.scope == "acme:sam/bot"
    assert store.list_records(plain, current=False) == []
    with pytest.raises(StoreError, match="acme:sam/bot"):
        store.write_records(plain, [theirs])


def test_a_record_of_another_scope_is_refused_and_nothing_is_written(store: RecordStore) -> None:
    a, b = open_thread(store, "sam"), open_thread(store, "ana")
    good, stray = home(a, "Sam", "Paris", 0), home(b, "Ana", "Oslo", 0)
    with pytest.raises(StoreError, match="ana/bot"):
        store.write_records(a, [good, stray])
    assert store.list_records(a, current=False) == []
    with pytest.raises(StoreError):
        store.replace_composites(a, [Composite("cmp-1", 1, "x", ("r",), scope="ana/bot")])


def test_writing_an_id_again_replaces_the_record_and_keeps_its_place(store: RecordStore) -> None:
    t = open_thread(store)
    paris, oslo = home(t, "Sam", "Paris", 0, "m1"), home(t, "Ana", "Oslo", 1, "m2")
    store.write_records(t, [paris, oslo])
    again = replace(paris, sources=("m1", "m3"), mentions=2, confidence=0.9)
    store.write_records(t, [again])
    assert store.record(t, paris.id) == again
    assert len(store.list_records(t, current=False)) == 2
    assert store.record_subjects(t) == ["Sam", "Ana"]  # first written first, still
    assert [r.id for r in store.records_for_messages(t, ["m3"])] == [paris.id]
    store.write_records(t, [replace(again, sources=("m3",))])
    assert store.records_for_messages(t, ["m1"]) == []


# --------------------------------------------------------------------------- finding


def test_records_about_match_subjects_word_by_word_current_and_closed(store: RecordStore) -> None:
    t = open_thread(store)
    old, new = chain(store, t, "Paris", "Lyon")
    full_name = home(t, "Sam Lee", "Nice", 30)
    other = home(t, "Samuel", "Rome", 31)
    sync = rec(t, "The weekly sync is on Monday.", subject="the weekly sync", attribute="schedule")
    job = rec(t, "Sam works at Acme.", subject="Sam", attribute="employer", value="Acme")
    store.write_records(t, [full_name, other, sync, job])
    assert store.records_about(t, "Sam", "home") == [old, new, full_name]
    assert store.records_about(t, "sam lee", "home") == [old, new, full_name]
    assert store.records_about(t, "Lee", "home") == [full_name]
    assert store.records_about(t, "Sam", "employer") == [job]
    assert store.records_about(t, "sync", "schedule") == [sync]
    assert store.records_about(t, "our weekly sync", "schedule") == [sync]
    assert store.records_about(t, "Ana", "home") == []


def test_similar_records_rank_by_shared_terms_among_current_ones(store: RecordStore) -> None:
    t = open_thread(store)
    a = rec(t, "Sam went hiking in the Alps with Ana.", kind="event")
    b = rec(t, "Sam went hiking.", kind="event", day=1)
    c = rec(t, "Ana went hiking in the Alps with Sam and Leo.", kind="event", day=2)
    pref = rec(t, "Sam likes hiking in the Alps.", kind="preference")
    closed = rec(t, "Sam went hiking in the Alps with Ana again.", kind="event", valid_to=T0)
    store.write_records(t, [a, b, c, pref, closed])
    found = store.similar_records(t, "event", "Sam hiked in the Alps with Ana")
    assert [r.id for r in found] == [a.id, c.id, b.id]  # a and c tie: first written first
    assert [r.id for r in store.similar_records(t, "event", "hiking", limit=2)] == [a.id, b.id]
    assert store.similar_records(t, "event", "cooking pasta") == []
    assert store.similar_records(t, "event", "") == []


def test_candidates_are_term_matches_and_attribute_matches(store: RecordStore) -> None:
    t = open_thread(store)
    old, new = chain(store, t, "Paris", "Lyon")
    event = rec(t, "Sam visited Paris for the marathon.", kind="event", day=5)
    phone = rec(t, "Ana's number is 555 0100.", subject="Ana", attribute="phone", value="555 0100")
    store.write_records(t, [event, phone])
    assert store.record_candidates(t, ["pari"]) == [event]  # the closed Paris is not current
    assert store.record_candidates(t, ["pari"], current=False) == [old, event]
    assert store.record_candidates(t, ["marathon"], ["home"]) == [new, event]
    assert store.record_candidates(t, ["pari"], ["home"], kinds=["fact"], current=False) == [
        old,
        new,
    ]
    assert store.record_candidates(t, ["pari"], kinds=[]) == []
    assert store.record_candidates(t, ["555"], ["phone"]) == [phone]
    assert store.record_candidates(t, [], []) == []
    # a limit keeps that many word matches, and every attribute match
    many = [rec(t, f"Sam ran race number {i}.", kind="event", day=i) for i in range(8)]
    store.write_records(t, many)
    found = store.record_candidates(t, ["race"], ["phone"], limit=3)
    assert len([r for r in found if r.kind == "event"]) == 3 and phone in found


def test_list_records_filters_and_pages_newest_first(store: RecordStore) -> None:
    t = open_thread(store)
    old, new = chain(store, t, "Paris", "Lyon")
    same_time = rec(t, "Sam likes jazz.", kind="preference", day=10, subject="Sam")
    ana = home(t, "Ana", "Oslo", 2)
    store.write_records(t, [same_time, ana])
    assert store.list_records(t) == [new, same_time, ana]  # a tie keeps written order
    assert store.list_records(t, current=False) == [new, same_time, ana, old]
    assert store.list_records(t, subject="Sam") == [new, same_time]
    assert store.list_records(t, subject="sam", attribute="home", current=False) == [new, old]
    assert store.list_records(t, kind="preference") == [same_time]
    assert store.list_records(t, current=False, limit=2) == [new, same_time]
    assert store.list_records(t, current=False, limit=2, offset=2) == [ana, old]
    assert store.list_records(t, current=False, offset=3) == [old]
    assert store.list_records(t, subject="Leo") == []


def test_subjects_and_records_of_messages(store: RecordStore) -> None:
    t = open_thread(store)
    store.write_records(
        t,
        [
            home(t, "Sam", "Paris", 0, "m1", "m2"),
            home(t, "Ana", "Oslo", 1, "m2"),
            rec(t, "It rained.", sources=("m3",)),
            home(t, "Sam Lee", "Nice", 2, "m4"),
        ],
    )
    assert store.record_subjects(t) == ["Sam", "Ana", "Sam Lee"]
    found = store.records_for_messages(t, ["m2", "m3", "m9"])
    assert [r.text for r in found] == ["Sam lives in Paris.", "Ana lives in Oslo.", "It rained."]


def test_touch_counts_each_distinct_record_once(store: RecordStore) -> None:
    t = open_thread(store)
    paris = home(t, "Sam", "Paris", 0)
    store.write_records(t, [paris])
    store.touch_records(t, [paris.id, paris.id, "rec-none"])
    store.touch_records(t, [paris.id])
    assert store.record(t, paris.id) == replace(paris, recall_count=2)


def test_composites_and_the_cursor_are_stored(store: RecordStore) -> None:
    t = open_thread(store)
    scope = thread_scope(t)
    first = Composite(
        "cmp-a",
        1,
        "Sam lives in Lyon.",
        ("r1", "r2"),
        entities=("Sam",),
        tags=("home",),
        first=T0,
        last=T0 + timedelta(days=2),
        scope=scope,
        extra={"representative": "r2", "kinds": ["fact"]},
    )
    top = Composite("cmp-b", 2, "Sam lives in Lyon.", ("cmp-a", "cmp-c"), scope=scope)
    store.replace_composites(t, [first, top])
    assert store.composites(t) == [first, top]
    store.replace_composites(t, [top])
    assert store.composites(t) == [top]
    assert store.records_cursor(t) == 0
    store.set_records_cursor(t, 42)
    assert store.records_cursor(t) == 42


# --------------------------------------------------------------------------- deleting


def test_deleting_a_change_leaves_what_held_before_it(store: RecordStore) -> None:
    t = open_thread(store)
    paris, lyon, oslo = chain(store, t, "Paris", "Lyon", "Oslo")
    assert store.delete_records(t, [lyon.id, "rec-none"]) == [lyon.id]
    spliced = store.record(t, paris.id)
    assert spliced == replace(paris, valid_to=lyon.valid_to, superseded_by=oslo.id)
    assert store.record(t, oslo.id) == replace(oslo, supersedes=paris.id)
    assert store.delete_records(t, [oslo.id]) == [oslo.id]
    assert store.record(t, paris.id) == replace(paris, valid_to=None, superseded_by=None)
    assert store.list_records(t) == [store.record(t, paris.id)]


def test_deleting_a_whole_chain_in_any_order_leaves_nothing_dangling(store: RecordStore) -> None:
    t = open_thread(store)
    paris, lyon, oslo, rome = chain(store, t, "Paris", "Lyon", "Oslo", "Rome")
    assert store.delete_records(t, [rome.id, lyon.id, oslo.id]) == [lyon.id, oslo.id, rome.id]
    assert store.list_records(t, current=False) == [
        replace(paris, valid_to=None, superseded_by=None)
    ]


def test_deleting_a_denial_reopens_what_it_closed(store: RecordStore) -> None:
    t = open_thread(store)
    allergy = rec(t, "Ana is allergic to cats.", subject="Ana", attribute="allergy", value="cats")
    denial = rec(
        t,
        "Ana is no longer allergic to cats.",
        day=5,
        subject="Ana",
        attribute="allergy",
        value="cats",
        negated=True,
        supersedes=allergy.id,
    )
    closed = replace(allergy, valid_to=denial.valid_from, superseded_by=denial.id)
    store.write_records(t, [closed, denial])
    store.delete_records(t, [denial.id])
    assert store.record(t, allergy.id) == allergy


def test_deleting_records_takes_the_composites_built_on_them(store: RecordStore) -> None:
    t = open_thread(store)
    scope = thread_scope(t)
    a, b, c = (rec(t, f"Fact {n}.", day=n) for n in range(3))
    store.write_records(t, [a, b, c])
    low_ab = Composite("cmp-ab", 1, "ab", (a.id, b.id), scope=scope)
    low_c = Composite("cmp-c", 1, "c", (c.id, "rec-elsewhere"), scope=scope)
    high = Composite("cmp-top", 2, "top", ("cmp-ab", "cmp-other"), scope=scope)
    store.replace_composites(t, [low_ab, low_c, high])
    store.delete_records(t, [b.id])
    assert store.composites(t) == [low_c]
    assert [r.id for r in store.list_records(t)] == [c.id, a.id]


def test_forgetting_a_source_trims_records_and_drops_those_left_with_none(
    store: RecordStore,
) -> None:
    t = open_thread(store)
    paris, lyon = chain(store, t, "Paris", "Lyon")
    both = rec(t, "Sam and Ana met.", kind="event", sources=("m-Paris", "m-x"))
    explicit = rec(t, "Sam prefers tea.", kind="preference")  # never had a source
    store.write_records(t, [both, explicit])
    store.replace_composites(t, [Composite("cmp", 1, "c", (lyon.id,), scope=thread_scope(t))])
    assert store.forget_record_sources(t, ["m-Paris", "m-unknown"]) == [paris.id]
    assert store.record(t, both.id) == replace(both, sources=("m-x",))
    assert store.record(t, lyon.id) == replace(lyon, supersedes=None)
    assert store.composites(t) != []
    assert store.forget_record_sources(t, ["m-Lyon"]) == [lyon.id]
    assert store.composites(t) == []
    assert store.records_for_messages(t, ["m-Paris", "m-Lyon"]) == []
    assert store.record(t, explicit.id) == explicit
    assert store.forget_record_sources(t, []) == []


def test_a_failed_transaction_leaves_records_as_they_were(store: RecordStore) -> None:
    t = open_thread(store)
    paris, lyon = chain(store, t, "Paris", "Lyon")
    composite = Composite("cmp", 1, "c", (lyon.id,), scope=thread_scope(t))
    store.replace_composites(t, [composite])
    store.set_records_cursor(t, 3)
    with pytest.raises(RuntimeError), store.transaction():
        store.write_records(t, [home(t, "Ana", "Oslo", 3), replace(paris, mentions=9)])
        store.touch_records(t, [lyon.id])
        store.forget_record_sources(t, ["m-Lyon"])
        store.replace_composites(t, [])
        store.set_records_cursor(t, 9)
        raise RuntimeError("crash mid-exchange")
    assert store.list_records(t, current=False) == [lyon, paris]
    assert store.records_about(t, "Sam", "home") == [paris, lyon]
    assert store.record_candidates(t, ["oslo"]) == []
    assert store.records_for_messages(t, ["m-Lyon"]) == [lyon]
    assert store.composites(t) == [composite] and store.records_cursor(t) == 3


# --------------------------------------------------------------------------- forgetting messages


def said(backend: Backend, thread: Thread, *lines: tuple[str, str, str]) -> None:
    """Store messages given as (id, session, text)."""
    from arbormem.ids import content_hash
    from arbormem.store import NewMessage
    from arbormem.text import analyze

    backend.append(
        thread,
        [
            NewMessage(
                id=uid,
                role="user",
                content=text,
                timestamp=T0 + timedelta(minutes=i),
                session=session,
                terms=" ".join(analyze(text)),
                chash=content_hash(text),
            )
            for i, (uid, session, text) in enumerate(lines)
        ],
    )


def sam_moves(backend: Backend) -> tuple[Thread, list[Record]]:
    """Sam lived in Paris (m-Paris), moved to Lyon (m-Lyon); both met Ana (m-Paris,
    m-met); one record is explicit and one cites an imported id; a composite sits on
    Lyon."""
    t = open_thread(backend)
    said(
        backend,
        t,
        ("m-Paris", "s1", "I live in Paris."),
        ("m-met", "s1", "Ana and I met at the market."),
        ("m-Lyon", "s2", "I moved to Lyon!"),
    )
    paris, lyon = chain(backend, t, "Paris", "Lyon")
    met = rec(t, "Sam and Ana met at the market.", kind="event", sources=("m-Paris", "m-met"))
    explicit = rec(t, "Sam prefers tea.", kind="preference")
    imported = rec(t, "Sam's badge is 4471.", sources=("import-1",))
    backend.write_records(t, [met, explicit, imported])
    backend.replace_composites(t, [Composite("cmp", 1, "c", (lyon.id,), scope=thread_scope(t))])
    return t, [paris, lyon, met, explicit, imported]


def test_forgetting_a_message_reaches_the_records_made_from_it(backend: Backend) -> None:
    t, (paris, lyon, met, explicit, imported) = sam_moves(backend)
    backend.delete_messages(["m-Lyon"], t)
    assert backend.record(t, lyon.id) is None and backend.composites(t) == []
    assert backend.record(t, paris.id) == replace(paris, valid_to=None, superseded_by=None)
    backend.delete_messages(["m-Paris"])
    assert backend.record(t, paris.id) is None
    assert backend.record(t, met.id) == replace(met, sources=("m-met",))
    # the explicit record and the one citing an imported id never lose anything
    assert backend.list_records(t, current=False) == [
        replace(met, sources=("m-met",)),
        explicit,
        imported,
    ]


def test_a_deletion_that_rolls_back_leaves_the_records(backend: Backend) -> None:
    t, records = sam_moves(backend)
    with pytest.raises(RuntimeError), backend.transaction():
        backend.delete_messages(["m-Lyon", "m-Paris"], t)
        assert backend.record(t, records[1].id) is None  # gone inside the transaction
        raise RuntimeError("crash after the deletion")
    assert [backend.record(t, r.id) for r in records] == records
    assert len(backend.composites(t)) == 1 and backend.get("m-Lyon") is not None


def test_forgetting_a_session_reaches_its_records(backend: Backend) -> None:
    t, (paris, lyon, met, *_) = sam_moves(backend)
    backend.delete_session(t, "s1")
    assert backend.record(t, paris.id) is None and backend.record(t, met.id) is None
    assert backend.record(t, lyon.id) == replace(lyon, supersedes=None)
    assert len(backend.composites(t)) == 1


def test_forgetting_a_thread_takes_all_its_records(backend: Backend) -> None:
    t, _ = sam_moves(backend)
    other = open_thread(backend, "ana")
    kept = home(other, "Ana", "Oslo", 0, "m-Paris")
    backend.write_records(other, [kept])
    backend.set_records_cursor(t, 3)
    backend.delete_thread(t)
    assert backend.list_records(t, current=False) == [] and backend.composites(t) == []
    assert backend.records_cursor(t) == 0
    with pytest.raises(StoreError, match="sam/bot"):
        backend.write_records(t, [home(t, "Sam", "Rome", 9)])
    with pytest.raises(StoreError):
        backend.set_records_cursor(t, 1)
    again = open_thread(backend)  # the same scope starts empty
    assert again.id != t.id and backend.list_records(again, current=False) == []
    assert backend.list_records(other) == [kept]


def test_records_written_then_their_thread_forgotten_in_one_transaction_leave_nothing(
    backend: Backend,
) -> None:
    # PostgreSQL writes a transaction's record changes back just before it commits:
    # a thread forgotten after them in the same transaction must not get them back.
    t, _ = sam_moves(backend)
    with backend.transaction():
        backend.write_records(t, [home(t, "Sam", "Rome", 9)])
        backend.set_records_cursor(t, 3)
        backend.delete_thread(t)
    assert backend.list_records(t, current=False) == [] and backend.composites(t) == []
    assert backend.records_cursor(t) == 0
    again = open_thread(backend)
    assert backend.list_records(again, current=False) == [] and backend.records_cursor(again) == 0


# -- several handles on one store ------------------------------------------------------
# A back-end may keep the records it loaded (PostgreSQL does, stamped with the version
# of the thread's cursor row): another handle's change must still be seen at once.

SHARED = ("sqlite-file", "postgres")


@pytest.fixture(params=SHARED)
def two_handles(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Backend, Backend]]:
    first = STORES[request.param](request, tmp_path)
    second = STORES[request.param](request, tmp_path)
    assert isinstance(first, Backend) and isinstance(second, Backend)
    yield first, second
    first.close()
    second.close()


def test_a_change_through_another_handle_is_seen_by_one_that_read_before(
    two_handles: tuple[Backend, Backend],
) -> None:
    one, other = two_handles
    t = open_thread(one)
    paris = home(t, "Sam", "Paris", 0, "m1")
    one.write_records(t, [paris])
    assert one.list_records(t, current=False) == [paris]  # loaded (and kept) here
    t2 = open_thread(other)
    assert t2.id == t.id
    lyon = home(t2, "Sam", "Lyon", 5, "m2")
    other.write_records(t2, [lyon])
    other.set_records_cursor(t2, 7)
    assert one.list_records(t, current=False) == other.list_records(t2, current=False)
    assert {r.id for r in one.list_records(t, current=False)} == {paris.id, lyon.id}
    assert one.records_cursor(t) == 7
    other.delete_records(t2, [paris.id])
    assert [r.id for r in one.list_records(t, current=False)] == [lyon.id]


def test_a_change_of_a_kept_thread_writes_only_what_it_changed_and_reads_back_exactly(
    two_handles: tuple[Backend, Backend],
) -> None:
    one, other = two_handles
    t = open_thread(one)
    many = [rec(t, f"Sam owns a bike number {i}", day=i, sources=(f"m{i}",)) for i in range(30)]
    one.write_records(t, many)
    one.touch_records(t, [many[3].id])
    one.forget_record_sources(t, ["m4"])  # the only source: the record goes
    one.replace_composites(t, [])
    seen_here = one.list_records(t, current=False)
    seen_fresh = other.list_records(open_thread(other), current=False)
    assert seen_here == seen_fresh
    assert len(seen_fresh) == 29
    assert {r.id: r.recall_count for r in seen_fresh}[many[3].id] == 1


def test_a_change_that_fails_leaves_no_trace_in_what_the_handle_kept(
    request: pytest.FixtureRequest,
) -> None:
    from arbormem.store.postgres.records import PostgresRecords

    store = open_store(request.getfixturevalue("pg_url"))
    try:
        assert isinstance(store, PostgresRecords) and isinstance(store, Backend)
        t = open_thread(store)
        paris = home(t, "Sam", "Paris", 0, "m1")
        store.write_records(t, [paris])
        store.list_records(t)  # kept

        def fails(m: MemoryRecordStore) -> None:
            m.write_records(t, [home(t, "Sam", "Oslo", 3, "m2")])
            raise RuntimeError("the write fails after the change was applied")

        with pytest.raises(RuntimeError):
            store._change(t, fails)
        assert store.list_records(t, current=False) == [paris]
    finally:
        store.close()


def test_the_changes_of_one_transaction_are_seen_by_another_handle_all_at_its_commit(
    two_handles: tuple[Backend, Backend],
) -> None:
    # One extraction batch resolves and writes many records in one transaction (on
    # PostgreSQL written back once, at its end): another handle sees none of them
    # before the commit and every one after, as this handle does.
    one, other = two_handles
    t = open_thread(one)
    first = [rec(t, f"Sam owns a bike number {i}", day=i, sources=(f"m{i}",)) for i in range(5)]
    one.write_records(t, first)
    t2 = open_thread(other)
    assert other.list_records(t2, current=False) == first[::-1]  # loaded (and kept) there
    paris, lyon = home(t, "Sam", "Paris", 10, "m10"), home(t, "Sam", "Lyon", 12, "m12")
    with one.transaction():
        one.write_records(t, [paris])
        one.write_records(t, [replace(paris, valid_to=lyon.valid_from, superseded_by=lyon.id)])
        one.write_records(t, [replace(lyon, supersedes=paris.id)])
        one.touch_records(t, [first[0].id])
        one.forget_record_sources(t, ["m1"])  # its only source: the record goes
        one.replace_composites(t, [Composite("cmp", 1, "c", (lyon.id,), scope=thread_scope(t))])
        one.set_records_cursor(t, 13)
        assert one.records_cursor(t) == 13 and len(one.list_records(t, current=False)) == 6
        assert other.list_records(t2, current=False) == first[::-1]
        assert other.records_cursor(t2) == 0
    seen_here = one.list_records(t, current=False)
    assert other.list_records(t2, current=False) == seen_here
    assert [r.id for r in seen_here].count(first[1].id) == 0 and len(seen_here) == 6
    assert other.records_cursor(t2) == 13 and other.composites(t2) == one.composites(t)
    assert other.record(t2, paris.id) == replace(
        paris, valid_to=lyon.valid_from, superseded_by=lyon.id
    )
    assert other.record(t2, first[0].id).recall_count == 1  # type: ignore[union-attr]


# -- the reads extraction makes for every statement -------------------------------------
# Back-ends answer records_about and similar_records from lookups of their own (an index
# by subject word, the best few by a heap): after any mix of writes, closings,
# deletions and forgotten sources they give the reference store's answers exactly.

PEOPLE = ("Sam", "Sam Lee", "Ana", "the weekly sync", "sync", "Lee")
WORDS = ("bike", "red", "market", "Lyon", "tea", "sewing", "machine", "bought")


def _random_history(thread: Thread, seed: int) -> list[tuple[str, object]]:
    import random

    rng = random.Random(seed)
    steps: list[tuple[str, object]] = []
    made: list[Record] = []
    for i in range(120):
        roll = rng.random()
        if roll < 0.7 or not made:
            who = rng.choice(PEOPLE)
            words = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
            attribute = rng.choice((None, "home", "likes", "employer"))
            r = rec(
                thread,
                f"{who} {words} {i % 7}",
                day=i,
                kind=rng.choice(("fact", "event")),
                subject=rng.choice((who, None)) if attribute is None else who,
                attribute=attribute,
                value=words if attribute else None,
                sources=(f"m{i}",),
            )
            if rng.random() < 0.3:
                r = replace(r, valid_to=T0 + timedelta(days=i + 1), superseded_by="x")
            made.append(r)
            steps.append(("write", [r]))
        elif roll < 0.85:
            old = rng.choice(made)
            steps.append(("write", [replace(old, subject=rng.choice(PEOPLE), valid_to=None)]))
        elif roll < 0.95:
            steps.append(("delete", [rng.choice(made).id]))
        else:
            steps.append(("forget", [f"m{rng.randrange(i)}"]))
    return steps


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_records_about_and_similar_records_match_the_reference_after_any_history(
    store: RecordStore, seed: int
) -> None:
    t = open_thread(store)
    reference = MemoryRecordStore()
    stores: list[RecordStore] = [store, reference]
    if isinstance(store, MemoryRecordStore):
        from arbormem.store.postgres.records import _Tracked

        stores.append(_Tracked(t))  # PostgreSQL's lookups, without a server
    for step, (op, arg) in enumerate(_random_history(t, seed)):
        for s in stores:
            if op == "write":
                s.write_records(t, arg)  # type: ignore[arg-type]
            elif op == "delete":
                s.delete_records(t, arg)  # type: ignore[arg-type]
            else:
                s.forget_record_sources(t, arg)  # type: ignore[arg-type]
        if step % 10:
            continue
        for s in stores[:1] + stores[2:]:
            for who, attribute in itertools.product(PEOPLE, ("home", "likes", "employer")):
                assert s.records_about(t, who, attribute) == reference.records_about(
                    t, who, attribute
                )
            for kind, words in itertools.product(("fact", "event"), WORDS):
                text = f"Sam {words} machine"
                for limit in (1, 5):
                    assert s.similar_records(t, kind, text, limit) == reference.similar_records(
                        t, kind, text, limit
                    )
