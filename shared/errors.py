"""The project's exception hierarchy.

Everything we raise derives from :class:`ThematiqError`. Errors from azure-core
are caught at the storage boundary and re-raised as one of these with
``raise ... from err`` so callers never need to know the SDK's types.
"""

from __future__ import annotations

from typing import Any


class ThematiqError(Exception):
    """Base class of every error Thematiq raises on purpose."""

    #: HTTP status used when the error reaches the API.
    status: int = 500
    #: Short slug; the problem+json ``type`` is derived from it.
    slug: str = "internal"
    title: str = "Internal error"

    def __init__(self, detail: str = "", **extra: Any) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.extra = extra


class ValidationFailed(ThematiqError):
    """Client input is well-formed JSON but not acceptable. Names the fields."""

    status = 422
    slug = "validation-error"
    title = "Request validation failed"

    def __init__(self, detail: str, errors: list[dict[str, str]]) -> None:
        super().__init__(detail, errors=errors)
        self.errors = errors


class BadRequest(ThematiqError):
    status = 400
    slug = "bad-request"
    title = "Bad request"


class Unauthorized(ThematiqError):
    status = 401
    slug = "unauthorized"
    title = "Unauthorized"


class NotFound(ThematiqError):
    status = 404
    slug = "not-found"
    title = "Not found"


class Conflict(ThematiqError):
    status = 409
    slug = "conflict"
    title = "Conflict"


class PayloadTooLarge(ThematiqError):
    status = 413
    slug = "payload-too-large"
    title = "Payload too large"


class StorageUnavailable(ThematiqError):
    """Storage could not be reached or timed out: retry later (503)."""

    status = 503
    slug = "storage-unavailable"
    title = "Storage temporarily unavailable"
    retry_after_seconds = 5


class StorageError(ThematiqError):
    """An unexpected answer from Storage that retrying will not fix."""

    status = 500
    slug = "storage-error"
    title = "Storage error"


class LostClaim(ThematiqError):
    """Another worker or the reaper owns the job now; stop touching it."""


class PipelineError(ThematiqError):
    """Raised by pipeline code. ``retryable`` decides whether a retry can help."""

    retryable: bool = True


class RetryableError(PipelineError):
    """A transient fault (storage hiccup, LLM 429/5xx): try again later."""

    retryable = True


class PermanentError(PipelineError):
    """Bad input or a bug that another attempt will not fix: fail at once."""

    retryable = False


class Cancelled(ThematiqError):
    """The job was cancelled; raised inside the pipeline by ``ctx.raise_if_cancelled``."""
