"""The API's data, as pydantic models.

They describe the same JSON as the components of the service's OpenAPI document
(``GET /api/openapi.json``), field for field; ``tests/unit/client/test_models_match_openapi.py``
compares their JSON schemas with the document's, so the two cannot drift apart.
Unlike the service's models they ignore fields they do not know, so an older client
keeps working against a newer service.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_JOB_ID = r"^[0-9a-f]{28}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Status(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


class ProgressView(_Model):
    stage: str
    processed: int
    total: int | None
    message: str

    @property
    def fraction(self) -> float | None:
        """Share of the stage done (0..1), if the total is known."""
        return min(1.0, self.processed / self.total) if self.total else None


class ErrorView(_Model):
    type: str
    message: str


class JobLinks(_Model):
    self_: str = Field(alias="self")
    cancel: str
    result: str | None = None


class CallbackView(_Model):
    url: str
    status: Literal["pending", "retrying", "delivered", "failed"]
    attempts: int = Field(ge=0)
    last_error: str | None = None


class JobView(_Model):
    """A job: its status, progress, attempts and error. ``Job`` is the same class."""

    id: str = Field(pattern=_JOB_ID)
    pipeline: str
    status: Status
    params: dict[str, Any]
    progress: ProgressView
    attempts: int = Field(ge=0)
    max_attempts: int = Field(ge=1)
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    error: ErrorView | None
    usage: dict[str, float]
    input_bytes: int = Field(ge=0)
    result_bytes: int | None
    links: JobLinks
    callback: CallbackView | None = None

    @property
    def terminal(self) -> bool:
        return self.status.terminal


class JobList(_Model):
    items: list[JobView]
    next_cursor: str | None


class LevelLink(_Model):
    id: str
    label: str


class ThemeLink(_Model):
    theme_id: str
    label: str
    confidence: float
    #: The broad theme this theme is in (its parent, or itself when the themes are the broad level); with
    #: multi_label, every broad theme a response counts in. None from a service before 2026-12-08.
    broad: LevelLink | None = None


class RowSentiment(_Model):
    label: str
    score: float


class ResponseRow(_Model):
    """A response as submitted (text, metadata) with its coding: themes (primary first), both levels, sentiment."""

    id: str | int
    text: str
    metadata: dict[str, Any]
    bucket: str
    reason: str | None
    themes: list[ThemeLink]
    broad: LevelLink | None
    fine: LevelLink | None
    sentiment: RowSentiment | None


class ResponseList(_Model):
    items: list[ResponseRow]
    next_cursor: str | None
    total: int
    #: How many of the matching responses are usable: the n a breakdown states for the segment.
    usable: int | None = None


class FieldError(_Model):
    field: str
    message: str


class Problem(_Model):
    """RFC 9457 problem details; ``errors`` names the offending fields."""

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[FieldError] | None = None


class Health(_Model):
    status: str
    storage: str
    queue_depth: int


class CallbackSpec(_Model):
    url: str = Field(min_length=1, max_length=2048)


class SubmitBody(_Model):
    pipeline: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,39}$")
    params: dict[str, Any] = Field(default_factory=dict)
    input: Any = Field(...)
    callback: CallbackSpec | None = None


Job = JobView
Progress = ProgressView
JobErrorInfo = ErrorView
Page = JobList


class WebhookSecretInfo(_Model):
    """One of a tenant's active webhook signing secrets, as ``GET /webhooks/secrets`` lists it (never its value)."""

    id: str
    created_at: datetime


class WebhookSecret(_Model):
    """A new webhook signing secret, as ``POST /webhooks/secrets`` answers it: the value is shown only here."""

    id: str
    secret: str
    created_at: datetime


class WebhookSecretList(_Model):
    items: list[WebhookSecretInfo]
