"""How a job looks to API clients: one pydantic model, used both to answer and to document (OpenAPI)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.config.constants import JOB_ID_RE
from shared.core.jobs import Job, Status


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
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    started_at: str | None = Field(json_schema_extra={"format": "date-time"})
    heartbeat_at: str | None = Field(json_schema_extra={"format": "date-time"})
    finished_at: str | None = Field(json_schema_extra={"format": "date-time"})
    error: ErrorView | None
    usage: dict[str, float]
    input_bytes: int = Field(ge=0)
    result_bytes: int | None
    links: JobLinks

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
    return body


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None
