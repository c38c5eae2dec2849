"""One row that cannot be read (a hand-edited entity) does not make a tenant's job list or a waiting job a 500.

The reaper already logs and skips such rows (its scans, its index, a stage's chunks); the API read them as they
came. Runs on the fake here and on Azurite in its twin (tests/integration/core/…_on_azurite.py).
"""

from __future__ import annotations

from shared.core.chunks import Chunk, ChunkStatus, chunk_partition, chunk_row
from shared.core.jobs import Status
from shared.core.lifecycle import Lifecycle
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, service, submit

#: A job id sorting before every real one (ids start with inverted milliseconds): the newest row of the listing.
_ODD_ID = "0" * 28


def test_an_unreadable_job_row_is_left_out_of_the_list(backend: Backend) -> None:
    """It used to fail the whole listing (``Status('bogus')``: ValueError, a 500), on every page that reached it."""
    good = submit(backend).job
    table = backend.stores.jobs.table  # type: ignore[attr-defined]
    table.create_entity({"PartitionKey": TENANT, "RowKey": _ODD_ID, "kind": "job", "pipeline": "echo",
                         "status": "bogus"})
    jobs, _ = service(backend).list(TENANT, {})
    assert [j.id for j in jobs] == [good.id]
    jobs, _ = service(backend).list(TENANT, {"status": "queued"})
    assert [j.id for j in jobs] == [good.id]


def test_a_waiting_job_whose_stage_has_an_unreadable_chunk_row_is_answered(backend: Backend) -> None:
    """GET of a waiting job sums its stage's chunks; a chunk row that cannot be read used to make it a 500."""
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed.applied
    life.create_chunks(TENANT, j.id, "s", [Chunk(TENANT, j.id, "s", 0, ChunkStatus.PENDING, 1, "m:f", of=2, plan="p")])
    assert life.suspend(claimed.row, "s").applied
    table = backend.stores.chunks.table  # type: ignore[attr-defined]
    table.create_entity({"PartitionKey": chunk_partition(TENANT, j.id), "RowKey": chunk_row("s", 1), "kind": "chunk",
                         "job_id": j.id, "stage": "s", "index": 1, "status": "bogus"})
    seen = service(backend).get(TENANT, j.id)
    assert seen.status == Status.WAITING
