"""What the client raises: every failure is a :class:`ThematiqError`."""

from __future__ import annotations

from typing import Any

from .models import Problem


class ThematiqError(Exception):
    """Base of every error this package raises."""


class TransportError(ThematiqError):
    """Nothing usable answered: connection refused, DNS, TLS, a timeout (after the retries)."""


class ApiError(ThematiqError):
    """The service answered with an error status. ``problem`` is its RFC 9457 body (or one made up from the status)."""

    def __init__(self, status: int, problem: Problem, retry_after: float | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.problem = problem
        self.retry_after = retry_after
        self.headers = headers or {}
        super().__init__(f"{status} {problem.title}: {problem.detail}")

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The offending fields, ``[{"field": ..., "message": ...}]``."""
        return [e.model_dump() for e in self.problem.errors or []]

    @property
    def transient(self) -> bool:
        """Worth retrying later: throttling, storage blips and gateway errors."""
        return self.status in (408, 429, 502, 503, 504)


class WaitTimeout(ThematiqError, TimeoutError):
    """:meth:`Client.wait` gave up; the job keeps running. ``job`` is how it was last seen."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message)
        self.job = job
