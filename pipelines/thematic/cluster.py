"""Clustering of embeddings into themes, with an automatic, explained theme count.

numpy only (no scikit-learn/scipy at run time: footprint and cold start).

Algorithm:

1. PCA (via SVD of a sample) to at most 64 dimensions, only to make the
   many k-means runs of step 2 cheap. Vectors are re-normalised afterwards
   so k-means stays spherical (cosine).
2. Candidate theme counts ``k`` over the whole allowed range (every k up to
   20, then steps of ~25 %). For each, spherical k-means with k-means++
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
   (Superseded in issue 22: the curve is now read by :func:`decide`, in units of its own seed noise, with
   bands for 2-4, 5-12 and finer counts; see there and docs/thematic.md. Since its fourth round each candidate
   is also scored on its *split path*, the previous candidate's partition with groups bisected; since its fifth
   round each candidate counts as the better of the two: see :func:`silhouette_curve`, :func:`_bisect_to` and
   :func:`_envelope`.)
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
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .parallel import Unit, Units

F32 = NDArray[np.float32]
I64 = NDArray[np.int64]

#: Seeds per candidate k when choosing automatically (k <= 20; SEEDS_LARGE_K above).
SEEDS = 3
SEEDS_LARGE_K = 2
#: k-means iterations per run of the k search (the final partition runs to convergence).
SEARCH_ITER = 25
#: k-means++ restarts of each bisection of the split path (:func:`_bisect_to`) up to ``SPLIT_BATCH_K`` groups ...
SPLIT_RESTARTS = 2
#: ... and above it (issue 27): the path bisects every group of the previous candidate's partition, ~1,200 2-means
#: runs per curve of 2,000 answers, most of them above 60 (groups of ~30). One restart everywhere lost a lump's
#: bisection in test_count_split_path's shape, so it is 1 only there.
SPLIT_RESTARTS_LARGE_K = 1
#: Above 20, candidate counts grow in geometric steps of this factor (see candidate_ks). 1.25 since issue 27 (was
#: 1.15: 16 candidates above 20 up to a cap of 178, now 10); each costs a k-means row, its silhouettes and a split
#: path. Chosen with ``SPLIT_BATCH_K`` and ``SPLIT_RESTARTS_LARGE_K`` on the TUNE sets (7 sets x 3 seeds, the whole
#: cluster stage, bench/cluster_speed.py --counts): no count outside 0.5-2x (none before), mean |log2(k / true k)|
#: 0.330 -> 0.301, NMI at the chosen count +0.003 (other seeds, a null change: 0.330 -> 0.362, +0.001). The k search
#: of the 2,000-answer job 0.5-0.6 CPU-s cheaper (docs/embedding-speed.md, 2026-12-07).
CANDIDATE_STEP = 1.25
#: Hard ceiling of the automatic count and its growth with sqrt(n) (see auto_cap).
AUTO_CAP = 200
CAP_SQRT = 4.0
#: Below this best silhouette the structure is weak and the count a judgement (see choose_k).
WEAK_STRUCTURE = 0.06
#: The small band: counts 2..SMALL_MAX are answered only on strong structure (see decide).
SMALL_MAX = 4
#: ... their peak must beat every larger count by this many noise units ...
STRONG = 4.0
#: ... and by this much in absolute silhouette ...
SMALL_GAIN = 0.03
#: A level is "very unequal" when its largest group holds more than UNEQUAL x its fair share 1/k: its mean
#: silhouette is then carried by one distinct group, and says little about how many themes the rest holds.
UNEQUAL = 1.3
#: ... and at the broad level only while the fine level is a competing reading (scores at least this fraction of the
#: broad peak): 400 answers on one theme beside six of 25 score 0.85 at k=6 and 0.24 at 14, that broad level is real.
UNEQUAL_RIVAL = 0.5
#: The broad peak beats the fine one when it scores more than this many noise units higher (else: fine).
TIE = 1.0
#: The fine level's gain is near-paraphrase bunches when its median is this many noise units below the broad one's.
PARAPHRASE = 2.0
#: Confidence 1 when the best 2x-wrong count scores this many noise units below the chosen one.
CONF_MARGIN = 4.0
#: Kaufman & Rousseeuw's bound (Finding Groups in Data, 1990): a silhouette coefficient <= 0.25 means "no
#: substantial structure". Not fitted on any set; a coarse answer (2-4) at or below it is never "high".
SUBSTANTIAL = 0.25
#: Other readings reported: level peaks within this many noise units of the chosen count.
ALT = 3.0
#: The fine level's count is read on its *flat top*: every fine candidate within this many noise units of the level's
#: best (:func:`_flat_middle`). Measured on the tune sets (issue 22, seventh round): the seed-to-seed spread of the curve
#: at one k is ~0.45 noise units (median of the 7 tune sets, 3 seeds), and the fine band holds 15-25 candidates, whose
#: noise alone spans ~4 of those spreads, ~2 noise units: a candidate closer than that to the best is not told apart.
#: Only where the fine level shows no substantial structure (silhouette <= ``SUBSTANTIAL``): on clean structure the
#: best restart is reproducible while the others miss it, so the seed spread overstates the noise of the maximum (the
#: synthetic nested and dominant shapes: noise 0.12 and 0.03 from failed restarts, a smooth falling fine band).
FLAT = 2.0
#: Lower bound of the curve's noise estimate (a curve whose seeds all agree is not noise-free).
NOISE_FLOOR = 0.002
#: Relative band around the best silhouette reported as equally supported counts.
PLATEAU = 0.05
#: The granularity prior (weak structure only): sqrt(n)/3 clipped to PRIOR_MIN..PRIOR_MAX, searched
#: within a factor PRIOR_WINDOW either side.
PRIOR_MIN = 4
PRIOR_MAX = 25
PRIOR_WINDOW = 1.6
#: The coarse peak of the curve is searched up to this k (the broad level: 3-12 themes).
BROAD_MAX = 12
#: Groups the split path (:func:`_bisect_to`) prefers to cut have at least this many members (2 x the default
#: min_theme_size: two halves that can each stay a theme).
SPLIT_MIN = 10
#: Candidate cuts scored at once by :func:`_cut_totals` (rows of CHOICE_SAMPLE float64: ~1 MiB an array).
CUT_BLOCK = 64
#: Points used to choose k (the silhouette is O(sample · dim · k), the k-means O(sample · PCA_DIMS · k) per round).
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
#: seed-to-seed variation of the result. 5 since issue 27 (was 10; a quarter of the 2,000-answer job's time after
#: embedding at 2 threads): on the TUNE sets, 3 seeds, the count and its confidence cannot move (the final partition
#: comes after them) and NMI at the chosen count fell 0.0034 on the mean (dominant-20ng -0.021, the rest within
#: 0.005); 3 restarts fell 0.0068 (docs/embedding-speed.md).
FINAL_RESTARTS = 5
#: Above this candidate count the split path (:func:`_bisect_to`) makes all the cuts it still needs from one scoring
#: round, the best-scoring first, instead of re-scoring every cut after each one (issue 27): a step scores ~k cuts
#: over every point and a candidate needs ~k/4 steps, so that path's cost grows as k^2 (~0.9 of the 2,000-answer
#: job's ~2.1 CPU-s of clustering, most of it above 60). No split path at all above 60 was cheaper still but moved
#: Banking77's TUNE counts down (49 for 77 on one seed, NMI -0.010); one round keeps them (95, 95, 119).
SPLIT_BATCH_K = 60
#: Candidates whose k-means runs :func:`silhouette_curve` submits ahead of its split path (with a second thread they
#: run beside it). Each holds its runs' labels and silhouette products (CHOICE_SAMPLE x k float32, <= 1.6 MiB a run).
CURVE_AHEAD = 8
#: Fewer new bisections than this in a split-path step are made in the calling thread (see :func:`_new_cuts`).
CUT_UNIT_MIN = 8
#: Rows per one-hot block in :func:`group_sums`.
GROUP_BLOCK = 8192


def normalise(x: NDArray[Any]) -> F32:
    # np.linalg.norm(x, axis=1, keepdims=True) for a float array, without its argument handling (k-means
    # normalises its centres every round): numpy's own code for this case is sqrt(add.reduce(x.conj() * x)), and
    # x.conj() of a real array is x.
    n = (np.sqrt(np.add.reduce(x * x, axis=1, keepdims=True)) if x.dtype.kind == "f"
         else np.linalg.norm(x, axis=1, keepdims=True))
    out: F32 = (x / np.maximum(n, 1e-12)).astype(np.float32, copy=False)  # the quotient is new: no second copy
    return out


def group_sums(labels: I64, x: F32, k: int) -> F32:
    """Row sums of ``x`` per label 0..k-1 (labels < 0 ignored).

    As a matrix product with a one-hot block (BLAS): ~10x faster than the
    sort + ``np.add.reduceat`` used before (which itself was ~30x faster than
    ``np.add.at``); this is the inner step of every k-means iteration. Blocks
    of rows bound the one-hot matrix to ``GROUP_BLOCK`` × k floats.
    """
    return _group_sums(labels, x, k, labels_ok=False)


def _group_sums(labels: I64, x: F32, k: int, *, labels_ok: bool) -> F32:
    """:func:`group_sums`; ``labels_ok``: every label is in 0..k-1 (k-means' own), so no mask is needed. The
    one-hot blocks, and so the matrix products and their rounding, are the same either way."""
    out = np.zeros((k, x.shape[1]), dtype=np.float32)
    for start in range(0, len(labels), GROUP_BLOCK):
        lab = labels[start : start + GROUP_BLOCK]
        onehot = np.zeros((len(lab), k), dtype=np.float32)
        if labels_ok:
            onehot[np.arange(len(lab)), lab] = 1.0
        else:
            keep = np.flatnonzero(lab >= 0)
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


def neighbours(x: F32, m: int, *, units: Units | None = None) -> I64:
    """Indices of the ``m`` most cosine-similar other points of each row of unit vectors ``x``.

    Exact, blockwise (memory O(block · n)); ``argpartition`` so no full sort. ``units``: the blocks are units of it
    (each block's rows are computed alone either way)."""
    return _neighbours_done(x, _neighbour_blocks(x, m, units))


def _neighbour_blocks(x: F32, m: int, units: Units | None) -> list[Unit[I64]] | I64:
    """:func:`neighbours`' blocks, submitted to ``units`` (or computed now when it is None)."""
    n = x.shape[0]
    block = max(64, min(1024, SMOOTH_BLOCK_CELLS // max(n, 1)))
    if units is None:
        out = np.empty((n, m), dtype=np.int64)
        for start in range(0, n, block):
            out[start : start + block] = _neighbour_block(x, m, start, block)
        return out
    return [units.submit(_neighbour_block, x, m, start, block) for start in range(0, n, block)]


def _neighbours_done(x: F32, blocks: list[Unit[I64]] | I64) -> I64:
    if isinstance(blocks, np.ndarray):
        return blocks
    parts = [u.result() for u in blocks]
    return np.concatenate(parts) if parts else np.empty((0, 0), dtype=np.int64)


def _neighbour_block(x: F32, m: int, start: int, block: int) -> I64:
    """The ``m`` nearest other points of rows ``start .. start + block`` (:func:`neighbours`)."""
    sims = x[start : start + block] @ x.T
    rows = np.arange(sims.shape[0])
    sims[rows, start + rows] = -np.inf  # not its own neighbour
    # A copy, not the slice: a view would keep argpartition's whole block x n array alive for as long as the result
    # waits to be collected (48 blocks of 64 MiB at 20,000 answers).
    out: I64 = np.argpartition(-sims, m - 1, axis=1)[:, :m].copy()
    return out


def knn_smooth(x: F32, m: int = SMOOTH_NEIGHBOURS, *, seed: int = 0, units: Units | None = None) -> F32:
    """Each point averaged with the mean of its ``m`` nearest neighbours, re-normalised.

    One step of neighbourhood averaging (a graph-diffusion / mean-shift step):
    the part of a short text's embedding that its neighbours share (the topic)
    is kept, its idiosyncratic part (wording, length, named entities) is
    damped, so k-means separates topics better. Measured at the true k on BBC:
    NMI 0.741 → 0.762 on leads and 0.584 → 0.634 on headlines; it also helps
    the many-small-themes set. It is used for the final partition only, not to
    choose k: on smoothed vectors near-paraphrase groups become so tight that
    silhouette prefers 40 themes on headlines.

    ``units``: the neighbour search's blocks are units of it (:func:`neighbours`).
    """
    return _smooth_start(x, m, seed=seed, units=units)()


def _smooth_start(x: F32, m: int = SMOOTH_NEIGHBOURS, *, seed: int = 0, units: Units | None = None
                  ) -> Callable[[], F32]:
    """:func:`knn_smooth` in two steps: this submits the neighbour search's blocks to ``units`` (the caller goes on
    with other work meanwhile, :func:`cluster`); the function it returns waits for them and smooths."""
    n = x.shape[0]
    m = min(m, n - 1)
    if m < 1:
        return lambda: x
    space = x if n <= SMOOTH_FULL_MAX else pca(x, PCA_DIMS, seed=seed)
    blocks = _neighbour_blocks(space, m, units)
    return lambda: normalise(x + x[_neighbours_done(space, blocks)].mean(axis=1))


def kmeans_pp_init(x: F32, k: int, rng: np.random.Generator) -> F32:
    """k-means++ seeding with cosine distance (``1 - x·c``) on unit vectors (:class:`PlusPlusPrefix`'s draws)."""
    return PlusPlusPrefix(x, rng=rng).first(k)


class PlusPlusPrefix:
    """The k-means++ centres of one random stream, drawn once and handed out as prefixes (issue 27).

    :func:`kmeans_pp_init` draws its centres one after the other, each from the stream and the distances to the
    centres before it, so its first k centres for a k' > k are its k centres: the same draws from the same state,
    the same distance updates in place. The k search seeds every candidate count with the same stream per seed
    (``seed * 1000 + s``), so ``first(k)`` gives what ``kmeans_pp_init(x, k, default_rng(seed))`` gives, bit for
    bit, while the draws are made once up to the largest count instead of once per candidate.

    Thread-safe (the curve's runs are units, :mod:`.parallel`): ``first`` holds a lock, and what it returns does not
    depend on the order of the calls (a call for more centres draws on from where the stream stopped).
    """

    def __init__(self, x: F32, seed: int | None = None, *, rng: np.random.Generator | None = None) -> None:
        self.x, self.rng = x, rng if rng is not None else np.random.default_rng(seed)
        self.centers = np.empty((0, x.shape[1]), dtype=np.float32)
        self.d: F32 | None = None
        self._lock = threading.Lock()

    def first(self, k: int) -> F32:
        with self._lock:
            return self._first(k)

    def _first(self, k: int) -> F32:
        x, rng, n = self.x, self.rng, self.x.shape[0]
        have = len(self.centers)
        if k > have:
            centers = np.empty((k, x.shape[1]), dtype=np.float32)
            centers[:have] = self.centers
            if have == 0:
                centers[0] = x[int(rng.integers(n))]
                self.d = np.maximum(1.0 - x @ centers[0], 0.0)
                have = 1
            d = self.d
            assert d is not None
            for i in range(have, k):
                total = float(d.sum())
                idx = int(rng.integers(n)) if total <= 0 else weighted_draw(rng, d / total)
                centers[i] = x[idx]
                # d = min(d, max(1 - x·c, 0)), the same operations in place (no temporaries: this loop runs k times).
                s = x @ centers[i]
                np.subtract(1.0, s, out=s)
                np.maximum(s, 0.0, out=s)
                np.minimum(d, s, out=d)
            self.centers = centers
        return self.centers[:k].copy()


def weighted_draw(rng: np.random.Generator, p: F32) -> int:
    """``int(rng.choice(len(p), p=p))``: the same index from the same state of ``rng``, which it leaves as
    ``choice`` does (one ``random()`` draw), without ``choice``'s checks of ``p`` (half its cost, and k-means++
    draws once per centre: ~3,000 times per job of 2,000 responses).

    The steps are numpy 2.4's ``Generator.choice`` with ``p`` and ``replace=True`` (``_generator.pyx``): ``p`` as
    float64, its cumulative sum normalised by its last value, and the first index whose cumulative weight
    exceeds a uniform draw. ``tests/unit/thematic/test_cluster_speed.py`` checks it against ``choice``.
    """
    cdf = p.astype(np.float64).cumsum()
    cdf /= cdf[-1]
    return int(cdf.searchsorted(rng.random(), side="right"))


def spherical_kmeans(
    x: F32, k: int, *, seed: int = 0, n_init: int = 2, max_iter: int = 40, tol: float = 1e-5,
    init: F32 | None = None, units: Units | None = None,
) -> tuple[I64, F32]:
    """Cluster unit vectors by cosine; returns (labels, unit centroids), best of ``n_init`` runs.

    ``init``: the first run's k-means++ centres when the caller has them (:class:`PlusPlusPrefix`: exactly
    ``kmeans_pp_init(x, k, default_rng(seed))``, so for ``n_init=1`` the same result). ``units``: the runs after
    their seeding are units of it (:mod:`.parallel`): the seedings draw from the one random stream in run order,
    here, and nothing else does, so every run gets the centres it gets one after the other; the best is then
    taken in run order (the first of equal scores), as one after the other."""
    n = x.shape[0]
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    best: tuple[float, I64, F32] | None = None
    runs: list[Unit[tuple[float, I64, F32]]] = []
    for run in range(n_init):
        c = init if run == 0 and init is not None else kmeans_pp_init(x, k, rng)
        if units is not None:
            runs.append(units.submit(_kmeans_run, x, c, k, max_iter, tol))
            continue
        got = _kmeans_run(x, c, k, max_iter, tol)
        if best is None or got[0] > best[0]:
            best = got
    for u in runs:
        got = u.result()
        if best is None or got[0] > best[0]:
            best = got
    assert best is not None
    return best[1], best[2]


def _kmeans_run(x: F32, c: F32, k: int, max_iter: int, tol: float) -> tuple[float, I64, F32]:
    """One run of :func:`spherical_kmeans` from the centres ``c``: (objective, labels, unit centroids)."""
    n = x.shape[0]
    rows = np.arange(n)
    prev = -np.inf
    labels = np.zeros(n, dtype=np.int64)
    last: I64 | None = None
    score = -np.inf
    for _it in range(max_iter):
        sims = x @ c.T
        labels = sims.argmax(axis=1).astype(np.int64, copy=False)
        fit = sims[rows, labels]
        score = float(fit.sum())
        counts = np.bincount(labels, minlength=k)
        # count_nonzero, not .all() / np.array_equal: the same answers without their per-call overhead (this
        # loop runs ~5,000 times in the k search of 2,000 responses, mostly on the split path's small groups).
        full = np.count_nonzero(counts) == k
        if last is not None and full and not np.count_nonzero(labels != last):
            # No point moved and no group is empty, so ``c`` already is the mean of these groups: the update
            # would give back ``c`` bit for bit, the next round the same labels and score, and the loop would
            # stop there with (labels, c, score). Stopping now returns exactly that, two matrix products
            # sooner (~20 % of the k search's k-means rounds end this way).
            break
        sums = _group_sums(labels, x, k, labels_ok=True)
        if not full:
            # Re-seed empty clusters with the worst-fitting points.
            empty = np.flatnonzero(counts == 0)
            sums[empty] = x[np.argsort(fit)[: empty.size]]
        c = normalise(sums)
        if score - prev <= tol * n:
            break
        prev = score
        last = labels
    return score, labels, c


def silhouette(x: F32, labels: I64) -> float:
    """Mean cosine silhouette of the unit vectors ``x`` (caller samples); 0 for one group or none."""
    return float(silhouette_values(x, labels).mean()) if len(labels) else 0.0


def silhouette_values(x: F32, labels: I64) -> NDArray[np.float64]:
    """Per-point cosine silhouette of the unit vectors ``x``; 0 alone in a group, all 0 for one group.

    From each group's vector sum instead of the n x n distance matrix (issue 27): on unit vectors the summed
    distance of point i to group g is sum_j (1 - x_i . x_j) = n_g - x_i . S_g, so the cost is two products of
    n x dim x k (the group sums and the points against them) instead of one of n x n x k (~2.6x fewer operations
    at n = 2,000, dim 384). The same mathematics as the matrix form; its own distance (1 - x_i . x_i, zero up to
    rounding) is taken out of the point's own group exactly. float32 like the matrix form it replaces (float64 would
    double the products' cost): ``tests/unit/thematic/test_cluster_speed.py`` holds it to the textbook definition,
    sklearn's and the matrix form.
    """
    return _silhouette_and_sims(x, labels)[0]


def _silhouette_and_sims(x: F32, labels: I64, self_dist: F32 | None = None) -> tuple[NDArray[np.float64], F32 | None]:
    """:func:`silhouette_values` and its product ``x @ group_sums(labels, x, k).T`` when ``labels`` are all of
    0..k-1 (then it is the very product :func:`_bisect_to` starts from: the same one-hot block), else None.
    ``self_dist``: :func:`_self_distances` of ``x`` when the caller scores many partitions of it (the curve)."""
    counts = np.bincount(labels) if len(labels) and labels.min() >= 0 else None
    if counts is not None and np.count_nonzero(counts) == len(counts):
        # Every label of 0..k-1 is used (every k-means partition): np.unique's values would be 0..k-1, its inverse
        # the labels themselves and its counts these: the same arrays without its sort (issue 27).
        uniq, own = np.arange(len(counts)), labels.astype(np.int64, copy=False)
    else:
        uniq, own, counts = np.unique(labels, return_inverse=True, return_counts=True)
        own = own.reshape(-1).astype(np.int64, copy=False)
    if len(uniq) < 2:
        return np.zeros(len(labels)), None
    sums = _group_sums(own, x, len(uniq), labels_ok=True)
    sims = x @ sums.T
    tot = counts.astype(np.float32) - sims
    rows = np.arange(len(labels))
    own_count = counts[own]
    a = (tot[rows, own] - (_self_distances(x) if self_dist is None else self_dist)) / np.maximum(own_count - 1, 1)
    mean_d = tot / counts.astype(np.float32)
    mean_d[rows, own] = np.inf
    b = mean_d.min(axis=1)
    s: NDArray[np.float64] = np.where(own_count > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return s, (sims if uniq[0] == 0 and uniq[-1] == len(uniq) - 1 else None)


def _self_distances(x: F32) -> F32:
    """Each unit vector's cosine distance to itself, 1 - x_i . x_i (zero up to rounding), as the silhouette takes
    it out of the point's own group."""
    out: F32 = 1.0 - np.einsum("ij,ij->i", x, x)
    return out


def candidate_ks(k_min: int, k_max: int) -> list[int]:
    """Every k up to 20, then geometric steps of ~25 % (``CANDIDATE_STEP``; resolution where it matters, 30 candidates
    to 200)."""
    ks: list[int] = []
    k = k_min
    while k <= k_max:
        ks.append(k)
        k = k + 1 if k < 20 else max(k + 1, round(k * CANDIDATE_STEP))
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
    """0..1: the margin of this count's silhouette over the best count at least 2x away, in noise units / ``CONF_MARGIN``,
    times the structure strength (see :func:`decide`)."""
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
    noise: float = 0.0
    """The curve's seed noise (:func:`curve_noise`): the unit every decision of :func:`decide` is measured in."""
    broad_k: int | None = None
    """The broad level's peak (5..12) of the curve, whether or not it is the chosen count."""


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


def silhouette_curve(x: F32, ks: list[int], *, seed: int, units: Units | None = None) -> list[dict[str, float]]:
    """Mean cosine silhouette per candidate k (best of the seeds) on a sample, in the full space.

    Each row also carries the *split path* (issue 22): ``split`` / ``split_median`` / ``split_top`` are the
    silhouette, median and largest share of the partition made by bisecting groups of the previous candidate's
    best partition (the k-means one or its own split path, whichever scored higher) until it has k groups, the
    cut that leaves the best silhouette first (:func:`_bisect_to`). A k-means++ run at k + 1 can lose a solution that the k
    solution plus one split has (one dominant group kept whole, a lump of the rest cut in two): its silhouette
    then falls below what a split achieves, and the curve's maximum drifts to coarse counts. The split path
    bounds that loss; it uses its own random stream, so the k-means fields are those of the plain curve.
    ``agree`` is the mean ARI between the k-means seeds' partitions at that k (their stability under
    re-seeding; reported, not used by :func:`decide`).

    ``units`` (:mod:`.parallel`): the k-means runs of the candidates (with their silhouettes) are units of it,
    submitted ``CURVE_AHEAD`` candidates ahead of the split path, which the calling thread walks meanwhile (it
    needs each candidate's runs only after its own bisection); the split path's bisections are units too
    (:func:`_bisect_to`). Each unit computes what it computes in order, and the rows are assembled in order.
    """
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(x), size=CHOICE_SAMPLE, replace=False) if len(x) > CHOICE_SAMPLE else np.arange(len(x))
    full = x[idx]
    reduced = pca(full, PCA_DIMS, seed=seed)
    rows: list[dict[str, float]] = []
    prev: I64 | None = None
    prev_sims: F32 | None = None  # full @ group_sums(prev, full).T, from prev's silhouette (None: recompute)
    split_rng = np.random.default_rng(seed + 7919)
    plus = {s: PlusPlusPrefix(reduced, seed * 1000 + s) for s in range(max(SEEDS, SEEDS_LARGE_K))}  # k-means++ centres, per seed
    self_dist = _self_distances(full)  # the same for every partition the curve scores
    if units is None:
        units = Units(1)
    # Single runs are noisy at small k; at large k many clusters average out, so fewer seeds suffice.
    seed_runs: list[list[Unit[tuple[I64, float, float, F32 | None]]]] = []

    def submit(i: int) -> None:
        k = ks[i]
        seed_runs.append([units.submit(_curve_run, reduced, full, self_dist, plus[s], k, seed * 1000 + s)
                          for s in range(SEEDS if k <= 20 else SEEDS_LARGE_K)])

    for i in range(min(CURVE_AHEAD, len(ks))):
        submit(i)
    for i, k in enumerate(ks):
        if i + CURVE_AHEAD < len(ks):
            submit(i + CURVE_AHEAD)
        split = _bisect_to(reduced, prev, k, split_rng, full, prev_sims, units=units) if prev is not None else None
        scored = _silhouette_and_sims(full, split, self_dist) if split is not None and int(split.max()) + 1 == k else None
        row, best_labels, best_sims = _seeds_row(k, [u.result() for u in seed_runs[i]])
        seed_runs[i] = []  # drop the finished runs' arrays
        median, top = row["median"], row["top"]
        nxt_sims = best_sims
        if split is not None and scored is not None:
            sp, split_sims = scored
            row.update(split=float(sp.mean()), split_median=float(np.median(sp)),
                       split_top=float(np.bincount(split).max() / len(split)))
            nxt, nxt_sims = (split, split_sims) if row["split"] > row["silhouette"] else (best_labels, best_sims)
        elif split is not None:
            # No cut into two theme-sized halves was left: the path has no partition into k groups.
            row.update(split=-1.0, split_median=-1.0, split_top=top)
            nxt = best_labels
        else:
            row.update(split=row["silhouette"], split_median=median, split_top=top)
            nxt = best_labels
        rows.append(row)
        prev, prev_sims = nxt, nxt_sims
    return rows


def _seeds_row(k: int, results: list[tuple[I64, float, float, F32 | None]]) -> tuple[dict[str, float], I64, F32 | None]:
    """:func:`silhouette_curve`'s row of candidate ``k`` from its seeds' runs (:func:`_curve_run`, in seed order),
    with the best run's labels and silhouette product."""
    vals = []
    median = top = 0.0
    runs: list[I64] = []
    best_labels: I64 | None = None
    best_sims: F32 | None = None
    for labels, mean, run_median, sims in results:
        vals.append(mean)
        runs.append(labels)
        if vals[-1] >= max(vals):
            median = run_median
            top = float(np.bincount(labels).max() / len(labels))
            best_labels, best_sims = labels, sims
    # The best of the seeds, not their mean: a bad local optimum of
    # k-means only ever lowers the score, so the max is the fair
    # estimate of how well k groups can fit. ``median``: the typical
    # response's silhouette in that best run (see choose_k).
    row = {"k": k, "silhouette": float(np.max(vals)), "seed_spread": float(np.ptp(vals)), "median": median,
           "top": top}
    agree = [_ari(runs[i], runs[j]) for i in range(len(runs)) for j in range(i + 1, len(runs))]
    row["agree"] = float(np.mean(agree)) if agree else 1.0
    assert best_labels is not None
    return row, best_labels, best_sims


def _curve_run(reduced: F32, full: F32, self_dist: F32, plus: PlusPlusPrefix, k: int, seed: int
               ) -> tuple[I64, float, float, F32 | None]:
    """One k-means run of :func:`silhouette_curve` at ``k`` (seeded by ``plus``, the stream of ``seed``) and its
    silhouette: (labels, mean and median silhouette, the silhouette's product for the split path)."""
    labels, _ = spherical_kmeans(reduced, k, seed=seed, n_init=1, max_iter=SEARCH_ITER,
                                 init=plus.first(max(1, min(k, len(reduced)))))
    per_point, sims = _silhouette_and_sims(full, labels, self_dist)
    return labels, float(per_point.mean()), float(np.median(per_point)), sims


def _ari(a: I64, b: I64) -> float:
    """Adjusted Rand index of two labelings (numpy; for the curve's seed agreement)."""
    n = len(a)
    if n < 2:
        return 1.0
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    na, nb = int(ai.max()) + 1, int(bi.max()) + 1
    # Counts of each (a, b) pair: integers, so exactly the table np.add.at built, in one pass.
    table = np.bincount(ai * nb + bi, minlength=na * nb).reshape(na, nb).astype(np.float64)

    def pairs(v: NDArray[np.float64]) -> float:
        return float((v * (v - 1) / 2).sum())

    sum_ij, sum_a, sum_b = pairs(table), pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    expected = sum_a * sum_b / (n * (n - 1) / 2)
    top = (sum_a + sum_b) / 2
    return 1.0 if top == expected else (sum_ij - expected) / (top - expected)


def _step_state(tot: F32, sizes: NDArray[np.float64], out: I64) -> tuple[
        NDArray[Any], I64, NDArray[Any], NDArray[Any]]:
    """What a split-path step scores its cuts from, given each point's distance sums to every group: each point's
    mean distance to its own group (``a``), its nearest other group, and the mean distances to the nearest and
    the second nearest other group (inf when there is none)."""
    rows = np.arange(len(out))
    mean_d = tot / np.maximum(sizes, 1.0)
    a = tot[rows, out] / np.maximum(sizes[out] - 1.0, 1.0)
    mean_d[rows, out] = np.inf
    near: I64 = mean_d.argmin(axis=1)
    b1 = mean_d[rows, near]
    mean_d[rows, near] = np.inf
    return a, near, b1, mean_d.min(axis=1)


#: A split-path cut: (members, halves 0/1, distance sums of every point to half 1, half 0's members, half 1's).
_Cut = tuple[I64, I64, F32, I64, I64]


def _bisect_to(x: F32, labels: I64, k: int, rng: np.random.Generator, space: F32 | None = None,
               sims: F32 | None = None, *, units: Units | None = None) -> I64:
    """``labels`` with groups bisected (2-means in ``x``) until there are ``k``: at every step the cut that leaves
    the partition with the highest mean cosine silhouette in ``space`` (the unit vectors the curve scores in;
    ``x`` when not given), among groups of >= ``SPLIT_MIN`` members while there are any. The split path of
    :func:`silhouette_curve`: the path scores each k by the best partition it reaches, so it picks its cuts by
    that score.

    Not the largest spread in total (the dominant group whenever one holds a third) nor per member (the rule of
    round four: a real theme looser than the others is least cohesive in every piece of it, so it was shredded
    before the lumps of tight themes were separated, and the path's score rose to k = 39 for 17 groups; see
    docs/thematic.md, issue 22, fifth round). Exact and incremental: each point's distance sums to each group are
    kept, so a candidate cut costs O(n), and each group is bisected once. ``sims``: ``space @ group_sums(labels,
    space, k).T`` when the caller has it (the curve, from the silhouette of ``labels``), else computed here.

    Above ``SPLIT_BATCH_K`` groups (the target ``k``) the cuts still needed are all made after one scoring round,
    the best-scoring first, each scored on the partition before any of them (issue 27: the cost of a step-by-step
    path grows as k^2).

    (Reusing the bisections of groups the previous candidate left whole halves the 2-means runs but moves counts on
    the tune sets, so it is not done: docs/embedding-speed.md, 2026-12-03.)

    ``units``: a step's new bisections are units of it; their seeds are drawn first, in the order of the eligible
    groups, as one at a time draws them (a bisection draws nothing else from ``rng``)."""
    out = labels.copy()
    n = len(out)
    v = x if space is None else space
    groups = int(out.max()) + 1
    sizes = np.bincount(out, minlength=groups).astype(np.float64)
    # tot[i, g]: the sum of cosine distances from point i to the members of group g, from the groups' vector sums
    # (sum of 1 - v_i . v_j = |g| - v_i . sum_g), as silhouette_values does: no n x n matrix.
    if sims is None or sims.shape != (n, groups):
        sims = v @ group_sums(out, v, groups).T
    tot = (sizes[None, :] - sims).astype(np.float32)
    # Each group's bisection, drawn once (a cut changes only the group it cuts): (members, halves, distance sums
    # to half 1), or None when it only peels off fewer than SPLIT_MIN // 2 points (no split into two themes: the
    # rest gets tighter and the silhouette rises for it, while the peeled points would be folded back anyway).
    cuts: dict[int, _Cut | None] = {}
    while groups < k:
        eligible = np.flatnonzero(sizes >= (SPLIT_MIN if (sizes >= SPLIT_MIN).any() else 2))
        a, near, b1, b2 = _step_state(tot, sizes, out)
        _new_cuts(x, v, out, eligible, cuts, rng, SPLIT_RESTARTS_LARGE_K if k > SPLIT_BATCH_K else SPLIT_RESTARTS,
                  units)
        best_total, best_g = -np.inf, -1
        cand = [int(g) for g in eligible if cuts[int(g)] is not None]
        own0 = sizes[out]
        scored: list[tuple[float, int]] = []
        for start in range(0, len(cand), CUT_BLOCK):
            for g, total in zip(cand[start : start + CUT_BLOCK],
                                _cut_totals(cand[start : start + CUT_BLOCK], cuts, tot, a, near, b1, b2, own0),
                                strict=True):
                scored.append((total, g))
                if total > best_total:
                    best_total, best_g = total, g
        if best_g < 0:
            break
        if k > SPLIT_BATCH_K:
            # Every cut still needed at once, the best-scoring first (ties: the order of eligible, as one at a time).
            order = sorted(range(len(scored)), key=lambda i: (-scored[i][0], i))
            made = [scored[i][1] for i in order[: k - groups]]
        else:
            made = [best_g]
        for g_cut in made:
            chosen = cuts.pop(g_cut)
            assert chosen is not None
            m, sub, s1 = chosen[:3]
            out[m[sub == 1]] = groups
            tot[:, g_cut] -= s1
            tot = np.concatenate([tot, s1[:, None]], axis=1)
            c1 = float((sub == 1).sum())
            sizes[g_cut] -= c1
            sizes = np.append(sizes, c1)
            groups += 1
    return out


def _new_cuts(x: F32, v: F32, out: I64, eligible: I64, cuts: dict[int, _Cut | None], rng: np.random.Generator,
              restarts: int, units: Units | None) -> None:
    """:func:`_bisect_to`'s bisections of the ``eligible`` groups not in ``cuts`` yet, added to it: their seeds
    drawn first, in the order of ``eligible`` (the rng's sequence), then each one computed (as units of
    ``units``, when given)."""
    new = [(g, np.flatnonzero(out == g), int(rng.integers(1 << 31))) for g in map(int, eligible) if g not in cuts]
    if units is None or units.threads == 1 or len(new) < CUT_UNIT_MIN:
        cuts.update(_cuts(x, v, new, restarts))
        return
    # A bisection is small (groups of ~30 at large k): one unit per share of them, not per bisection, so a step
    # synchronises once per thread, not ~k times (every hand-over costs a wake-up, long on a loaded machine).
    share = -(-len(new) // units.threads)
    parts = [units.submit(_cuts, x, v, new[start : start + share], restarts) for start in range(share, len(new), share)]
    for got in [_cuts(x, v, new[:share], restarts), *(u.result() for u in parts)]:
        cuts.update(got)


def _cuts(x: F32, v: F32, new: list[tuple[int, I64, int]], restarts: int) -> dict[int, _Cut | None]:
    """:func:`_cut` of each (group, members, seed) of ``new``, by group: the 2-means runs of all of them in lock step
    (:func:`bisect_many`, bit for bit each one's :func:`spherical_kmeans`)."""
    subs = bisect_many([x[m] for _, m, _ in new], [cut_seed for _, _, cut_seed in new], restarts, SEARCH_ITER)
    return {g: _cut(x, v, m, cut_seed, restarts, sub) for (g, m, cut_seed), sub in zip(new, subs, strict=True)}


def _cut(x: F32, v: F32, m: I64, seed: int, restarts: int, sub: I64 | None = None) -> _Cut | None:
    """:func:`_bisect_to`'s bisection of the group of members ``m`` (2-means in ``x``, seeded ``seed``) and its
    distance sums in ``v``, or None when it only peels off fewer than ``SPLIT_MIN // 2`` points. ``sub``: the
    2-means labels when the caller has them (:func:`bisect_many`)."""
    if sub is None:
        sub, _ = spherical_kmeans(x[m], 2, seed=seed, n_init=restarts, max_iter=SEARCH_ITER)
    ok = min(int((sub == 0).sum()), int((sub == 1).sum())) >= SPLIT_MIN // 2
    h0, h1 = m[sub == 0], m[sub == 1]  # kept with the cut: every step scores it until it is made
    return (m, sub, (float(len(h1)) - v @ v[h1].sum(axis=0)).astype(np.float32), h0, h1) if ok else None


def _pp2(x: F32, rng: np.random.Generator) -> F32:
    """``kmeans_pp_init(x, 2, rng)``: the same draws and the same operations, without the distance update after the
    last centre (a prefix would need it, a one-off draw of two centres does not)."""
    n = x.shape[0]
    centers = np.empty((2, x.shape[1]), dtype=np.float32)
    centers[0] = x[int(rng.integers(n))]
    d = np.maximum(1.0 - x @ centers[0], 0.0)
    total = float(d.sum())
    centers[1] = x[int(rng.integers(n)) if total <= 0 else weighted_draw(rng, d / total)]
    return centers


#: The one-hot rows of a 2-means round by label (:func:`bisect_many`): row 0 for label 0, row 1 for label 1.
_ONEHOT2 = np.eye(2, dtype=np.float32)


def bisect_many(xs: list[F32], seeds: list[int], restarts: int, max_iter: int = SEARCH_ITER, tol: float = 1e-5
                ) -> list[I64]:
    """The labels of ``spherical_kmeans(x, 2, seed=s, n_init=restarts, max_iter=max_iter, tol=tol)`` for every
    (x, s) of ``xs`` and ``seeds``, bit for bit, with every run of every problem in lock step (issue 27).

    The split path bisects hundreds of small groups (~30 points in 64 dimensions at large k), and a round of
    :func:`_kmeans_run` on one is ~20 numpy calls on arrays of a few dozen rows: their overhead is the cost. Here
    each run keeps its own two matrix products per round, called exactly as :func:`_kmeans_run` calls them (the
    same operands, shapes and strides, so BLAS computes the same floats), and its own score sum (a slice of the
    contiguous fits, reduced as :func:`_kmeans_run` reduces its fits); everything else (labels, fits, counts, the
    no-point-moved test, the one-hot rows, the centres' normalisation) is computed once per round for all runs,
    elementwise or per row, which gives each run the values it gets alone. Runs stop when they would alone; the
    best restart of each problem is taken in run order (the first of equal scores), as :func:`spherical_kmeans`.
    ``tests/unit/thematic/test_cluster_speed.py`` compares it with :func:`spherical_kmeans`."""
    out: list[I64 | None] = [None] * len(xs)
    run_x: list[F32] = []
    run_c: list[F32] = []
    owner: list[int] = []
    for p, (xm, seed) in enumerate(zip(xs, seeds, strict=True)):
        if xm.shape[0] < 2 or xm.shape[0] > GROUP_BLOCK or max_iter < 1:
            out[p] = spherical_kmeans(xm, 2, seed=seed, n_init=restarts, max_iter=max_iter, tol=tol)[0]
            continue
        rng = np.random.default_rng(seed)
        for _ in range(restarts):
            run_x.append(xm)
            run_c.append(_pp2(xm, rng))
            owner.append(p)
    if run_x:
        _lockstep_2means(run_x, run_c, owner, out, max_iter, tol)
    assert all(o is not None for o in out)
    return out  # type: ignore[return-value]  # every entry set above


def _lockstep_2means(run_x: list[F32], run_c: list[F32], owner: list[int], out: list[I64 | None], max_iter: int,
                     tol: float) -> None:
    """:func:`bisect_many`'s runs (points ``run_x[r]``, first centres ``run_c[r]``, problem ``owner[r]``), the best
    run's labels written to ``out[problem]``."""
    n_runs = len(run_x)
    sizes = [int(xm.shape[0]) for xm in run_x]
    ends = np.cumsum(sizes)
    starts = ends - np.asarray(sizes)
    seg = [slice(int(a), int(b)) for a, b in zip(starts, ends, strict=True)]
    total = int(ends[-1])
    sims = np.empty((total, 2), dtype=np.float32)
    cent = np.concatenate(run_c)
    sums = np.empty_like(cent)
    prev = [-np.inf] * n_runs
    done: list[tuple[float, I64] | None] = [None] * n_runs
    active = list(range(n_runs))
    labels = last = np.zeros(total, dtype=bool)
    scores = [0.0] * n_runs
    for it in range(max_iter):
        for r in active:
            np.matmul(run_x[r], cent[2 * r : 2 * r + 2].T, out=sims[seg[r]])
        s0, s1 = sims[:, 0], sims[:, 1]
        labels = s1 > s0  # argmax of two: the first of equal values
        fit = np.where(labels, s1, s0)
        ones = np.add.reduceat(labels, starts, dtype=np.intp)
        moved = np.add.reduceat(labels != last, starts, dtype=np.intp) if it else None
        going = []
        for r in active:
            scores[r] = float(np.add.reduce(fit[seg[r]]))  # fit.sum() of the run's own fits, without its wrapper
            full = 0 < ones[r] < sizes[r]
            if moved is not None and full and not moved[r]:
                done[r] = (scores[r], labels[seg[r]].astype(np.int64))  # as _kmeans_run's no-point-moved stop
            else:
                going.append(r)
        if not going:
            active = []
            break
        onehot = _ONEHOT2[labels.view(np.uint8)]
        for r in going:
            np.matmul(onehot[seg[r]].T, run_x[r], out=sums[2 * r : 2 * r + 2])
        sums += 0.0  # _group_sums adds the product to zeros: the same floats (-0.0 becomes 0.0)
        for r in going:
            if not 0 < ones[r] < sizes[r]:
                # Re-seed the empty group with the worst-fitting point, as _kmeans_run.
                empty = 1 if ones[r] == 0 else 0
                sums[2 * r + empty] = run_x[r][int(np.argsort(fit[seg[r]].copy())[0])]
        cent = normalise(sums)
        active = []
        for r in going:
            if scores[r] - prev[r] <= tol * sizes[r]:
                done[r] = (scores[r], labels[seg[r]].astype(np.int64))
            else:
                prev[r] = scores[r]
                active.append(r)
        last = labels
        if not active:
            break
    for r in active:  # max_iter reached
        done[r] = (scores[r], labels[seg[r]].astype(np.int64))
    best: dict[int, tuple[float, I64]] = {}
    for r in range(n_runs):
        got = done[r]
        assert got is not None
        p = owner[r]
        if p not in best or got[0] > best[p][0]:
            best[p] = got
    for p, (_, lab) in best.items():
        out[p] = lab


def _cut_totals(cand: list[int], cuts: dict[int, _Cut | None], tot: F32,
                a: NDArray[np.float64], near: I64, b1: NDArray[np.float64], b2: NDArray[np.float64],
                own0: NDArray[np.float64]) -> list[float]:
    """The summed silhouette of the partition after each cut of ``cand`` (:func:`_bisect_to`'s candidates), one
    row per cut: the same elementwise operations, dtypes and per-row sums as scoring the cuts one at a time (a row
    of a C-ordered 2-D array sums like the 1-D array), in a dozen array operations instead of a dozen per cut.

    Most points' silhouettes do not change with a cut (issue 27): a point outside the cut group whose nearest other
    group is not that group keeps its ``a``, its size and its ``b`` unless one half lies nearer than ``b1``. Those
    points get the value of the uncut state (the same operations on the same numbers, so the same floats); only
    the cut group's members, the points whose nearest other group it was and the points a half pulls nearer are
    computed, and every row is then summed whole, as before."""
    r = len(cand)
    if not r:
        return []
    m_all = [c for c in (cuts[g] for g in cand) if c is not None]  # every one: the candidates are the cut groups
    # Each cut's halves (members in order), kept in the cut by _bisect_to: a cut is scored at every step until made.
    h0 = [c[3] for c in m_all]
    h1 = [c[4] for c in m_all]
    s1 = np.stack([c[2] for c in m_all])
    c1 = np.array([float(len(h)) for h in h1])
    c0 = np.array([float(len(c[0])) for c in m_all]) - c1
    s0 = tot.T[cand] - s1
    d0, d1 = s0 / c0.astype(np.float32)[:, None], s1 / c1.astype(np.float32)[:, None]
    dmin = np.minimum(d0, d1)
    cand_a = np.array(cand)
    # Points whose b or a may change: a half nearer than b1, or g was their nearest other group; then the members.
    chg = dmin < b1[None, :]
    chg |= near[None, :] == cand_a[:, None]
    r0 = np.repeat(np.arange(r), [len(h) for h in h0])
    r1 = np.repeat(np.arange(r), [len(h) for h in h1])
    p0, p1 = np.concatenate(h0), np.concatenate(h1)
    chg[r0, p0] = False
    chg[r1, p1] = False
    # The uncut state's per-point silhouette (aa = a, b = b1, own = own0), as the plain form computes it there.
    base = _point_silhouettes(a, b1, own0)
    s = np.repeat(base[None, :], r, axis=0)
    # Non-members that change: aa and own as before, b = min(bx, min(d0, d1)).
    rc, pc = np.nonzero(chg)
    bx = np.where(near[pc] == cand_a[rc], b2[pc], b1[pc])
    ac, oc = a[pc], own0[pc]
    bc = np.minimum(bx, dmin[rc, pc])
    s[rc, pc] = _point_silhouettes(ac, bc, oc)
    # The cut group's members: a within their half, b the nearer of bx and the other half, own the half's size.
    for rr, pp, same, other, cs in ((r0, p0, s0, d1, c0), (r1, p1, s1, d0, c1)):
        bxm = np.where(near[pp] == cand_a[rr], b2[pp], b1[pp])
        am = (same[rr, pp] / (cs - 1.0).astype(np.float32)[rr]).astype(np.float64)
        bm = np.minimum(bxm, other[rr, pp])
        om = cs[rr]
        s[rr, pp] = _point_silhouettes(am, bm, om)
    return [float(v) for v in s.sum(axis=1)]


def _point_silhouettes(a: NDArray[np.float64], b: NDArray[np.float64], own: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-point silhouettes from each point's mean distance ``a`` to its own group and ``b`` to the nearest other,
    0 for a point alone in its group (``own`` its group's size): :func:`_cut_totals`' one formula, whatever points
    it is applied to."""
    return np.where(own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)


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


def curve_noise(rows: list[dict[str, float]]) -> float:
    """The silhouette curve's seed noise: the median, over the candidates, of the spread of the mean silhouette
    across k-means seeds at that k (at least ``NOISE_FLOOR``). Differences between counts smaller than this are
    not findings."""
    spreads = [r["seed_spread"] for r in rows if "seed_spread" in r]
    return max(NOISE_FLOOR, float(np.median(spreads)) if spreads else NOISE_FLOOR)


def _best(rows: list[dict[str, float]]) -> dict[str, float] | None:
    return _parsimonious(rows) if rows else None


def _middle(rows: list[dict[str, float]]) -> dict[str, float] | None:
    """The fine level's peak: of the candidates within ``PARSIMONY`` of the level's best, the one nearest the
    geometric middle of their range. The silhouette cannot tell these counts apart, and its bias is towards the
    coarse end, so the coarsest of them (parsimony) is the wrong tie-break at the fine level (20NG: 13..20 all
    score within 2 %; parsimony answered 13)."""
    if not rows:
        return None
    best = max(r["silhouette"] for r in rows)
    return _geometric_middle([r for r in rows if r["silhouette"] >= best - abs(best) * PARSIMONY])


def _geometric_middle(tied: list[dict[str, float]]) -> dict[str, float]:
    """Of candidates in k order, the one nearest the geometric middle of their range."""
    mid = math.sqrt(tied[0]["k"] * tied[-1]["k"])
    return min(tied, key=lambda r: abs(math.log(r["k"] / mid)))


def _flat_top(rows: list[dict[str, float]], noise: float) -> list[dict[str, float]]:
    """The candidates of ``rows`` scoring within ``FLAT`` noise units of their best (in k order)."""
    best = max(r["silhouette"] for r in rows)
    return [r for r in rows if r["silhouette"] >= best - FLAT * noise]


def _flat_middle(rows: list[dict[str, float]], noise: float) -> dict[str, float] | None:
    """The fine level's count: of the candidates within ``FLAT`` noise units of the level's best (its flat top,
    :func:`_flat_top`), the one nearest the geometric middle of their range (issue 22, seventh round).

    On a fine band that is flat within its noise, where the best candidate falls is the seed's luck: one k-means
    restart that scores a noise unit high, carried forward by the split path to the next few counts, makes a bump
    of several candidates (long 20NG posts, seed 2: a restart at k=45, 1.5 noise units above its neighbours' level,
    lifted 45-69, and :func:`_middle`'s 2 % tie, a third of a noise unit, answered 60 for 20; 16 and 34 on the other
    seeds). The flat top is what the curve supports, and its geometric middle is the count whose ratio to any count
    of the flat top is smallest in the worst case (the target is a ratio band, 0.5-2x). :func:`_middle` still picks
    the level's evidence (its mean and median) that :func:`_broad_or_fine` weighs against the broad level.
    :func:`decide` reads the flat top only when the level's silhouette is at most ``SUBSTANTIAL`` (see ``FLAT``)."""
    if not rows:
        return None
    return _geometric_middle(_flat_top(rows, noise))


def _unequal(r: dict[str, float]) -> bool:
    """The candidate's largest group holds more than ``UNEQUAL`` x its fair share (1/k) of the sample."""
    return r.get("top", 0.0) * r["k"] > UNEQUAL


def _rival(rows: list[dict[str, float]], k: int, *, key: str = "silhouette") -> dict[str, float] | None:
    """The best-scoring candidate (on ``key``: the mean or the ``median`` silhouette) at least 2x away from ``k``
    (below k/2 or above 2k): the reading that would make the count wrong by a factor of two."""
    far = [r for r in rows if r["k"] * 2 < k or r["k"] > 2 * k]
    return max(far, key=lambda r: r[key]) if far else None


def choose_k(x: F32, k_min: int, k_max: int, *, seed: int, units: Units | None = None) -> CountChoice:
    """The automatic theme count: the silhouette curve (:func:`silhouette_curve`), decided by :func:`decide`."""
    return decide(silhouette_curve(x, candidate_ks(k_min, k_max), seed=seed, units=units), len(x), k_min, k_max)


def decide(rows: list[dict[str, float]], n: int, k_min: int, k_max: int) -> CountChoice:
    """Pick k from a silhouette curve, in units of the curve's own seed noise (issue 22).

    The silhouette of sentence embeddings is biased towards the coarsest split (one big or distinct group
    against the rest always scores well at k = 2-4), so the curve is read in three bands:

    1. *small* (k <= ``SMALL_MAX``): answered only on strong structure: its peak must beat every k above the
       band by ``STRONG`` x the noise (and by ``SMALL_GAIN``), and not be very unequal (:func:`_unequal`:
       2-4 very unequal groups are one distinct theme against the rest, not the themes);
    2. *broad* (``SMALL_MAX`` < k <= ``BROAD_MAX``, the 5-12 broad themes researchers read) and *fine*
       (k > ``BROAD_MAX``): the broad peak is its smallest k within ``PARSIMONY`` of its best, the fine level's
       evidence the candidate nearest the middle of those within ``PARSIMONY`` of its best (:func:`_middle`), and
       its count, when the level's silhouette is at most ``SUBSTANTIAL``, the geometric middle of its flat top, the
       candidates within ``FLAT`` noise units of its best (:func:`_flat_middle`; issue 22, seventh round: where a
       flat band's best falls is the seed's luck; above that bound, the evidence row's own k). The fine
       level is the themes unless the broad peak beats it by more than ``TIE`` x the noise on the mean (and is
       not very unequal: one dominant theme beside lumps of the rest carries the broad level's mean), or leads on
       both the mean and the median, however slightly (and is not very unequal either), or
       the fine level's gain is only on the mean while its median is ``PARAPHRASE`` x the noise lower (near-
       paraphrase bunches: a minority of very tight groups lift the mean, the typical response fits worse).
       A near-tie goes to the finer level because of the coarse bias: a finer reading of real themes costs
       a little NMI, a coarser one loses whole themes.
    3. Weak structure (best silhouette < ``WEAK_STRUCTURE``): the count is a judgement, the best-scoring k
       within a factor ``PRIOR_WINDOW`` of :func:`prior_k`.

    Every candidate is read as the better of its k-means partition and its split path (:func:`_envelope`; issue
    22, fifth round), so the curve does not fall below what cutting groups of the previous count achieves, and a
    2-4 count must beat that too, not a k-means restart that lost the solution. Whether a fine level competes with a
    very unequal broad one is asked of k-means' own fine partitions (the split path's are refinements of the broad
    one, see :func:`_broad_or_fine`).

    Confidence: how far the chosen count's silhouette stands above the best count at least 2x away from it
    (:func:`_rival`), in noise units, scaled by ``CONF_MARGIN`` (``high`` >= 0.6: the nearest 2x-wrong reading
    scores ``0.6 x CONF_MARGIN`` noise units lower); zero when a 2x-wrong reading scores as well, and at most
    0.25 for a judgement or a decision the small-count or paraphrase guard overrode, for a count a 2x-wrong one
    beats on the median, and for a coarse answer (2-4) without substantial structure (see :func:`_confidence`).
    """
    noise = curve_noise(rows)
    rows = _envelope(rows)
    small = _best([r for r in rows if r["k"] <= SMALL_MAX])
    broad = _best([r for r in rows if SMALL_MAX < r["k"] <= BROAD_MAX])
    fine_rows = [r for r in rows if r["k"] > BROAD_MAX]
    fine = _middle(fine_rows)
    # The fine level's count: the middle of its flat top where the level shows no substantial structure (see
    # _flat_middle); above that bound its peak is a finding, and the noise unit is inflated by restarts that missed it.
    fine_at = _flat_middle(fine_rows, noise) if fine is not None and fine["silhouette"] <= SUBSTANTIAL else fine
    notes = [
        f"cosine silhouette (best of {SEEDS} k-means seeds, full embedding space) over k in {k_min}..{k_max}, "
        f"seed noise {noise:.4f}"
    ]
    levels = [r for r in (broad, fine) if r is not None]
    if broad is not None and fine is not None:
        # The fine reading k-means finds on its own (the split path's fine partitions are refinements of the broad
        # one: they carry its dominant group, so they always score close to it when one group holds most).
        plain_fine = max(r.get("kmeans", r["silhouette"]) for r in rows if r["k"] > BROAD_MAX)
        chosen, guarded = _broad_or_fine(broad, fine, noise, notes, plain_fine)
    else:
        chosen, guarded = (levels[0] if levels else (small if small is not None else rows[0])), False
    if chosen is fine and fine_at is not None and fine_at is not fine:
        top = _flat_top(fine_rows, noise)
        notes.append(
            f"the fine level is flat within {FLAT:g} noise units from k={int(top[0]['k'])} to k={int(top[-1]['k'])}: "
            f"its count is the geometric middle of that range, k={int(fine_at['k'])}"
        )
        chosen = fine_at
    # The fine level's count is reported as the fine reading (alternatives, fine_k) whichever level is the themes.
    fine = fine_at
    guarded_small = False
    if small is not None and levels:
        chosen, guarded, guarded_small = _small_guard(rows, small, chosen, guarded, noise, notes)
    criterion = "silhouette"
    # Structure is judged without a small count the guard set aside (a binary split of a cloud scores well).
    s_kept = max(r["silhouette"] for r in rows if r["k"] > SMALL_MAX) if guarded_small else max(
        r["silhouette"] for r in rows)
    window: list[dict[str, float]] = []
    if s_kept < WEAK_STRUCTURE and k_max > SMALL_MAX:
        chosen, window = _prior_choice(rows, n, k_min, k_max, s_kept, notes)
        criterion = "prior"
    confidence = _confidence(rows, chosen, noise, criterion == "prior" or guarded, notes)
    return _count_choice(rows, chosen, (small, broad, fine), window, criterion, confidence, noise, notes, k_max)


def _envelope(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    """Each candidate scored by the better of its k-means partition and its split path (``split`` of
    :func:`silhouette_curve`), with that partition's median and largest share; curves without a split path (from
    before issue 22's fourth round) are read as they are. The rows are changed in place (``silhouette``,
    ``median``, ``top``; the k-means value stays in ``kmeans``) so the reported scores are the ones decided on."""
    for r in rows:
        if "split" in r and "kmeans" not in r:
            r["kmeans"] = r["silhouette"]
            if r["split"] > r["silhouette"]:
                r["silhouette"], r["median"], r["top"] = r["split"], r["split_median"], r["split_top"]
    return rows


def _describe_peak(tag: str, r: dict[str, float]) -> str:
    return f"{tag} peak k={int(r['k'])} (mean {r['silhouette']:.4f}, median {r['median']:.4f})"


def _broad_or_fine(
    broad: dict[str, float], fine: dict[str, float], noise: float, notes: list[str], plain_fine: float | None = None
) -> tuple[dict[str, float], bool]:
    """:func:`decide`'s step 2: the broad or the fine level's peak, and whether a guard overrode the mean.

    ``plain_fine``: the best k-means score of the fine band (default: the fine peak's), which the very unequal
    exception asks whether the fine level is a competing reading at all (``UNEQUAL_RIVAL``)."""
    notes.append(_describe_peak("broad", broad) + ", " + _describe_peak("fine", fine))
    gap = (broad["silhouette"] - fine["silhouette"]) / noise
    med_gap = (broad["median"] - fine["median"]) / noise
    rival = fine["silhouette"] if plain_fine is None else plain_fine
    if gap > TIE and _unequal(broad) and rival >= UNEQUAL_RIVAL * broad["silhouette"]:
        notes.append(
            f"the broad level scores {gap:.1f} noise units higher, but its largest group holds "
            f"{broad.get('top', 0.0):.0%} of the responses (> {UNEQUAL} x 1/{int(broad['k'])}): one distinct theme "
            "against a few lumps of the rest, so the fine level is the themes"
        )
        return fine, True
    if gap > TIE:
        notes.append(f"the broad level scores {gap:.1f} noise units higher, so it is the themes")
        return broad, False
    if med_gap > PARAPHRASE and fine["silhouette"] >= broad["silhouette"]:
        notes.append(
            f"the fine level scores higher on the mean but {med_gap:.1f} noise units lower on the median: its "
            "gain is a minority of very tight groups (near-paraphrases), not the typical response, so the broad "
            "reading is the themes"
        )
        return broad, True
    if gap > 0 and med_gap > 0 and not _unequal(broad):
        notes.append(
            f"the broad level scores higher on both the mean and the median ({gap:.1f} / {med_gap:.1f} noise "
            "units), so it is the themes"
        )
        return broad, False
    notes.append(
        "the fine level scores within the noise of the broad one or higher, so it is the themes "
        "(the silhouette favours coarse splits)"
    )
    return fine, False


def _small_guard(
    rows: list[dict[str, float]], small: dict[str, float], chosen: dict[str, float], guarded: bool, noise: float,
    notes: list[str],
) -> tuple[dict[str, float], bool, bool]:
    """:func:`decide`'s step 1: a count of 2-4 only on strong structure. Returns (chosen, guarded, small set aside)."""
    # Larger counts are credited with their split path too: k-means++ at k > 4 can miss the solution "the small
    # count with one group cut", and the small count must beat what such a cut achieves.
    others = max(max(r["silhouette"], r.get("split", -1.0)) for r in rows if r["k"] > SMALL_MAX)
    lead = (small["silhouette"] - others) / noise
    unequal = _unequal(small)
    if lead >= STRONG and small["silhouette"] - others >= SMALL_GAIN and not unequal:
        # A guard between the broad and fine levels is moot now.
        notes.append(f"k={int(small['k'])} beats every larger count by {lead:.1f} noise units: strong structure")
        return small, False, False
    if lead > 0:
        why = (
            f"its largest group holds {small.get('top', 0.0):.0%} of the responses"
            if unequal
            else f"it leads by only {lead:.1f} noise units / {small['silhouette'] - others:.3f} (needs {STRONG} "
            f"and {SMALL_GAIN})"
        )
        notes.append(
            f"k={int(small['k'])} scores highest ({small['silhouette']:.4f}) but {why}: a split into 2-4 groups "
            "needs strong structure, so it is a coarser reading, not the themes"
        )
        return chosen, True, True
    plain = max(r.get("kmeans", r["silhouette"]) for r in rows if r["k"] > SMALL_MAX)
    if small["silhouette"] > plain:
        cut = max((r for r in rows if r["k"] > SMALL_MAX), key=lambda r: r.get("split", -1.0))
        notes.append(
            f"k={int(small['k'])} scores highest on k-means ({small['silhouette']:.4f}), but cutting groups of it "
            f"reaches {cut.get('split', 0.0):.4f} at k={int(cut['k'])} (the split path): a larger count that k-means "
            "missed, so the small count is a coarser reading, not the themes"
        )
        return chosen, True, True
    return chosen, guarded, False


def _prior_choice(
    rows: list[dict[str, float]], n: int, k_min: int, k_max: int, s_kept: float, notes: list[str]
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """:func:`decide`'s step 3, weak structure: the best-scoring k within the granularity prior's window."""
    kp = min(prior_k(n), k_max)
    lo, hi = max(k_min, math.ceil(kp / PRIOR_WINDOW)), min(k_max, math.floor(kp * PRIOR_WINDOW))
    window = [r for r in rows if lo <= r["k"] <= hi] or rows
    chosen = max(window, key=lambda r: r["silhouette"])
    notes.insert(
        0,
        f"structure is weak (best silhouette {s_kept:.3f} < {WEAK_STRUCTURE}): the count is a judgement, not a "
        f"finding. Took the best-scoring k within the granularity prior {lo}..{hi} (~sqrt(n)/3 for {n} "
        f"responses): k={int(chosen['k'])}",
    )
    return chosen, window


def _confidence(
    rows: list[dict[str, float]], chosen: dict[str, float], noise: float, capped: bool, notes: list[str]
) -> float:
    """The margin over the best count at least 2x away (:func:`_rival`) in noise units / ``CONF_MARGIN``, times
    the structure strength; at most 0.25 when ``capped`` (a judgement, or a guard overrode the mean).

    The median silhouette can veto: when a 2x-wrong count fits the typical response (the median) better than
    the chosen one, the count wins on the mean only and is a contested reading, not a finding (the reason the
    paraphrase guard reads the median), so the confidence is at most 0.25. Only a veto: a median that cannot
    tell counts apart (one group holding most responses is the median point at every count) says nothing. A
    coarse answer (k <= ``SMALL_MAX``) is capped at 0.25 too unless its silhouette shows substantial structure
    (> ``SUBSTANTIAL``): 2-4 themes for hundreds of responses must come from strong structure, and the
    silhouette's own scale says below 0.25 there is none."""
    k = int(chosen["k"])
    rival = _rival(rows, k)
    margin = (chosen["silhouette"] - rival["silhouette"]) / noise if rival is not None else 2 * CONF_MARGIN
    rival_med = _rival(rows, k, key="median")
    med_margin = (chosen["median"] - rival_med["median"]) / noise if rival_med is not None else 2 * CONF_MARGIN
    strength = min(1.0, max(0.0, (chosen["silhouette"] - 0.02) / 0.06))
    confidence = min(1.0, max(0.0, margin / CONF_MARGIN)) * strength
    if capped or med_margin < 0:
        confidence = min(confidence, 0.25)
    if rival is not None:
        notes.append(
            f"the best count at least 2x away, k={int(rival['k'])}, scores {abs(margin):.1f} noise units "
            f"{'below' if margin >= 0 else 'above'} it"
        )
    if rival_med is not None and med_margin < 0:
        notes.append(
            f"on the median (the typical response) the count k={int(rival_med['k'])}, at least 2x away, scores "
            f"{-med_margin:.1f} noise units higher: the count wins on the mean only, a contested reading"
        )
    if k <= SMALL_MAX and chosen["silhouette"] <= SUBSTANTIAL and confidence > 0.25:
        confidence = 0.25
        notes.append(
            f"a coarse answer of {k} themes with a silhouette of {chosen['silhouette']:.3f} (<= {SUBSTANTIAL}, "
            "no substantial structure on the silhouette's own scale) is one reading, not a finding"
        )
    return confidence


def _count_choice(
    rows: list[dict[str, float]], chosen: dict[str, float],
    peaks: tuple[dict[str, float] | None, dict[str, float] | None, dict[str, float] | None],
    window: list[dict[str, float]], criterion: str, confidence: float, noise: float, notes: list[str], k_max: int,
) -> CountChoice:
    """The :class:`CountChoice` of :func:`decide`: alternatives, plateau, fine level, rounded scores."""
    small, broad, fine = peaks
    s_best = max(r["silhouette"] for r in rows)
    k = int(chosen["k"])
    k_lo, k_hi = _plateau(rows, rows.index(chosen))
    # Readings the data also support: the other level's peak and the guarded small count, when they score within
    # ALT noise units of the chosen one (or above it).
    alts = {int(r["k"]) for r in (small, broad, fine) if r is not None and r is not chosen
            and r["silhouette"] >= chosen["silhouette"] - ALT * noise}
    if criterion == "prior":
        alts |= {int(window[0]["k"]), int(window[-1]["k"])}
    alternatives = sorted(alts - {k})
    label = "high" if confidence >= 0.6 else "medium" if confidence >= 0.3 else "low"
    fine_k = int(fine["k"]) if fine is not None and fine is not chosen and fine["k"] > k and int(fine["k"]) in alts else None
    for r in rows:
        r["silhouette"] = round(r["silhouette"], 5)
        r["seed_spread"] = round(r["seed_spread"], 5)
        r["median"] = round(r["median"], 5)
        if "top" in r:
            r["top"] = round(r["top"], 4)
    return CountChoice(
        k=k,
        criterion=criterion,
        explanation="; ".join(notes),
        scores=rows,
        confidence=round(confidence, 3),
        confidence_label=label,
        structure=round(s_best, 4),
        alternatives=alternatives,
        k_range=[k_lo, k_hi],
        cap=k_max,
        fine_k=fine_k,
        noise=round(noise, 5),
        broad_k=int(broad["k"]) if broad is not None else None,
    )


def cluster(
    x: F32, *, num_themes: int | None, max_themes: int | None, min_theme_size: int, seed: int, threads: int = 1
) -> Clustering:
    """Cluster unit vectors ``x`` into themes; see the module docstring.

    ``threads``: independent units of the work (the neighbour search of the smoothing, the curve's k-means runs,
    the split path's bisections, the final partition's restarts) run on that many threads (:mod:`.parallel`), each
    on one BLAS thread as everything else: the result is the same at any count, 1 runs everything in this thread."""
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
    with Units(threads, name="thematiq-cluster") as units:
        # The smoothing's neighbour search does not depend on the count: its blocks go first, so with a second
        # thread they run beside the PCA and the curve.
        smooth = _smooth_start(x, seed=seed, units=units)
        if num_themes is not None:
            k = min(num_themes, n)
            note = f"num_themes={num_themes} was requested"
            count = CountChoice(k, "fixed", note, [], cap=k_cap)
        else:
            count = choose_k(x, 2, max(2, k_cap), seed=seed, units=units)
            k = count.k
        # Partition the denoised vectors, but report centroids of the original
        # ones: assignment, outliers and confidences work in the original space.
        labels, _ = spherical_kmeans(smooth(), k, seed=seed, n_init=FINAL_RESTARTS, units=units)
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
    xk = x[keep]
    rows: list[dict[str, float]] = []
    found: dict[int, list[int]] = {}
    # At least two themes per broad theme on average: 13 themes under 10 broad ones is not a second level.
    for kb in range(BROAD_MIN, min(BROAD_MAX, k - 1, max(BROAD_MIN, k // 2)) + 1):
        g, _ = spherical_kmeans(cents, kb, seed=seed, n_init=8)
        kb_real = len(np.unique(g))
        sil = silhouette(xk, g[labels[keep]])
        rows.append({"k": kb_real, "silhouette": round(sil, 5)})
        found.setdefault(kb_real, [int(v) for v in g])
    if not rows:
        return [0] * k, rows
    chosen = _parsimonious(rows)
    groups = found[int(chosen["k"])]
    # Renumber 0..kb-1 in order of first appearance.
    ren: dict[int, int] = {}
    return [ren.setdefault(v, len(ren)) for v in groups], rows


def sub_level(x: F32, labels: I64, k: int, *, min_size: int, seed: int, threads: int = 1) -> tuple[I64, list[int]]:
    """Sub-themes inside each theme, for k <= ``BROAD_MAX``: (sub-theme index per point, parent theme per sub-theme).

    A theme with >= 2 x ``min_size`` members is split into the 2..``SUB_MAX``
    groups whose silhouette *within the theme* is best (smallest within
    ``PARSIMONY``), if that silhouette is positive; sub-groups below
    ``min_size`` are folded into the nearest sibling. Smaller themes and
    themes without internal structure stay one sub-theme. Points with label
    < 0 get -1.

    ``threads``: the themes' splits are independent units (:mod:`.parallel`; each seeds its own generator from
    ``seed`` and the theme), so the result is the same at any count (speed45: ~0.15 s of k-means in 384
    dimensions per 2,000 answers, which ran on the calling thread while the second core idled).
    """
    sub = -np.ones(len(x), dtype=np.int64)
    parent_of: list[int] = []
    members = [np.flatnonzero(labels == t) for t in range(k)]
    with Units(threads, name="thematiq-sublevel") as units:
        pending = [units.submit(_sub_split, x, m, t, min_size, seed) for t, m in enumerate(members)]
        splits = [u.result() for u in pending]
    for t, (m, best_lab) in enumerate(zip(members, splits, strict=True)):
        if len(m) == 0:
            continue
        if best_lab is None:
            best_lab = np.zeros(len(m), dtype=np.int64)
        base = len(parent_of)
        sub[m] = base + best_lab
        parent_of += [t] * (int(best_lab.max()) + 1)
    return sub, parent_of


def _sub_split(x: F32, m: I64, t: int, min_size: int, seed: int) -> I64 | None:
    """:func:`sub_level`'s split of theme ``t`` (members ``m``): a sub-theme index per member, or None (one)."""
    if len(m) == 0:
        return None
    best_lab: I64 | None = None
    kmax = min(SUB_MAX, len(m) // max(1, min_size))
    if kmax >= 2:
        xm = x[m]
        rng = np.random.default_rng(seed + t)
        s_idx = rng.choice(len(m), size=SUB_SAMPLE, replace=False) if len(m) > SUB_SAMPLE else np.arange(len(m))
        rows = []
        for ks in range(2, kmax + 1):
            lab, _ = spherical_kmeans(xm[s_idx], ks, seed=seed * 1000 + t, n_init=2, max_iter=SEARCH_ITER)
            rows.append({"k": ks, "silhouette": silhouette(xm[s_idx], lab)})
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
    return best_lab


def count_json(count: CountChoice | None, k_final: int) -> dict[str, Any]:
    """The new (schema 1.1) fields of ``run.theme_count``."""
    if count is None:
        return {}
    # A count the data did not choose (num_themes given, or too few responses for two themes) has no confidence:
    # CountChoice's defaults (1.0, "high") printed "Theme count confidence: high (1.00)" above "num_themes=6 was
    # requested" (review46). None, as a compared job's inherited count (baseline.py).
    chosen = count.criterion not in ("fixed", "single")
    return {
        "k": k_final,
        "k_chosen": count.k,
        "confidence": count.confidence if chosen else None,
        "confidence_label": count.confidence_label if chosen else None,
        "structure": count.structure,
        "alternatives": count.alternatives,
        "k_range": count.k_range,
        "cap": count.cap,
        "fine_k": count.fine_k,
        "noise": count.noise,
        "broad_k": count.broad_k,
    }


def _count_words(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def count_summary(choice: dict[str, Any], levels: dict[str, Any]) -> str:
    """The count in the words a researcher reads: "20 themes in 5 groups; the data also support 9 or 39 themes."

    ``choice`` is ``run.theme_count`` (with :func:`count_json`'s fields), ``levels`` the result's ``levels``.
    The confidence sentence says what the label means, so "high" is never a bare word.
    """
    k = int(choice.get("k") or choice.get("k_chosen") or 0)
    broad, fine = int(levels.get("broad_count") or 0), int(levels.get("fine_count") or 0)
    if levels.get("broad") == "parents" and broad:
        head = f"{_count_words(k, 'theme', 'themes')} in {_count_words(broad, 'group', 'groups')}"
    elif levels.get("fine") == "subthemes" and fine > k:
        head = f"{_count_words(k, 'theme', 'themes')}, with {fine} sub-themes under them"
    else:
        head = _count_words(k, "theme", "themes")
    alts = [a for a in choice.get("alternatives") or [] if a != k]
    if alts:
        head += "; the data also support " + " or ".join(", ".join(map(str, alts)).rsplit(", ", 1)) + " themes"
    label, crit = choice.get("confidence_label"), choice.get("criterion")
    if crit in ("fixed", "single"):
        return head + "."
    if crit == "prior":
        sure = "The structure is weak, so the count is a judgement (confidence low)."
    elif label == "high":
        sure = "Confidence high: no count half or twice as large fits the data nearly as well."
    elif label == "medium":
        sure = "Confidence medium: counts half or twice as large fit clearly worse, but not by much."
    else:
        sure = "Confidence low: a count at least twice as small or large fits about as well; read it as one reading."
    return f"{head}. {sure}"
