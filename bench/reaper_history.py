"""Storage cost of the reaper against history: an index run against the number of tenants that ever submitted, and
the daily sweep's listing for orphaned blobs against the number of retained jobs. Counted on the in-memory fake.

    .venv/bin/python bench/reaper_history.py [--tenants 1,10,100,1000] [--retained 1,100,1000,3000]

Prints, for the code it is run from (run it from a checkout of the code before to get the numbers before):

* an index run (``Reaper(sweep=False)``) after N tenants each ran one job that finished: billable storage
  requests, once the history is settled (the first run after the jobs takes idle tenants off the busy tenants);
  and the same with one job running;
* the daily sweep (``Reaper(sweep=True)``) a day after the last one, with N retained jobs (a result blob and a
  claim-checked input each, written days before): blob names listed, and listing requests at the service's page
  of 5,000 names.

Counts, not times: requests are what Azure bills, and they are exact on the fake (held to Azurite's answers by
tests/unit/contract). No speed numbers, so no CPU line is needed; it is printed anyway with the load.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# bench/platform.py shadows the stdlib ``platform`` module, which the SDKs import: take this folder off the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = Path(os.environ.get("THEMATIQ_ROOT", _HERE.parent))
sys.path.insert(0, str(ROOT))

os.environ.setdefault("AzureWebJobsStorage", "UseDevelopmentStorage=true")
os.environ.setdefault("RETENTION_DAYS", "30")

from shared.config.constants import REAPER_SWEEP_SECONDS  # noqa: E402
from shared.config.settings import get_settings  # noqa: E402
from shared.core import names  # noqa: E402
from shared.core.jobs import JobError, Status, set_clock  # noqa: E402
from shared.core.lifecycle import Ending, Lifecycle  # noqa: E402
from shared.core.ports import Stores  # noqa: E402
from shared.observability.metering import TransactionMeter  # noqa: E402
from shared.runtime.reaper import Reaper  # noqa: E402
from shared.storage.blobs import BlobStore  # noqa: E402
from shared.storage.chunk_store import ChunkStore  # noqa: E402
from shared.storage.fake import FakeClock, FakeStorage  # noqa: E402
from shared.storage.job_store import JobStore  # noqa: E402
from shared.storage.queues import Queues  # noqa: E402

_BODY = json.dumps({"pipeline": "echo", "params": {}, "input": [1]}).encode()
PAGE = 5000  # names per blob listing request (the service's maximum)


def cpu() -> str:
    model, flags = "?", ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and model == "?":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = " ".join(f for f in line.split(":", 1)[1].split() if f in ("avx2", "avx512f", "fma"))
    return f"{model} [{flags}]; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"


def platform_on_fake() -> tuple[FakeStorage, Stores]:
    clock = FakeClock()
    fake = FakeStorage(clock)
    set_clock(clock.now)
    s = get_settings()
    stores = Stores(
        jobs=JobStore(table=fake.table(s.jobs_table)),
        chunks=ChunkStore(table=fake.table(s.jobs_table)),
        messages=Queues(queue_for=lambda name: fake.queue(name or s.jobs_queue)),
        blobs=BlobStore(container=fake.container(s.results_container)),
    )
    return fake, stores


def counted(fake: FakeStorage, run: Callable[[], Any]) -> int:
    fake.reset_ops()
    run()
    return TransactionMeter.billable(fake.ops())


def index_run_ops(tenants: int) -> tuple[int, int]:
    """(idle, with one job running): billable requests of a settled index run after ``tenants`` tenants' history."""
    from shared.api.service import JobService

    fake, stores = platform_on_fake()
    life, service = Lifecycle(stores), JobService(stores)
    for i in range(tenants):
        tenant = f"t-{i:05d}"
        j = service.submit(tenant, _BODY, None).job
        claimed = life.claim(stores.jobs.get(tenant, j.id, with_input=True), 1).row
        life.finish(claimed, Ending(Status.FAILED, JobError.of("X", "y")))
    Reaper(stores, sweep=True).run()  # a first sweep (records what it records), then a settling index run
    fake.clock.advance(3600 + 1)  # past BUSY_STALE_SECONDS: an idle tenant's mark is old enough to be taken off
    Reaper(stores, sweep=False).run()
    idle = counted(fake, lambda: Reaper(stores, sweep=False).run())
    j = service.submit("t-00000", _BODY, None).job
    life.claim(stores.jobs.get("t-00000", j.id, with_input=True), 1)
    Reaper(stores, sweep=False).run()
    running = counted(fake, lambda: Reaper(stores, sweep=False).run())
    return idle, running


def sweep_listing(retained: int) -> tuple[int, int, int]:
    """(names listed, listing requests at 5,000 a page, billable requests) of the daily sweep a day after the last,
    with ``retained`` finished jobs whose blobs were written days before."""
    from shared.api.service import JobService

    fake, stores = platform_on_fake()
    dated: Callable[..., str] | None = getattr(names, "dated_input_blob_name", None)
    life, service = Lifecycle(stores), JobService(stores)
    for _ in range(retained):
        j = service.submit("acme", _BODY, None).job  # an inline input: the blob below stands for a large one
        life.finish(life.claim(stores.jobs.get("acme", j.id, with_input=True), 1).row, Ending(Status.SUCCEEDED))
        stores.blobs.put(names.result_blob_name("acme", j.id, 1), b"{}")
        stores.blobs.put(dated("acme", j.id, j.created_at) if dated else names.input_blob_name("acme", j.id), b"x")
    fake.clock.advance(3 * 86400)
    Reaper(stores, sweep=True).run()  # the sweep before (and, from platform45 on, the one full listing)
    fake.clock.advance(REAPER_SWEEP_SECONDS)
    listed: list[int] = []
    written = stores.blobs.written

    def spy(*args: Any) -> Any:
        out = written(*args)
        listed.append(len(out))
        return out

    stores.blobs.written = spy  # type: ignore[method-assign]
    ops = counted(fake, lambda: Reaper(stores, sweep=True).run())
    return sum(listed), sum(max(1, math.ceil(n / PAGE)) for n in listed), ops


def main() -> int:
    logging.disable(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", default="1,10,100,1000")
    parser.add_argument("--retained", default="1,100,1000,3000")  # the fake slows past a few thousand
    args = parser.parse_args()
    print(f"code: {ROOT}; cpu: {cpu()}")
    print("\nindex run (every 5 minutes): billable storage requests after N tenants' history")
    print("| tenants that ever submitted | idle | one job running |\n|---|---|---|")
    for n in (int(x) for x in args.tenants.split(",")):
        idle, running = index_run_ops(n)
        print(f"| {n} | {idle} | {running} |", flush=True)
    print("\ndaily sweep a day after the last: the orphan listing against retained jobs (2 blobs each)")
    print("| retained jobs | blob names listed | listing requests (5,000 a page) | sweep's billable requests |")
    print("|---|---|---|---|")
    for n in (int(x) for x in args.retained.split(",")):
        listed, pages, ops = sweep_listing(n)
        print(f"| {n} | {listed} | {pages} | {ops} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
