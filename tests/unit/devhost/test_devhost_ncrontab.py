"""NCRONTAB next-occurrence table, checked against NCrontab's documented behaviour.

Notably day-of-month AND day-of-week must both match (NCrontab's
GetNextOccurrence), so ``0 0 0 13 * 5`` is Friday the 13th only; Vixie cron
would fire on every 13th and every Friday.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from devhost.ncrontab import CrontabError, CrontabSchedule
from devhost.timers import IntervalSchedule, default_use_monitor, parse_schedule


def dt(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)  # type: ignore[misc]


TABLE = [
    # expression, after, expected next
    ("0 */5 * * * *", dt(2024, 1, 1), dt(2024, 1, 1, 0, 5)),
    ("*/15 * * * * *", dt(2024, 1, 1), dt(2024, 1, 1, 0, 0, 15)),
    ("*/15 * * * * *", dt(2024, 1, 1, 0, 0, 14, 999), dt(2024, 1, 1, 0, 0, 15)),
    ("0 0 9 * * MON-FRI", dt(2024, 1, 6, 10), dt(2024, 1, 8, 9)),  # Saturday -> Monday
    ("0 30 9 * * 1-5", dt(2024, 1, 1, 9, 30), dt(2024, 1, 2, 9, 30)),  # strictly after
    ("0 0 0 13 * 5", dt(2024, 1, 1), dt(2024, 9, 13)),  # Friday the 13th (AND, not OR)
    ("0 0 0 1-7 * MON", dt(2024, 1, 2), dt(2024, 2, 5)),  # first Monday of the month
    ("0 0 0 31 * *", dt(2024, 1, 31), dt(2024, 3, 31)),  # February has no 31st
    ("0 0 0 29 2 *", dt(2024, 3, 1), dt(2028, 2, 29)),  # leap day
    ("0 0 12 * JAN,jul *", dt(2024, 2, 1), dt(2024, 7, 1, 12)),  # month names, any case
    ("0 0 0 * * SUN", dt(2024, 1, 1), dt(2024, 1, 7)),  # 0 = Sunday
    ("0 0 0 * * Tuesday", dt(2024, 1, 1), dt(2024, 1, 2)),  # full names work too
    ("5/20 * * * * *", dt(2024, 1, 1), dt(2024, 1, 1, 0, 0, 5)),  # a/n: from a to max
    ("5/20 * * * * *", dt(2024, 1, 1, 0, 0, 45), dt(2024, 1, 1, 0, 1, 5)),
    ("0 0 8-10/2 * * *", dt(2024, 1, 1, 8), dt(2024, 1, 1, 10)),  # stepped range
    ("0 0 8-10/2 * * *", dt(2024, 1, 1, 10), dt(2024, 1, 2, 8)),
    ("0 0 22-20 * * *", dt(2024, 1, 1), dt(2024, 1, 1, 20)),  # reversed range is swapped
    ("0 15,45 * * * *", dt(2024, 1, 1, 0, 15), dt(2024, 1, 1, 0, 45)),  # list
    ("0 59 23 31 12 *", dt(2024, 12, 31, 23, 59), dt(2025, 12, 31, 23, 59)),  # year rollover
    ("0 0 */6 * * *", dt(2024, 1, 1, 5, 59, 59), dt(2024, 1, 1, 6)),
]


@pytest.mark.parametrize(("expr", "after", "expected"), TABLE)
def test_next_occurrence(expr: str, after: datetime, expected: datetime) -> None:
    assert CrontabSchedule.parse(expr).next(after) == expected


@pytest.mark.parametrize(
    "expr",
    ["* * * * *", "0 0 0 * * 7", "61 * * * * *", "0 0 24 * * *", "0 0 0 0 * *", "0 0 0 * 13 *",
     "*/0 * * * * *", "0 0 0 * * FOO", "a * * * * *"],
)
def test_invalid(expr: str) -> None:
    with pytest.raises(CrontabError):
        CrontabSchedule.parse(expr)


def test_never_occurs() -> None:
    with pytest.raises(CrontabError):
        CrontabSchedule.parse("0 0 0 30 2 *").next(dt(2024, 1, 1))


def test_occurrences_and_timespan() -> None:
    assert CrontabSchedule.parse("*/20 * * * * *").occurrences(dt(2024, 1, 1), 3) == [
        dt(2024, 1, 1, 0, 0, 20), dt(2024, 1, 1, 0, 0, 40), dt(2024, 1, 1, 0, 1)]
    sched = parse_schedule("00:00:30")
    assert isinstance(sched, IntervalSchedule)
    assert sched.next(dt(2024, 1, 1)) == dt(2024, 1, 1, 0, 0, 30)


def test_use_monitor_default() -> None:
    # The host disables monitoring by default for schedules recurring in under a minute.
    assert default_use_monitor(parse_schedule("0 */5 * * * *"))
    assert not default_use_monitor(parse_schedule("*/10 * * * * *"))
