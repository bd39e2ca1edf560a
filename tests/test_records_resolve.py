"""The update rules, as pure functions over a record view: a new value supersedes the
old one (links both ways), a denial closes what it denies, a restatement merges,
history is kept, and "as of" answers with what held then."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from arbormem.records.engine import RecordBook
from arbormem.records.extract import Candidate
from arbormem.records.model import Record, record_id
from arbormem.records.resolve import near_duplicate, resolve, same_subject, same_value, value_at
from arbormem.records.vocab import render

T0 = datetime(2024, 1, 10, tzinfo=timezone.utc)


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


def fact(
    subject: str,
    attribute: str,
    value: str,
    when: int,
    *,
    source: str | None = None,
    negated: bool = False,
    change: bool = False,
    kind: str = "fact",
    tags: tuple[str, ...] = (),
) -> Record:
    text = render(attribute, subject, value, negated=negated)
    return Record(
        id=record_id("u/a", text),
        kind=kind,
        text=text,
        subject=subject,
        attribute=attribute,
        value=value,
        negated=negated,
        tags=(attribute, *(("change",) if change else ()), *tags),
        sources=(source or f"m{when}",),
        valid_from=day(when),
        created_at=day(when),
        updated_at=day(when),
        scope="u/a",
    )


def book(*records: Record) -> RecordBook:
    b = RecordBook("u/a")
    for r in records:
        b.add(r)
    return b


def test_a_new_value_supersedes_the_current_one_with_links_both_ways() -> None:
    b = book(fact("Sam", "home", "Paris", 0))
    plan = resolve(Candidate(fact("Sam", "home", "Lyon", 30, change=True)), b)
    assert plan.action == "supersede"
    new, old = plan.writes
    assert new.value == "Lyon" and new.supersedes == old.id
    assert old.value == "Paris" and old.superseded_by == new.id and old.valid_to == day(30)
    assert plan.closed == (old.id,)
    # pure: the view itself is untouched until the plan is applied
    assert b.get(old.id).current  # type: ignore[union-attr]


def test_a_restatement_merges_sources_and_counts_and_a_replay_changes_nothing() -> None:
    b = book(fact("Sam", "home", "Paris", 0))
    plan = b.add(fact("Sam", "home", "Paris", 5, source="m5"))
    assert plan.action == "merge"
    (record,) = b.records(subject="Sam")
    assert record.sources == ("m0", "m5") and record.mentions == 2
    again = b.add(fact("Sam", "home", "Paris", 5, source="m5"))
    assert again.action == "ignore"
    assert b.records(subject="Sam")[0].mentions == 2


def test_a_denial_closes_the_value_it_denies_and_one_about_nothing_known_is_dropped() -> None:
    b = book(fact("Amir", "allergy", "shellfish", 0), fact("Amir", "allergy", "pollen", 0))
    plan = b.add(fact("Amir", "allergy", "shellfish", 40, negated=True))
    assert plan.action == "close"
    current = {(r.value, r.negated) for r in b.records(subject="Amir")}
    assert current == {("pollen", False), ("shellfish", True)}
    left = replace(
        fact("Amir", "employer", "Acme", 41, negated=True), text="Amir no longer works at Acme."
    )
    assert resolve(Candidate(left, needs_match=True), b).action == "ignore"


def test_a_denial_without_a_value_names_the_one_it_closes() -> None:
    b = book(fact("Nina", "partner", "Marco", 0))
    denial = replace(
        fact("Nina", "partner", "x", 50, negated=True),
        value=None,
        text="Nina is no longer with their partner.",
    )
    plan = b.add(Candidate(denial, needs_match=True))
    assert plan.action == "close" and plan.record is not None
    assert plan.record.value == "Marco" and plan.record.text == "Nina is no longer with Marco."


def test_several_valued_attributes_add_instead_of_replacing() -> None:
    b = book(fact("Zoe", "pets", "Pudding", 0))
    assert b.add(fact("Zoe", "pets", "Dash", 90, change=True)).action == "add"
    assert {r.value for r in b.records(subject="Zoe")} == {"Pudding", "Dash"}


def test_a_change_dated_before_the_current_value_goes_into_history() -> None:
    b = book(fact("Sam", "employer", "Globex", 30, change=True))
    older = fact("Sam", "employer", "Northwind", 10, change=True)
    older = replace(older, created_at=day(40))  # said later, about earlier
    plan = b.add(older)
    assert plan.action == "history"
    assert plan.writes[0].valid_to == day(30) and plan.writes[0].superseded_by is not None
    assert [r.value for r in b.records(subject="Sam")] == ["Globex"]


def test_used_to_closes_a_matching_value_or_becomes_history() -> None:
    b = book(fact("Sam", "home", "Lyon", 10))
    past = replace(
        fact("Sam", "home", "Rome", 50), valid_from=None, valid_to=day(50), tags=("home", "past")
    )
    plan = b.add(Candidate(past, past=True))
    assert plan.action == "history"
    assert plan.writes[0].valid_to == day(10)  # before everything known
    assert [r.value for r in b.records(subject="Sam")] == ["Lyon"]
    ended = replace(
        fact("Sam", "home", "Lyon", 60), valid_from=None, valid_to=day(60), tags=("home", "past")
    )
    ended = replace(
        ended, id=record_id("u/a", "Sam used to live in Lyon."), text="Sam used to live in Lyon."
    )
    assert b.add(Candidate(ended, past=True)).action == "close"
    assert b.records(subject="Sam") == []  # Lyon ended; nothing is known to hold now


def test_a_value_that_comes_back_is_a_new_record() -> None:
    b = book(fact("Sam", "home", "Paris", 0), fact("Sam", "home", "Lyon", 30, change=True))
    back = fact("Sam", "home", "Paris", 60, change=True)
    plan = b.add(back)
    assert plan.action == "supersede" and plan.record is not None
    assert plan.record.id != back.id  # the first Paris stays closed in the history
    assert [r.value for r in b.history(plan.record.id)] == ["Paris", "Lyon", "Paris"]


def test_value_at_answers_what_held_then() -> None:
    paris = replace(fact("Sam", "home", "Paris", 10), valid_to=day(30), superseded_by="x")
    lyon = fact("Sam", "home", "Lyon", 30, change=True)
    assert value_at([paris, lyon], day(20)) == [paris]
    assert value_at([paris, lyon], day(40)) == [lyon]
    # before its first mention, a simply stated value is taken to hold already
    assert value_at([paris, lyon], day(0)) == [paris]
    # but not a change: before "I moved to Lyon" it was not Lyon
    assert value_at([lyon], day(0)) == []


def test_matching_helpers() -> None:
    assert same_subject("the weekly sync", "sync") and same_subject("Sam", "Sam Lee")
    assert not same_subject("Sam", "Ana") and not same_subject(None, "Sam")
    a, b = fact("Sam", "home", "Lyon", 0), fact("Sam", "home", "Lyon, France", 1)
    assert same_value(a, b)
    dog = replace(fact("Zoe", "pets", "Rex", 0), tags=("pets", "dog"))
    assert same_value(replace(dog, value="a dog"), dog)
    assert not same_value(replace(dog, value="a cat"), dog)
    one = replace(
        fact("Sam", "likes", "hiking", 0),
        kind="event",
        attribute=None,
        text="Sam went hiking in the Alps on 3 May 2024.",
    )
    two = replace(one, text="Sam went hiking in the Alps on 3 May 2024!")
    assert near_duplicate(one, two)
    assert not near_duplicate(one, replace(two, subject="Ana"))
