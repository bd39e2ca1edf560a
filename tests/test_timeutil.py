from datetime import datetime, timedelta, timezone

import pytest

from arbormem.errors import InputError
from arbormem.timeutil import display, format_timestamp, parse_stored, parse_timestamp


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-02-14T15:23:05Z", datetime(2026, 2, 14, 15, 23, 5, tzinfo=timezone.utc)),
        ("2026-02-14 16:23:05+01:00", datetime(2026, 2, 14, 15, 23, 5, tzinfo=timezone.utc)),
        ("2026-02-14", datetime(2026, 2, 14, tzinfo=timezone.utc)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)),
        ("12:05 am on 1 Jan, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=timezone.utc)),
        ("8 May 2023", datetime(2023, 5, 8, tzinfo=timezone.utc)),
        (1700000000, datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)),
        (1700000000000, datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)),
    ],
)
def test_accepted_forms_become_utc(raw: object, expected: datetime) -> None:
    assert parse_timestamp(raw) == expected


def test_naive_datetimes_are_taken_as_utc_and_aware_ones_converted() -> None:
    naive = datetime(2026, 1, 1, 12, 0)
    assert parse_timestamp(naive).tzinfo == timezone.utc
    aware = datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert parse_timestamp(aware).hour == 10


@pytest.mark.parametrize("raw", ["yesterday-ish", "", "31 Foo 2023", True, [2023], "2023-02-30"])
def test_unreadable_timestamps_name_the_field_and_the_fix(raw: object) -> None:
    with pytest.raises(InputError) as err:
        parse_timestamp(raw, field="messages[3].timestamp")
    assert "messages[3].timestamp" in str(err.value)


def test_stored_form_round_trips_and_sorts_in_time_order() -> None:
    a = datetime(2023, 5, 8, 13, 56, 0, 123456, tzinfo=timezone.utc)
    b = a + timedelta(microseconds=1)
    assert parse_stored(format_timestamp(a)) == a
    assert format_timestamp(a) < format_timestamp(b)


def test_years_before_1000_are_stored_padded_and_read_back() -> None:
    early = [datetime(5, 1, 1, tzinfo=timezone.utc), datetime(999, 12, 31, 23, 59, 59)]
    stored = [format_timestamp(t) for t in early]
    assert stored[0] == "0005-01-01T00:00:00.000000Z"
    assert [parse_stored(s) for s in stored] == [parse_timestamp(t) for t in early]
    assert sorted([*stored, format_timestamp(datetime(2023, 1, 1))])[-1].startswith("2023")
    assert display(early[0]) == "0005-01-01 00:00:00 UTC"
    # What an earlier version stored for year 5 still reads back.
    assert parse_stored("5-01-01T00:00:00.000000Z") == early[0]


@pytest.mark.parametrize(
    "raw",
    [
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:30:00-01:00",
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
    ],
)
def test_an_offset_past_the_calendar_is_an_input_error(raw: object) -> None:
    with pytest.raises(InputError, match="out of range") as err:
        parse_timestamp(raw, field="since")
    assert "since" in str(err.value)
