"""CPU seconds per stage of a ``--scale`` job without embedding, for checkouts side by side (issue 27: the Python
after embedding, read on a shared machine).

    .venv/bin/python bench/stage_cpu.py --roots /work/main,. [--rounds 4] [--texts leads] [--n 2000]

Each round runs every checkout once, in its own fresh process (the order turns round each time), on
``scale_texts(n, texts)`` with the bench's cached embeddings (``bench/thematic.py``'s ``ours``; the first run of a
set computes and caches them). Everything runs on one thread (``embed.DEFAULT_THREADS = 1``, one BLAS thread), and
each stage is timed by the CPU of the calling thread (``time.thread_time``), which other processes' load changes
much less than wall time. A fresh process starts with the word and phrase caches cold, as a job does. Prints each
run's line, then per checkout the min and median of every stage. The CPU model and flags are printed first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, os, sys, time
root = sys.argv[1]
sys.path.insert(0, root); sys.path.append(os.path.join(root, "bench"))
from shared.runtime.blas import ONE_BLAS_THREAD
for k, v in ONE_BLAS_THREAD.items():
    os.environ.setdefault(k, v)
import thematic as b
from pipelines.thematic import embed as E
from pipelines.thematic import stages as S
import pipelines.thematic.run  # imported before the clock starts, as bench/thematic.py's timed job
E.DEFAULT_THREADS = 1
texts = b.scale_texts(int(sys.argv[2]), sys.argv[3])
cpu = {}
def timed(stage):
    def run(ctx, s):
        t0 = time.thread_time()
        try:
            return stage(ctx, s)
        finally:
            cpu[stage.__name__.removesuffix("_stage")] = round(time.thread_time() - t0, 4)
    return run
S.run_stages.__defaults__ = (tuple(timed(st) for st in S.STAGES),)
load = os.getloadavg()[0]
b.ours(texts)
print(json.dumps({"cpu": cpu, "load": round(load, 2)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", default=f"/work/main,{ROOT}", help="comma-separated checkouts")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--texts", choices=("leads", "mixed"), default="leads")
    ap.add_argument("--n", type=int, default=2000)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.int8_speed import machine

    print(machine(), flush=True)
    roots = [str(Path(r).resolve()) for r in args.roots.split(",")]
    got: dict[str, list[dict[str, float]]] = {r: [] for r in roots}
    loads: dict[str, list[float]] = {r: [] for r in roots}
    for i in range(args.rounds):
        for r in roots if i % 2 == 0 else roots[::-1]:
            out = subprocess.run([sys.executable, "-c", _CHILD, r, str(args.n), args.texts], capture_output=True,
                                 text=True, check=True, cwd=r)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            got[r].append(row["cpu"])
            loads[r].append(row["load"])
            print(f"round {i} {r}: " + " ".join(f"{k} {v:.3f}" for k, v in row["cpu"].items())
                  + f" load {row['load']}", flush=True)
    stages = [k for k in got[roots[0]][0] if all(k in g for r in roots for g in got[r])]
    print(f"\nCPU s of the calling thread per stage, {args.rounds} fresh processes per checkout, min / median "
          f"({args.n} {args.texts}, cached embeddings, one thread)")
    print("| checkout | " + " | ".join(stages) + " | load |")
    print("|---|" + "---:|" * (len(stages) + 1))
    for r in roots:
        cells = [f"{min(g[k] for g in got[r]):.3f} / {statistics.median(g[k] for g in got[r]):.3f}" for k in stages]
        print(f"| {r} | " + " | ".join(cells) + f" | {min(loads[r]):.1f}-{max(loads[r]):.1f} |")


if __name__ == "__main__":
    main()
