"""Six-field NCRONTAB expressions (``sec min hour day month day-of-week``), as the timer trigger reads them.

Semantics follow the NCrontab library the Functions host uses:

* values: seconds/minutes 0-59, hours 0-23, day 1-31, month 1-12, day-of-week 0-6
  (0 = Sunday; 7 is rejected, as NCrontab does);
* ``*``, lists ``a,b``, ranges ``a-b`` (given in reverse they are swapped), steps
  ``*/n``, ``a-b/n`` and ``a/n`` (= from ``a`` to the field's maximum every ``n``);
* month and day names match case-insensitively by prefix of the English name
  (``JAN``, ``mon``, ``Tuesday``), the first name in calendar order winning;
* day-of-month and day-of-week must BOTH match (NCrontab's
  ``GetNextOccurrence`` checks the day then the weekday), unlike Vixie cron,
  which fires when either matches. ``0 0 0 13 * 5`` is only Friday the 13th;
* a day that a month lacks (31 in April) is skipped for that month;
* the next occurrence is strictly after the base time, to the second.

Times are naive or UTC ``datetime`` objects; the caller decides the time zone
(the host uses UTC unless WEBSITE_TIME_ZONE is set).
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTH_NAMES = [calendar.month_name[i] for i in range(1, 13)]
DAY_NAMES = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

# (low, high, names) per field, in expression order.
_FIELDS: list[tuple[str, int, int, list[str] | None]] = [
    ("second", 0, 59, None),
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day", 1, 31, None),
    ("month", 1, 12, MONTH_NAMES),
    ("day-of-week", 0, 6, DAY_NAMES),
]

# 28 years contain every weekday/leap-year combination: no match by then means never.
_SEARCH_DAYS = 366 * 28


class CrontabError(ValueError):
    """The expression is not valid NCRONTAB."""


def _value(text: str, lo: int, hi: int, names: list[str] | None, field: str) -> int:
    if not text:
        raise CrontabError(f"empty value in {field} field")
    if text[0].isdigit():
        if not text.isdigit():
            raise CrontabError(f"{text!r} is not a number in {field} field")
        value = int(text)
    elif names is not None:
        for i, name in enumerate(names):
            if name.lower().startswith(text.lower()):
                value = i + lo
                break
        else:
            raise CrontabError(f"{text!r} is not a known {field} name")
    else:
        raise CrontabError(f"{text!r} is not valid in {field} field")
    if not lo <= value <= hi:
        raise CrontabError(f"{value} is out of range {lo}-{hi} in {field} field")
    return value


def _parse_field(text: str, lo: int, hi: int, names: list[str] | None, field: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                raise CrontabError(f"bad step {step_text!r} in {field} field")
            step = int(step_text)
        if part == "*":
            start, end = lo, hi
        elif "-" in part:
            a, b = part.split("-", 1)
            start, end = _value(a, lo, hi, names, field), _value(b, lo, hi, names, field)
            if start > end:
                start, end = end, start
        else:
            start = _value(part, lo, hi, names, field)
            # "a/n" runs from a to the maximum; a bare "a" is just a.
            end = hi if step > 1 else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class CrontabSchedule:
    """A parsed expression; :meth:`next` gives the next occurrence after a time."""

    expression: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]

    @classmethod
    def parse(cls, expression: str) -> CrontabSchedule:
        parts = expression.split()
        if len(parts) != 6:
            raise CrontabError(f"{expression!r}: expected 6 fields (sec min hour day month day-of-week)")
        sets = [_parse_field(p, lo, hi, names, f) for p, (f, lo, hi, names) in zip(parts, _FIELDS, strict=True)]
        return cls(
            expression=expression,
            seconds=tuple(sorted(sets[0])),
            minutes=tuple(sorted(sets[1])),
            hours=tuple(sorted(sets[2])),
            days=sets[3],
            months=sets[4],
            days_of_week=sets[5],
        )

    def _day_matches(self, d: date) -> bool:
        # isoweekday: Monday=1..Sunday=7; NCRONTAB: Sunday=0.
        return d.month in self.months and d.day in self.days and d.isoweekday() % 7 in self.days_of_week

    def _first_time_from(self, h: int, m: int, s: int) -> tuple[int, int, int] | None:
        """Earliest (hour, minute, second) in the schedule that is >= (h, m, s)."""
        for hour in self.hours:
            if hour < h:
                continue
            for minute in self.minutes:
                if hour == h and minute < m:
                    continue
                for second in self.seconds:
                    if hour == h and minute == m and second < s:
                        continue
                    return hour, minute, second
        return None

    def next(self, after: datetime) -> datetime:
        """The first occurrence strictly after ``after`` (keeps its tzinfo)."""
        t = after.replace(microsecond=0) + timedelta(seconds=1)
        d = t.date()
        first = True
        for _ in range(_SEARCH_DAYS):
            if d.month not in self.months:
                # Jump to the first day of the next month.
                d = (d.replace(day=1) + timedelta(days=32)).replace(day=1)
                first = False
                continue
            if self._day_matches(d):
                hms = self._first_time_from(t.hour, t.minute, t.second) if first else self._first_time_from(0, 0, 0)
                if hms is not None:
                    return datetime(d.year, d.month, d.day, *hms, tzinfo=after.tzinfo)
            d += timedelta(days=1)
            first = False
        raise CrontabError(f"{self.expression!r} never occurs")

    def occurrences(self, after: datetime, count: int) -> list[datetime]:
        out: list[datetime] = []
        t = after
        for _ in range(count):
            t = self.next(t)
            out.append(t)
        return out
