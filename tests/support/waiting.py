"""Waiting for a condition instead of sleeping for a guessed time.

The suite runs on shared, loaded machines (it once failed at load average 10–18): a sleep that waits for a host to
be ready, a message to arrive or a thread to reach a point is too short there and too long everywhere else. Poll
the condition itself, with a timeout that only bounds a test that would otherwise hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.05, what: str = "",
               pause: Callable[[float], None] | None = None) -> T:
    """The predicate's first truthy value; AssertionError (naming ``what``) if none came within ``timeout`` s.
    ``pause(interval)`` between calls (``time.sleep``, looked up at each call, by default).

    The predicate is called once more after the deadline, so a condition met while the poller was descheduled
    still counts.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'condition'} not met within {timeout:g} s")
        (pause or time.sleep)(interval)


def wait_in_page(page: Any, predicate: Callable[[], T], timeout: float = 30.0, interval_ms: int = 100,
                 what: str = "") -> T:
    """:func:`wait_until` for a test that drives a Playwright page (sync API): the page's events (``request``,
    ``response``, ``requestfinished``) reach the test's handlers only while a Playwright call runs, so it pauses
    with ``page.wait_for_timeout``, never ``time.sleep``. ``timeout`` (s) is measured by the test's clock."""
    return wait_until(predicate, timeout, interval_ms / 1000, what, pause=lambda s: page.wait_for_timeout(s * 1000))
