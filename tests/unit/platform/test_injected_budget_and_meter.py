"""A platform's memory budget and transaction meter are its own, handed to its workers: no reset needed.

Before, both were process globals (``BUDGET``, ``METER``) that every worker read, so one test's full budget
deferred the next test's jobs unless something reset it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.core.jobs import Status
from shared.observability.metering import METER, TransactionMeter
from shared.platform import Platform, use
from shared.runtime.inprocess import in_process
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptResult, Lease, Runner

from .delivery import deliver_all, http

REF = "tests.unit.platform.pipes:PIPELINE"


def _submit(numbers: list[int]) -> str:
    resp = http("submit_job", "POST", "jobs", {"pipeline": "staged", "params": {"chunk_size": 4}, "input": numbers})
    assert resp.status_code == 202, resp.get_body()
    return str(json.loads(resp.get_body())["id"])


def test_each_platform_hands_its_own_budget_and_meter_to_both_workers(platform: Platform) -> None:
    other = Platform.in_memory()
    assert platform.worker.budget is platform.budget and platform.chunk_worker.budget is platform.budget
    assert platform.worker.meter is platform.meter and platform.chunk_worker.meter is platform.meter
    assert other.budget is not platform.budget and other.meter is not platform.meter
    assert platform.meter is not METER  # METER is what the Azure Storage clients feed


def test_a_full_budget_on_another_platform_defers_nothing_here(platform: Platform) -> None:
    """The memory another host (an earlier test's platform) holds is not this host's: the job runs at once."""
    elsewhere = Platform.in_memory()
    held = elsewhere.budget.try_reserve(elsewhere.budget.capacity_mb())  # that host's memory is all in use
    assert held is not None
    platform.registry.register(REF)
    job_id = _submit(list(range(1, 9)))

    delivered = deliver_all(platform)

    assert platform.stores.jobs.get("local", job_id).status == Status.SUCCEEDED, delivered
    assert platform.budget.deferred == 0 and platform.budget.peak_running == 1
    assert elsewhere.budget.running == 1  # still held there, untouched


def test_the_storage_operations_of_an_attempt_process_are_counted_on_its_platforms_meter(platform: Platform) -> None:
    """An attempt's process reports its Storage transactions; its host adds them to the platform's meter only."""
    base = platform
    in_thread = in_process(base.stores)

    def reporting(lease: Lease, spec: AttemptSpec, timeout: float, settings: Any) -> Runner:
        runner = in_thread(lease, spec, timeout, settings)

        class Reporting:
            def run(self, value: Any) -> AttemptResult:
                out = runner.run(value)
                out.storage_ops = {"table:merge": 2, "blob:put": 1}  # what a child process would have reported
                return out

        return Reporting()

    platform = Platform(base.stores, base.registry, runner=reporting, clock=base.clock, meter=TransactionMeter(),
                        fake=base.fake)
    platform.registry.register(REF)
    before = METER.snapshot()
    use(platform)  # the fixture resets the process afterwards
    job_id = _submit(list(range(1, 9)))
    delivered = deliver_all(platform)

    assert platform.stores.jobs.get("local", job_id).status == Status.SUCCEEDED
    attempts = len(delivered)  # every delivery here ran one attempt: the job's two, one per chunk
    assert attempts == 4, delivered
    assert platform.meter.snapshot() == {"table:merge": 2 * attempts, "blob:put": attempts}
    assert METER.snapshot() == before


def test_a_platform_on_the_fake_counts_its_own_requests_and_not_another_platforms(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hosts on one account: each counts the requests its own stores make, as each host's clients would."""
    assert platform.fake is not None
    fake = platform.fake
    other = Platform.in_memory(fake=fake)  # a second host on the same storage account
    platform.registry.register(REF)
    # The fake counts a request with ``meter.add``; the Azure clients' response hook with ``METER.hook``. Only an
    # ``add`` on METER would mean a fake client is bound to the process's meter. Its totals are no evidence: on a
    # shared test worker a thread an earlier test left behind (a heartbeat on Azurite) may still feed the hook.
    on_process_meter: list[str] = []
    monkeypatch.setattr(METER, "add", lambda op, n=1: on_process_meter.append(op))

    mark, before, elsewhere = platform.meter.snapshot(), fake.ops(), other.meter.snapshot()
    job_id = _submit(list(range(1, 9)))
    submitted = fake.ops() - before
    assert submitted["table:insert"] >= 1 and submitted["queue:send"] == 1  # a submission makes requests
    assert platform.meter.snapshot() - mark == submitted
    assert other.meter.snapshot() == elsewhere

    mark, before = platform.meter.snapshot(), fake.ops()
    assert other.stores.jobs.get("local", job_id).status == Status.QUEUED
    assert other.meter.snapshot() - elsewhere == fake.ops() - before == {"table:get": 1}
    assert platform.meter.snapshot() == mark

    before = fake.ops()
    deliver_all(platform)  # the deliverer's own receives and deletes go through an unmetered client
    ran, counted = fake.ops() - before, platform.meter.snapshot() - mark
    assert platform.stores.jobs.get("local", job_id).status == Status.SUCCEEDED
    worker_ops = {op: n for op, n in ran.items() if op.startswith(("table:", "blob:")) or op == "queue:send"}
    assert worker_ops["table:merge"] > 0 and worker_ops["blob:put"] > 0
    assert {op: n for op, n in counted.items() if op in worker_ops or op.startswith(("table:", "blob:"))} == worker_ops
    assert other.meter.snapshot() - elsewhere == {"table:get": 1}
    assert on_process_meter == []  # the process's meter is the Azure clients'
