"""The record: idempotent ids, value equality, and a JSON form that round-trips and
refuses bad input with the field named."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from arbormem.errors import InputError
from arbormem.records.model import (
    KINDS,
    Composite,
    Record,
    check_kind,
    composite_from_dict,
    normalise_text,
    record_from_dict,
    record_id,
    value_key,
)

T = datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc)


def full_record() -> Record:
    return Record(
        id=record_id("ana/bot", "Ana lives in Lyon."),
        kind="fact",
        text="Ana lives in Lyon.",
        subject="Ana",
        attribute="home",
        value="Lyon",
        negated=False,
        tags=("home", "change"),
        entities=("Ana", "Lyon"),
        sources=("m1", "m7"),
        valid_from=T,
        valid_to=datetime(2024, 9, 1, tzinfo=timezone.utc),
        superseded_by="rec-next",
        supersedes="rec-before",
        confidence=0.75,
        importance=0.7,
        created_at=T,
        updated_at=T,
        recall_count=3,
        mentions=2,
        scope="ana/bot",
    )


def test_the_same_statement_in_the_same_scope_has_one_id() -> None:
    a = record_id("u/a", "Sam lives in Lyon.")
    assert a == record_id("u/a", "  sam LIVES in   lyon ")
    assert a != record_id("u/b", "Sam lives in Lyon.")
    assert a != record_id("u/a", "Sam lives in Paris.")
    # the same statement coming back after it was replaced is a record of its own
    assert a != record_id("u/a", "Sam lives in Lyon.", epoch=T)
    assert record_id("u/a", "Sam lives in Lyon.", epoch=T) == record_id(
        "u/a", "Sam lives in Lyon.", epoch=T
    )


def test_normalised_text_folds_case_space_and_edge_punctuation() -> None:
    assert normalise_text(' "Sam  lives in Lyon!" ') == "sam lives in lyon"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("+1 (555) 010-2000", "+1 555 010 2000"),
        ("07700 900123", "07700-900-123"),
        ("The Acme Corp.", "acme corp"),
        ("a dog", "dog"),
    ],
)
def test_values_compare_without_punctuation_case_or_articles(a: str, b: str) -> None:
    assert value_key(a) == value_key(b)


def test_different_values_stay_different() -> None:
    assert value_key("Lyon") != value_key("Lisbon")
    assert value_key("555 010 2000") != value_key("555 010 2001")
    assert value_key(None) == ""


def test_a_record_round_trips_through_json() -> None:
    record = full_record()
    assert record_from_dict(record.to_dict()) == record
    procedure = replace(
        record, kind="procedure", intent="reset the router", body="1. Unplug it\n2. Wait"
    )
    assert record_from_dict(procedure.to_dict()) == procedure


def test_a_closed_record_is_not_current() -> None:
    record = full_record()
    assert not record.current
    assert replace(record, valid_to=None, superseded_by=None).current


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "opinion"}, "record.kind"),
        ({"text": ""}, "record.text"),
        ({"text": 42}, "record.text"),
        ({"valid_from": "last tuesday"}, "record.valid_from"),
        ({"confidence": 1.5}, "record.confidence"),
        ({"confidence": True}, "record.confidence"),
        ({"mentions": -1}, "record.mentions"),
        ({"negated": "yes"}, "record.negated"),
        ({"sources": "m1"}, "record.sources"),
        ({"colour": "red"}, "record"),
    ],
)
def test_bad_fields_are_refused_with_the_field_named(change: dict[str, object], field: str) -> None:
    data = full_record().to_dict()
    data.update(change)
    with pytest.raises(InputError) as exc:
        record_from_dict(data)
    assert exc.value.field == field


def test_check_kind_lists_the_kinds() -> None:
    assert check_kind("preference") == "preference"
    with pytest.raises(InputError, match="use one of fact, preference"):
        check_kind("feeling")
    assert len(KINDS) == 7


def test_a_composite_round_trips_and_needs_members() -> None:
    composite = Composite(
        id="cmp-1",
        level=2,
        text="Ana lives in Lyon.",
        members=("cmp-a", "cmp-b"),
        entities=("Ana",),
        tags=("home",),
        first=T,
        last=T,
        extra={"representative": "cmp-a"},
    )
    assert composite_from_dict(composite.to_dict()) == composite
    data = composite.to_dict()
    data["members"] = []
    with pytest.raises(InputError, match="at least one member"):
        composite_from_dict(data)
    data = composite.to_dict()
    data["level"] = 0
    with pytest.raises(InputError, match="level"):
        composite_from_dict(data)
