"""Values from ``host.json`` that the app itself must agree with (read once per process)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from pathlib import Path

APP_ROOT = Path(__file__).resolve().parents[2]


def parse_timespan(value: str) -> timedelta:
    """``[d.]hh:mm:ss[.fff]`` as used by host.json."""
    days = 0
    if "." in value.split(":")[0]:
        d, value = value.split(".", 1)
        days = int(d)
    h, m, s = value.split(":")
    return timedelta(days=days, hours=int(h), minutes=int(m), seconds=float(s))


@dataclass(frozen=True)
class HostConfig:
    max_dequeue_count: int
    function_timeout: timedelta | None


#: Time the worker keeps for itself after an attempt's timeout, to record the outcome before the host's own
#: functionTimeout would cancel the invocation (and leave the job to the reaper).
_OUTCOME_MARGIN_SECONDS = 60


def attempt_timeout(pipeline_timeout: float | None, setting: float) -> float:
    """The timeout of one attempt: the pipeline's own, capped by the setting and by host.json functionTimeout."""
    timeout = min(pipeline_timeout or setting, setting)
    limit = host_config().function_timeout
    if limit is not None:
        timeout = min(timeout, max(1.0, limit.total_seconds() - _OUTCOME_MARGIN_SECONDS))
    return timeout


@lru_cache(maxsize=1)
def host_config() -> HostConfig:
    data = json.loads((APP_ROOT / "host.json").read_text())
    queues = data.get("extensions", {}).get("queues", {})
    timeout = data.get("functionTimeout")
    return HostConfig(
        max_dequeue_count=int(queues.get("maxDequeueCount", 5)),
        function_timeout=parse_timespan(timeout) if timeout and timeout != "-1" else None,
    )
