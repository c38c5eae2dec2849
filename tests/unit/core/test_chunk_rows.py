"""Chunk rows in a partition per job (``{tenant}~{job}``, RowKey ``{stage}~{index}``), and the rows of the layout before.

A tenant's job listing reads its job rows and nothing else: before, a chunk's RowKey (``{job}~c~…``) sorted right
after its job's row in the tenant's partition, so ``GET /api/jobs`` read every chunk of every job it paged over, and
on Azure (1,000 rows scanned per request, ``LIST_MAX_SERVICE_PAGES`` requests) a tenant whose recent jobs fanned out
got short pages. Azurite does not stop at 1,000 rows: the fake counts the rows a query looks at
(``FakeStorage.rows_scanned``) and can stop where the service stops (``rows_per_scan``), so those checks run on the
fake only.

Chunk rows the code before wrote (a stage in flight across the deploy) are still read and written where they are;
``ChunkStore.move_legacy`` moves each once it can no longer change (a copy, then a delete on its ETag: two partitions,
no transaction holds both). Runs on the fake here and on Azurite in its twin
(tests/integration/core/test_chunk_rows_on_azurite.py).
"""

from __future__ import annotations

import gzip
import random
from typing import Any

import pytest

from shared.config.settings import Settings, get_settings
from shared.core.chunks import Chunk, ChunkStatus, chunk_partition, chunk_row, legacy_chunk_row
from shared.core.errors import EtagMismatch, NotFound
from shared.core.jobs import Status
from shared.core.lifecycle import Lifecycle
from shared.core.registry import default_registry
from shared.runtime.chunk_worker import ChunkWorker
from shared.runtime.protocol import AttemptSpec
from shared.runtime.reaper import Reaper
from shared.runtime.runner import AttemptResult, Lease
from shared.storage.chunk_store import ChunkStore
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, reaper, submit

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


def _fan_out_jobs(backend: Backend, jobs: int, chunks: int, *, legacy: bool = False,
                  status: ChunkStatus = ChunkStatus.PENDING) -> list[str]:
    ids = []
    for _ in range(jobs):
        j = submit(backend).job
        if legacy:
            _write_legacy(backend, _chunks(j.id, chunks, legacy=True, status=status))
        else:
            Lifecycle(backend.stores).create_chunks(TENANT, j.id, STAGE, _chunks(j.id, chunks, status=status))
        ids.append(j.id)
    return sorted(ids)  # newest first: the order a listing answers in


def test_a_job_listing_reads_no_chunk_row(backend: Backend) -> None:
    ids = _fan_out_jobs(backend, jobs=6, chunks=20)
    if backend.fake is not None:
        # A hundredth of the 1,000 rows a request may scan: with 20 chunk rows after each job row, the listing used to
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
    ids = _fan_out_jobs(backend, jobs=3, chunks=20, legacy=True, status=ChunkStatus.SUCCEEDED)
    if backend.fake is not None:
        backend.fake.rows_scanned = 0
    page, _ = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=3, cursor=None)
    assert [j.id for j in page] == ids  # the old rows are read (and filtered out by kind) until they are moved
    if backend.fake is not None:
        assert backend.fake.rows_scanned == 3 + 3 * 20  # every chunk row of the three jobs is looked at
    report = _store(backend).move_legacy(TENANT)
    assert (report.moved, report.cancelled, report.left) == (60, 0, 0)
    assert _store(backend).move_legacy(TENANT).moved == 0  # nothing left to move: running it again is harmless
    if backend.fake is not None:
        backend.fake.rows_scanned = 0
    page, _ = backend.stores.jobs.list(TENANT, status=None, pipeline=None, limit=3, cursor=None)
    assert [j.id for j in page] == ids
    if backend.fake is not None:
        assert backend.fake.rows_scanned == 3
    for job_id in ids:
        stage = backend.stores.chunks.list_stage(TENANT, job_id, STAGE)
        assert [(c.index, c.legacy, c.status) for c in stage] == [(i, False, ChunkStatus.SUCCEEDED) for i in range(20)]
        # Every property came along, the inline input too.
        moved = backend.stores.chunks.get(TENANT, job_id, STAGE, 7, with_input=True)
        assert moved.input_inline == INPUT and moved.of == 20 and moved.plan == "p" and moved.tenant == TENANT


def test_a_stage_costs_one_range_query_once_it_is_whole(backend: Backend) -> None:
    [job_id] = _fan_out_jobs(backend, jobs=1, chunks=5)
    before = _queries(backend)
    assert len(backend.stores.chunks.list_stage(TENANT, job_id, STAGE)) == 5
    assert _queries(backend) - before == 1
    assert backend.stores.chunks.table.get_entity(  # type: ignore[attr-defined]
        chunk_partition(TENANT, job_id), chunk_row(STAGE, 3))["index"] == 3
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
    runs and fans them in where they are; the migration may move the finished ones in the middle of the stage,
    which then lies in both layouts until its last chunks finish and a later run moves them too."""
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
        assert (report.moved, report.left) == (1, 3)  # the finished one; the job still runs the others
    for _ in range(3):
        assert (backend.deliver(worker.handle, chunks_queue) or "").startswith("succeeded")
    assert backend.deliver(worker.handle, chunks_queue) is None
    stage = backend.stores.chunks.list_stage(TENANT, j.id, STAGE)
    assert [c.status for c in stage] == [ChunkStatus.SUCCEEDED] * 4
    assert [c.legacy for c in stage] == [True] * 4 if moved == "never" else [False, True, True, True]
    after = job(backend, j.id)
    assert after.status == Status.WAITING and after.fan_ins == 1 and after.fan_in_at is not None  # resume sent
    assert _store(backend).move_legacy(TENANT).moved == 4 - (moved == "mid-stage")
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, j.id, STAGE)] == [False] * 4


def test_a_chunk_of_a_job_still_going_stays_where_it_is_until_it_has_finished(backend: Backend) -> None:
    j = submit(backend).job
    _write_legacy(backend, _chunks(j.id, 2, legacy=True, status=ChunkStatus.QUEUED))
    assert (_store(backend).move_legacy(TENANT).left) == 2
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.chunks.get(TENANT, j.id, STAGE, 0), 1)
    assert claimed.applied and claimed.row.legacy  # claimed where it is
    report = _store(backend).move_legacy(TENANT)
    assert (report.moved, report.left) == (0, 2)  # running: still changing
    held = backend.stores.chunks.update(claimed.row, status=ChunkStatus.SUCCEEDED)
    report = _store(backend).move_legacy(TENANT)
    assert (report.moved, report.left) == (1, 1)
    # A writer still holding the old row (no transition writes a finished chunk; this is the store's own guard)
    # finds it gone: changed since read, so it would re-read and find the moved row.
    with pytest.raises(EtagMismatch):
        backend.stores.chunks.update(held, processed=1)
    assert not backend.stores.chunks.get(TENANT, j.id, STAGE, 0).legacy


def test_never_started_chunks_of_an_ended_job_are_cancelled_in_place_then_moved(backend: Backend) -> None:
    j = submit(backend).job
    _write_legacy(backend, _chunks(j.id, 3, legacy=True, status=ChunkStatus.QUEUED)[:2]
                  + _chunks(j.id, 3, legacy=True, status=ChunkStatus.PENDING)[2:])
    assert Lifecycle(backend.stores).cancel(job(backend, j.id)).row.status == Status.CANCELLED
    store = _store(backend)
    stale = store.table.get_entity(TENANT, legacy_chunk_row(j.id, STAGE, 0))
    # A delivery of chunk 0 cancels it first (what the chunk worker does for a chunk of an ended job): the
    # migration's cancel, conditional on the row it read, loses, is planned again on the fresh row and finds it
    # finished (not cancelled by the migration): this run moves it.
    assert Lifecycle(backend.stores).cancel(backend.stores.chunks.get(TENANT, j.id, STAGE, 0)).applied
    found = store._cancel_in_place(stale, Chunk.from_entity(stale))  # planned again on the fresh row: finished
    assert found is not None and found[0]["status"] == "cancelled" and found[1] is False
    report = store.move_legacy(TENANT)
    assert (report.moved, report.cancelled, report.left) == (3, 2, 0)
    stage = backend.stores.chunks.list_stage(TENANT, j.id, STAGE)
    assert [(c.status, c.legacy) for c in stage] == [(ChunkStatus.CANCELLED, False)] * 3


def test_a_move_cut_off_between_its_copy_and_its_delete_is_finished_by_the_next_run(backend: Backend) -> None:
    j = submit(backend).job
    _write_legacy(backend, _chunks(j.id, 2, legacy=True, status=ChunkStatus.SUCCEEDED))
    store = _store(backend)
    old = store.table.get_entity(TENANT, legacy_chunk_row(j.id, STAGE, 1))
    store.table.create_entity({**dict(old), "PartitionKey": chunk_partition(TENANT, j.id),
                               "RowKey": chunk_row(STAGE, 1)})  # the copy, and no delete
    stage = backend.stores.chunks.list_stage(TENANT, j.id, STAGE)
    assert [(c.index, c.legacy) for c in stage] == [(0, True), (1, False)]  # each chunk once: the copy wins
    report = store.move_legacy(TENANT)
    assert (report.moved, report.left) == (2, 0)
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, j.id, STAGE)] == [False, False]
    assert store.move_legacy(TENANT).moved == 0


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
    ids = _fan_out_jobs(backend, jobs=2, chunks=3, legacy=True, status=ChunkStatus.SUCCEEDED)
    [going] = _fan_out_jobs(backend, jobs=1, chunks=1, legacy=True, status=ChunkStatus.RUNNING)
    assert backend.stores.jobs.index_state().chunks_moved_at is None
    assert Reaper(backend.stores, sweep=False).run().chunk_rows_moved == 0  # an index run never looks
    report = Reaper(backend.stores, sweep=True).run()
    assert report.chunk_rows_moved == 6 and report.errors == 0, report.summary()
    assert backend.stores.jobs.index_state().chunks_moved_at is None  # one left: the next sweep looks again
    for job_id in ids:
        assert {c.legacy for c in backend.stores.chunks.list_stage(TENANT, job_id, STAGE)} == {False}
    [running] = backend.stores.chunks.list_stage(TENANT, going, STAGE)
    backend.stores.chunks.update(running, status=ChunkStatus.SUCCEEDED)
    assert Reaper(backend.stores, sweep=True).run().chunk_rows_moved == 1
    assert backend.stores.jobs.index_state().chunks_moved_at is not None
    # Recorded: later sweeps do not read the tenants' job rows for it again (a row written after is still read).
    [late] = _fan_out_jobs(backend, jobs=1, chunks=1, legacy=True, status=ChunkStatus.SUCCEEDED)
    assert Reaper(backend.stores, sweep=True).run().chunk_rows_moved == 0
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, late, STAGE)] == [True]


def test_chunk_rows_tenant_writes_where_the_code_before_reads_and_the_sweep_leaves_them(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first deploy beside instances of the code before (CHUNK_ROWS=tenant): new stages go to the layout they
    read, and nothing is moved away from them; once every instance reads both (CHUNK_ROWS=job), the sweep moves."""
    monkeypatch.setenv("CHUNK_ROWS", "tenant")
    get_settings.cache_clear()
    [job_id] = _fan_out_jobs(backend, jobs=1, chunks=3, status=ChunkStatus.SUCCEEDED)
    table = _store(backend).table
    assert table.get_entity(TENANT, legacy_chunk_row(job_id, STAGE, 1))["index"] == 1  # where the code before looks
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, job_id, STAGE)] == [True] * 3
    assert Reaper(backend.stores, sweep=True).run().chunk_rows_moved == 0
    assert backend.stores.jobs.index_state().chunks_moved_at is None
    monkeypatch.setenv("CHUNK_ROWS", "job")
    get_settings.cache_clear()
    assert Reaper(backend.stores, sweep=True).run().chunk_rows_moved == 3
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, job_id, STAGE)] == [False] * 3


def test_an_unreadable_row_of_the_layout_before_is_left_and_does_not_keep_the_sweep_looking(backend: Backend) -> None:
    [job_id] = _fan_out_jobs(backend, jobs=1, chunks=2, legacy=True, status=ChunkStatus.SUCCEEDED)
    _store(backend).table.create_entity({"PartitionKey": TENANT, "RowKey": legacy_chunk_row(job_id, STAGE, 2),
                                         "kind": "chunk", "job_id": job_id, "stage": STAGE, "status": "bogus"})
    report = _store(backend).move_legacy(TENANT)
    assert (report.moved, report.left, report.unreadable) == (2, 0, 1)
    assert Reaper(backend.stores, sweep=True).run().errors == 0
    assert backend.stores.jobs.index_state().chunks_moved_at is not None


def test_the_reaper_recovers_a_stale_chunk_of_the_layout_before_where_it_is(backend: Backend) -> None:
    """A chunk of the layout before whose worker died: the index run (the stage's range query of both layouts) and
    the sweep (its cross-partition scans) find it, and its reap is written where it is."""
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed.applied
    _write_legacy(backend, _chunks(j.id, 1, legacy=True, status=ChunkStatus.QUEUED))
    assert life.suspend(claimed.row, STAGE).applied
    assert life.claim(backend.stores.chunks.get(TENANT, j.id, STAGE, 0), 1).applied  # its worker dies
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
    report = reaper(backend).run()
    assert report.chunks_requeued == [f"{j.id}/{STAGE}/0"], report.summary()
    chunk = backend.stores.chunks.get(TENANT, j.id, STAGE, 0)
    assert chunk.legacy and chunk.status == ChunkStatus.QUEUED and chunk.attempts == 1


# -- review44j: readers racing the sweep's move ----------------------------------------------------------------------
def _move_between_reads(monkeypatch: pytest.MonkeyPatch, store: ChunkStore, method: str) -> list[int]:
    """Run ``move_legacy`` (another process's sweep) right after the store's first read at the new key or range has
    come back, before it looks at the layout before: the window in which a moving row is in neither read."""
    original = getattr(store, method)
    moved: list[int] = []

    def read(partition: str, *args: Any) -> Any:
        try:
            return original(partition, *args)
        finally:  # a point read that found nothing raises NotFound
            if "~" in partition and not moved:
                moved.append(store.move_legacy(TENANT).moved)

    monkeypatch.setattr(store, method, read)
    return moved


def test_a_fan_in_racing_the_move_sees_every_chunk_of_its_stage(backend: Backend,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage of 3 across the deploy, error budget 50%: chunk 0 failed and was moved by an earlier sweep, chunks 1
    and 2 ran in the layout before. Chunk 2's finisher lists the stage to fan in while a sweep moves 1 and 2 between
    its two range queries. Before review44j the listing was [chunk 0] alone: 1 of 1 items failed, over the budget,
    and the job failed, where 1 of 3 is within it."""
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed.applied
    rows = [c.with_changes(budget=0.5) for c in _chunks(j.id, 3, legacy=True)]
    _write_legacy(backend, [rows[0].with_changes(status=ChunkStatus.FAILED), rows[1].with_changes(
        status=ChunkStatus.RUNNING), rows[2].with_changes(status=ChunkStatus.RUNNING)])
    assert _store(backend).move_legacy(TENANT).moved == 1  # chunk 0, finished
    assert life.suspend(claimed.row, STAGE).applied  # waits for chunks 1 and 2
    for index in (1, 2):
        row = backend.stores.chunks.get(TENANT, j.id, STAGE, index)
        assert row.legacy
        backend.stores.chunks.update(row, status=ChunkStatus.SUCCEEDED)
    moved = _move_between_reads(monkeypatch, _store(backend), "_range")
    check = life.refill_or_fan_in(TENANT, j.id, STAGE)
    assert moved == [2]
    assert check.value == "fired", check
    after = job(backend, j.id)
    assert after.status == Status.WAITING and after.fan_in_at is not None


def test_a_point_read_racing_the_move_finds_the_chunk(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Missed at the new key (not moved yet), then at the old one (moved since): before review44j a NotFound for a
    chunk that exists, which a re-read deciding a lifecycle write raised instead of deciding."""
    [job_id] = _fan_out_jobs(backend, jobs=1, chunks=1, legacy=True, status=ChunkStatus.SUCCEEDED)
    moved = _move_between_reads(monkeypatch, _store(backend), "_point")
    chunk = backend.stores.chunks.get(TENANT, job_id, STAGE, 0)
    assert moved == [1]
    assert not chunk.legacy and chunk.status == ChunkStatus.SUCCEEDED


def test_a_stage_found_in_neither_layout_costs_three_queries(backend: Backend) -> None:
    before = _queries(backend)
    assert backend.stores.chunks.list_stage(TENANT, "0" * 28, STAGE) == []
    assert _queries(backend) - before == 3  # new, old, new: a stage moved whole in between is not missed


@pytest.mark.parametrize("mode", ["drop", "commit-5xx"])
def test_a_cancel_in_place_whose_answer_is_lost_is_decided_by_re_reading(backend: Backend, mode: str) -> None:
    """The migration's cancel of a never-started chunk of an ended job commits and its answer is lost (``drop``: the
    SDK does not retry a MERGE) or its SDK retry comes back 412 (``commit-5xx``). Before review44j the first made the
    tenant's move raise, so the sweep was not recorded and ran its table scans again minutes later; the second left
    the chunk in the layout before until the next day's sweep. Re-read, the row shows the cancel's own op."""
    j = submit(backend).job
    _write_legacy(backend, _chunks(j.id, 2, legacy=True, status=ChunkStatus.QUEUED))
    assert Lifecycle(backend.stores).cancel(job(backend, j.id)).row.status == Status.CANCELLED
    backend.faults.arm("table", mode, method="MERGE", contains='"status":"cancelled"')
    report = Reaper(backend.stores, sweep=True).run()
    assert [m for _, _, m in backend.faults.log] == [mode]
    assert report.errors == 0 and report.chunk_rows_moved == 2, report.summary()
    assert backend.stores.jobs.index_state().chunks_moved_at is not None
    stage = backend.stores.chunks.list_stage(TENANT, j.id, STAGE)
    assert [(c.status, c.legacy) for c in stage] == [(ChunkStatus.CANCELLED, False)] * 2


# -- review44j: the service's 4 MiB per transaction -----------------------------------------------------------------
def _big(job_id: str, n: int, *, legacy: bool, status: ChunkStatus) -> list[Chunk]:
    """Chunks with 40 KiB of inline input each (incompressible, as a gzip is): 100 of them are 5.5 MB of base64."""
    rng = random.Random(0)
    return [c.with_changes(input_inline=rng.randbytes(40 * 1024))
            for c in _chunks(job_id, n, legacy=legacy, status=status)]


def test_a_stage_of_100_chunks_with_large_inline_inputs_is_created_in_transactions_under_4_mib(
    backend: Backend
) -> None:
    """Before review44j ``create_all`` sent the 100 chunks in one transaction, which the service refuses over 4 MiB
    (413 RequestBodyTooLarge, a StorageError: the stage could never be created). Azurite accepts it; the fake
    refuses it as the service does."""
    j = submit(backend).job
    Lifecycle(backend.stores).create_chunks(TENANT, j.id, STAGE, _big(j.id, 100, legacy=False,
                                                                       status=ChunkStatus.PENDING))
    stage = backend.stores.chunks.list_stage(TENANT, j.id, STAGE)
    assert [c.index for c in stage] == list(range(100))
    assert backend.stores.chunks.get(TENANT, j.id, STAGE, 99, with_input=True).input_inline == _big(
        j.id, 100, legacy=False, status=ChunkStatus.PENDING)[99].input_inline


def test_moving_100_rows_with_large_inline_inputs_keeps_each_transaction_under_4_mib(backend: Backend) -> None:
    """Before review44j the copy of 100 such rows was one transaction: refused (413), so the tenant's move raised
    every sweep, no sweep was recorded (its table scans ran again every few minutes) and the rows never moved."""
    j = submit(backend).job
    _write_legacy(backend, _big(j.id, 100, legacy=True, status=ChunkStatus.SUCCEEDED))
    report = Reaper(backend.stores, sweep=True).run()
    assert report.errors == 0 and report.chunk_rows_moved == 100, report.summary()
    assert backend.stores.jobs.index_state().chunks_moved_at is not None
    assert {c.legacy for c in backend.stores.chunks.list_stage(TENANT, j.id, STAGE)} == {False}


def test_chunk_rows_tenant_set_again_after_the_move_was_recorded_has_its_rows_moved_once_unset(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move was recorded (no later sweep looks); then a deploy beside code that reads only the layout before sets
    CHUNK_ROWS=tenant again and new stages go there. Before review44j they were never moved: every listing of those
    tenants scanned them until retention. A sweep under CHUNK_ROWS=tenant now clears the record."""
    assert Reaper(backend.stores, sweep=True).run().errors == 0
    assert backend.stores.jobs.index_state().chunks_moved_at is not None
    monkeypatch.setenv("CHUNK_ROWS", "tenant")
    get_settings.cache_clear()
    [job_id] = _fan_out_jobs(backend, jobs=1, chunks=2, status=ChunkStatus.SUCCEEDED)
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, job_id, STAGE)] == [True] * 2
    assert Reaper(backend.stores, sweep=True).run().chunk_rows_moved == 0
    assert backend.stores.jobs.index_state().chunks_moved_at is None
    monkeypatch.setenv("CHUNK_ROWS", "job")
    get_settings.cache_clear()
    assert Reaper(backend.stores, sweep=True).run().chunk_rows_moved == 2
    assert backend.stores.jobs.index_state().chunks_moved_at is not None
    assert [c.legacy for c in backend.stores.chunks.list_stage(TENANT, job_id, STAGE)] == [False] * 2


def test_chunk_rows_tenant_reads_a_stage_and_a_chunk_where_it_writes_them_first(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under CHUNK_ROWS=tenant a chunk read cost two point reads before review44j (the new key, empty, first) and a
    stage two range queries; now one each, and a stage split across the layouts is still read whole."""
    monkeypatch.setenv("CHUNK_ROWS", "tenant")
    get_settings.cache_clear()
    [job_id] = _fan_out_jobs(backend, jobs=1, chunks=3, status=ChunkStatus.SUCCEEDED)
    reads = backend.ops()
    before = (reads.get("table:get", 0), _queries(backend))
    chunk = backend.stores.chunks.get(TENANT, job_id, STAGE, 1)
    assert [c.index for c in backend.stores.chunks.list_stage(TENANT, job_id, STAGE)] == [0, 1, 2]
    assert chunk.legacy and (backend.ops().get("table:get", 0) - before[0], _queries(backend) - before[1]) == (1, 1)
    # A stage split across the layouts (its finished chunks moved, the last still running where it was written).
    monkeypatch.setenv("CHUNK_ROWS", "job")
    get_settings.cache_clear()
    [split] = _fan_out_jobs(backend, jobs=1, chunks=0, legacy=True)
    _write_legacy(backend, _chunks(split, 4, legacy=True, status=ChunkStatus.SUCCEEDED)[:3]
                  + _chunks(split, 4, legacy=True, status=ChunkStatus.RUNNING)[3:])
    assert _store(backend).move_legacy(TENANT).moved == 3 + 3
    monkeypatch.setenv("CHUNK_ROWS", "tenant")
    get_settings.cache_clear()
    assert not backend.stores.chunks.get(TENANT, split, STAGE, 1).legacy  # moved: found at the new key next
    assert [(c.index, c.legacy) for c in backend.stores.chunks.list_stage(TENANT, split, STAGE)] == [
        (0, False), (1, False), (2, False), (3, True)]


def _expired_with_legacy_rows(backend: Backend) -> str:
    """A finished job whose two chunk rows are of the layout before (finished too, so the move may take them)."""
    from shared.core.jobs import JobError
    from shared.core.lifecycle import Ending

    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1).row
    assert life.finish(claimed, Ending(Status.FAILED, JobError.of("X", "y"))).applied
    _write_legacy(backend, _chunks(j.id, 2, legacy=True, status=ChunkStatus.SUCCEEDED))
    return j.id


def _expire(backend: Backend, job_id: str) -> bool:
    from datetime import timedelta

    from shared.core.jobs import utcnow
    from shared.core.names import job_prefix

    return Lifecycle(backend.stores).expire(job(backend, job_id), job_prefix(TENANT, job_id),
                                            utcnow() + timedelta(seconds=1), moving=True)


def _rows_of(backend: Backend, job_id: str) -> list[str]:
    table = _store(backend).table
    return sorted(str(e["RowKey"]) for e in table.query_entities(
        "PartitionKey eq @pk", parameters={"pk": chunk_partition(TENANT, job_id)}))


def test_a_move_whose_job_was_expired_while_it_held_the_rows_deletes_its_copies(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sweeps at once (platform45): one's move has read the rows, the other's retention deletes the job whole,
    then the move copies. The copies had no job and nothing deleted them; now the move reads the job's row after
    its copies and deletes them when it is gone."""
    j = _expired_with_legacy_rows(backend)
    store = _store(backend)
    real = store._move
    expired: list[bool] = []

    def retention_first(rows: list[Any]) -> int:
        if not expired:
            expired.append(_expire(backend, j))  # the other sweep, between this move's query and its copy
        return real(rows)

    monkeypatch.setattr(store, "_move", retention_first)
    store.move_legacy(TENANT)
    assert expired == [True]
    with pytest.raises(NotFound):
        job(backend, j)
    assert _rows_of(backend, j) == []


def test_a_copy_made_after_retentions_look_and_before_the_jobs_row_went_is_deleted_by_retention(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order: the move read the rows before retention looked, copies after that look, and reads the job's
    row before retention deletes it. Retention looks at the job's partition again after the row (while the move
    runs), and the copies go then."""
    j = _expired_with_legacy_rows(backend)
    store = _store(backend)
    held = list(store.table.query_entities(
        "PartitionKey eq @pk and RowKey lt @end and kind eq @kind",
        parameters={"pk": TENANT, "end": "~", "kind": "chunk"}))  # the move's query, before retention
    assert len(held) == 2
    delete = backend.stores.jobs.delete
    moved: list[int] = []

    def move_first(row: Any) -> None:
        if not moved:
            moved.append(store._move(held))  # copies, old rows already gone (404), the job's row still there
            assert len(_rows_of(backend, j)) == 2
        delete(row)

    monkeypatch.setattr(backend.stores.jobs, "delete", move_first)
    assert _expire(backend, j)
    assert moved and _rows_of(backend, j) == []
