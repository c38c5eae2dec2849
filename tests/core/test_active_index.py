"""The active-jobs index (issue 13, a cheaper idle): one row per unfinished job beside the job row, written and
removed in the same transactions as the job's own writes, so the reaper finds unfinished work without a
cross-partition scan and without reading a finished row. On the fake and on Azurite."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config.constants import ACTIVE_ROW_PREFIX, TENANTS_PARTITION
from shared.config.settings import get_settings
from shared.core.jobs import Status
from shared.core.lifecycle import Lifecycle
from shared.observability.metering import METER, TransactionMeter
from shared.runtime.reaper import Reaper
from shared.storage.job_store import active_row_key
from tests.core.scenarios import TENANT, executions, job, submit, worker
from tests.support.backends import Backend


def _table(b: Backend) -> Any:
    return b.stores.jobs.table  # type: ignore[attr-defined]


def _indexed(b: Backend) -> set[str]:
    rows = _table(b).query_entities(
        "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
        parameters={"pk": TENANT, "lo": ACTIVE_ROW_PREFIX, "hi": ACTIVE_ROW_PREFIX[:-1] + "."},
    )
    return {str(r["job_id"]) for r in rows}


def test_the_index_holds_exactly_the_unfinished_jobs(backend: Backend) -> None:
    done = submit(backend).job
    assert backend.deliver(worker(backend).handle) == "succeeded"
    waiting = submit(backend, key="k-1").job
    cancelled = submit(backend).job
    Lifecycle(backend.stores).cancel(job(backend, cancelled.id))
    assert job(backend, done.id).status == Status.SUCCEEDED and job(backend, cancelled.id).status == Status.CANCELLED
    assert _indexed(backend) == {waiting.id}
    assert {j.id for j in backend.stores.jobs.active()} == {waiting.id}
    tenants = list(_table(backend).query_entities("PartitionKey eq @pk", parameters={"pk": TENANTS_PARTITION}))
    assert [t["RowKey"] for t in tenants] == [TENANT]


def test_a_finish_whose_answer_is_lost_removes_the_index_row_with_it(backend: Backend) -> None:
    j = submit(backend).job
    backend.faults.arm("table", "drop", method="MERGE", contains='"status":"succeeded"', count=1)
    backend.deliver(worker(backend).handle)
    assert job(backend, j.id).status == Status.SUCCEEDED and executions(j.id) == 1
    assert _indexed(backend) == set()


def test_a_job_written_before_the_index_is_found_by_the_sweep_and_still_finishes(backend: Backend) -> None:
    j = submit(backend).job
    _table(backend).delete_entity(TENANT, active_row_key(j.id))  # as a row written before the index existed
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed is not None  # and its worker dies
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == []  # the index cannot name it
    assert Reaper(backend.stores, sweep=True).run().requeued_stale == [j.id]  # the sweep can
    while backend.deliver(worker(backend).handle) is not None:
        pass
    assert job(backend, j.id).status == Status.SUCCEEDED  # finishing it without an index row works


def test_an_idle_index_run_costs_the_same_however_many_jobs_finished(backend: Backend) -> None:
    if backend.name != "azurite":
        pytest.skip("counted by the meter on the real clients' responses")
    for _ in range(12):
        submit(backend)
    while backend.deliver(worker(backend).handle) is not None:
        pass
    METER.reset()
    Reaper(backend.stores, sweep=False).run()
    indexed = TransactionMeter.billable(METER.snapshot())
    METER.reset()
    Reaper(backend.stores, sweep=True).run()
    swept = TransactionMeter.billable(METER.snapshot())
    # The tenants partition, this tenant's index range, and three queue reads for the metrics.
    assert indexed == 5, METER.snapshot()
    assert swept > indexed
