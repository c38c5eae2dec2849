"""The one table that maps domain errors to RFC 9457 problem types at the HTTP edge."""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.errors import (
    BadRequest,
    Conflict,
    Misconfigured,
    NotFound,
    PayloadTooLarge,
    StorageError,
    StorageUnavailable,
    ThematiqError,
    Unauthorized,
    ValidationFailed,
)


class PreconditionFailed(ThematiqError):
    """An ``If-Match`` that no longer matches: someone changed the resource since the client read it (412)."""


class PreconditionRequired(ThematiqError):
    """A write that must be conditional came without ``If-Match`` (428): a blind overwrite would lose edits."""


class UnsupportedMediaType(ThematiqError):
    """A request body in a media type or content coding the route does not read (415): it reads JSON, uncompressed."""


@dataclass(frozen=True)
class ProblemType:
    status: int
    slug: str
    title: str


INTERNAL = ProblemType(500, "internal", "Internal error")

#: Most specific first: the first entry the error is an instance of wins.
PROBLEMS: tuple[tuple[type[ThematiqError], ProblemType], ...] = (
    (ValidationFailed, ProblemType(422, "validation-error", "Request validation failed")),
    (BadRequest, ProblemType(400, "bad-request", "Bad request")),
    (Unauthorized, ProblemType(401, "unauthorized", "Unauthorized")),
    (NotFound, ProblemType(404, "not-found", "Not found")),
    (Conflict, ProblemType(409, "conflict", "Conflict")),
    (PayloadTooLarge, ProblemType(413, "payload-too-large", "Payload too large")),
    (PreconditionFailed, ProblemType(412, "precondition-failed", "Precondition failed")),
    (PreconditionRequired, ProblemType(428, "precondition-required", "Precondition required")),
    (UnsupportedMediaType, ProblemType(415, "unsupported-media-type", "Unsupported media type")),
    (StorageUnavailable, ProblemType(503, "storage-unavailable", "Storage temporarily unavailable")),
    (Misconfigured, ProblemType(503, "service-misconfigured", "Service unavailable")),
    (StorageError, ProblemType(500, "storage-error", "Storage error")),
)


def problem_type(err: ThematiqError) -> ProblemType:
    """The problem type of ``err``; anything not in the table (an internal signal that escaped) is a 500."""
    for cls, ptype in PROBLEMS:
        if isinstance(err, cls):
            return ptype
    return INTERNAL
