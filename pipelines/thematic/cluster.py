"""Clustering of embeddings into themes, with an automatic, explained theme count.

numpy only (no scikit-learn/scipy at run time: footprint and cold start).

Algorithm:

1. PCA (via SVD of a sample) to at most 64 dimensions, only to make the
   many k-means runs of step 2 cheap. Vectors are re-normalised afterwards
   so k-means stays spherical (cosine).
2. Candidate theme counts ``k`` over the whole allowed range (every k up to
   10, then steps of ~15 %). For each, spherical k-means with k-means++
   seeding on a sample (≤ 3,000 points), for ``SEEDS`` different seeds.
3. Each candidate is scored by the mean cosine silhouette, computed in the
   *original* 384-d embedding space (not the reduced one, and not UMAP: a
   density-distorting reduction inflates the separation of a few big blobs,
   which is how a silhouette criterion ends up choosing 3 themes on data
   with 20). Several seeds per k because single-run
   silhouettes are noisy (max over seeds: a poor local optimum only lowers
   the score); the chosen k is the smallest one scoring within 2 % of the
   best (parsimony: on short texts silhouette creeps up again at large k). (A
   one-standard-error rule towards smaller k was tried and dropped: on small
   inputs it collapsed BBC's 5 topics to 3.) Every candidate's score and its
   seed spread is recorded in the run metadata as the reason for the choice.
4. The final partition is spherical k-means at the chosen k on all points in
   the full space (``FINAL_RESTARTS`` k-means++ restarts, best objective), so
   no sampling error reaches the assignments. It runs on *neighbour-smoothed*
   vectors (each point averaged with its 5 nearest neighbours, see
   :func:`knn_smooth`), which damps the wording-specific part of short-text
   embeddings: +0.02 NMI on BBC leads, +0.05 on headlines, +0.03 on the
   small-themes set and on the feedback sample, over 3 seeds each. Centring,
   PCA and PCA-whitening were measured too and did not help (whitening made
   the result seed-dependent).

Evaluated on BBC leads, BBC headlines and a many-small-groups set (see
docs/thematic.md): silhouette in the full cosine space peaks at or near the
true count on all three, while cluster stability (also tried) always
prefers k=2 and a cohesion-ratio merge of over-clustered micro-clusters
chained everything into one giant theme.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

F32 = NDArray[np.float32]
I64 = NDArray[np.int64]

#: Seeds per candidate k when choosing automatically (k <= 20; SEEDS_LARGE_K above).
SEEDS = 3
SEEDS_LARGE_K = 2
#: k-means iterations per run of the k search (the final partition runs to convergence).
SEARCH_ITER = 25
#: Hard ceiling of the automatic count and its growth with sqrt(n) (see auto_cap).
AUTO_CAP = 200
CAP_SQRT = 4.0
#: Below this best silhouette the structure is weak and the count a judgement (see choose_k).
WEAK_STRUCTURE = 0.06
#: A winner at k <= 3 must beat the best k >= 6 by this much, else the curve counts as flat.
FLAT_MARGIN = 0.03
#: Relative band around the best silhouette reported as equally supported counts.
PLATEAU = 0.05
#: The granularity prior (weak structure only): sqrt(n)/3 clipped to PRIOR_MIN..PRIOR_MAX, searched
#: within a factor PRIOR_WINDOW either side.
PRIOR_MIN = 4
PRIOR_MAX = 25
PRIOR_WINDOW = 1.6
#: The coarse peak of the curve is searched up to this k (the broad level: 3-12 themes).
BROAD_MAX = 12
#: Two peaks are two levels of structure (the loser is reported) when the curve falls by this fraction between them.
DIP = 0.05
#: Points used to choose k (silhouette is O(sample²)).
CHOICE_SAMPLE = 2000
#: Dimensions kept by PCA for the k search.
PCA_DIMS = 64
#: Relative tolerance of the parsimony rule in choose_k.
PARSIMONY = 0.02
#: Neighbours averaged into each point before the final partition (see
#: :func:`knn_smooth`). 5 measured best on all four benchmark sets; 10+
#: starts to merge themes of fewer than ~10 members into their neighbours.
SMOOTH_NEIGHBOURS = 5
#: Above this many points the neighbours are searched in the PCA space
#: (``PCA_DIMS``) instead of the full one: the search is O(n²·d), and at 100k
#: points 384 dimensions would cost ~1.5 min on 2 cores against ~15 s.
SMOOTH_FULL_MAX = 20_000
#: Similarities held at once in the neighbour search: 8M cells = 32 MiB of
#: float32, ~130 MiB with the negated copy and argpartition's int64 indices,
#: flat up to the 100k input limit (then 84 rows per block; the matrix
#: products stay large enough for BLAS). 4x this added ~0.3 GiB to the peak
#: RSS of a 20k run.
SMOOTH_BLOCK_CELLS = 1 << 23
#: k-means restarts of the final partition; the best objective wins. Cheap
#: next to embedding (a few seconds at 100k), and it removes most of the
#: seed-to-seed variation of the result.
FINAL_RESTARTS = 10
#: Rows per one-hot block in :func:`group_sums`.
GROUP_BLOCK = 8192


def normalise(x: NDArray[Any]) -> F32:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    out: F32 = (x / np.maximum(n, 1e-12)).astype(np.float32)
    return out


def group_sums(labels: I64, x: F32, k: int) -> F32:
    """Row sums of ``x`` per label 0..k-1 (labels < 0 ignored).

    As a matrix product with a one-hot block (BLAS): ~10x faster than the
    sort + ``np.add.reduceat`` used before (which itself was ~30x faster than
    ``np.add.at``); this is the inner step of every k-means iteration. Blocks
    of rows bound the one-hot matrix to ``GROUP_BLOCK`` × k floats.
    """
    out = np.zeros((k, x.shape[1]), dtype=np.float32)
    for start in range(0, len(labels), GROUP_BLOCK):
        lab = labels[start : start + GROUP_BLOCK]
        keep = np.flatnonzero(lab >= 0)
        onehot = np.zeros((len(lab), k), dtype=np.float32)
        onehot[keep, lab[keep]] = 1.0
        out += onehot.T @ x[start : start + GROUP_BLOCK]
    return out


def pca(x: F32, dims: int, *, seed: int = 0, sample: int = 5000) -> F32:
    """Project onto the top ``dims`` principal axes (fitted on a sample), re-normalised."""
    if x.shape[1] <= dims or x.shape[0] <= dims:
        return x
    rng = np.random.default_rng(seed)
    fit = x[rng.choice(len(x), size=sample, replace=False)] if len(x) > sample else x
    mean = fit.mean(axis=0)
    _, _, vt = np.linalg.svd(fit - mean, full_matrices=False)
    return normalise((x - mean) @ vt[:dims].T)


def neighbours(x: F32, m: int) -> I64:
    """Indices of the ``m`` most cosine-similar other points of each row of unit vectors ``x``.

    Exact, blockwise (memory O(block · n)); ``argpartition`` so no full sort.
    """
    n = x.shape[0]
    out = np.empty((n, m), dtype=np.int64)
    block = max(64, min(1024, SMOOTH_BLOCK_CELLS // max(n, 1)))
    for start in range(0, n, block):
        sims = x[start : start + block] @ x.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # not its own neighbour
        out[start : start + block] = np.argpartition(-sims, m - 1, axis=1)[:, :m]
    return out


def knn_smooth(x: F32, m: int = SMOOTH_NEIGHBOURS, *, seed: int = 0) -> F32:
    """Each point averaged with the mean of its ``m`` nearest neighbours, re-normalised.

    One step of neighbourhood averaging (a graph-diffusion / mean-shift step):
    the part of a short text's embedding that its neighbours share (the topic)
    is kept, its idiosyncratic part (wording, length, named entities) is
    damped, so k-means separates topics better. Measured at the true k on BBC:
    NMI 0.741 → 0.762 on leads and 0.584 → 0.634 on headlines; it also helps
    the many-small-themes set. It is used for the final partition only, not to
    choose k: on smoothed vectors near-paraphrase groups become so tight that
    silhouette prefers 40 themes on headlines.
    """
    n = x.shape[0]
    m = min(m, n - 1)
    if m < 1:
        return x
    space = x if n <= SMOOTH_FULL_MAX else pca(x, PCA_DIMS, seed=seed)
    nb = neighbours(space, m)
    return normalise(x + x[nb].mean(axis=1))


def kmeans_pp_init(x: F32, k: int, rng: np.random.Generator) -> F32:
    """k-means++ seeding with cosine distance (``1 - x·c``) on unit vectors."""
    n = x.shape[0]
    centers = np.empty((k, x.shape[1]), dtype=np.float32)
    centers[0] = x[int(rng.integers(n))]
    d = np.maximum(1.0 - x @ centers[0], 0.0)
    for i in range(1, k):
        total = float(d.sum())
        idx = int(rng.integers(n)) if total <= 0 else int(rng.choice(n, p=d / total))
        centers[i] = x[idx]
        d = np.minimum(d, np.maximum(1.0 - x @ centers[i], 0.0))
    return centers


def spherical_kmeans(
    x: F32, k: int, *, seed: int = 0, n_init: int = 2, max_iter: int = 40, tol: float = 1e-5
) -> tuple[I64, F32]:
    """Cluster unit vectors by cosine; returns (labels, unit centroids), best of ``n_init`` runs."""
    n = x.shape[0]
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    best: tuple[float, I64, F32] | None = None
    rows = np.arange(n)
    for _ in range(n_init):
        c = kmeans_pp_init(x, k, rng)
        prev = -np.inf
        labels = np.zeros(n, dtype=np.int64)
        score = -np.inf
        for _it in range(max_iter):
            sims = x @ c.T
            labels = sims.argmax(axis=1).astype(np.int64)
            fit = sims[rows, labels]
            score = float(fit.sum())
            sums = group_sums(labels, x, k)
            counts = np.bincount(labels, minlength=k)
            empty = np.flatnonzero(counts == 0)
            if empty.size:
                # Re-seed empty clusters with the worst-fitting points.
                sums[empty] = x[np.argsort(fit)[: empty.size]]
            c = normalise(sums)
            if score - prev <= tol * n:
                break
            prev = score
        if best is None or score > best[0]:
            best = (score, labels, c)
    assert best is not None
    return best[1], best[2]


def silhouette(x: F32, labels: I64) -> float:
    """Mean cosine silhouette of all points of ``x`` (caller samples); 0 for one group."""
    return silhouette_from_distances(1.0 - x @ x.T, labels)


def silhouette_from_distances(d: F32, labels: I64) -> float:
    """Silhouette given the pairwise distance matrix (computed once, reused for every k)."""
    return float(silhouette_values(d, labels).mean()) if len(labels) else 0.0


def silhouette_values(d: F32, labels: I64) -> NDArray[np.float64]:
    """Per-point cosine silhouette given the pairwise distances; all 0 for one group."""
    uniq = np.unique(labels)
    if len(uniq) < 2:
        return np.zeros(len(labels))
    onehot = (labels[:, None] == uniq[None, :]).astype(np.float32)
    counts = onehot.sum(axis=0)
    tot = d @ onehot
    own = np.searchsorted(uniq, labels)
    rows = np.arange(len(labels))
    own_count = counts[own]
    a = tot[rows, own] / np.maximum(own_count - 1, 1)
    mean_d = tot / np.maximum(counts, 1)
    mean_d[rows, own] = np.inf
    b = mean_d.min(axis=1)
    s: NDArray[np.float64] = np.where(own_count > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return s


def candidate_ks(k_min: int, k_max: int) -> list[int]:
    """Every k up to 20, then geometric steps of ~15 % (resolution where it matters, ~35 candidates to 200)."""
    ks: list[int] = []
    k = k_min
    while k <= k_max:
        ks.append(k)
        k = k + 1 if k < 20 else max(k + 1, round(k * 1.15))
    if ks and ks[-1] != k_max:
        ks.append(k_max)
    return ks


def auto_cap(n: int, min_theme_size: int, max_themes: int | None) -> int:
    """The largest count the automatic choice considers: it grows with the data instead of stopping at 40.

    At most ``n / min_theme_size`` (a theme needs members), ``AUTO_CAP``, and
    ``CAP_SQRT`` · sqrt(n): enough for 150 intents in 2,250 texts (cap 190)
    while 600 answers are not searched up to 120 themes. ``max_themes`` (when
    given) lowers it further.
    """
    cap = min(n // max(1, min_theme_size), AUTO_CAP, max(12, int(CAP_SQRT * math.sqrt(max(n, 1)))))
    if max_themes is not None:
        cap = min(cap, max_themes)
    return cap


def prior_k(n: int) -> int:
    """The granularity prior used only when the data do not decide: ~sqrt(n)/3 themes, 4..25.

    Thematic analyses report a handful to a few dozen themes; sqrt(n)/3 gives
    8 for 600 answers, 11 for 1,000, 15 for 2,000, 25 from 5,600 on.
    """
    return int(min(PRIOR_MAX, max(PRIOR_MIN, round(math.sqrt(max(n, 1)) / 3))))


@dataclass
class CountChoice:
    """The automatic theme count and how sure it is."""

    k: int
    criterion: str
    """``silhouette`` (the data decide), ``prior`` (weak structure: the granularity prior within the
    silhouette curve), ``fixed`` or ``single``."""
    explanation: str
    scores: list[dict[str, float]]
    confidence: float = 1.0
    """0..1: how strongly the data single out this count (structure strength x sharpness of the peak)."""
    confidence_label: str = "high"
    """``high`` (>= 0.6), ``medium`` (>= 0.3) or ``low``."""
    structure: float = 0.0
    """The best mean cosine silhouette of any candidate: < ~0.05 is weak structure."""
    alternatives: list[int] = field(default_factory=list)
    """Other counts the data support about as well (a coarser and a finer reading)."""
    k_range: list[int] = field(default_factory=list)
    """[lowest, highest] candidate k scoring within ``PLATEAU`` of the best."""
    cap: int = 0
    fine_k: int | None = None
    """A finer peak of the curve above the chosen k (the sub-theme level), when there is one."""


@dataclass
class Clustering:
    labels: I64
    """Theme index per point, 0..k-1."""
    k: int
    centroids: F32
    criterion: str
    explanation: str
    scores: list[dict[str, float]]
    count: CountChoice | None = None


def silhouette_curve(x: F32, ks: list[int], *, seed: int) -> list[dict[str, float]]:
    """Mean cosine silhouette per candidate k (best of the seeds) on a sample, in the full space."""
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(x), size=CHOICE_SAMPLE, replace=False) if len(x) > CHOICE_SAMPLE else np.arange(len(x))
    full = x[idx]
    reduced = pca(full, PCA_DIMS, seed=seed)
    dist = (1.0 - full @ full.T).astype(np.float32)
    rows: list[dict[str, float]] = []
    for k in ks:
        vals = []
        median = 0.0
        # Single runs are noisy at small k; at large k many clusters average out, so fewer seeds suffice.
        for s in range(SEEDS if k <= 20 else SEEDS_LARGE_K):
            labels, _ = spherical_kmeans(reduced, k, seed=seed * 1000 + s, n_init=1, max_iter=SEARCH_ITER)
            per_point = silhouette_values(dist, labels)
            vals.append(float(per_point.mean()))
            if vals[-1] >= max(vals):
                median = float(np.median(per_point))
        # The best of the seeds, not their mean: a bad local optimum of
        # k-means only ever lowers the score, so the max is the fair
        # estimate of how well k groups can fit. ``median``: the typical
        # response's silhouette in that best run (see choose_k).
        rows.append(
            {"k": k, "silhouette": float(np.max(vals)), "seed_spread": float(np.ptp(vals)), "median": median}
        )
    return rows


def _plateau(rows: list[dict[str, float]], i: int) -> tuple[int, int]:
    """The contiguous run of candidates around index ``i`` scoring within ``PLATEAU`` of it: (k_lo, k_hi)."""
    ref = rows[i]["silhouette"]
    lo = hi = i
    while lo > 0 and rows[lo - 1]["silhouette"] >= ref - abs(ref) * PLATEAU:
        lo -= 1
    while hi < len(rows) - 1 and rows[hi + 1]["silhouette"] >= ref - abs(ref) * PLATEAU:
        hi += 1
    return int(rows[lo]["k"]), int(rows[hi]["k"])


def _parsimonious(rows: list[dict[str, float]]) -> dict[str, float]:
    """The smallest k scoring within ``PARSIMONY`` of the best of ``rows``."""
    best = max(r["silhouette"] for r in rows)
    floor = best - abs(best) * PARSIMONY
    return min((r for r in rows if r["silhouette"] >= floor), key=lambda r: r["k"])


def choose_k(x: F32, k_min: int, k_max: int, *, seed: int) -> CountChoice:
    """Pick k from the silhouette curve: peaks, a coarse-vs-fine rule, and a prior where the curve is flat or weak.

    1. Silhouette per candidate k (see :func:`silhouette_curve`), up to the
       adaptive cap (:func:`auto_cap`).
    2. The coarse peak (best k <= ``BROAD_MAX``) and the fine peak (best
       k > ``BROAD_MAX``; for each the smallest k within ``PARSIMONY`` of the
       best is taken). The fine peak is the themes when it scores at least as
       well as the coarse one on both the mean and the *median* per-point
       silhouette. Near-paraphrase groups (BBC headlines: stories told by
       several articles) give a minority of tight points a very high
       silhouette and the rest a worse one: the mean rises, the median falls,
       and the coarse level wins (a split decision: confidence halved). Real
       sub-themes (DBPedia classes, newsgroups, intents) lift the typical
       point too. (The rule before, "coarse unless the fine peak's mean is
       25 % higher", could not tell the two apart: on the nested benchmark
       sets the fine mean is 0.98-1.19x the coarse one, on BBC headlines
       1.05-1.11x with a median of 0.81-0.88x.) The losing peak is
       reported as an alternative reading when the decision was split or the
       curve dips by ``DIP`` between the peaks (then it is also ``fine_k``,
       the sub-theme level, when finer).
    3. Weak or flat structure: the best silhouette is below
       ``WEAK_STRUCTURE``, or the winner is k <= 3 and no better than
       ``FLAT_MARGIN`` above the best k >= 6 (a binary split of a cloud, e.g.
       by sentiment or length, always scores well at k=2: a structureless
       Gaussian cloud of the same shape does too). Then the count is a
       judgement and we say so: the best-scoring k within a factor
       ``PRIOR_WINDOW`` of :func:`prior_k` is taken, with low confidence and
       the window's ends as the coarser and finer readings.
    4. Confidence = strength x sharpness (x 0.5 with a rival peak scoring
       >= 90 % of it): strength rises from 0 at silhouette 0.02 to 1 at 0.12;
       sharpness falls from 1 when no other candidate is within ``PLATEAU``
       of the chosen score to 0 when half of them are.
    """
    n = len(x)
    rows = silhouette_curve(x, candidate_ks(k_min, k_max), seed=seed)
    sil = [r["silhouette"] for r in rows]
    s_best = max(sil)
    coarse_rows = [r for r in rows if r["k"] <= BROAD_MAX]
    fine_rows = [r for r in rows if r["k"] > BROAD_MAX]
    coarse = _parsimonious(coarse_rows) if coarse_rows else _parsimonious(rows)
    fine = _parsimonious(fine_rows) if fine_rows and coarse_rows else None
    chosen, rival, split = coarse, None, False
    note = (
        f"cosine silhouette (best of {SEEDS} k-means seeds, full embedding space) over k in {k_min}..{k_max}: "
        f"best {s_best:.4f}; "
    )
    if fine is None:
        note += f"smallest k within {PARSIMONY:.0%} of it: k={int(coarse['k'])} ({coarse['silhouette']:.4f})"
    else:
        i_c, i_f = rows.index(coarse), rows.index(fine)
        valley = min(sil[i_c : i_f + 1])
        dipped = valley <= coarse["silhouette"] * (1 - DIP)
        better_mean = fine["silhouette"] >= coarse["silhouette"]
        better_median = fine["median"] >= coarse["median"]
        fine_wins = better_mean and better_median
        split = better_mean != better_median
        chosen = fine if fine_wins else coarse
        loser = coarse if fine_wins else fine
        rival = loser if dipped or split else None
        note += (
            f"coarse peak k={int(coarse['k'])} (mean {coarse['silhouette']:.4f}, median {coarse['median']:.4f}), "
            f"fine peak k={int(fine['k'])} (mean {fine['silhouette']:.4f}, median {fine['median']:.4f})"
            + (f", a dip to {valley:.4f} between them" if dipped else "")
            + "; "
        )
        if fine_wins:
            note += "the fine level fits the typical response at least as well (mean and median), so it is the themes"
        elif better_mean:
            note += (
                "the fine level scores higher on the mean but lower on the median: its gain is a minority of "
                "very tight groups (near-paraphrases), not the typical response, so the coarse reading is the themes"
            )
        else:
            note += "the coarse level scores higher, so it is the themes"
    i = rows.index(chosen)
    k_lo, k_hi = _plateau(rows, i)
    strength = min(1.0, max(0.0, (chosen["silhouette"] - 0.02) / 0.10))
    # Sharpness: the share of the other candidates scoring as well (within PLATEAU), wherever they are.
    ref = chosen["silhouette"] - abs(chosen["silhouette"]) * PLATEAU
    as_good = sum(1 for r in rows if r is not chosen and r["silhouette"] >= ref) / max(1, len(rows) - 1)
    sharp = min(1.0, max(0.0, 1.0 - as_good / 0.5))
    confidence = strength * sharp
    alternatives = sorted({k for k in (k_lo, k_hi) if k != int(chosen["k"])})
    if rival is not None:
        alternatives = sorted(set(alternatives) | {int(rival["k"])})
        if split:
            # A split decision (the rival wins on the mean or on the median): two readings, equally arguable.
            confidence *= 0.5
    note += f"; k={k_lo}..{k_hi} score within {PLATEAU:.0%} of the chosen k"
    above6 = [r["silhouette"] for r in rows if r["k"] >= 6]
    flat = chosen["k"] <= 3 and bool(above6) and chosen["silhouette"] - max(above6) < FLAT_MARGIN and n >= 100
    weak = s_best < WEAK_STRUCTURE
    criterion = "silhouette"
    if (weak or flat) and k_max > 3:
        kp = min(prior_k(n), k_max)
        lo, hi = max(k_min, math.ceil(kp / PRIOR_WINDOW)), min(k_max, math.floor(kp * PRIOR_WINDOW))
        window = [r for r in rows if lo <= r["k"] <= hi] or rows
        picked = chosen
        chosen = max(window, key=lambda r: r["silhouette"])
        criterion = "prior"
        confidence = min(confidence, 0.25)
        alternatives = sorted({int(window[0]["k"]), int(window[-1]["k"])} - {int(chosen["k"])})
        why = (
            f"structure is weak (best silhouette {s_best:.3f} < {WEAK_STRUCTURE})"
            if weak
            else f"the curve is flat (k={int(picked['k'])} scores only "
            f"{picked['silhouette'] - max(above6):.3f} above the best k >= 6)"
        )
        note = (
            f"{why}: the count is a judgement, not a finding. Took the best-scoring k within the "
            f"granularity prior {lo}..{hi} (~sqrt(n)/3 for {n} responses): k={int(chosen['k'])}; "
            f"coarser and finer readings: k={', '.join(map(str, alternatives))}. " + note
        )
    label = "high" if confidence >= 0.6 else "medium" if confidence >= 0.3 else "low"
    for r in rows:
        r["silhouette"] = round(r["silhouette"], 5)
        r["seed_spread"] = round(r["seed_spread"], 5)
        r["median"] = round(r["median"], 5)
    return CountChoice(
        k=int(chosen["k"]),
        criterion=criterion,
        explanation=note,
        scores=rows,
        confidence=round(confidence, 3),
        confidence_label=label,
        structure=round(s_best, 4),
        alternatives=alternatives,
        k_range=[k_lo, k_hi],
        cap=k_max,
        fine_k=int(rival["k"]) if criterion == "silhouette" and rival is not None and rival["k"] > chosen["k"] else None,
    )


def cluster(
    x: F32, *, num_themes: int | None, max_themes: int | None, min_theme_size: int, seed: int
) -> Clustering:
    """Cluster unit vectors ``x`` into themes; see the module docstring."""
    n = x.shape[0]
    # Fewer than two themes' worth of responses: one theme, nothing to choose.
    k_cap = auto_cap(n, min_theme_size, max_themes)
    if n < 4 or k_cap < 2 or num_themes == 1:
        labels = np.zeros(n, dtype=np.int64)
        cent = normalise(x.sum(axis=0, keepdims=True)) if n else np.zeros((1, x.shape[1]), np.float32)
        why = f"{n} usable responses and min_theme_size={min_theme_size} allow at most one theme"
        if num_themes == 1:
            why = "num_themes=1 was requested"
        return Clustering(labels, 1, cent, "single", why, [], CountChoice(1, "single", why, [], cap=k_cap))
    if num_themes is not None:
        k = min(num_themes, n)
        note = f"num_themes={num_themes} was requested"
        count = CountChoice(k, "fixed", note, [], cap=k_cap)
    else:
        count = choose_k(x, 2, max(2, k_cap), seed=seed)
        k = count.k
    # Partition the denoised vectors, but report centroids of the original
    # ones: assignment, outliers and confidences work in the original space.
    labels, _ = spherical_kmeans(knn_smooth(x, seed=seed), k, seed=seed, n_init=FINAL_RESTARTS)
    centroids = normalise(group_sums(labels, x, k))
    return Clustering(labels, k, centroids, count.criterion, count.explanation, count.scores, count)


def parents(centroids: F32, sizes: NDArray[np.int64], *, seed: int) -> list[int] | None:
    """Group themes into ~sqrt(k) parents when there are many (> 12), else None (kept for callers of 1.0)."""
    k = len(centroids)
    if k <= BROAD_MAX:
        return None
    labels, _ = spherical_kmeans(centroids, round(math.sqrt(k)), seed=seed, n_init=8)
    del sizes
    return [int(v) for v in labels]


#: Broad themes when the chosen count is above BROAD_MAX: BROAD_MIN..BROAD_MAX groups of themes.
BROAD_MIN = 3
#: Sub-themes per theme when the chosen count is at most BROAD_MAX: 2..SUB_MAX.
SUB_MAX = 8
#: Members per theme used to choose its sub-theme count.
SUB_SAMPLE = 600


def broad_level(x: F32, labels: I64, k: int, *, seed: int) -> tuple[list[int], list[dict[str, float]]]:
    """Parent (broad theme) index per theme, for k > ``BROAD_MAX``: themes grouped into 3..12 broad themes.

    The theme centres are clustered (spherical k-means, 8 restarts) for each
    candidate count (at most k / 2, so each broad theme holds two themes on average); the count whose induced partition of the *responses* has
    the best silhouette (on a sample, full space) wins, smallest within
    ``PARSIMONY``. Every theme lies in exactly one broad theme.
    """
    cents = normalise(group_sums(labels, x, k))
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(x), size=CHOICE_SAMPLE, replace=False) if len(x) > CHOICE_SAMPLE else np.arange(len(x))
    keep = idx[labels[idx] >= 0]
    dist = (1.0 - x[keep] @ x[keep].T).astype(np.float32)
    rows: list[dict[str, float]] = []
    found: dict[int, list[int]] = {}
    # At least two themes per broad theme on average: 13 themes under 10 broad ones is not a second level.
    for kb in range(BROAD_MIN, min(BROAD_MAX, k - 1, max(BROAD_MIN, k // 2)) + 1):
        g, _ = spherical_kmeans(cents, kb, seed=seed, n_init=8)
        kb_real = len(np.unique(g))
        sil = silhouette_from_distances(dist, g[labels[keep]])
        rows.append({"k": kb_real, "silhouette": round(sil, 5)})
        found.setdefault(kb_real, [int(v) for v in g])
    if not rows:
        return [0] * k, rows
    chosen = _parsimonious(rows)
    groups = found[int(chosen["k"])]
    # Renumber 0..kb-1 in order of first appearance.
    ren: dict[int, int] = {}
    return [ren.setdefault(v, len(ren)) for v in groups], rows


def sub_level(x: F32, labels: I64, k: int, *, min_size: int, seed: int) -> tuple[I64, list[int]]:
    """Sub-themes inside each theme, for k <= ``BROAD_MAX``: (sub-theme index per point, parent theme per sub-theme).

    A theme with >= 2 x ``min_size`` members is split into the 2..``SUB_MAX``
    groups whose silhouette *within the theme* is best (smallest within
    ``PARSIMONY``), if that silhouette is positive; sub-groups below
    ``min_size`` are folded into the nearest sibling. Smaller themes and
    themes without internal structure stay one sub-theme. Points with label
    < 0 get -1.
    """
    sub = -np.ones(len(x), dtype=np.int64)
    parent_of: list[int] = []
    for t in range(k):
        m = np.flatnonzero(labels == t)
        if len(m) == 0:
            continue
        best_lab: I64 | None = None
        kmax = min(SUB_MAX, len(m) // max(1, min_size))
        if kmax >= 2:
            xm = x[m]
            rng = np.random.default_rng(seed + t)
            s_idx = rng.choice(len(m), size=SUB_SAMPLE, replace=False) if len(m) > SUB_SAMPLE else np.arange(len(m))
            dist = (1.0 - xm[s_idx] @ xm[s_idx].T).astype(np.float32)
            rows = []
            for ks in range(2, kmax + 1):
                lab, _ = spherical_kmeans(xm[s_idx], ks, seed=seed * 1000 + t, n_init=2, max_iter=SEARCH_ITER)
                rows.append({"k": ks, "silhouette": silhouette_from_distances(dist, lab)})
            chosen = _parsimonious(rows)
            if chosen["silhouette"] > 0:
                lab, _ = spherical_kmeans(knn_smooth(xm, seed=seed), int(chosen["k"]), seed=seed, n_init=4)
                sizes = np.bincount(lab, minlength=int(chosen["k"]))
                ok = np.flatnonzero(sizes >= min_size)
                if len(ok) >= 2:
                    remap = -np.ones(int(chosen["k"]), dtype=np.int64)
                    remap[ok] = np.arange(len(ok))
                    new = remap[lab]
                    c = normalise(group_sums(new, xm, len(ok)))
                    lost = np.flatnonzero(new < 0)
                    if lost.size:
                        new[lost] = (xm[lost] @ c.T).argmax(axis=1)
                    best_lab = new
        if best_lab is None:
            best_lab = np.zeros(len(m), dtype=np.int64)
        base = len(parent_of)
        sub[m] = base + best_lab
        parent_of += [t] * (int(best_lab.max()) + 1)
    return sub, parent_of


def count_json(count: CountChoice | None, k_final: int) -> dict[str, Any]:
    """The new (schema 1.1) fields of ``run.theme_count``."""
    if count is None:
        return {}
    return {
        "k": k_final,
        "k_chosen": count.k,
        "confidence": count.confidence,
        "confidence_label": count.confidence_label,
        "structure": count.structure,
        "alternatives": count.alternatives,
        "k_range": count.k_range,
        "cap": count.cap,
        "fine_k": count.fine_k,
    }
