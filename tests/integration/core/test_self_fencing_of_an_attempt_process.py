"""An attempt that cannot renew its lease fences itself (stops its pipeline process) before the reaper could hand
the job on: the real attempt runner and its child process, on Azurite. Moved from the unit tier's
tests/unit/core/test_lifecycle_promises.py (review finding 1) and test_lost_answers_decided_by_rereading.py (case e),
whose other scenarios need no process."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from shared.config.settings import Settings, get_settings
from shared.core.errors import StorageUnavailable
from shared.core.lifecycle import Lifecycle
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptRunner
from shared.runtime.worker import JobLease
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, submit

#: The reaper's stale threshold here. The backend's 2 s leaves the fence (0.6 x 2 s = 1.2 s) only 0.8 s before the
#: row goes stale, and a loaded machine's kill and reap of the child can use that up (the suite failed at load
#: average 10-18); 5 s puts the fence at 3 s with 2 s to spare and keeps every order the tests assert.
STALE_SECONDS = 5.0


@pytest.fixture
def settings(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings the attempt runner fences by, after ``backend`` set the tier's (heartbeat 0.2 s)."""
    monkeypatch.setenv("HEARTBEAT_STALE_SECONDS", str(STALE_SECONDS))
    get_settings.cache_clear()
    return get_settings()


class _KillTimedRunner(AttemptRunner):
    """The real runner, noting when it first killed the attempt's process: when the fence stopped the pipeline.

    ``run`` returns later than that: it lets the renewal that was still in flight end first (bounded).
    """

    killed_at: float | None = None

    def _kill(self) -> None:
        if self.killed_at is None and self._proc is not None:
            self.killed_at = time.monotonic()
        super()._kill()


def _renewals_alive(label: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"renew {label}" and t.is_alive()]


class _TimedLease:
    """A JobLease whose calls take as long as a real SDK call can (read timeout 30 s, then re-reads).

    ``mode``:
      * ``blocked``  the first renewal succeeds; the next one blocks for ``block`` s and then fails
                     (a MERGE that hangs to its read timeout, then re-reads that time out too);
      * ``slow-ok``  the first renewal writes its heartbeat at once but its answer arrives ``block`` s
                     later (the SDK retried a 5xx); every later renewal fails at once.
    ``heartbeat_written`` is the monotonic time of the last heartbeat that reached the row: the
    reaper's clock.
    """

    def __init__(self, inner: JobLease, mode: str, block: float) -> None:
        self.inner, self.mode, self.block = inner, mode, block
        self.label = inner.label
        self.calls = 0
        self.heartbeat_written = time.monotonic()

    def renew(self, progress: Any) -> bool:
        self.calls += 1
        if self.calls == 1:
            cancel = self.inner.renew(progress)
            self.heartbeat_written = time.monotonic()
            if self.mode == "slow-ok":
                time.sleep(self.block)
            return cancel
        if self.mode == "blocked" and self.calls == 2:
            time.sleep(self.block)
        raise StorageUnavailable("storage did not answer")


@pytest.mark.parametrize("mode", ["blocked", "slow-ok"])
def test_the_fence_stops_the_attempt_before_its_last_written_heartbeat_is_stale(
    backend: Backend, settings: Settings, mode: str
) -> None:
    """Review finding 1: self-fencing was measured from the wrong clock and only between blocking calls."""
    j = submit(backend, "sleep", {"seconds": 30, "steps": 30}).job
    life = Lifecycle(backend.stores)
    claim = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claim.applied
    claimed = claim.row
    spec = AttemptSpec(mode="run", job_id=j.id, tenant=TENANT, attempt=1, pipeline="sleep",
                       pipeline_ref="pipelines.sleep:PIPELINE", params=claimed.params, max_attempts=3)
    # A renewal that blocks past the stale threshold: the fence must act while it blocks, not only after it.
    lease = _TimedLease(JobLease(life, claimed), mode, block=STALE_SECONDS + 0.5)
    runner = _KillTimedRunner(lease, spec, 60, settings)  # type: ignore[arg-type]
    outcome = runner.run([1])
    assert outcome.kind == "lost" and runner.killed_at is not None
    ran_on = runner.killed_at - lease.heartbeat_written
    # The reaper hands the job on once the row's heartbeat is older than heartbeat_stale_seconds:
    # the fenced attempt must be gone by then, or two attempts run at once.
    assert ran_on < settings.heartbeat_stale_seconds, (
        f"the pipeline ran on {ran_on:.1f} s after the last heartbeat reached the row "
        f"(stale threshold {settings.heartbeat_stale_seconds} s)"
    )
    # The renewal that blocked past the fence ended with the attempt, not after it: a late one would land a
    # heartbeat on the abandoned row (or, in the test process, on the next test's meter: fresh-clone CI of 811b79b).
    assert not _renewals_alive(lease.label)


def test_the_fence_counts_from_the_claims_heartbeat_not_from_the_runners_start(
    backend: Backend, settings: Settings
) -> None:
    """Review finding 1: the fence counted from the runner's start, not from the heartbeat the claim wrote."""
    j = submit(backend, "sleep", {"seconds": 30, "steps": 30}).job
    life = Lifecycle(backend.stores)
    claim = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claim.applied
    claimed = claim.row
    claimed_at = time.monotonic()  # the claim wrote heartbeat_at now
    backend.faults.arm("table", "refuse", method="MERGE", count=100_000)  # no renewal gets through
    # The behaviour, not a synchronisation: Worker._run reading a claim-checked input blob (the SDK may take ~90 s).
    # Half the stale threshold: a fence counted from the runner's start would end after the row went stale.
    time.sleep(STALE_SECONDS / 2)
    spec = AttemptSpec(mode="run", job_id=j.id, tenant=TENANT, attempt=1, pipeline="sleep",
                       pipeline_ref="pipelines.sleep:PIPELINE", params=claimed.params, max_attempts=3)
    runner = _KillTimedRunner(JobLease(life, claimed, claimed_at), spec, 60, settings)
    outcome = runner.run([1])
    assert outcome.kind == "lost" and runner.killed_at is not None
    ran_on = runner.killed_at - claimed_at
    assert ran_on < settings.heartbeat_stale_seconds, (
        f"the pipeline ran on {ran_on:.1f} s after the claim's heartbeat (stale {settings.heartbeat_stale_seconds} s)"
    )


def test_an_attempt_that_cannot_renew_its_lease_stops_before_the_reaper_hands_it_on(
    backend: Backend, settings: Settings
) -> None:
    """Issue 11 case e: self-fencing."""
    j = submit(backend, "sleep", {"seconds": 30, "steps": 30}).job
    claimed = Lifecycle(backend.stores).claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1).row
    assert claimed.status == "running"
    backend.faults.arm("table", "refuse", method="MERGE", count=100_000)  # no heartbeat gets through
    spec = AttemptSpec(mode="run", job_id=j.id, tenant=TENANT, attempt=1, pipeline="sleep",
                       pipeline_ref="pipelines.sleep:PIPELINE", params=claimed.params, max_attempts=3)
    started = time.monotonic()
    runner = _KillTimedRunner(JobLease(Lifecycle(backend.stores), claimed), spec, 60, settings)
    outcome = runner.run([1])
    assert outcome.kind == "lost" and runner.killed_at is not None
    elapsed = runner.killed_at - started
    assert elapsed < settings.heartbeat_stale_seconds + 1.5, elapsed  # gone before the reaper could hand it on
