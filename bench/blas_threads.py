"""The job after embedding at 1 and at 2 BLAS threads: is the result the same, and what does each cost idle and
with the other core busy (why an attempt's process runs numpy's BLAS on one thread: ``runner.ONE_BLAS_THREAD``).

    .venv/bin/python bench/blas_threads.py [--sets scale2000] [--rounds 4]

Each run is a fresh process of ``bench/cluster_speed.py``'s worker (the whole job on cached embeddings: clean,
cluster, describe, insight, render), with onnxruntime at 2 threads (unused: the embeddings come from the bench
cache) and BLAS at 1 or 2 threads, alternating 1, 2, 2, 1, ... so both see the same load. "busy" runs the same
beside one busy-loop process (a pure-Python loop: one core taken, as by another attempt on the instance). The
peer is measured in the same run: BLAS 2 is today's default of numpy on 2 cores, BLAS 1 the attempt's setting.

Prints the CPU, per condition and setting the job's wall seconds (min, median, max) and CPU seconds, the result's
hash per setting (a result that depends on the BLAS thread count differs between 1- and 2-vCPU instances), and
the load average. Wall times of a shared machine are noisy: read the medians of one run side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_speed import first_difference, run_one  # noqa: E402
from bench.int8_speed import machine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="scale2000", help="comma-separated: scale2000 and/or suite set names")
    ap.add_argument("--rounds", type=int, default=4, help="runs per setting and condition")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(machine())
    print(f"load average before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="blas-threads-") as tmp:
        for name in [s for s in args.sets.split(",") if s]:
            docs: dict[int, Path] = {}
            table: dict[tuple[str, int], list[dict[str, float]]] = {}
            shas: dict[int, set[str]] = {1: set(), 2: set()}
            for cond in ("idle", "busy"):
                hog = (subprocess.Popen([sys.executable, "-c", "while True: pass"]) if cond == "busy" else None)
                try:
                    for r in range(args.rounds):
                        for blas in ((1, 2) if r % 2 == 0 else (2, 1)):
                            out = Path(tmp) / f"{name}-{cond}-{blas}-{r}.json"
                            res = run_one(ROOT, name, args.seed, 2, out, blas=blas)
                            docs.setdefault(blas, out)
                            shas[blas].add(res["sha"])
                            table.setdefault((cond, blas), []).append(res)
                finally:
                    if hog is not None:
                        hog.kill()
                        hog.wait()
            a = json.loads(docs[1].read_text(encoding="utf-8"))
            b = json.loads(docs[2].read_text(encoding="utf-8"))
            diff = first_difference(a, b)
            print(f"\n{name}: k at BLAS 1 / 2: {len(a['themes'])} / {len(b['themes'])}; result hash BLAS 1 "
                  f"{sorted(shas[1])}, BLAS 2 {sorted(shas[2])}; 1 vs 2: "
                  f"{'IDENTICAL' if diff is None else 'DIFFERS at ' + diff[:160]}")
            print(f"  {'condition':9s} {'BLAS':>4s} {'wall min':>9s} {'median':>8s} {'max':>8s} {'CPU med':>8s}")
            for (cond, blas), runs in table.items():
                wall = [x["job_wall"] for x in runs]
                cpu = [x["job_cpu"] for x in runs]
                print(f"  {cond:9s} {blas:4d} {min(wall):9.2f} {statistics.median(wall):8.2f} {max(wall):8.2f} "
                      f"{statistics.median(cpu):8.2f}")
    print(f"\nload average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
