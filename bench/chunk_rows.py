"""Storage cost of the chunk key layout: the layout before (chunk rows in the tenant's partition, right after their
job's row) against chunk partitions per job, counted on the in-memory fake with the real service's scan budget.

    .venv/bin/python bench/chunk_rows.py [--jobs 60] [--chunks 200] [--limit 50]

For one tenant with ``--jobs`` finished fan-out jobs of ``--chunks`` chunks each, prints per layout:

* ``GET /api/jobs?limit=N`` (``JobStore.list``): service requests, rows the service looks at, jobs on the first
  page, and requests to page through every job;
* the reaper's fetch of active jobs (``JobStore.active``, an ``or`` of RowKeys, which the service answers by
  scanning the partition): rows looked at, with 14 jobs running;
* per chunk: a point read, a stage listing, retention of one job; and what ``ChunkStore.move_legacy`` costs.

Counts, not times: requests and rows are what Azure bills and throttles, and they are exact on the fake (held to
Azurite's answers by tests/unit/contract). The fake stops a request after ``rows_per_scan`` (1,000) rows looked
at, as the service does; Azurite does not, which is why this runs on the fake.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

# bench/platform.py shadows the stdlib ``platform`` module, which the SDKs import: take this folder off the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
sys.path.insert(0, str(ROOT))

import platform  # noqa: E402

os.environ.setdefault("AzureWebJobsStorage", "UseDevelopmentStorage=true")

from shared.core.chunks import Chunk, ChunkStatus  # noqa: E402
from shared.core.jobs import Job, Status, new_job_id, utcnow  # noqa: E402
from shared.storage.chunk_store import ChunkStore  # noqa: E402
from shared.storage.fake import FakeStorage  # noqa: E402
from shared.storage.job_store import JobStore, active_row_key  # noqa: E402

TENANT = "acme"


def cpu() -> str:
    model, flags = platform.processor() or "?", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model in ("?", "x86_64", ""):
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                wanted = ("avx2", "avx512f", "avx512_vnni", "fma", "sse4_2")
                flags = " ".join(f for f in line.split(":", 1)[1].split() if f in wanted)
    except OSError:
        pass
    return f"{model} [{flags}]"


def build(legacy: bool, jobs: int, chunks: int) -> tuple[FakeStorage, JobStore, ChunkStore, list[str]]:
    fake = FakeStorage()
    table = fake.table("jobs")
    job_store, chunk_store = JobStore(table), ChunkStore(table)
    ids: list[str] = []
    now = utcnow()
    for n in range(jobs):
        job_id = new_job_id(1_800_000_000_000 + n)
        status = Status.RUNNING if n >= jobs - 14 else Status.SUCCEEDED
        job_store.create(Job(tenant=TENANT, id=job_id, pipeline="echo", status=status, params={}, created_at=now,
                             available_at=now, max_attempts=3, input_inline=b"[1]"))
        if status.terminal:
            table.delete_entity(TENANT, active_row_key(job_id))  # a finished job has no active-index row
        rows = [Chunk(TENANT, job_id, "embed", i, ChunkStatus.SUCCEEDED, 10, "m:f", of=chunks, legacy=legacy)
                for i in range(chunks)]
        if legacy:
            for start in range(0, chunks, 100):  # as the code before wrote them: batches in the tenant's partition
                table.submit_transaction([("create", c.to_entity()) for c in rows[start:start + 100]])
        else:
            chunk_store.create_all(rows)
        ids.append(job_id)
    fake.rows_per_scan = 1000
    fake.reset_ops()
    return fake, job_store, chunk_store, sorted(ids)


def counted(fake: FakeStorage, fn: Any) -> tuple[Any, int, int, int]:
    fake.reset_ops()
    out = fn()
    ops = fake.ops()
    return out, ops["table:query"] + ops["table:get"], ops["table:batch"] + ops["table:insert"] + ops["table:delete"] \
        + ops["table:merge"], fake.rows_scanned


def listing(job_store: JobStore, limit: int) -> tuple[int, int]:
    page, cursor = job_store.list(TENANT, status=None, pipeline=None, limit=limit, cursor=None)
    first = len(page)
    while cursor:
        page, cursor = job_store.list(TENANT, status=None, pipeline=None, limit=limit, cursor=cursor)
    return first, 0


def report(name: str, legacy: bool, args: argparse.Namespace) -> None:
    fake, jobs, chunks, ids = build(legacy, args.jobs, args.chunks)
    print(f"\n{name}: {args.jobs} jobs x {args.chunks} chunks in tenant {TENANT!r}")
    (page, _), reads, _, scanned = counted(
        fake, lambda: (len(jobs.list(TENANT, status=None, pipeline=None, limit=args.limit, cursor=None)[0]), 0))
    print(f"  GET /api/jobs?limit={args.limit}, first page: {reads} requests, {scanned} rows looked at, {page} jobs")
    _, reads, _, scanned = counted(fake, lambda: listing(jobs, args.limit))
    print(f"  every page of the listing: {reads} requests, {scanned} rows looked at")
    active, reads, _, scanned = counted(fake, lambda: list(jobs.active([TENANT], lambda t, e: None)))
    print(f"  reaper's fetch of active jobs ({len(active)} running): {reads} requests, {scanned} rows looked at")
    job_id = ids[0]
    _, reads, _, scanned = counted(fake, lambda: chunks.get(TENANT, job_id, "embed", 7))
    print(f"  a chunk's point read: {reads} requests")
    _, reads, _, scanned = counted(fake, lambda: chunks.list_stage(TENANT, job_id, "embed"))
    print(f"  a stage listing: {reads} requests, {scanned} rows looked at")
    _, reads, writes, scanned = counted(fake, lambda: chunks.delete_job_chunks(TENANT, ids[1]))
    print(f"  retention of one job's chunks: {reads} queries, {writes} writes, {scanned} rows looked at")
    if legacy:
        moved, reads, writes, scanned = counted(fake, lambda: chunks.move_legacy(TENANT))
        print(f"  move_legacy: moved {moved.moved}, left {moved.left}: {reads} reads ({scanned} rows looked at), "
              f"{writes} writes")
        (page, _), reads, _, scanned = counted(
            fake, lambda: (len(jobs.list(TENANT, status=None, pipeline=None, limit=args.limit, cursor=None)[0]), 0))
        print(f"  after the move, GET /api/jobs?limit={args.limit}: {reads} requests, {scanned} rows looked at, "
              f"{page} jobs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--limit", type=int, default=50)
    args = parser.parse_args()
    print(f"cpu: {cpu()} (counts only; no timing here)")
    report("layout before (tenant partition, {job}~c~{stage}~{index})", True, args)
    report("chunk partitions ({tenant}~{job}, {stage}~{index})", False, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
