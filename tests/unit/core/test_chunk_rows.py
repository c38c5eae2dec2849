"""Chunk rows in their own RowKey range (``~chunk~{job}~{stage}~{index}``), and the rows of the layout before.

A tenant's job listing reads its job rows and nothing else: before, a chunk's RowKey (``{job}~c~…``) sorted right
after its job's row, so ``GET /api/jobs`` read every chunk of every job it paged over, and on Azure (1,000 rows
scanned per request, ``LIST_MAX_SERVICE_PAGES`` requests) a tenant whose recent jobs fanned out got short pages.
Azurite does not stop at 1,000 rows: the fake counts the rows a query looks at (``FakeStorage.rows_scanned``) and
can stop where the service stops (``rows_per_scan``), so those checks run on the fake only.

Chunk rows the code before wrote (a stage in flight across the deploy) are still read and written where they are,
and ``ChunkStore.move_legacy`` moves them, each in one transaction with its ETag. Runs on the fake here and on
Azurite in its twin (tests/integration/core/test_chunk_rows_on_azurite.py).
"""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from shared.config.settings import Settings, get_settings
from shared.core.chunks import Chunk, ChunkStatus, chunk_row, legacy_chunk_row
from shared.core.errors import NotFound
from shared.core.jobs import Status
from shared.core.lifecycle import Lifecycle
from shared.core.registry import default_registry
from shared.runtime.chunk_worker import ChunkWorker
from shared.runtime.protocol import AttemptSpec
from shared.runtime.reaper import Reaper
from shared.runtime.runner import AttemptResult, Lease
from shared.storage.chunk_store import ChunkStore
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, submit

STAGE = "square"
INPUT = gzip.compress(b"[1]", mtime=0)


def _chunks(job_id: str, n: int, *, legacy: bool = False, status: ChunkStatus = ChunkStatus.PENDING) -> list[Chunk]:
    return [Chunk(TENANT, job_id, STAGE, i, status, 1, "m:f", of=n, plan="p", input_inline=INPUT,
                  legacy=legacy) for i in range(n)]


def _write_legacy(backend: Backend, chunks: list[Chunk]) -> None:
    """Rows as the code before wrote them: the same entity at ``{job}~c~{stage}~{index}``."""
    table = backend.stores.chunks.table  # type: ignore[attr-defined]
    for chunk in chunks:
        assert chunk.legacy and chunk.row_key == legacy_chunk_row(chunk.job_id, chunk.stage, chunk.index)
        table.create_entity(chunk.to_entity())


def _store(backend: Backend) -> ChunkStore:
    store = backend.stores.chunks
    assert isinstance(store, ChunkStore)
    return store


def _queries(backend: Backend) -> int:
    return backend.ops()["table:query"]


def _fan_out_jobs(backend: Backend, jobs: int, chunks: int, *, legacy: bool = False) -> list[str]:
    ids = []
    for _ in range(jobs):
        j = submit(backend).job
        if legacy:
            _write_legacy(backend, _chunks(j.id, chunks, legacy=True))
        else:
            Lifecycle(backend.stores).create_chunks(TENANT, j.id, STAGE, _chunks(j.id, chunks))
        ids.append(j.id)
    return sorted(ids)  # newest first: the order a listing answers in


def test_a_job_listing_reads_no_chunk_row(backend: Backend) -> None:
    ids = _fan_out_jobs(backend, jobs=6, chunks=20)
    if backend.fake is not None:
        # A tenth of the 1,000 rows a request may scan: with 20 chunk rows after each job row, the listing used to
        # get 2 jobs a request and 5 requests (LIST_MAX_SERVICE_PAGES) did not reach the 6th job.
        backend.fake.rows_per_scan = 10
        backend.fake.rows_scanned = 0
    before = _queries(backend)
    page, cursor = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=6, cursor=None)
    assert [j.id for j in page] == ids and cursor is None
    assert _queries(backend) - before == 1  # one request, whatever the jobs fanned out to
    if backend.fake is not None:
        assert backend.fake.rows_scanned == 6  # the six job rows: no chunk row, no bookkeeping row


def test_a_listing_over_chunk_rows_of_the_layout_before_stops_reading_them_once_they_are_moved(
    backend: Backend,
) -> None:
    ids = _fan_out_jobs(backend, jobs=3, chunks=20, legacy=True)
    if backend.fake is not None:
        backend.fake.rows_scanned = 0
    page, _ = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=3, cursor=None)
    assert [j.id for j in page] == ids  # the old rows are read (and filtered out by kind) until they are moved
    if backend.fake is not None:
        assert backend.fake.rows_scanned == 3 + 3 * 20  # every chunk row of the three jobs is looked at
    report = _store(backend).move_legacy(TENANT)
    assert (report.moved, report.dropped, report.left) == (60, 0, 0)
    assert _store(backend).move_legacy(TENANT).moved == 0  # nothing left to move: running it again is harmless
    if backend.fake is not None:
        backend.fake.rows_scanned = 0
    page, _ = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=3, cursor=None)
    assert [j.id for j in page] == ids
    if backend.fake is not None:
        assert backend.fake.rows_scanned == 3
    for job_id in ids:
        stage = backend.stores.chunks.list_stage(TENANT, job_id, STAGE)
        assert [(c.index, c.legacy, c.status) for c in stage] == [(i, False, ChunkStatus.PENDING) for i in range(20)]
        # Every property came along, the inline input too.
        moved = backend.stores.chunks.get(TENANT, job_id, STAGE, 7, with_input=True)
        assert moved.input_inline == INPUT and moved.of == 20 and moved.plan == "p"


def test_a_stage_costs_one_range_query_once_it_is_whole(backend: Backend) -> None:
    [job_id] = _fan_out_jobs(backend, jobs=1, chunks=5)
    before = _queries(backend)
    assert len(backend.stores.chunks.list_stage(TENANT, job_id, STAGE)) == 5
    assert _queries(backend) - before == 1
    # A stage written in the layout before: the new range comes back empty, the old one is read.
    [old] = _fan_out_jobs(backend, jobs=1, chunks=5, legacy=True)
    before = _queries(backend)
    assert [c.index for c in backend.stores.chunks.list_stage(TENANT, old, STAGE)] == list(range(5))
    assert _queries(backend) - before == 2


class _Succeeds:
    """A chunk attempt that succeeds at once."""

    def __call__(self, lease: Lease, spec: AttemptSpec, timeout: float, settings: Settings) -> _Succeeds:
        return self

    def run(self, input_value: Any) -> AttemptResult:
        return AttemptResult("succeeded", result=b"[1]")


@pytest.mark.parametrize("moved", ["never", "mid-stage"])
def test_a_stage_written_in_the_layout_before_runs_to_its_fan_in(backend: Backend, monkeypatch: pytest.MonkeyPatch,
                                                                moved: str) -> None:
    """A job in flight across the deploy: its chunks were written by the code before. The new code queues, claims,
    runs and fans them in where they are, and the migration may move them in the middle of the stage."""
    monkeypatch.setenv("MAX_CHUNKS_IN_FLIGHT_PER_JOB", "2")
    get_settings.cache_clear()
    chunks_queue = get_settings().chunks_queue
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed.applied
    _write_legacy(backend, _chunks(j.id, 4, legacy=True))
    assert life.suspend(claimed.row, STAGE).applied  # two legacy rows queued (the window), their messages sent
    stage = backend.stores.chunks.list_stage(TENANT, j.id, STAGE)
    assert [(c.status, c.legacy) for c in stage] == [(ChunkStatus.QUEUED, True)] * 2 + [(ChunkStatus.PENDING, True)] * 2
    worker = ChunkWorker(backend.stores, default_registry(), runner=_Succeeds())
    assert (backend.deliver(worker.handle, chunks_queue) or "").startswith("succeeded")
    if moved == "mid-stage":
        report = _store(backend).move_legacy(TENANT)
        assert (report.moved, report.left) == (4, 0)
    for _ in range(3):
        assert (backend.deliver(worker.handle, chunks_queue) or "").startswith("succeeded")
    assert backend.deliver(worker.handle, chunks_queue) is None
    stage = backend.stores.chunks.list_stage(TENANT, j.id, STAGE)
    assert [c.status for c in stage] == [ChunkStatus.SUCCEEDED] * 4
    assert {c.legacy for c in stage} == {moved == "never"}
    after = job(backend, j.id)
    assert after.status == Status.WAITING and after.fan_ins == 1 and after.fan_in_at is not None  # resume sent


def test_a_writer_holding_a_row_the_migration_moved_re_reads_and_applies(backend: Backend) -> None:
    j = submit(backend).job
    _write_legacy(backend, _chunks(j.id, 2, legacy=True, status=ChunkStatus.QUEUED))
    held = backend.stores.chunks.get(TENANT, j.id, STAGE, 0)
    assert held.legacy
    assert _store(backend).move_legacy(TENANT).moved == 2
    # Its conditional write finds the old row gone (404): changed since read, so it re-reads and claims the moved row.
    claimed = Lifecycle(backend.stores).claim(held, 1)
    assert claimed.applied and not claimed.row.legacy and claimed.row.status == ChunkStatus.RUNNING
    table = _store(backend).table
    with pytest.raises(Exception):  # noqa: B017  # the SDK's ResourceNotFoundError: the old row is gone
        table.get_entity(TENANT, legacy_chunk_row(j.id, STAGE, 0))
    assert table.get_entity(TENANT, chunk_row(j.id, STAGE, 0))["status"] == "running"


def test_a_move_that_loses_to_a_write_reads_the_row_again_and_moves_what_is_there(backend: Backend) -> None:
    j = submit(backend).job
    _write_legacy(backend, _chunks(j.id, 1, legacy=True, status=ChunkStatus.QUEUED))
    store = _store(backend)
    stale = store.table.get_entity(TENANT, legacy_chunk_row(j.id, STAGE, 0))
    # A claim lands on the old row after the migration read it: the move's delete no longer matches (412), the whole
    # transaction fails (no copy of the stale row is made), and the fresh row is the one moved.
    assert Lifecycle(backend.stores).claim(backend.stores.chunks.get(TENANT, j.id, STAGE, 0), 1).applied
    assert store._move_one(stale) == "moved"
    chunk = backend.stores.chunks.get(TENANT, j.id, STAGE, 0)
    assert not chunk.legacy and chunk.status == ChunkStatus.RUNNING and chunk.attempts == 1


def test_an_old_row_beside_a_new_one_of_the_same_chunk_is_dropped(backend: Backend) -> None:
    """Only a writer of the code before running beside the new code makes both; readers take the new row."""
    j = submit(backend).job
    Lifecycle(backend.stores).create_chunks(TENANT, j.id, STAGE, _chunks(j.id, 2, status=ChunkStatus.SUCCEEDED))
    _write_legacy(backend, _chunks(j.id, 1, legacy=True))
    assert [c.status for c in backend.stores.chunks.list_stage(TENANT, j.id, STAGE)] == [ChunkStatus.SUCCEEDED] * 2
    report = _store(backend).move_legacy(TENANT)
    assert (report.moved, report.dropped, report.left) == (0, 1, 0)
    assert [c.status for c in backend.stores.chunks.list_stage(TENANT, j.id, STAGE)] == [ChunkStatus.SUCCEEDED] * 2


def test_retention_deletes_a_jobs_chunks_of_both_layouts(backend: Backend) -> None:
    j = submit(backend).job
    Lifecycle(backend.stores).create_chunks(TENANT, j.id, "a", [
        Chunk(TENANT, j.id, "a", i, ChunkStatus.SUCCEEDED, 1, "m:f", of=3) for i in range(3)])
    _write_legacy(backend, _chunks(j.id, 2, legacy=True))
    assert backend.stores.chunks.delete_job_chunks(TENANT, j.id) == 5
    assert backend.stores.chunks.list_stage(TENANT, j.id, "a") == []
    assert backend.stores.chunks.list_stage(TENANT, j.id, STAGE) == []
    with pytest.raises(NotFound):
        backend.stores.chunks.get(TENANT, j.id, STAGE, 0)


def test_the_sweep_moves_the_rows_of_the_layout_before_until_none_are_left(backend: Backend) -> None:
    ids = _fan_out_jobs(backend, jobs=2, chunks=3, legacy=True)
    assert backend.stores.jobs.index_state().chunks_moved_at is None
    assert Reaper(backend.stores, sweep=False).run().chunk_rows_moved == 0  # an index run never looks
    report = Reaper(backend.stores, sweep=True).run()
    assert report.chunk_rows_moved == 6 and report.errors == 0, report.summary()
    assert backend.stores.jobs.index_state().chunks_moved_at is not None
    for job_id in ids:
        assert {c.legacy for c in backend.stores.chunks.list_stage(TENANT, job_id, STAGE)} == {False}
    # Recorded: later sweeps do not read the tenants' job rows for it again (a row written after is still read).
    [late] = _fan_out_jobs(backend, jobs=1, chunks=1, legacy=True)
    assert Reaper(backend.stores, sweep=True).run().chunk_rows_moved == 0
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, late, STAGE)] == [True]
