"""An attempt's self-fencing clock starts no later than the heartbeat its claim wrote.

The reaper hands a job or a chunk on ``HEARTBEAT_STALE_SECONDS`` after the heartbeat the claim (or resume)
planned; the attempt kills itself ``FENCE_FRACTION`` of that after its fence starts (docs/architecture.md,
"Self-fencing"). So the fence must start when the claim's heartbeat was planned, or before: a fence started when
the claim's answer came back (a claim whose first try timed out after committing: 30 s per try) or, for a chunk,
once its input was read, would let the reaper's next attempt start while this one still runs.

A claim here is made slow by a short sleep inside it: the test measures ordering, not duration.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from shared.core.lifecycle import Lifecycle
from shared.platform import Platform
from shared.runtime.runner import AttemptHost

from .delivery import deliver_all, http

REF = "tests.unit.platform.pipes:PIPELINE"


@pytest.fixture
def fences(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float, float]]:
    """(transition, when it was called, where the attempt's fence started), for every claim and resume."""
    calls: list[tuple[str, float]] = []
    seen: list[tuple[str, float, float]] = []

    def slow(name: str) -> None:
        original = getattr(Lifecycle, name)

        def wrapper(self: Lifecycle, *args: Any, **kwargs: Any) -> Any:
            calls.append((name, time.monotonic()))
            time.sleep(0.01)  # the write's answer comes back later than its heartbeat was planned
            return original(self, *args, **kwargs)

        monkeypatch.setattr(Lifecycle, name, wrapper)

    slow("claim")
    slow("resume")
    attempt = AttemptHost._attempt

    def spy(self: AttemptHost, lease: Any, *args: Any) -> Any:
        name, called = calls[-1]
        seen.append((name, called, lease.renewed_at))
        return attempt(self, lease, *args)

    monkeypatch.setattr(AttemptHost, "_attempt", spy)
    return seen


def test_job_chunk_and_resume_attempts_fence_from_before_their_claim(
    platform: Platform, fences: list[tuple[str, float, float]]
) -> None:
    platform.registry.register(REF)
    submitted = http("submit_job", "POST", "jobs", {"pipeline": "staged", "params": {"chunk_size": 4},
                                                     "input": list(range(1, 11))})
    assert submitted.status_code == 202, submitted.get_body()
    assert json.loads(submitted.get_body())["id"]

    assert deliver_all(platform) == ["job_worker", "chunk_worker", "chunk_worker", "chunk_worker", "job_worker"]

    assert [name for name, _, _ in fences] == ["claim", "claim", "claim", "claim", "resume"]
    late = [(name, round(fence - called, 3)) for name, called, fence in fences if fence > called]
    assert late == [], "fence started after the claim was planned (transition, seconds late)"
