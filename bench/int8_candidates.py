"""Fused int8 candidates for the VNNI graph, built in memory from the pinned MiniLM weights, timed on BBC leads.

Issue 27: with AMX in use the u8·s8 GEMMs are ~22 % of the ``int8-vnni`` graph's time and the per-token
quantise / dequantise nodes around them ~47 %, so the candidates here remove nodes, never change the GEMM:

* ``vnni``: the shipped ``int8-vnni`` graph (as built by ``models.build_graph``), the reference.
* ``minmax``: the same graph with each activation's absmax as ``max(ReduceMax x, -ReduceMin x)`` instead of
  ``ReduceMax(Abs x)``: the same codes bit for bit (negation and abs are exact), one full-size pass fewer.
* ``nbits:B``: every linear layer as one ``com.microsoft.MatMulNBits`` (8-bit weights, symmetric, blocks of ``B``
  along K, ``accuracy_level=4``: the kernel quantises the activations per row and per block itself, bias fused).
  Different vectors: the fidelity to fp32 and batch independence are printed.
* ``fp32``, ``int8``: the fp32 reference and the default graph.

Speed: CPU-seconds of this process (``process_time``) over 2,000 BBC leads (``--n``), the graphs interleaved for
``--reps`` rounds, ``--threads`` intra-op threads (1 on a loaded machine: a 2-thread pool spins while it waits).
Batch independence: the first 40 texts embedded one by one and in a batch with 200 longer texts, against the
vectors of the full run. Nothing here is shipped; a candidate that is adopted goes into ``models.py`` with a pin.

    .venv/bin/python bench/int8_candidates.py --graphs fp32,vnni,minmax,nbits:32 --threads 1 --reps 5 --n 600
    .venv/bin/python bench/int8_candidates.py --graphs vnni --batch-sizes 32,64,128,256 --threads 1 --reps 3 --n 600
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]
sys.path.insert(0, str(ROOT))
import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from pipelines.thematic import models as M  # noqa: E402


def _nbits_linear(g: Any, x: str, wt: np.ndarray, b: np.ndarray, name: str, block: int) -> str:
    """y = x @ wt + b as one MatMulNBits: int8 weights per (output column, block of ``block`` inputs)."""
    from onnx import helper

    k, n = wt.shape
    w = wt.T.reshape(n, k // block, block)
    scale = (np.maximum(np.abs(w).max(axis=2), 1e-8) / 127.0).astype(np.float32)
    # Stored unsigned with the default zero point 2^(bits-1) = 128.
    q = (np.clip(np.rint(w / scale[:, :, None]), -127, 127).astype(np.int16) + 128).astype(np.uint8)
    out = g.op_ms("MatMulNBits", [x, g.const(f"{name}.wq", q), g.const(f"{name}.ws", scale.reshape(-1)), "", "",
                                  g.const(f"{name}.b", b)])
    g.nodes[-1].attribute.extend([helper.make_attribute(a, v) for a, v in
                                  (("K", k), ("N", n), ("bits", 8), ("block_size", block), ("accuracy_level", 4))])
    return out


def _minmax_quantized(g: Any, x: str) -> tuple[str, str]:
    """``_Graph._quantized`` (fused) with absmax from ReduceMax and ReduceMin: the same codes, bit for bit."""
    got = g._qcache.get(x)
    if got is not None:
        return got  # type: ignore[no-any-return]
    mx = g.op("ReduceMax", [x], axes=[-1], keepdims=1)
    mn = g.op("Neg", [g.op("ReduceMin", [x], axes=[-1], keepdims=1)])
    absmax = g.op("Max", [g.op("Max", [mx, mn]), g.const_once("tiny", np.array(1e-8, np.float32))])
    xscale = g.op("Div", [absmax, g.const_once("q127", np.array(127.0, np.float32))])
    inv = g.op("Div", [g.const_once("q127", np.array(127.0, np.float32)), absmax])
    xq = g.op("QuantizeLinear", [g.op("Mul", [x, inv]), g.const_once("one_scale", np.array(1.0, np.float32)),
                                 g.const_once("zp128", np.array(128, np.uint8))])
    g._qcache[x] = (xq, xscale)
    return xq, xscale


def build(name: str) -> bytes:
    spec = M.SPECS["minilm"]
    w = M.load_weights(spec)
    kind, _, arg = name.partition(":")
    saved = M._Graph._qlinear, M._Graph._quantized
    try:
        if kind == "nbits":
            block = int(arg or 32)
            M._Graph._qlinear = lambda g, x, wt, b, n: _nbits_linear(g, x, wt, b, n, block)  # type: ignore[method-assign]
        elif kind == "minmax":
            M._Graph._quantized = _minmax_quantized  # type: ignore[method-assign]
        if kind == "fp32":
            model = M.build_graph(spec, w)
        elif kind == "int8":
            g = spec.graph("int8")
            model = M.build_graph(spec, w, int8=M.INT8, skip=g.skip, fused=g.fused)
        elif kind in ("vnni", "minmax", "nbits"):
            g = spec.graph("int8-vnni")
            model = M.build_graph(spec, w, int8=M.INT8, skip=g.skip, fused=g.fused)
        else:
            raise SystemExit(f"unknown candidate {name!r}")
    finally:
        M._Graph._qlinear, M._Graph._quantized = saved  # type: ignore[method-assign]
    return bytes(model.SerializeToString())


def main() -> None:
    from bench.int8_speed import encoder, machine
    from bench.thematic import bbc

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="fp32,vnni,minmax,nbits:32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=2000, help="BBC leads")
    ap.add_argument("--batch-sizes", default="", help="time each graph at these batch sizes instead (e.g. 32,64,128)")
    args = ap.parse_args()
    names = args.graphs.split(",")
    texts = list(dict.fromkeys(a[1] for a in bbc()))[: args.n]
    print(machine(), flush=True)
    encs = {k: encoder(build(k), args.threads) for k in names}
    vec = {k: e.embed(texts) for k, e in encs.items()}
    ref, base = vec.get("fp32"), vec.get("vnni")
    for k, v in vec.items():
        alone = np.vstack([encs[k].embed([t]) for t in texts[:40]])
        mixed = encs[k].embed(texts[:40] + texts[-200:])[:40]
        line = f"{k:10s} alone |diff| {np.abs(alone - v[:40]).max():.1e}  mixed |diff| {np.abs(mixed - v[:40]).max():.1e}"
        if ref is not None:
            c = (v * ref).sum(1)
            line += f"  cos fp32 mean {c.mean():.4f} min {c.min():.4f}"
        if base is not None:
            line += f"  max |diff| vs vnni {np.abs(v - base).max():.1e}"
        print(line, flush=True)
    sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    if sizes:  # vectors do not depend on the batch (checked above), so only the time can change
        encs = {f"{k}@{b}": e for k, e in encs.items() for b in sizes}
        names = list(encs)
    cpu: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(args.reps):
        for k, e in encs.items():
            batch = int(k.partition("@")[2] or 64)
            c0 = time.process_time()
            e.embed(texts, batch_size=batch, batch_tokens=0)
            cpu[k].append(time.process_time() - c0)
    print(f"{len(texts)} BBC leads, {args.threads} thread(s), {args.reps} rounds interleaved; CPU-s best / median")
    ref_k = "vnni@64" if sizes else "vnni"
    ref_t = min(cpu[ref_k]) if ref_k in cpu else None
    for k in names:
        rel = f"  x vnni {ref_t / min(cpu[k]):.2f}" if ref_t else ""
        print(f"{k:10s} {min(cpu[k]):7.2f} {float(np.median(cpu[k])):7.2f}  texts/CPU-s {len(texts) / min(cpu[k]):6.0f}{rel}")
    print("after: " + machine().split("; ")[-1])


if __name__ == "__main__":
    main()
