"""Timestamps: everything is stored and compared in UTC.

Accepted on input (a :class:`~arbormem.errors.InputError` names the field otherwise):

* ``datetime`` objects (naive ones are taken as UTC);
* ISO 8601 strings: ``2026-02-14T15:23:05Z``, ``2026-02-14 15:23:05+01:00``,
  ``2026-02-14`` (midnight UTC); naive strings are taken as UTC;
* Unix epoch numbers in seconds (or milliseconds when larger than 10^11);
* the LoCoMo style ``1:56 pm on 8 May, 2023``.

Stored form: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, which sorts as text in time order.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from arbormem.errors import InputError

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}

# "1:56 pm on 8 May, 2023" and "8 May 2023, 1:56 pm" styles.
_CLOCK_DATE = re.compile(
    r"^\s*(?P<h>\d{1,2}):(?P<m>\d{2})\s*(?P<ampm>am|pm)?\s+on\s+"
    r"(?P<d>\d{1,2})\s+(?P<mon>[a-z]+)\.?,?\s+(?P<y>\d{4})\s*$",
    re.IGNORECASE,
)
_DATE_WORDS = re.compile(
    r"^\s*(?P<d>\d{1,2})\s+(?P<mon>[a-z]+)\.?,?\s+(?P<y>\d{4})"
    r"(?:,?\s+(?P<h>\d{1,2}):(?P<m>\d{2})\s*(?P<ampm>am|pm)?)?\s*$",
    re.IGNORECASE,
)

#: The longest timestamp string read ("Wednesday, 1:56 pm on 8 September, 2023" is 40).
MAX_TIMESTAMP_CHARS = 100

_FORMATS_HINT = (
    "use ISO 8601 such as 2026-02-14T15:23:05Z, a Unix epoch number, or '1:56 pm on 8 May, 2023'"
)


def utcnow() -> datetime:
    """The current time, UTC, microsecond precision."""
    return datetime.now(timezone.utc)


def ensure_utc(value: datetime) -> datetime:
    """Attach UTC to naive datetimes and convert aware ones to UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def format_timestamp(value: datetime) -> str:
    """The canonical stored form, which sorts lexically in time order."""
    v = ensure_utc(value)
    # Not strftime: its %Y does not pad years before 1000 to four digits on every
    # platform, and "5-01-01" neither sorts nor parses back.
    return (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d}T"
        f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}Z"
    )


def parse_stored(value: str) -> datetime:
    """Parse the canonical stored form (fast path, no validation)."""
    # fromisoformat is an order of magnitude faster than strptime; the trailing Z
    # is dropped because Python 3.10 does not accept it.
    try:
        return datetime.fromisoformat(value[:-1]).replace(tzinfo=timezone.utc)
    except ValueError:
        # Versions before 0.1 stored years before 1000 unpadded ("5-01-01T..."):
        # read them back rather than fail every read of the thread.
        year, _, rest = value.partition("-")
        if not year.isdigit() or len(year) >= 4:
            raise
        return datetime.fromisoformat(f"{year.zfill(4)}-{rest[:-1]}").replace(tzinfo=timezone.utc)


def display(value: datetime, *, seconds: bool = True) -> str:
    """``2026-02-14 15:23:05 UTC`` as shown to people and LLMs."""
    v = ensure_utc(value)
    shown = f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}"
    return f"{shown}:{v.second:02d} UTC" if seconds else f"{shown} UTC"


def _from_words(match: re.Match[str], raw: str, field: str, source: str | None) -> datetime:
    month = _MONTHS.get(match["mon"].lower())
    if month is None:
        raise InputError(
            f"unknown month {match['mon']!r} in timestamp {raw!r}",
            field=field,
            source=source,
            hint=_FORMATS_HINT,
        )
    hour = int(match["h"]) if match["h"] else 0
    minute = int(match["m"]) if match["m"] else 0
    ampm = (match["ampm"] or "").lower()
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    try:
        return datetime(int(match["y"]), month, int(match["d"]), hour, minute, tzinfo=timezone.utc)
    except ValueError as exc:
        raise InputError(
            f"impossible date in timestamp {raw!r}: {exc}", field=field, source=source
        ) from None


def _to_utc(value: datetime, raw: object, field: str, source: str | None) -> datetime:
    try:
        return ensure_utc(value)
    except OverflowError:  # an offset that moves the time past year 1 or 9999
        raise InputError(
            f"timestamp {raw!r} is out of range in UTC", field=field, source=source
        ) from None


def parse_timestamp(
    value: object, *, field: str = "timestamp", source: str | None = None
) -> datetime:
    """Turn any accepted timestamp form into an aware UTC datetime.

    >>> parse_timestamp("2026-02-14T15:23:05Z").isoformat()
    '2026-02-14T15:23:05+00:00'
    """
    if isinstance(value, datetime):
        return _to_utc(value, value, field, source)
    if isinstance(value, bool):
        raise InputError(
            f"must be a timestamp, got a boolean ({value})",
            field=field,
            source=source,
            hint=_FORMATS_HINT,
        )
    if isinstance(value, (int, float)):
        seconds = float(value)
        if abs(seconds) > 1e11:  # milliseconds since the epoch
            seconds /= 1000.0
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise InputError(
                f"epoch value {value} is out of range", field=field, source=source
            ) from None
    if not isinstance(value, str):
        raise InputError(
            f"must be a timestamp string or number, got {type(value).__name__}",
            field=field,
            source=source,
            hint=_FORMATS_HINT,
        )
    raw = value.strip()
    if not raw:
        raise InputError("is empty", field=field, source=source, hint=_FORMATS_HINT)
    if len(raw) > MAX_TIMESTAMP_CHARS:
        # Every form is a few dozen characters; a long string was parsed whole (ten
        # million digits read as a date) and echoed whole in the error.
        raise InputError(
            f"is {len(raw):,} characters long: no timestamp is over {MAX_TIMESTAMP_CHARS}",
            field=field,
            source=source,
            hint=_FORMATS_HINT,
        )
    iso = raw[:-1] + "+00:00" if raw[-1:] in ("Z", "z") else raw
    try:
        parsed = datetime.fromisoformat(iso)
    except ValueError:
        pass
    else:
        return _to_utc(parsed, raw, field, source)
    for pattern in (_CLOCK_DATE, _DATE_WORDS):
        match = pattern.match(raw)
        if match:
            return _from_words(match, raw, field, source)
    try:
        return parse_timestamp(float(raw), field=field, source=source)
    except (ValueError, InputError):
        pass
    raise InputError(
        f"cannot read {raw!r} as a timestamp", field=field, source=source, hint=_FORMATS_HINT
    )
