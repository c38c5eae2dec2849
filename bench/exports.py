"""How long ``?format=xlsx`` (and ``csv``) of a large thematic job takes, and how much memory it peaks at.

    .venv/bin/python bench/exports.py                 # 20,000 responses (issue 23's target: < 10 s, < 300 MB)
    .venv/bin/python bench/exports.py --n 50000 --formats xlsx

The job is synthetic (tests/support/synthetic_result.py: 8 themes with sub-themes, 3 metadata keys, sentiment,
a breakdown and an impact table) but goes through the real code path: submitted with ``JobService.submit`` (so
its input is claim-checked in the blob store as in production), its result stored in a blob as the worker does,
and the download made with ``JobService.result(..., fmt)``, which reads the row and both blobs and runs the
exporter. Storage is the in-memory fake, so the numbers are the API's own work, not Azurite's.

Each format runs in a fresh child process. Its peak RSS is read from ``VmHWM`` after resetting it (``5`` to
``/proc/self/clear_refs``) just before the export, so the peak is the export's alone on top of the process's
resident baseline (interpreter, pydantic, the SDKs, the built job), which is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# Run as a script, bench/ is sys.path[0], and bench/platform.py would shadow the standard library's platform
# (imported by uuid, which the child imports later).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parent.parent


def _machine() -> str:
    info = Path("/proc/cpuinfo").read_text()
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), []))
    wanted = [f for f in ("avx2", "avx512_vnni", "avx_vnni") if f in flags]
    load = Path("/proc/loadavg").read_text().split()[:3]
    return f"cpu: {model}; cores {os.cpu_count()}; flags {' '.join(wanted) or 'none of avx2/avx512_vnni/avx_vnni'}; " \
           f"load {' '.join(load)}"


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(n: int, fmt: str) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DEFAULT_TENANT", "bench")
    os.environ["MAX_INPUT_BYTES"] = str(200 * 1024 * 1024)
    from shared.api.service import JobService
    from shared.config.settings import get_settings
    from shared.core.jobs import Status, utcnow
    from shared.core.ports import Stores
    from shared.storage.blobs import BlobStore
    from shared.storage.chunk_store import ChunkStore
    from shared.storage.fake import FakeStorage
    from shared.storage.job_store import JobStore
    from shared.storage.queues import Queues
    from tests.support.synthetic_result import synthetic_job

    get_settings.cache_clear()
    s = get_settings()
    fake = FakeStorage()
    stores = Stores(jobs=JobStore(table=fake.table(s.jobs_table)), chunks=ChunkStore(table=fake.table(s.jobs_table)),
                    messages=Queues(queue_for=lambda name: fake.queue(name or s.jobs_queue)),
                    blobs=BlobStore(container=fake.container(s.results_container)))
    service = JobService(stores)
    items, doc = synthetic_job(n, seed=1)
    body = json.dumps({"pipeline": "thematic", "params": {"llm": "off"}, "input": items}).encode()
    job = service.submit("bench", body, None).job
    assert job.input_blob, "a job this size has its input claim-checked"
    result = json.dumps(doc, separators=(",", ":")).encode()
    name = f"bench/{job.id}/result.json"
    stores.blobs.put(name, result, "application/json")
    row = stores.jobs.get("bench", job.id)
    stores.jobs.update(row, status=Status.SUCCEEDED, finished_at=utcnow(), result_blob=name, result_bytes=len(result))
    del items, doc, body, result
    import gc

    gc.collect()
    baseline = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS: the peak from here on is the export's
    t0, c0 = time.perf_counter(), time.process_time()
    out = service.result("bench", job.id, fmt)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": _status_kb("VmHWM") / 1024, "baseline_mb": baseline / 1024,
            "bytes": len(out.body)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="responses (default 20,000)")
    ap.add_argument("--formats", default="xlsx,csv", help="comma-separated (default xlsx,csv)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per format (the best wall time is reported)")
    ap.add_argument("--child", nargs=2, metavar=("N", "FORMAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1])))
        return 0
    print(_machine())
    print(f"{args.n} responses; peak = VmHWM during the export (reset just before it), in a fresh process each run")
    print(f"{'format':<7} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'baseline MB':>12} {'size MB':>8}")
    for fmt in args.formats.split(","):
        runs = []
        for _ in range(args.repeat):
            proc = subprocess.run([sys.executable, __file__, "--child", str(args.n), fmt], capture_output=True,
                                  text=True, check=True, cwd=ROOT)
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["wall_s"])
        print(f"{fmt:<7} {best['wall_s']:>7.2f} {best['cpu_s']:>7.2f} {max(r['peak_mb'] for r in runs):>8.0f} "
              f"{best['baseline_mb']:>12.0f} {best['bytes'] / 1e6:>8.2f}")
    print("after: " + _machine().split("; ")[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
