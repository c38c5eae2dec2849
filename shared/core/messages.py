"""The job queue message: ids, and for a new job the row as inserted when it is small.

A queue message holds at most 64 KiB once base64-encoded (48 KiB of text). The first
message of a job carries the inserted row (its small inline input included) and the
insert's ETag when they fit in :data:`SNAPSHOT_MAX_CHARS`, so the worker's claim is a
conditional write on that ETag with no read before it: if the row is unchanged the
claim lands, and if anything changed it (a cancel, a duplicate delivery's claim, the
reaper) the write fails with 412 and the claim re-reads and decides, as always.
Other messages, and jobs with a large input (claim check), carry ids only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.config.constants import JOB_ID_RE, STAGE_RE, TENANT_RE

#: Largest encoded job message that carries the row (base64 makes it at most 64,000 bytes on the queue).
SNAPSHOT_MAX_CHARS = 48_000


class BadMessage(ValueError):
    """A queue message that is not one of ours; it can never be processed."""


@dataclass(frozen=True)
class JobMessage:
    tenant: str
    job_id: str
    #: The attempt this message is meant to start. A message for an attempt
    #: that has already been claimed (a duplicate, or the original message of
    #: a job the reaper re-enqueued) is a no-op.
    attempt: int
    traceparent: str | None = None
    #: Wake a ``waiting`` job after its chunks finished: continue attempt ``attempt``.
    resume: bool = False
    #: The insert's ETag and the row as inserted (``Job.snapshot()``), for a claim without a read.
    etag: str | None = None
    row: dict[str, Any] | None = None

    def encode(self) -> str:
        body: dict[str, object] = {"t": self.tenant, "j": self.job_id, "a": self.attempt}
        if self.traceparent:
            body["tp"] = self.traceparent
        if self.resume:
            body["r"] = 1
        if self.etag and self.row is not None:
            body["e"] = self.etag
            body["s"] = self.row
        return json.dumps(body, separators=(",", ":"))

    def without_row(self) -> JobMessage:
        return JobMessage(self.tenant, self.job_id, self.attempt, self.traceparent, self.resume)

    @classmethod
    def decode(cls, text: str) -> JobMessage:
        try:
            body = json.loads(text)
            row = body.get("s")
            etag = body.get("e")
            if row is not None and (not isinstance(row, dict) or not isinstance(etag, str)):
                raise TypeError("a row needs its etag")
            msg = cls(
                str(body["t"]), str(body["j"]), int(body["a"]), body.get("tp"), bool(body.get("r")),
                etag if row is not None else None, row,
            )
        except (ValueError, KeyError, TypeError) as err:
            raise BadMessage("not a job message") from err
        if not TENANT_RE.fullmatch(msg.tenant) or not JOB_ID_RE.fullmatch(msg.job_id) or msg.attempt < 1:
            raise BadMessage("job message with invalid ids")
        if msg.row is not None and (msg.row.get("PartitionKey") != msg.tenant or msg.row.get("RowKey") != msg.job_id):
            raise BadMessage("job message whose row is another job's")
        return msg


@dataclass(frozen=True)
class ChunkMessage:
    """Runs attempt ``attempt`` of chunk ``index`` of map stage ``stage`` of a job."""

    tenant: str
    job_id: str
    stage: str
    index: int
    attempt: int
    traceparent: str | None = None

    def encode(self) -> str:
        body: dict[str, object] = {"t": self.tenant, "j": self.job_id, "s": self.stage, "i": self.index, "a": self.attempt}
        if self.traceparent:
            body["tp"] = self.traceparent
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> ChunkMessage:
        try:
            body = json.loads(text)
            msg = cls(str(body["t"]), str(body["j"]), str(body["s"]), int(body["i"]), int(body["a"]), body.get("tp"))
        except (ValueError, KeyError, TypeError) as err:
            raise BadMessage("not a chunk message") from err
        if not TENANT_RE.fullmatch(msg.tenant) or not JOB_ID_RE.fullmatch(msg.job_id) or msg.attempt < 1 or msg.index < 0:
            raise BadMessage("chunk message with invalid ids")
        if not STAGE_RE.fullmatch(msg.stage):
            raise BadMessage("chunk message with an invalid stage")
        return msg
