"""``models.build_graph`` against a reference copy of models.py: the same ONNX bytes for tiny random BERT and
MPNet weights, fp32 and int8 (plain, fused, with fp32 layers). The built MiniLM files are pinned by sha256
already; this covers MPNet (whose weights are optional) and every graph option.

    git show main:pipelines/thematic/models.py > /tmp/models_ref.py
    .venv/bin/python bench/graph_parity.py /tmp/models_ref.py      # exit 1 on any difference
"""
import dataclasses
import importlib.util
import sys
from pathlib import Path

import numpy as np

sys.path[0] = str(Path(__file__).resolve().parents[1])
from pipelines.thematic import models as new  # noqa: E402

spec_ = importlib.util.spec_from_file_location("pipelines.thematic.models_ref", sys.argv[1])
old = importlib.util.module_from_spec(spec_)
sys.modules[spec_.name] = old
assert spec_.loader is not None
spec_.loader.exec_module(old)

def weights(arch, layers, hidden, ffn, vocab, maxpos, heads, rng):
    w = {"embeddings.word_embeddings.weight": rng.normal(size=(vocab, hidden)),
         "embeddings.position_embeddings.weight": rng.normal(size=(maxpos + 2, hidden)),
         "embeddings.token_type_embeddings.weight": rng.normal(size=(2, hidden)),
         "embeddings.LayerNorm.weight": rng.normal(size=hidden), "embeddings.LayerNorm.bias": rng.normal(size=hidden),
         "encoder.relative_attention_bias.weight": rng.normal(size=(32, heads))}
    for i in range(layers):
        p = f"encoder.layer.{i}"
        names = ([f"{p}.attention.self.{k}" for k in ("query", "key", "value")] + [f"{p}.attention.output.dense"]
                 if arch == "bert" else [f"{p}.attention.attn.{k}" for k in "qkvo"])
        for n in names:
            w[n + ".weight"], w[n + ".bias"] = rng.normal(size=(hidden, hidden)), rng.normal(size=hidden)
        ln1 = f"{p}.attention.output.LayerNorm" if arch == "bert" else f"{p}.attention.LayerNorm"
        for n in (ln1, f"{p}.output.LayerNorm"):
            w[n + ".weight"], w[n + ".bias"] = rng.normal(size=hidden), rng.normal(size=hidden)
        w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"] = rng.normal(size=(ffn, hidden)), rng.normal(size=ffn)
        w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"] = rng.normal(size=(hidden, ffn)), rng.normal(size=hidden)
    return {k: v.astype(np.float32) for k, v in w.items()}

n = bad = 0
for spec in new.SPECS.values():
    small = dataclasses.replace(spec, layers=2, hidden=16, heads=4, max_tokens=16)
    w = weights(small.arch, 2, 16, 32, 50, 16, 4, np.random.default_rng(0))
    for kw in ({}, {"int8": new.INT8}, {"int8": new.INT8, "fused": True}, {"int8": new.INT8, "skip": ("ffn_out",)}):
        a = old.build_graph(small, w, **kw).SerializeToString()
        b = new.build_graph(small, w, **kw).SerializeToString()
        n += 1
        bad += a != b
        print(spec.key, small.arch, kw, "identical" if a == b else "DIFFERENT", len(a), "bytes")
print(n, "graphs compared,", bad, "different")
raise SystemExit(1 if bad else 0)
