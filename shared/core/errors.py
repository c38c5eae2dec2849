"""Domain errors of the platform. They carry no HTTP status: ``shared.api.problems`` maps them at the edge.

Errors from azure-core are caught at the storage boundary (``shared.storage.errors``)
and re-raised as one of these, so no caller needs the SDK's types.
"""

from __future__ import annotations

from shared.sdk.errors import (
    Cancelled,
    PermanentError,
    PipelineError,
    RetryableError,
    ThematiqError,
    ValidationFailed,
)


class BadRequest(ThematiqError):
    """The request cannot be parsed (malformed JSON, a bad header or cursor)."""


class Unauthorized(ThematiqError):
    """No trusted tenant, or the caller's identity could not be established."""


class NotFound(ThematiqError):
    """No such job, or another tenant's (never distinguished)."""


class Conflict(ThematiqError):
    """The request contradicts the job's state (cancel a finished job, a reused key with another body)."""


class CorruptInput(Conflict):
    """A job's stored input does not decode as gzipped JSON (corrupt storage): no retry or redelivery can mend it.

    The message names the decoder's error type only: its own message can quote the bytes, the tenant's data."""


class PayloadTooLarge(ThematiqError):
    """The body or a part of it is over a limit."""


class Misconfigured(ThematiqError):
    """The deployment lacks something the request needs (a secret setting whose Key Vault reference App Service did
    not resolve, ``shared.config.settings.UnresolvedSecret``): nothing was done; the caller may retry later, once the
    operator has fixed it (a 503, not a 500: the code is not at fault, and nothing is half done)."""

    #: Above the typed client's max_retry_wait (60 s), so it raises at once instead of blocking for five waits on
    #: something only the operator can fix.
    retry_after_seconds = 120


class StorageUnavailable(ThematiqError):
    """Storage could not be reached or timed out: retry later.

    ``maybe_applied`` is False only when the request provably never reached the service
    (the connection could not be made); otherwise a write may have happened, and only a
    re-read can tell (``shared.core.conditional``).
    """

    retry_after_seconds = 5

    def __init__(self, detail: str = "", *, maybe_applied: bool = True, **extra: object) -> None:
        super().__init__(detail, **extra)
        self.maybe_applied = maybe_applied


class Contended(StorageUnavailable):
    """A conditional transition kept losing to other writers: transient, so retried or answered 503 like an outage.

    The last re-read showed the transition's own write had not landed, so nothing is
    half-applied (``maybe_applied`` is False).
    """

    def __init__(self, detail: str = "", **extra: object) -> None:
        super().__init__(detail, maybe_applied=False, **extra)


class StorageError(ThematiqError):
    """An unexpected answer from Storage that retrying will not fix."""


class StorageForbidden(Misconfigured, StorageError):
    """Storage refused the app itself (401/403: an identity that lost its role, a rotated account key, key access
    turned off): the deployment's to fix, never the request's. A 503 ``service-misconfigured`` at the API (a 500
    ``storage-error`` until review44p); still permanent, so a worker's last delivery does not re-send it."""


class EtagMismatch(ThematiqError):
    """A conditional write lost (412): someone else changed the entity first, or the SDK retried ours."""


class AlreadyExists(ThematiqError):
    """An insert hit an existing entity (409): someone else's, or our own retried by the SDK."""


class LostClaim(ThematiqError):
    """Another worker or the reaper owns the work now; stop touching it. Internal, never reaches a client."""


__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Cancelled",
    "Conflict",
    "EtagMismatch",
    "LostClaim",
    "Misconfigured",
    "NotFound",
    "PayloadTooLarge",
    "PermanentError",
    "PipelineError",
    "RetryableError",
    "StorageError",
    "StorageForbidden",
    "StorageUnavailable",
    "ThematiqError",
    "Unauthorized",
    "ValidationFailed",
]
