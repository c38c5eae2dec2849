"""Retry-After and ETag matching (no host needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.api.polling import etag_of, matches, retry_after
from shared.core.jobs import Job, Progress, Status

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _job(status: Status, **kw: object) -> Job:
    base = {"tenant": "t", "id": "a" * 28, "pipeline": "echo", "status": status, "params": {}, "created_at": NOW,
            "available_at": NOW, "max_attempts": 3}
    return Job(**{**base, **kw})  # type: ignore[arg-type]


def test_retry_after_by_status_and_progress() -> None:
    assert retry_after(_job(Status.SUCCEEDED), now=NOW) is None
    assert retry_after(_job(Status.QUEUED), now=NOW) == 1
    assert retry_after(_job(Status.RETRYING, available_at=NOW + timedelta(seconds=8)), 600, now=NOW) == 8
    # Running: a tenth of the time it has run, within the pipeline's ceiling (timeout/60, at most 30 s).
    started = NOW - timedelta(seconds=200)
    assert retry_after(_job(Status.RUNNING, started_at=started), 1500, now=NOW) == 20
    assert retry_after(_job(Status.RUNNING, started_at=NOW - timedelta(hours=1)), 1500, now=NOW) == 25
    assert retry_after(_job(Status.RUNNING, started_at=NOW - timedelta(hours=1)), 60, now=NOW) == 2
    # Nearly done at its rate: sooner.
    nearly = _job(Status.RUNNING, started_at=started, progress=Progress("embed", 95, 100))
    assert retry_after(nearly, 1500, now=NOW) == 11
    # Never faster than progress is written (3 s by default).
    assert retry_after(_job(Status.RUNNING, started_at=NOW - timedelta(seconds=1)), 1500, now=NOW) == 3


def test_etag_matching() -> None:
    tag = etag_of({"a": 1})
    assert tag == etag_of({"a": 1}) and tag != etag_of({"a": 2}) and tag.startswith('W/"')
    # Only the heartbeat moved: the same (weak) ETag.
    assert etag_of({"a": 1, "heartbeat_at": "t1"}) == etag_of({"a": 1, "heartbeat_at": "t2"})
    strong = tag.removeprefix("W/")
    assert matches(tag, tag) and matches(strong, tag) and matches(f'"x", {tag}', tag) and matches("*", tag)
    assert not matches('"x"', tag) and not matches(None, tag) and not matches("", tag)
