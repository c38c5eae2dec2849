"""The errors a pipeline may raise or see, and the control-flow signals of a running attempt.

Every error Thematiq raises on purpose derives from :class:`ThematiqError`. None of
them knows about HTTP: the API maps them to problem types in one table
(``shared.api.problems``).
"""

from __future__ import annotations

from typing import Any


class ThematiqError(Exception):
    """Base class of every error Thematiq raises on purpose. ``field`` names the offending input, if any."""

    def __init__(self, detail: str = "", **extra: Any) -> None:
        super().__init__(detail or type(self).__name__)
        self.detail = detail or type(self).__name__
        self.extra = extra


class ValidationFailed(ThematiqError):
    """Client input is well-formed JSON but not acceptable. Names the fields."""

    def __init__(self, detail: str, errors: list[dict[str, str]]) -> None:
        super().__init__(detail, errors=errors)
        self.errors = errors


class ParamError(ValueError):
    """A rule across parameters, raised in a params model's ``model_validator``, blamed on one of them.

    Pydantic places a model validator's error on the model itself, so the 422 would name ``params``; this one
    names ``params.<field>`` (``field`` is a dotted path below the params, e.g. ``num_themes``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class PipelineError(ThematiqError):
    """Raised by pipeline code. ``retryable`` decides whether a retry can help."""

    retryable: bool = True


class RetryableError(PipelineError):
    """A transient fault (storage hiccup, LLM 429/5xx): try again later."""

    retryable = True


class PermanentError(PipelineError):
    """Bad input or a bug that another attempt will not fix: fail at once."""

    retryable = False


class Cancelled(BaseException):
    """The job was cancelled; raised inside the pipeline by ``ctx.raise_if_cancelled``.

    A ``BaseException``, like :class:`shared.sdk.fanout_types.Suspend`: it is a
    control-flow signal, and a pipeline's ``except Exception`` must not swallow it.
    """
