"""Retry policy: a value object that turns (attempt, error) into a decision."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay: timedelta
    reason: str


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a failed attempt is tried again.

    The delay before attempt ``n + 1`` (after ``n`` failed attempts) is
    ``min(max_delay, base_delay * factor ** (n - 1))`` scaled by a random
    factor in ``[1 - jitter, 1]`` ("equal jitter" style), so that jobs that
    failed together do not retry together.

    ``max_attempts`` counts attempts, not retries: 3 means one try and two
    retries. The worker also fails a job on the queue's last allowed delivery
    (host.json ``maxDequeueCount``), whichever comes first.
    """

    max_attempts: int = 3
    base_delay: timedelta = timedelta(seconds=5)
    factor: float = 2.0
    max_delay: timedelta = timedelta(minutes=5)
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be within [0, 1]")

    def backoff(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """Delay after the ``attempt``-th failed attempt (1-based)."""
        raw = self.base_delay.total_seconds() * self.factor ** max(0, attempt - 1)
        capped = min(self.max_delay.total_seconds(), raw)
        scale = 1 - self.jitter * (rng or random).random()
        return timedelta(seconds=capped * scale)

    def decide(self, attempt: int, retryable: bool, rng: random.Random | None = None) -> RetryDecision:
        """Decide what happens after attempt number ``attempt`` failed."""
        if not retryable:
            return RetryDecision(False, timedelta(0), "permanent error")
        if attempt >= self.max_attempts:
            return RetryDecision(False, timedelta(0), f"attempts exhausted ({attempt}/{self.max_attempts})")
        return RetryDecision(True, self.backoff(attempt, rng), f"retry {attempt + 1}/{self.max_attempts}")
