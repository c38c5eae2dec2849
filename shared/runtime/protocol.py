"""The typed protocol between a worker (``shared.runtime.runner``) and its attempt process (``shared.runtime.child``).

The parent writes one :class:`AttemptSpec` to a file; the child answers with JSON
lines on an event pipe, each one of the :data:`Event` union, ending with exactly one
terminal event (:class:`Done`, :class:`Failed`, :class:`CancelledEvent` or
:class:`Suspended`). Control goes the other way on stdin: the line ``cancel``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AttemptSpec(_Frozen):
    """What the child runs: a whole attempt (``run``) or one chunk of a map stage (``map``)."""

    mode: Literal["run", "map"]
    job_id: str
    tenant: str
    attempt: int
    pipeline: str
    pipeline_ref: str
    params: dict[str, Any]
    max_attempts: int
    input_path: str = ""
    result_path: str = ""
    #: For ``map``: the module-level function that runs the chunk.
    fn_ref: str | None = None
    #: The job's LLM token budget spans attempts and chunks: what is already spent, and this process's cap.
    llm_tokens_used: int = 0
    llm_token_limit: int | None = None


class ProgressEvent(_Frozen):
    event: Literal["progress"] = "progress"
    stage: str = ""
    processed: int = 0
    total: int | None = None
    message: str = ""


class UsageEvent(_Frozen):
    event: Literal["usage"] = "usage"
    counters: dict[str, float]


class LogEvent(_Frozen):
    event: Literal["log"] = "log"
    level: str = "INFO"
    logger: str = ""
    message: str = ""


class MeterEvent(_Frozen):
    """The child's storage transactions, counted with the parent's."""

    event: Literal["meter"] = "meter"
    counts: dict[str, int]


class Done(_Frozen):
    event: Literal["done"] = "done"
    #: The result file holds raw bytes rather than JSON (map-stage chunks may return either).
    binary: bool = False


class Failed(_Frozen):
    event: Literal["error"] = "error"
    type: str
    message: str = ""
    retryable: bool = True


class CancelledEvent(_Frozen):
    event: Literal["cancelled"] = "cancelled"


class Suspended(_Frozen):
    event: Literal["suspended"] = "suspended"
    stage: str
    chunks: int


Event = Annotated[
    ProgressEvent | UsageEvent | LogEvent | MeterEvent | Done | Failed | CancelledEvent | Suspended,
    Field(discriminator="event"),
]
Terminal = Done | Failed | CancelledEvent | Suspended
EVENTS: TypeAdapter[Event] = TypeAdapter(Event)


def encode(event: BaseModel) -> str:
    return event.model_dump_json()


def decode(line: bytes) -> Event | None:
    """One event, or None for a line that is not one (a pipeline that printed to the event pipe)."""
    try:
        return EVENTS.validate_json(line)
    except ValueError:
        return None
