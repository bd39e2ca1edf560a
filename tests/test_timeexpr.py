"""Time expressions in questions: the date ranges they name and how close a date is."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from arbormem.timeexpr import SIDE_DAYS, DateRange, closeness, find_ranges


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


def only(text: str, now: datetime | None = None) -> DateRange:
    (found,) = find_ranges(text, now)
    return found


@pytest.mark.parametrize("year", [2021, 2022, 2023, 2024])
def test_a_month_without_a_year_matches_february_in_every_year(year: int) -> None:
    # Written in the leap year 2000, February ended on the 29th and could not be moved
    # to a common year: "February" matched nothing three years in four.
    for question in ("What did we plant in February?", "Where did she go in late February?"):
        assert closeness(day(year, 2, 25), find_ranges(question)) == 1.0
    assert closeness(day(year, 2, 15), find_ranges("in February")) == 1.0
    assert closeness(day(year, 6, 15), find_ranges("in February")) < 0.01


@pytest.mark.parametrize(
    ("today", "expected"),
    [
        (day(2024, 3, 1), day(2024, 3, 1)),  # a Friday: today
        (day(2024, 2, 26), day(2024, 3, 1)),  # the Monday before: later this week
        (day(2024, 3, 3), day(2024, 3, 1)),  # the Sunday after: earlier this week
    ],
)
def test_this_weekday_is_the_one_in_the_current_week(today: datetime, expected: datetime) -> None:
    assert only("what happens this friday?", today) == DateRange(expected, expected)


def test_last_and_next_weekday_never_mean_today() -> None:
    friday = day(2024, 3, 1)
    assert only("last friday", friday).start == day(2024, 2, 23)
    assert only("next friday", friday).start == day(2024, 3, 8)
    assert only("last monday", friday).start == day(2024, 2, 26)


def test_before_and_after_reach_a_month_to_their_side_of_the_date() -> None:
    before = only("What did I cook before May 2023?")
    assert (before.start, before.end) == (day(2023, 4, 1), day(2023, 4, 30))
    assert closeness(day(2023, 4, 12), [before]) == 1.0  # used to be 0.0 ...
    assert closeness(day(2023, 1, 10), [before]) < 0.01  # ... and a far one still is
    # A year reaches as far as it lasts: "before 2021" is 2020, not December.
    year = only("what did we do before 2021?")
    assert closeness(day(2020, 6, 1), [year]) == 1.0 > closeness(day(2021, 8, 1), [year])
    after = only("after May 2023")
    assert after.start == day(2023, 6, 1) and closeness(day(2023, 5, 10), [after]) < 0.2
    puppy = only("the puppy she got two weeks before August 11, 2023")
    assert (puppy.start, puppy.end) == (day(2023, 7, 11), day(2023, 8, 10))
    since = only("what changed since march 2022")
    assert (since.start, since.end) == (day(2022, 3, 1), day(2022, 4, 30))
    # Whole years, leap ones too, and never a day of X itself.
    assert only("before 2021") == DateRange(day(2020, 1, 1), day(2020, 12, 31))
    assert only("after 2021") == DateRange(day(2022, 1, 1), day(2022, 12, 31))
    assert only("before January 2024") == DateRange(day(2023, 12, 1), day(2023, 12, 31))
    assert only("after 3 May 2023").start == day(2023, 5, 4)
    assert (only("before 3 May 2023").end - only("before 3 May 2023").start).days == SIDE_DAYS - 1
    # No side word: the date alone, as before.
    assert only("on 3 May 2023") == DateRange(day(2023, 5, 3), day(2023, 5, 3))


def test_a_range_with_no_year_keeps_its_shape_in_every_year() -> None:
    from arbormem.recall.retriever import _spans

    # "before January 5" starts in December: moved to 2024 it began in December 2024.
    ((start, end),) = _spans(only("before January 5"), 7, range(2024, 2025))
    assert start == day(2023, 12, 5) and end == day(2024, 1, 12)


def test_month_and_year_edges() -> None:
    assert only("last month", day(2024, 1, 15)) == DateRange(day(2023, 12, 1), day(2023, 12, 31))
    assert only("next month", day(2023, 12, 5)) == DateRange(day(2024, 1, 1), day(2024, 1, 31))
    assert only("in February 2024") == DateRange(day(2024, 2, 1), day(2024, 2, 29))
    assert only("in February 2023") == DateRange(day(2023, 2, 1), day(2023, 2, 28))
    # Not a day: the month it names is what is left.
    assert find_ranges("on 30 February 2023") == [DateRange(day(2023, 2, 1), day(2023, 2, 28))]
    assert find_ranges("tomorrow", day(9999, 12, 31)) == []  # past the calendar


def test_dates_written_with_numbers() -> None:
    # Real chats (and the people asking about them) write 24.01.2024: day first.
    assert only("What did Paola explore on 24.01.2024?") == DateRange(
        day(2024, 1, 24), day(2024, 1, 24)
    )
    assert only("on 10.01.2024") == DateRange(day(2024, 1, 10), day(2024, 1, 10))
    assert only("on 13/10/2024") == DateRange(day(2024, 10, 13), day(2024, 10, 13))
    assert only("on 10/13/2024") == DateRange(day(2024, 10, 13), day(2024, 10, 13))
    # Slashes either way round: both days, month first.
    assert find_ranges("on 1/10/2024") == [
        DateRange(day(2024, 1, 10), day(2024, 1, 10)),
        DateRange(day(2024, 10, 1), day(2024, 10, 1)),
    ]
    assert find_ranges("on 1.2.2024") == [DateRange(day(2024, 2, 1), day(2024, 2, 1))]
    assert find_ranges("on 40.40.2024") == []
    before = only("the Friday before 10.01.2024")
    assert before.end == day(2024, 1, 9)


def test_weeks_of_a_month_or_year() -> None:
    assert only("in the first week of 2024") == DateRange(day(2024, 1, 1), day(2024, 1, 7))
    assert only("the second week of March 2023") == DateRange(day(2023, 3, 8), day(2023, 3, 14))
    # "last week" inside it is not last week.
    now = day(2024, 1, 20)
    assert find_ranges("the last week of December 2023", now) == [
        DateRange(day(2023, 12, 25), day(2023, 12, 31))
    ]
    november = only("Which country was Tim visiting in the second week of November?")
    assert not november.year_known
    assert closeness(day(2022, 11, 10), [november]) == 1.0
    assert closeness(day(2022, 11, 30), [november]) < 1.0


def test_seasons_and_holidays() -> None:
    assert only("in the spring of 2024") == DateRange(day(2024, 3, 1), day(2024, 5, 31))
    assert only("in winter 2021 - 2022") == DateRange(day(2021, 12, 1), day(2022, 2, 28))
    assert find_ranges("winter 2024") == [
        DateRange(day(2024, 1, 1), day(2024, 2, 29)),
        DateRange(day(2024, 12, 1), day(2024, 12, 31)),
    ]
    # New Year is celebrated from the evening before.
    assert only("where will they celebrate New Year 2025?") == DateRange(
        day(2024, 12, 31), day(2025, 1, 1)
    )
    eve = only("What did Kevin plan for New Year’s Eve?")
    assert (eve.start.month, eve.start.day, eve.year_known) == (12, 31, False)
    assert closeness(day(2023, 12, 31), [eve]) == 1.0
    assert only("thanksgiving 2023") == DateRange(day(2023, 11, 23), day(2023, 11, 23))
    assert only("on Halloween").start.month == 10
