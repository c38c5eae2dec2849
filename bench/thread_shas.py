"""The result document's sha256 per data set, at a thread count of the cluster stage, for any checkout (issue 27).

The cluster stage runs its independent units on ``embed.DEFAULT_THREADS`` threads (``pipelines/thematic/parallel.py``)
and must give the same document at any count, and the same as before the change. This runs the whole pipeline (no
LLM) on each set with the bench's cached embeddings and prints the sha256 of the document without its timings, so
runs of two checkouts and thread counts compare by eye::

    .venv/bin/python bench/thread_shas.py --threads 1,2 [--sets leads,banking] [--seeds 0,1]
    .venv/bin/python bench/thread_shas.py --root /work/main        # the same sets on another checkout
    .venv/bin/python bench/thread_shas.py --sets leads --threads 1,2 --rounds 10   # + medians per thread count

``--rounds``: every thread count that many times, interleaved (1, 2, 1, 2, ...; the first round is a warm-up: the
process's caches of words and phrases fill on a set's first run), then the median stage times (wall and the
process's CPU seconds) per set and thread count. The times are the pipeline without embedding (cached vectors).
Also the CPU seconds of the cluster and describe stages, all threads (``cpu``) and the calling thread alone
(``main``): on a loaded machine the wall says little, and the calling thread's CPU is what its critical path costs
(a quiet 2-core machine's wall for the stage is about the larger of ``main`` and ``cpu - main``, plus the waits).

``--root``: the checkout whose ``pipelines`` package runs (the bench helpers are this one's). A checkout without the
stage's threads ignores ``--threads`` (its cluster stage is one thread whatever the setting).
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_SETS = ("leads", "banking", "20ng", "dominant-20ng", "dominant-banking", "small-20ng", "long-20ng",
                "headlines", "sentences", "feedback", "clinc", "stackoverflow")


def strip(doc: Any) -> Any:
    """The document without what differs between two runs of the same input (timings)."""
    if isinstance(doc, dict):
        return {k: strip(v) for k, v in doc.items() if k not in ("timings_seconds",)}
    if isinstance(doc, list):
        return [strip(v) for v in doc]
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose pipelines package runs")
    ap.add_argument("--threads", default="2", help="comma-separated stage thread counts (embed.DEFAULT_THREADS)")
    ap.add_argument("--sets", default=",".join(DEFAULT_SETS))
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from shared.runtime.blas import ONE_BLAS_THREAD

    for name, value in ONE_BLAS_THREAD.items():  # as every attempt's process
        os.environ.setdefault(name, value)
    sys.path.insert(0, args.root)  # before ROOT: its pipelines package wins
    for mod in [m for m in sys.modules if m == "pipelines" or m.startswith("pipelines.") or m == "shared"
                or m.startswith("shared.")]:
        del sys.modules[mod]
    import bench.thematic as b
    import pipelines.thematic.mapped as mapped
    from bench.int8_speed import machine
    from pipelines.thematic import ThematicParams
    from pipelines.thematic import embed as E
    from pipelines.thematic import stages as S
    from pipelines.thematic.run import run_with

    print(machine(), "| pipelines from", Path(sys.modules["pipelines"].__file__ or "").parent.parent, flush=True)
    stage_cpu: dict[str, tuple[float, float]] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            c0, m0 = time.process_time(), time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                stage_cpu[name] = (time.process_time() - c0, time.thread_time() - m0)
        return run

    S._cluster = timed("cluster", S._cluster)  # type: ignore[assignment]
    S._describe = timed("describe", S._describe)  # type: ignore[assignment]
    real = mapped.job_embedder
    mapped.job_embedder = lambda *a, **k: b.CachedEmbedder(real(*a, **k))  # type: ignore[assignment]
    for name in args.sets.split(","):
        texts, _ = b.suite_set(name)
        items = [{"id": i, "text": t} for i, t in enumerate(texts)]
        for seed in map(int, args.seeds.split(",")):
            times: dict[int, list[tuple[float, ...]]] = {}
            for rnd in range(args.rounds):
                for threads in map(int, args.threads.split(",")):
                    E.DEFAULT_THREADS = threads  # type: ignore[misc]  # the stage reads it when it runs
                    load = os.getloadavg()[0]
                    t0, c0 = time.perf_counter(), time.process_time()
                    doc = run_with(b.Ctx(), ThematicParams(llm="off", seed=seed), items, client=None)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    sha = hashlib.sha256(json.dumps(strip(doc), sort_keys=True).encode()).hexdigest()
                    t = doc["run"]["timings_seconds"]
                    (cc, cm), (dc, dm) = stage_cpu.get("cluster", (0.0, 0.0)), stage_cpu.get("describe", (0.0, 0.0))
                    if rnd > 0 or args.rounds == 1:
                        times.setdefault(threads, []).append(
                            (t.get("cluster", 0), t.get("describe", 0), wall, cpu, cc, cm, dc, dm, load))
                    print(f"{name:18s} seed {seed} threads {threads}: sha256 {sha[:16]}  k {len(doc['themes']):3d}  "
                          f"n {len(texts):5d}  cluster {t.get('cluster', 0):.2f} s (cpu {cc:.2f}, main {cm:.2f})  "
                          f"describe {t.get('describe', 0):.2f} s (cpu {dc:.2f}, main {dm:.2f})  wall {wall:.2f} s  "
                          f"cpu {cpu:.2f} s  load {load:.1f}", flush=True)
            if args.rounds > 1:
                for threads, rows in times.items():
                    med = [statistics.median(col) for col in zip(*rows, strict=True)]
                    print(f"{name:18s} seed {seed} threads {threads}: median of {len(rows)} (after a warm-up round): "
                          f"cluster {med[0]:.3f} s (cpu {med[4]:.3f}, main {med[5]:.3f})  describe {med[1]:.3f} s "
                          f"(cpu {med[6]:.3f}, main {med[7]:.3f})  wall {med[2]:.3f} s  cpu {med[3]:.3f} s  "
                          f"load {med[8]:.1f} ({min(r[8] for r in rows):.1f}-{max(r[8] for r in rows):.1f})",
                          flush=True)


if __name__ == "__main__":
    main()
