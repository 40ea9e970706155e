"""RFC 3339 timestamps: every text the edge accepts has a time in seconds.

A timestamp is checked once, where it enters (a request, ``tool_results``, a record),
and turned into seconds wherever a call is priced (``verify``, ``inspect --cache``): a
text the check lets through must never fail there, where no field can be named.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from conv_helpers import example_bundle, user
from hypothesis import given
from hypothesis import strategies as st
from prefixlock import Conversation, SQLiteStore
from prefixlock.cli.commands import main
from prefixlock.core.messages import TextPart
from prefixlock.core.output import ModelOutput, Usage
from prefixlock.core.timestamps import seconds, timestamp_problem

#: The Gregorian calendar repeats every 400 years, which are 146,097 days.
CYCLE = 146_097 * 86_400


def test_year_zero_is_a_time() -> None:
    # 0000-01-01 is 719,528 days before 1970-01-01 (proleptic Gregorian; 0000 is a
    # leap year, as 400 is).
    assert timestamp_problem("0000-01-01T00:00:00Z") is None
    assert seconds("0000-01-01T00:00:00Z") == -719_528 * 86_400
    assert seconds("0000-02-29T12:00:00Z") == seconds("0400-02-29T12:00:00Z") - CYCLE
    assert seconds("0000-01-01T00:00:00+23:59") == -719_528 * 86_400 - 86_340
    # a leap second is read as the second before it, its fraction kept
    assert seconds("0000-12-31t23:59:60.5z") == seconds("0001-01-01T00:00:00Z") - 0.5


def test_the_extremes_of_the_range_are_times() -> None:
    top = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
    assert seconds("9999-12-31T23:59:59Z") == top
    assert seconds("9999-12-31T23:59:60-23:59") == top + 86_340
    assert seconds("0001-01-01T00:00:00+23:59") == seconds("0001-01-01T00:00:00Z") - 86_340


@given(
    year=st.integers(0, 9999),
    month=st.integers(1, 12),
    day=st.integers(1, 28),
    second=st.integers(0, 60),
    offset=st.integers(-(23 * 60 + 59), 23 * 60 + 59),
)
def test_every_accepted_timestamp_has_a_time(
    year: int, month: int, day: int, second: int, offset: int
) -> None:
    sign = "-" if offset < 0 else "+"
    zone = f"{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    text = f"{year:04d}-{month:02d}-{day:02d}T12:34:{second:02d}{zone}"
    assert timestamp_problem(text) is None
    later = f"{year + 400:04d}{text[4:]}"
    if year + 400 <= 9999:
        assert seconds(text) == seconds(later) - CYCLE
    assert seconds(text) - seconds(text.replace(zone, "Z")) == -offset * 60


def test_inspect_cache_prices_a_year_zero_call(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "y0")
    conv.handle(user("u1", conversation="y0", timestamp="0000-01-01T00:00:00Z"))
    used = Usage(20_000, 0, 20_000, 30, None, "{}")
    conv.record(ModelOutput("anthropic", (TextPart("Hi."),), "end_turn", used))
    assert main(["inspect", str(db), "y0", "--cache"]) == 0
    assert main(["inspect", str(db), "--cache"]) == 0
