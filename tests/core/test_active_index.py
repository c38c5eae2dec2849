"""The active-jobs index (issue 13, a cheaper idle): one row per unfinished job beside the job row, written and
removed in the same transactions as the job's own writes, so the reaper finds unfinished work without a
cross-partition scan and without reading a finished row. On the fake and on Azurite."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableTransactionError

from shared.config.constants import ACTIVE_ROW_PREFIX, REAPER_SWEEP_SECONDS, TENANTS_PARTITION
from shared.config.settings import get_settings
from shared.core.errors import ThematiqError
from shared.core.jobs import JobError, Status
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
    assert {j.id for j in backend.stores.jobs.active(backend.stores.jobs.index_state().tenants, _raise)} == {waiting.id}
    tenants = list(_table(backend).query_entities("PartitionKey eq @pk", parameters={"pk": TENANTS_PARTITION}))
    assert [t["RowKey"] for t in tenants] == [TENANT]


@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable"])
def test_a_finish_whose_answer_is_lost_removes_the_index_row_with_it(backend: Backend, mode: str) -> None:
    j = submit(backend).job
    rule = backend.faults.arm("table", mode, method="MERGE", contains='"status":"succeeded"', count=1)
    assert backend.deliver(worker(backend).handle) == "succeeded"  # applied, and known to be
    assert rule.hits == 1, "the fault must have hit the finishing batch"
    assert job(backend, j.id).status == Status.SUCCEEDED and executions(j.id) == 1
    assert _indexed(backend) == set()


def test_more_active_jobs_than_one_query_holds_are_all_found(backend: Backend) -> None:
    ids = {submit(backend).job.id for _ in range(31)}
    tenants = backend.stores.jobs.index_state().tenants
    assert {j.id for j in backend.stores.jobs.active(tenants, _raise)} == ids


_COMPARISON = re.compile(r"\b(?:eq|ne|gt|ge|lt|le)\b")


def test_every_filter_stays_within_the_services_15_comparisons(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """"No more than 15 discrete comparisons are permitted within a $filter string" (Querying tables and
    entities, Table service REST API). Azurite and the fake allow more, so the limit is enforced here."""
    table = _table(backend)
    query = table.query_entities

    def strict(query_filter: str, **kw: Any) -> Any:
        if len(_COMPARISON.findall(query_filter)) > 15:
            err = HttpResponseError(message="InvalidInput: more than 15 comparisons (the service's limit)")
            err.status_code = 400
            raise err
        return query(query_filter, **kw)

    ids = {submit(backend).job.id for _ in range(16)}
    monkeypatch.setattr(table, "query_entities", strict)
    tenants = backend.stores.jobs.index_state().tenants
    assert {j.id for j in backend.stores.jobs.active(tenants, _raise)} == ids


def test_a_tenant_whose_index_cannot_be_read_does_not_hide_the_others(backend: Backend) -> None:
    j = submit(backend).job
    assert Lifecycle(backend.stores).claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1) is not None
    table = _table(backend)
    table.upsert_entity({"PartitionKey": TENANTS_PARTITION, "RowKey": "aaa-other", "kind": "tenant"})
    table.create_entity({"PartitionKey": "aaa-other", "RowKey": ACTIVE_ROW_PREFIX + "x", "kind": "active"})  # no job_id
    table.create_entity({"PartitionKey": "aaa-other", "RowKey": active_row_key("f" * 28), "kind": "active",
                         "job_id": "f" * 28})  # its job is gone: a stray, removed
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    report = Reaper(backend.stores, sweep=False).run()
    assert report.requeued_stale == [j.id], report.summary()
    left = {r["RowKey"] for r in table.query_entities("PartitionKey eq @pk", parameters={"pk": "aaa-other"})}
    assert left == {ACTIVE_ROW_PREFIX + "x"}


def test_an_unindexed_job_the_sweep_finds_is_indexed_from_then_on(backend: Backend) -> None:
    j = submit(backend).job
    _table(backend).delete_entity(TENANT, active_row_key(j.id))  # as a row written before the index existed
    life = Lifecycle(backend.stores)
    assert life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1) is not None  # its worker dies
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=True).run().requeued_stale == [j.id]
    assert _indexed(backend) == {j.id}
    # Attempt 2's worker dies too: an index run sees it, without waiting for tomorrow's sweep.
    assert life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 2) is not None
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert Reaper(backend.stores, sweep=False).run().requeued_stale == [j.id]


def test_finishing_an_unindexed_job_does_not_rest_on_the_sdks_error_index(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = submit(backend).job
    _table(backend).delete_entity(TENANT, active_row_key(j.id))
    # The SDK reports index 0 whenever it cannot parse the service's "n:" prefix.
    monkeypatch.setattr(TableTransactionError, "_extract_index", lambda self: 0)
    assert Lifecycle(backend.stores).cancel(job(backend, j.id)).status == Status.CANCELLED


def test_the_index_matches_the_unfinished_jobs_after_racing_transitions(backend: Backend) -> None:
    life = Lifecycle(backend.stores)
    claimed = []
    for _ in range(8):
        c = life.claim(backend.stores.jobs.get(TENANT, submit(backend).job.id, with_input=True), 1)
        assert c is not None
        claimed.append(c)
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def race(step: Any) -> None:
        barrier.wait()
        for c in claimed:
            try:
                step(c)
            except ThematiqError:
                pass  # lost the race: fine
            except BaseException as err:
                errors.append(err)

    steps = [
        lambda c: life.finish(c, Status.FAILED, error=JobError.of("X", "y")),
        life.reap_stale,
        life.reap_stale,
        lambda c: life.cancel(backend.stores.jobs.get(TENANT, c.id)),
    ]
    threads = [threading.Thread(target=race, args=(step,)) for step in steps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    rows = {c.id: job(backend, c.id) for c in claimed}
    assert _indexed(backend) == {i for i, r in rows.items() if not r.status.terminal}


def test_the_sweep_is_due_once_a_day_whichever_process_runs_it(backend: Backend) -> None:
    submit(backend)
    assert Reaper(backend.stores).run().swept  # never swept: due
    assert not Reaper(backend.stores).run().swept  # a new Reaper (a new process): the table says it is done
    backend.clock.advance(REAPER_SWEEP_SECONDS + 1)
    assert Reaper(backend.stores).run().swept


def _raise(tenant: str, err: Exception) -> None:
    raise AssertionError(f"{tenant}: {err!r}")


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
