"""Cheap polling: an ETag of the job's JSON, ``If-None-Match`` → 304, and a ``Retry-After`` that fits the job.

The ETag is a (weak) hash of the representation the client would get, so it changes when
anything it cares about changes (status, progress, including a waiting job's summed chunk
progress, attempts, error, callback) and not when only the heartbeat moved. A 304 still
costs the one row read, but no body and no parsing.

``Retry-After`` (seconds) tells a poller when the next look is worth it:

* ``queued``: soon (a worker picks it up within the queue's polling interval): 1 s, or 2 s with fairness on,
  where each poll of a queued job also looks for it in its tenant's wait list (two requests instead of one, so
  the poller's requests a second stay one); a *parked* one (its tenant's fairness window full, progress stage
  ``parked``, ``shared.core.fairness``) waits for that many of its tenant's jobs to end: its place in the wait
  list in seconds, at least ``PARKED_SECONDS``;
* ``retrying``: when the next attempt is due;
* ``running``: a tenth of the time it has run so far (a job that has run for ten
  minutes will not end in the next second), never faster than progress is written
  (``PROGRESS_MIN_INTERVAL_SECONDS``); and if its progress rate says it should be done
  sooner, that time instead;
* ``waiting`` (a map stage): like running, from the chunks' summed progress;
* always between 1 s and a ceiling that grows with the pipeline's timeout (a long
  pipeline may be polled less often, up to 30 s).
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from typing import Any

from shared.config.settings import get_settings
from shared.core import fairness
from shared.core.jobs import Job, Progress, Status, utcnow

MIN_SECONDS = 1
MAX_SECONDS = 30
#: The progress stage of a parked job (``JobService.get`` sets it), and the least Retry-After it gets.
PARKED = "parked"
PARKED_SECONDS = 5
#: A queued job's Retry-After when its poll also looked for it in the wait list (fairness on, not parked).
LOOKED_SECONDS = 2


#: Fields that change without the job changing for its reader: a running job's heartbeat moves every
#: HEARTBEAT_SECONDS. The ETag is weak (RFC 9110: equivalent, not byte-identical) and leaves them out, so
#: a poll between two progress writes is a 304 even though the heartbeat went on.
UNTRACKED = frozenset({"heartbeat_at"})


def etag_of(body: Any) -> str:
    tracked = {k: v for k, v in body.items() if k not in UNTRACKED} if isinstance(body, dict) else body
    data = json.dumps(tracked, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return 'W/"' + hashlib.sha256(data).hexdigest()[:32] + '"'


def matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison of an ``If-None-Match`` list (or ``*``) with ``etag``."""
    if not if_none_match:
        return False
    bare = etag.removeprefix("W/")
    for candidate in if_none_match.split(","):
        c = candidate.strip()
        if c == "*" or c.removeprefix("W/") == bare:
            return True
    return False


def any_tag(if_none_match: str | None) -> bool:
    """``If-None-Match: *`` (alone or in a list): a match whatever the representation is."""
    return any(c.strip() == "*" for c in (if_none_match or "").split(","))


def _seconds(since: datetime | None, now: datetime) -> float:
    return max(0.0, (now - since).total_seconds()) if since else 0.0


def retry_after(job: Job, pipeline_timeout: float | None = None, now: datetime | None = None) -> int | None:
    """Seconds until the next poll of ``job`` is worth it; None once the job is terminal."""
    if job.status.terminal:
        return None
    now = now or utcnow()
    settings = get_settings()
    timeout = pipeline_timeout or settings.pipeline_timeout_seconds
    ceiling = max(2, min(MAX_SECONDS, round(timeout / 60)))
    floor = max(MIN_SECONDS, math.ceil(settings.progress_min_interval_seconds))
    if job.status == Status.QUEUED and job.progress.stage == PARKED:
        value = float(max(PARKED_SECONDS, _place(job.progress.message)))
    elif job.status == Status.QUEUED:
        # A poll that looked in the wait list paid two requests: every other second keeps it at one a second.
        value = float(LOOKED_SECONDS) if fairness.may_be_parked(job) else 1.0
    elif job.status == Status.RETRYING:
        value = max(1.0, (job.available_at - now).total_seconds())
    else:
        ran = _seconds(job.started_at, now)
        value = max(float(floor), ran / 10)
        p = job.progress
        if p.total and 0 < p.processed < p.total and ran > 0:
            # Nearly done at this rate: come back when it should be, not a full interval later.
            left = ran * (p.total - p.processed) / p.processed
            value = min(value, max(float(MIN_SECONDS), left))
    return int(max(MIN_SECONDS, min(ceiling, math.ceil(value))))


def parked_progress(place: int, window: int, listed: int) -> Progress:
    """How a parked job's progress reads: stage ``parked``, its place in the wait list in the message (past the
    ``listed`` rows a poll looks at, only that it is further back)."""
    where = f"{place} of" if place <= listed else f"over {listed} of"
    return Progress(stage=PARKED, processed=0, total=None,
                    message=f"parked: {where} the tenant's jobs waiting for a place in its window of {window}")


def _place(message: str) -> int:
    """The place :func:`parked_progress` wrote ("parked: 3 of …"); further back than listed: the longest wait."""
    words = message.split()
    return int(words[1]) if len(words) > 1 and words[1].isdigit() else MAX_SECONDS


def headers(job: Job, pipeline_timeout: float | None = None) -> dict[str, str]:
    """``Retry-After`` for a job that is not finished yet: when polling it again is worth it."""
    seconds = retry_after(job, pipeline_timeout)
    return {} if seconds is None else {"Retry-After": str(seconds)}
