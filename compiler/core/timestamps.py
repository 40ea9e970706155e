"""RFC 3339 timestamps, as clients send them with a request (``AgentRunRequest.timestamp``).

prefixlock never reads a clock: every time it knows is one of these texts. They are
checked once at the edge (:func:`timestamp_problem`), stored as sent (a user or
background record keeps its request's, :mod:`prefixlock.store.records`), and turned into
seconds only where the cache simulator needs a call's time (:func:`seconds`).
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime

from .secrets import quoted

__all__ = ["seconds", "stamp_problem", "timestamp_problem"]

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)


def timestamp_problem(text: str) -> str | None:
    """Why ``text`` is not an RFC 3339 ``date-time`` (None if it is one): the whole
    string (no trailing newline), real months and days, hours, minutes, seconds (60 for
    a leap second) and offsets."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        # quoted with its secrets redacted: an error is printed and logged
        return f"{quoted(text)} is not an RFC 3339 timestamp like 2026-12-02T10:00:00Z"
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    if not 1 <= month <= 12:
        return f"{text!r}: month {month:02d} is not 01 to 12"
    days = calendar.monthrange(year, month)[1]
    if not 1 <= day <= days:
        return f"{text!r}: day {day:02d} is not 01 to {days} in {year:04d}-{month:02d}"
    if hour > 23 or minute > 59 or second > 60:
        return f"{text!r}: time {hour:02d}:{minute:02d}:{second:02d} is not a time of day"
    off_hour, off_minute = match.group(7), match.group(8)
    if off_hour is not None and (int(off_hour) > 23 or int(off_minute) > 59):
        return f"{text!r}: offset {off_hour}:{off_minute} is not an offset"
    return None


def stamp_problem(value: object) -> str | None:
    """:func:`timestamp_problem` for a value of any type (a timestamp is a string)."""
    if not isinstance(value, str):
        return f"expected an RFC 3339 string, got {quoted(value)}"
    return timestamp_problem(value)


#: The Gregorian calendar repeats every 400 years, which are 146,097 days: a year 0000
#: (RFC 3339 allows it, :class:`datetime` starts at 1) is read as 0400, less one cycle.
_CYCLE_SECONDS = 146_097 * 86_400


def seconds(text: str) -> float:
    """Seconds since the epoch of a checked timestamp (:func:`timestamp_problem` gave
    None), whatever its offset and year (0000 included); a leap second (``:60``) is taken
    as the second before it, which is close enough for a cache's lifetime."""
    text, shift = text.upper(), 0
    if text.startswith("0000"):
        text, shift = "0400" + text[4:], _CYCLE_SECONDS
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = datetime.fromisoformat(text.replace(":60", ":59", 1))
    return moment.timestamp() - shift
