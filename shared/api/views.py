"""How a job looks to API clients: one pydantic model, used both to answer and to document (OpenAPI)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from shared.config.constants import JOB_ID_RE
from shared.core.jobs import Job, Status

#: An RFC 3339 UTC timestamp (``2026-12-01T09:00:00.123456Z``).
DateTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class ProgressView(BaseModel):
    stage: str
    processed: int
    total: int | None
    message: str


class ErrorView(BaseModel):
    type: str = Field(description="The exception or failure kind, e.g. `RuntimeError`, `WorkerLost`, `Timeout`.")
    message: str = Field(description="Why the attempt or the job failed, readable by a person.")


class JobLinks(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    self_: str = Field(alias="self")
    cancel: str
    result: str | None = Field(default=None, description="Present once the job has succeeded.")


class CallbackView(BaseModel):
    """The completion webhook of a job and how its delivery stands (docs/webhooks.md)."""

    url: str
    status: Literal["pending", "retrying", "delivered", "failed"] = Field(
        description="`pending` until the job ends; `retrying` after a failed delivery; `delivered` once the "
        "receiver answered 2xx; `failed` (dead letter) when deliveries kept failing for 24 h."
    )
    attempts: int = Field(ge=0, description="Delivery attempts so far.")
    last_error: str | None = Field(default=None, description="Why the last delivery failed.")


class JobView(BaseModel):
    """A job as the API returns it. Storage details and the input are never shown."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(pattern=JOB_ID_RE.pattern)
    pipeline: str
    status: Status
    params: dict[str, Any]
    progress: ProgressView
    attempts: int = Field(ge=0)
    max_attempts: int = Field(ge=1)
    cancel_requested: bool
    created_at: DateTime
    started_at: DateTime | None
    heartbeat_at: DateTime | None
    finished_at: DateTime | None
    error: ErrorView | None
    usage: dict[str, float]
    input_bytes: int = Field(ge=0)
    result_bytes: int | None
    links: JobLinks
    callback: CallbackView | None = Field(default=None, description="Present when the job was submitted with one.")

    @classmethod
    def of(cls, job: Job, base_path: str) -> JobView:
        self_link = f"{base_path}/jobs/{job.id}"
        return cls(
            id=job.id,
            pipeline=job.pipeline,
            status=job.status,
            params=job.params,
            progress=ProgressView(
                stage=job.progress.stage, processed=job.progress.processed, total=job.progress.total,
                message=job.progress.message,
            ),
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            cancel_requested=job.cancel_requested,
            created_at=_iso(job.created_at) or "",
            started_at=_iso(job.started_at),
            heartbeat_at=_iso(job.heartbeat_at),
            finished_at=_iso(job.finished_at),
            error=ErrorView(type=job.error.type, message=job.error.message) if job.error else None,
            usage=job.usage,
            input_bytes=job.input_bytes,
            result_bytes=job.result_bytes,
            callback=CallbackView(
                url=job.callback_url, status=job.callback_status or "pending",  # type: ignore[arg-type]
                attempts=job.callback_attempts, last_error=job.callback_error,
            ) if job.callback_url else None,
            links=JobLinks.model_validate({
                "self": self_link,
                "cancel": f"{self_link}/cancel",
                "result": f"{self_link}/result" if job.status == Status.SUCCEEDED else None,
            }),
        )


def public(job: Job, base_path: str) -> dict[str, Any]:
    """The JSON body of a job, as :class:`JobView` serialises it."""
    body = JobView.of(job, base_path).model_dump(mode="json", by_alias=True)
    if body["links"].get("result") is None:
        body["links"].pop("result", None)
    if body.get("callback") is None:
        body.pop("callback", None)
    return body


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None
