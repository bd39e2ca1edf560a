"""Time expressions in questions, resolved to date ranges.

``"What did she buy in May 2023?"`` refers to sessions in May 2023; ``"last
week"`` to the week before the reference time (the thread's latest message,
by default). :func:`find_ranges` returns every range a question mentions;
:func:`closeness` scores a date against them, 1 inside a range and decaying
with the distance outside, so recall can favour turns from the right time.

Understood: ``3 May 2023``, ``May 3, 2023``, ``3rd of May``, ``May 2023``,
``in May``, ``in 2022``, ISO dates, ``yesterday``, ``today``, ``last/this/next
week|weekend|month|year``, weekday names with last/next, ``N days|weeks|months|
years ago``, ``early/mid/late <month>``, dates written with numbers (``24.01.2024``
day first; ``1/10/2024`` both ways round when both are dates), ``the first|second|
third|fourth|last week of <month> and/or <year>``, seasons of a year (``spring 2024``,
``winter 2021-2022``), and holidays (New Year, New Year's Eve, Christmas, Valentine's
Day, Halloween, Thanksgiving, the Fourth of July), with or without a year. A date after ``before``, ``until`` or
``by`` becomes the stretch just before it: the year before a year ("before 2021"
is 2020), the month before a month, else as long as it lasts and at least a
month. After ``after``, the stretch just after it; after ``since``, itself and
the stretch after.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple": 2,
    "few": 3,
}


@dataclass(frozen=True)
class DateRange:
    """An inclusive range of days, UTC. ``year_known`` is False for "in May"
    (any year: matched against the nearest)."""

    start: datetime
    end: datetime
    year_known: bool = True


def _month(name: str) -> int:
    name = name.lower()[:3]
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(name))


def _day(year: int, month: int, day: int) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:
        return None


def _month_range(year: int, month: int, part: str | None = None) -> DateRange:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    nxt = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
    end = nxt - timedelta(days=1)
    if part == "early":
        end = start + timedelta(days=10)
    elif part in ("mid", "middle"):
        start, end = start + timedelta(days=9), start + timedelta(days=20)
    elif part == "late":
        start = end - timedelta(days=10)
    return DateRange(start, end)


_SEASON = r"(spring|summer|fall|autumn|winter)"
#: Fixed-date holidays, and Thanksgiving (the fourth Thursday of November).
_HOLIDAYS = {
    "new year's eve": (12, 31),
    "new years eve": (12, 31),
    "new year's day": (1, 1),
    "new years day": (1, 1),
    "new year's": (1, 1),
    "new years": (1, 1),
    "new year": (1, 1),
    "christmas eve": (12, 24),
    "christmas day": (12, 25),
    "christmas": (12, 25),
    "valentine's day": (2, 14),
    "valentines day": (2, 14),
    "halloween": (10, 31),
    "independence day": (7, 4),
    "fourth of july": (7, 4),
    "thanksgiving": (11, 0),
}
_HOLIDAY = "(" + "|".join(re.escape(h) for h in sorted(_HOLIDAYS, key=len, reverse=True)) + ")"
_NTH = r"(first|1st|second|2nd|third|3rd|fourth|4th|last)"

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    # 10.01.2024 (day first, as dots are written), 1/10/2024 (either way round).
    ("numeric", re.compile(rf"\b(\d{{1,2}})([./])(\d{{1,2}})\2{_YEAR}\b")),
    ("week_of", re.compile(rf"\b{_NTH}\s+week\s+of\s+(?:{_MONTH}\.?,?\s*)?(?:{_YEAR})?")),
    (
        "season_y",
        re.compile(
            rf"\b{_SEASON}(?:\s+(?:break|holidays?|vacation))?(?:\s+of)?\s+{_YEAR}"
            rf"(?:\s*[-\u2013/]\s*{_YEAR})?\b"
        ),
    ),
    ("holiday", re.compile(rf"\b{_HOLIDAY}(?:\s+(?:of\s+)?{_YEAR})?\b")),
    ("d_m_y", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\.?,?\s+{_YEAR}\b")),
    ("m_d_y", re.compile(rf"\b{_MONTH}\.?\s+{_DAY},?\s+{_YEAR}\b")),
    ("part_m_y", re.compile(rf"\b(early|mid|middle|late)[\s-]+{_MONTH}\s+{_YEAR}\b")),
    ("m_y", re.compile(rf"\b{_MONTH}\.?,?\s+(?:of\s+)?{_YEAR}\b")),
    ("d_m", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b")),
    ("m_d", re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\s*(?:,\s*)?(?:19|20)\d\d)")),
    ("part_m", re.compile(rf"\b(early|mid|middle|late)[\s-]+{_MONTH}\b")),
    ("in_m", re.compile(rf"\b(?:in|during|of|since|by|before|after|until|through)\s+{_MONTH}\b")),
    ("in_y", re.compile(rf"\b(?:in|during|since|by|before|after|of|until)\s+{_YEAR}\b")),
]

_RELATIVE = re.compile(
    r"\b(?:(yesterday|today|tonight|tomorrow)|"
    r"(last|this|next|past)\s+(week|weekend|month|year|"
    + "|".join(_WEEKDAYS)
    + r")|(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple|few)\s+"
    r"(?:of\s+)?(day|week|month|year)s?\s+ago)\b"
)


def _absolute_range(kind: str, g: tuple[str, ...]) -> DateRange | None:
    """The range one matched absolute expression names (None: not a real date)."""
    rng: DateRange | None = None
    if kind == "iso":
        day = _day(int(g[0]), int(g[1]), int(g[2]))
        rng = DateRange(day, day) if day else None
    elif kind == "d_m_y":
        day = _day(int(g[2]), _month(g[1]), int(g[0]))
        rng = DateRange(day, day) if day else None
    elif kind == "m_d_y":
        day = _day(int(g[2]), _month(g[0]), int(g[1]))
        rng = DateRange(day, day) if day else None
    elif kind == "part_m_y":
        rng = _month_range(int(g[2]), _month(g[1]), g[0])
    elif kind == "m_y":
        rng = _month_range(int(g[1]), _month(g[0]))
    elif kind == "d_m":
        day = _day(TEMPLATE_YEAR, _month(g[1]), int(g[0]))
        rng = DateRange(day, day, year_known=False) if day else None
    elif kind == "m_d":
        day = _day(TEMPLATE_YEAR, _month(g[0]), int(g[1]))
        rng = DateRange(day, day, year_known=False) if day else None
    elif kind == "part_m":
        r = _month_range(TEMPLATE_YEAR, _month(g[1]), g[0])
        rng = DateRange(r.start, r.end, year_known=False)
    elif kind == "in_m":
        r = _month_range(TEMPLATE_YEAR, _month(g[0]))
        rng = DateRange(r.start, r.end, year_known=False)
    elif kind == "in_y":
        year = int(g[0])
        rng = DateRange(
            datetime(year, 1, 1, tzinfo=timezone.utc),
            datetime(year, 12, 31, tzinfo=timezone.utc),
        )
    return rng


def _relative_ranges(groups: tuple[Any, ...], today: datetime) -> list[DateRange]:
    """The range one matched relative expression names, as a list (empty or one)."""
    word, which, unit, count, ago_unit = groups
    out: list[DateRange] = []
    if word:
        shift = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[word]
        day = today + timedelta(days=shift)
        out.append(DateRange(day, day))
    elif which:
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
        if unit in ("week", "weekend"):
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            start = monday + timedelta(days=5) if unit == "weekend" else monday
            out.append(DateRange(start, monday + timedelta(days=6)))
        elif unit == "month":
            year, month = today.year, today.month + step
            year += (month - 1) // 12
            month = (month - 1) % 12 + 1
            out.append(_month_range(year, month))
        elif unit == "year":
            year = today.year + step
            out.append(
                DateRange(
                    datetime(year, 1, 1, tzinfo=timezone.utc),
                    datetime(year, 12, 31, tzinfo=timezone.utc),
                )
            )
        else:  # a weekday
            target = _WEEKDAYS.index(unit)
            if step == 0:  # "this friday": the one in the current Monday-to-Sunday week
                day = today + timedelta(days=target - today.weekday())
            elif step < 0:  # "last friday" on a Friday is a week back
                day = today - timedelta(days=(today.weekday() - target) % 7 or 7)
            else:
                day = today + timedelta(days=(target - today.weekday()) % 7 or 7)
            out.append(DateRange(day, day))
    elif count:
        n = int(count) if count.isdigit() else _NUMBERS[count]
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[ago_unit] * n
        center = today - timedelta(days=days)
        slack = timedelta(days=max(1, days // 7))
        out.append(DateRange(center - slack, center + slack))
    return out


#: Words that make a date one side of the range asked about ("before May 2023").
_BEFORE = frozenset(["before", "until", "till", "by"])
_AFTER = frozenset(["after", "since"])
_SIDE = re.compile(r"\b(before|until|till|by|after|since)\s+$")
#: How far "before X" and "after X" reach past X, at least: things asked about "two
#: weeks before August 11" or "since March" are mostly close to it, and an open-ended
#: range would make every turn on that side match (and read every row of it). A
#: longer X reaches as far as it lasts ("before 2021" is 2020).
SIDE_DAYS = 31
#: The year ranges that name no year are written in (a leap year: 29 February exists).
TEMPLATE_YEAR = 2000


def _one_side(text: str, m: re.Match[str], rng: DateRange) -> DateRange:
    """The side of ``rng`` a preceding "before", "after" or "since" points to (the
    word may open the match, as in "before May"); ``rng`` itself otherwise."""
    first = m.group(0).split(None, 1)[0]
    side = _SIDE.search(text, max(0, m.start() - 8), m.start())
    word = first if first in _BEFORE | _AFTER else (side.group(1) if side else None)
    if word in _BEFORE:
        return _beside(rng, -1)
    if word == "after":
        return _beside(rng, 1)
    if word == "since":  # since May: May too
        return DateRange(rng.start, _beside(rng, 1).end, rng.year_known)
    return rng


def _beside(rng: DateRange, step: int) -> DateRange:
    """The stretch just before (``step`` -1) or after (1) ``rng``, not touching it: the
    year or month next to a whole year or month, else as long as ``rng`` and at least
    ``SIDE_DAYS`` days."""
    day = timedelta(days=1)
    start, end = rng.start, rng.end
    if (start.month, start.day, end.month, end.day) == (1, 1, 12, 31) and start.year == end.year:
        year = start.year + step
        return DateRange(
            datetime(year, 1, 1, tzinfo=timezone.utc),
            datetime(year, 12, 31, tzinfo=timezone.utc),
            rng.year_known,
        )
    if (
        start.day == 1
        and (start.year, start.month) == (end.year, end.month)
        and (end + day).day == 1
    ):
        month = start.month - 1 + step
        whole = _month_range(start.year + month // 12, month % 12 + 1)
        return DateRange(whole.start, whole.end, rng.year_known)
    reach = max(timedelta(days=SIDE_DAYS), end - start + day)
    if step < 0:
        return DateRange(start - reach, start - day, rng.year_known)
    return DateRange(end + day, end + reach, rng.year_known)


def _absolute(text: str) -> list[tuple[int, int, DateRange]]:
    found: list[tuple[int, int, DateRange]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            try:
                ranges = [_one_side(text, m, r) for r in _absolute_ranges(kind, m.groups())]
            except (ValueError, OverflowError):  # past the calendar (year 0, 10000)
                ranges = []
            if ranges:
                taken.append((m.start(), m.end()))
                found.extend((m.start(), m.end(), r) for r in ranges)
    return found


def _absolute_ranges(kind: str, g: tuple[str, ...]) -> list[DateRange]:
    """The ranges one matched absolute expression names: none when it is not a real
    date, two when it can be read two ways (1/10/2024)."""
    if kind == "numeric":
        return _numeric(int(g[0]), g[1], int(g[2]), int(g[3]))
    if kind == "week_of":
        return _week_of(g[0], g[1], g[2])
    if kind == "season_y":
        return _season(g[0], int(g[1]), int(g[2]) if g[2] else None)
    if kind == "holiday":
        return _holiday(g[0], int(g[1]) if g[1] else None)
    rng = _absolute_range(kind, g)
    return [rng] if rng is not None else []


def _numeric(first: int, separator: str, second: int, year: int) -> list[DateRange]:
    """``first.second.year`` is day first (as dotted dates are written); with slashes
    either way round, both when both are dates (month first, then day first)."""
    if separator == ".":
        orders = [(second, first), (first, second)]  # (month, day)
        orders = orders[:1] if second <= 12 else orders[1:]
    else:
        orders = [(first, second), (second, first)]
    out: list[DateRange] = []
    for month, dom in orders:
        day = _day(year, month, dom) if 1 <= month <= 12 else None
        if day is not None and DateRange(day, day) not in out:
            out.append(DateRange(day, day))
    return out


_ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3}


def _week_of(nth: str, month: str | None, year: str | None) -> list[DateRange]:
    """ "the second week of November (2023)", "the first week of 2024"."""
    if not month and not year:
        return []
    known = year is not None
    y = int(year) if year else TEMPLATE_YEAR
    whole = _month_range(y, _month(month)) if month else _year_range(y)
    if nth == "last":
        start = whole.end - timedelta(days=6)
    else:
        start = whole.start + timedelta(weeks=_ORDINALS.get(nth, 3))
    return [DateRange(start, start + timedelta(days=6), known)]


def _year_range(year: int) -> DateRange:
    return DateRange(
        datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year, 12, 31, tzinfo=timezone.utc)
    )


_SEASON_MONTHS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9}


def _season(season: str, year: int, until: int | None) -> list[DateRange]:
    """A season of a year (northern): three months; "winter 2021-2022" from December
    to February, and "winter 2024" both its January-February and its December."""
    if season != "winter":
        first = _SEASON_MONTHS[season]
        return [DateRange(_month_range(year, first).start, _month_range(year, first + 2).end)]
    if until is not None:
        return [DateRange(_month_range(year, 12).start, _month_range(until, 2).end)]
    return [
        DateRange(_month_range(year, 1).start, _month_range(year, 2).end),
        _month_range(year, 12),
    ]


def _holiday(name: str, year: int | None) -> list[DateRange]:
    """A holiday's day, in ``year`` or (``None``) any year. "New Year 2025" is
    celebrated from the evening before: 31 December 2024 and 1 January 2025."""
    name = name.replace("\u2019", "'")
    month, dom = _HOLIDAYS[name]
    y = year if year is not None else TEMPLATE_YEAR
    if month == 11 and dom == 0:  # Thanksgiving: the fourth Thursday of November
        first = datetime(y, 11, 1, tzinfo=timezone.utc)
        day = first + timedelta(days=(3 - first.weekday()) % 7 + 21)
    else:
        day = datetime(y, month, dom, tzinfo=timezone.utc)
    start = day - timedelta(days=1) if (month, dom) == (1, 1) else day
    return [DateRange(start, day, year is not None)]


def _relative(text: str, now: datetime, taken: Sequence[tuple[int, int]] = ()) -> list[DateRange]:
    """Relative expressions outside the spans ``taken`` by absolute ones (the "last
    week" of "the last week of December 2023" is not last week)."""
    today = now.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    out: list[DateRange] = []
    for m in _RELATIVE.finditer(text):
        if any(a < m.end() and m.start() < b for a, b in taken):
            continue
        try:
            out.extend(_relative_ranges(m.groups(), today))
        except (ValueError, OverflowError):  # "tomorrow" on 31 December 9999
            continue
    return out


def find_ranges(text: str, now: datetime | None = None) -> list[DateRange]:
    """Every date range ``text`` mentions. Relative expressions need ``now``."""
    lower = text.lower().replace("\u2019", "'")
    found = _absolute(lower)
    ranges = [r for _, _, r in found]
    if now is not None:
        ranges.extend(_relative(lower, now, [(a, b) for a, b, _ in found]))
    return ranges


def find_spans(text: str, now: datetime | None = None) -> list[tuple[int, int, DateRange]]:
    """Every date range ``text`` mentions with where it is said: ``(start, end, range)``,
    in text order. Relative expressions ("last week") need ``now``; offsets index
    ``text`` itself (it is only lower-cased, never reshaped)."""
    lower = text.lower()
    found = _absolute(lower)
    if now is not None:
        today = now.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        for m in _RELATIVE.finditer(lower):
            try:
                found.extend((m.start(), m.end(), r) for r in _relative_ranges(m.groups(), today))
            except (ValueError, OverflowError):
                continue
    return sorted(found, key=lambda f: f[0])


def in_year(when: datetime, year: int) -> datetime:
    """``when`` moved to ``year``; 29 February becomes the 28th in a common year.

    Ranges with no year are written in the leap year 2000, so February ends on the
    29th: moved by ``replace`` alone, "February" failed in three years of four."""
    try:
        return when.replace(year=year)
    except ValueError:
        return when.replace(year=year, day=28)


def closeness(
    when: datetime, ranges: list[DateRange], *, scale_days: float = 10.0, lag_days: int = 7
) -> float:
    """1.0 when ``when`` falls in one of the ranges (or up to ``lag_days`` after its
    end: people talk about things a little after they happen), decaying with the
    distance in days outside. 0.0 with no ranges."""
    best = 0.0
    day = when.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    for r in ranges:
        years = [r.start.year] if r.year_known else [day.year - 1, day.year, day.year + 1]
        for year in years:
            try:
                start = r.start if r.year_known else in_year(r.start, year)
                end = r.end if r.year_known else in_year(r.end, year + r.end.year - r.start.year)
            except ValueError:  # past the calendar (year 0, 10000)
                continue
            try:
                end = end + timedelta(days=lag_days)
            except OverflowError:
                end = datetime.max.replace(tzinfo=timezone.utc)
            if start <= day <= end:
                return 1.0
            gap = (start - day).days if day < start else (day - end).days
            best = max(best, math.exp(-gap / scale_days))
    return best
