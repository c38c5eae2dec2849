"""The job queue message: ids only, never the payload (a message holds at most 64 KiB)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from shared.config.constants import JOB_ID_RE, STAGE_RE, TENANT_RE


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

    def encode(self) -> str:
        body: dict[str, object] = {"t": self.tenant, "j": self.job_id, "a": self.attempt}
        if self.traceparent:
            body["tp"] = self.traceparent
        if self.resume:
            body["r"] = 1
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> JobMessage:
        try:
            body = json.loads(text)
            msg = cls(str(body["t"]), str(body["j"]), int(body["a"]), body.get("tp"), bool(body.get("r")))
        except (ValueError, KeyError, TypeError) as err:
            raise BadMessage("not a job message") from err
        if not TENANT_RE.match(msg.tenant) or not JOB_ID_RE.match(msg.job_id) or msg.attempt < 1:
            raise BadMessage("job message with invalid ids")
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
        if not TENANT_RE.match(msg.tenant) or not JOB_ID_RE.match(msg.job_id) or msg.attempt < 1 or msg.index < 0:
            raise BadMessage("chunk message with invalid ids")
        if not STAGE_RE.match(msg.stage):
            raise BadMessage("chunk message with an invalid stage")
        return msg
