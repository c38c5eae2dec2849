"""The busy tenants (platform45): an index run reads only the tenants that may hold an active-index row, so its cost
follows the work in flight, not every tenant that ever submitted. A tenant is named busy (``~busy-{tenant}``) after
every write that adds an index row; the reaper takes it off, conditional on the ETag it read before it found the
tenant's index empty (``Lifecycle.idle_tenant``, through ``conditional.apply``). On the fake and on Azurite."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from shared.config.constants import BUSY_ROW_PREFIX, BUSY_STALE_SECONDS, SWEEP_ROW, TENANTS_PARTITION
from shared.config.settings import get_settings
from shared.core.jobs import JobError, Status
from shared.core.lifecycle import Ending, Lifecycle
from shared.observability.metering import METER, TransactionMeter
from shared.runtime.reaper import Reaper
from shared.storage.job_store import JobStore
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, service, submit

_BODY = json.dumps({"pipeline": "echo", "params": {}, "input": [1]}).encode()


def _jobs(b: Backend) -> JobStore:
    jobs = b.stores.jobs
    assert isinstance(jobs, JobStore)
    return jobs


def _ran_one_job(b: Backend, tenant: str) -> str:
    """A tenant's history: one job submitted, claimed (which names the tenant busy) and finished."""
    life = Lifecycle(b.stores)
    j = service(b).submit(tenant, _BODY, None).job
    claimed = life.claim(b.stores.jobs.get(tenant, j.id, with_input=True), 1).row
    assert claimed.status == Status.RUNNING
    assert life.finish(claimed, Ending(Status.FAILED, JobError.of("X", "y"))).applied
    return j.id


def _running(b: Backend, tenant: str = TENANT) -> str:
    j = service(b).submit(tenant, _BODY, None).job
    claimed = Lifecycle(b.stores).claim(b.stores.jobs.get(tenant, j.id, with_input=True), 1).row
    assert claimed.status == Status.RUNNING
    return j.id


def _counted(b: Backend, run: Callable[[], Any]) -> Counter[str]:
    """The storage requests ``run`` makes: the fake's own count, or the meter on Azurite's real clients."""
    if b.fake is not None:
        b.fake.reset_ops()
        run()
        return b.fake.ops()
    METER.reset()
    run()
    return METER.snapshot()


def _index_run(b: Backend) -> int:
    return TransactionMeter.billable(_counted(b, lambda: Reaper(b.stores, sweep=False).run()))


def _later(b: Backend) -> None:
    """Past the age at which the reaper takes an idle tenant off (and past every process's trust in its own mark)."""
    b.clock.advance(BUSY_STALE_SECONDS + 1)


def _busy(b: Backend) -> set[str]:
    rows = _jobs(b).table.query_entities("PartitionKey eq @pk", parameters={"pk": TENANTS_PARTITION})
    return {str(r["RowKey"])[len(BUSY_ROW_PREFIX):] for r in rows if str(r["RowKey"]).startswith(BUSY_ROW_PREFIX)}


def test_an_index_run_costs_the_same_for_1_and_100_idle_tenants(backend: Backend) -> None:
    """Before platform45 an index run queried the index of every tenant that ever submitted: 1 + 100 queries here."""
    _ran_one_job(backend, "t-000")
    _later(backend)
    settle = Reaper(backend.stores, sweep=False).run()
    assert settle.tenants_idled == ["t-000"] and _busy(backend) == set()
    one = _index_run(backend)
    for i in range(1, 100):
        _ran_one_job(backend, f"t-{i:03d}")
    assert len(_busy(backend)) == 99
    _later(backend)
    assert len(Reaper(backend.stores, sweep=False).run().tenants_idled) == 99  # each taken off once
    hundred = _index_run(backend)
    # The tenants partition's busy range (empty but for the sweep row) and the queue metrics' three reads.
    assert one == hundred == 4, (one, hundred)
    # Work in flight costs what it costs, whatever the history: one tenant's index range and its job rows.
    running = _running(backend, "t-050")
    assert _index_run(backend) == hundred + 2
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == [running]


def test_a_tenant_with_work_in_flight_stays_busy_and_one_without_is_taken_off(backend: Backend) -> None:
    _ran_one_job(backend, "a-idle")
    running = _running(backend)
    assert Reaper(backend.stores, sweep=False).run().tenants_idled == []  # marked lately: left for now
    _later(backend)
    report = Reaper(backend.stores, sweep=False).run()
    assert report.tenants_idled == ["a-idle"] and _busy(backend) == {TENANT}
    assert report.requeued_stale == [running]  # an hour on, its worker is gone too: still in flight
    assert Lifecycle(backend.stores).cancel(job(backend, running)).row.status == Status.CANCELLED
    _later(backend)
    assert Reaper(backend.stores, sweep=False).run().tenants_idled == [TENANT] and _busy(backend) == set()
    # A new claim names it busy again, and the next index run sees the job.
    again = _running(backend)
    assert _busy(backend) == {TENANT}
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == [again]


def test_a_claim_between_the_reapers_look_and_its_removal_keeps_the_tenant_busy(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's index row lands after the reaper found the index empty, and its busy upsert before the removal:
    the removal's ETag no longer matches (412), the re-read row is planned again, and its index is looked at again."""
    _ran_one_job(backend, TENANT)
    queued = submit(backend).job  # not indexed until its claim: its message is its record
    _later(backend)
    jobs = _jobs(backend)
    real = jobs.unmark_busy
    claimed: list[str] = []

    def claim_first(mark: Any) -> Any:
        if not claimed:
            row = Lifecycle(backend.stores).claim(jobs.get(TENANT, queued.id, with_input=True), 1).row
            claimed.append(row.id)
        return real(mark)

    monkeypatch.setattr(jobs, "unmark_busy", claim_first)
    report = Reaper(backend.stores, sweep=False).run()
    assert claimed == [queued.id] and report.tenants_idled == [] and _busy(backend) == {TENANT}
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)  # its worker died
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == [queued.id]


def test_a_claim_whose_busy_upsert_comes_after_the_removal_names_the_tenant_again(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order: the index row lands after the reaper's look, the removal lands (the ETag is unchanged), and
    the claim's upsert comes last. It writes the row again, so the tenant is busy and the job is found."""
    _ran_one_job(backend, TENANT)
    queued = submit(backend).job
    _later(backend)
    jobs = _jobs(backend)
    real_unmark, real_mark = jobs.unmark_busy, jobs._mark_quietly
    deferred: list[str] = []

    def claim_first(mark: Any) -> Any:
        if not deferred:
            monkeypatch.setattr(jobs, "_mark_quietly", deferred.append)  # the claim's upsert waits
            assert Lifecycle(backend.stores).claim(jobs.get(TENANT, queued.id, with_input=True), 1).applied
            monkeypatch.setattr(jobs, "_mark_quietly", real_mark)
        return real_unmark(mark)

    monkeypatch.setattr(jobs, "unmark_busy", claim_first)
    assert Reaper(backend.stores, sweep=False).run().tenants_idled == [TENANT]
    assert deferred == [TENANT] and _busy(backend) == set()
    real_mark(deferred.pop())  # the claim's upsert, now
    assert _busy(backend) == {TENANT}
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == [queued.id]


@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable", "refuse"])
def test_a_removal_whose_answer_is_lost_is_decided_by_re_reading(backend: Backend, mode: str) -> None:
    _ran_one_job(backend, TENANT)
    Reaper(backend.stores, sweep=False).run()  # records the busy tenants (the first run lists every tenant)
    _running(backend)
    Lifecycle(backend.stores).finish(
        job(backend, next(iter(_jobs(backend).active([TENANT], _raise))).id), Ending(Status.SUCCEEDED)
    )
    _later(backend)
    rule = backend.faults.arm("table", mode, method="DELETE", count=1)
    report = Reaper(backend.stores, sweep=False).run()
    backend.faults.disarm()
    assert rule.hits == 1, "the fault must have hit the removal"
    # Committed with its answer lost, or retried into a 404: the re-read finds the row gone, which is the removal
    # landed. Refused (a 503 never applied): the re-read finds it unchanged and the removal is sent again.
    assert report.tenants_idled == [TENANT] and _busy(backend) == set(), report.summary()
    assert report.errors == 0


def test_busy_tenants_are_recorded_from_every_tenant_once_then_only_they_are_read(backend: Backend) -> None:
    """A table as the code before left it: tenant rows, no busy rows. The first run lists every tenant (as before),
    names the ones with unfinished jobs busy and records that it did; later runs read the busy ones only."""
    for i in range(5):
        _ran_one_job(backend, f"old-{i}")
    running = _running(backend)
    table = _jobs(backend).table
    for tenant in _busy(backend):
        table.delete_entity(TENANTS_PARTITION, BUSY_ROW_PREFIX + tenant)
    state = backend.stores.jobs.index_state()
    assert not state.busy_seeded and set(state.tenants) == {TENANT, *(f"old-{i}" for i in range(5))}
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    first = Reaper(backend.stores, sweep=False).run()
    assert first.requeued_stale == [running] and first.tenants_marked == [TENANT]
    state = backend.stores.jobs.index_state()
    assert state.busy_seeded and state.tenants == (TENANT,)
    assert table.get_entity(TENANTS_PARTITION, SWEEP_ROW).get("busy_seeded_at") is not None


def test_a_claim_whose_busy_upsert_fails_is_found_by_the_sweep_which_names_the_tenant_again(backend: Backend) -> None:
    Reaper(backend.stores, sweep=False).run()  # the busy tenants recorded (none)
    rule = backend.faults.arm("table", "refuse", contains='"kind":"busy"', count=100)
    running = _running(backend)  # the claim stands: the upsert after it is best effort
    backend.faults.disarm()
    assert rule.hits >= 1 and _busy(backend) == set()
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == []  # no index run can name it
    swept = Reaper(backend.stores, sweep=True).run()
    assert swept.requeued_stale == [running] and swept.tenants_marked == [TENANT] and _busy(backend) == {TENANT}
    # Attempt 2's worker dies too: an index run sees it from now on.
    assert Lifecycle(backend.stores).claim(job(backend, running).with_changes(), 2).applied
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == [running]


def _raise(tenant: str, err: Exception) -> None:
    raise AssertionError(f"{tenant}: {err!r}")


def test_a_process_names_a_tenant_busy_once_while_it_trusts_its_mark(backend: Backend) -> None:
    """The six operations of a no-op job hold: a claim whose process marked the tenant lately upserts nothing, and the
    reaper leaves a mark that young alone, so no write it covers can come after the reaper's look."""
    _running(backend)
    marks = backend.stores.jobs.index_state().marks
    assert set(marks) == {TENANT}
    counts = _counted(backend, lambda: [_running(backend) for _ in range(3)])
    # Each job: its insert, its send, the read this test claims from, and the claim's batch; no upsert of the mark
    # (the tenant row is named once per process too).
    assert TransactionMeter.billable(counts) == 3 * 4, counts
    assert backend.stores.jobs.index_state().marks[TENANT].etag == marks[TENANT].etag  # not written again
