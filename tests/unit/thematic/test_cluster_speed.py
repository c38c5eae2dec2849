"""The cluster stage's fast paths compute exactly what the plain computations do (issue 27).

The silhouette from the groups' vector sums is the textbook silhouette (sklearn's where installed) and the matrix form
it replaced up to float rounding; the k-means shortcuts (the weighted draw of k-means++, stopping when no point moved,
the pair table of the ARI, the split path's incremental scoring of its cuts) return bit for bit what the loops they
replace returned: these tests keep the plain
versions and compare on data where the shortcuts fire.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.thematic import cluster as K


def blobs(n: int, k: int, d: int, seed: int, spread: float = 0.35) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = K.normalise(rng.normal(size=(k, d)))
    y = rng.integers(0, k, n)
    return K.normalise(centres[y] + spread * rng.normal(size=(n, d)) / np.sqrt(d)), y


def textbook_silhouette(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Rousseeuw's definition, point by point in float64, cosine distance: a = mean distance to the other members
    of its group, b = the smallest mean distance to another group, s = (b - a) / max(a, b), 0 alone in a group."""
    x64 = x.astype(np.float64)
    d = 1.0 - x64 @ x64.T
    out = np.zeros(len(x))
    for i in range(len(x)):
        own = labels == labels[i]
        if own.sum() < 2:
            continue
        a = d[i, own].sum() / (own.sum() - 1)
        b = min(d[i, labels == g].mean() for g in np.unique(labels) if g != labels[i])
        out[i] = (b - a) / max(a, b)
    return out


def matrix_silhouette(d: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The matrix form the group-sum silhouette replaced (issue 27): the summed distances to each group as one
    product of the n x n distance matrix with the one-hot labels."""
    uniq = np.unique(labels)
    if len(uniq) < 2:
        return np.zeros(len(labels))
    onehot = (labels[:, None] == uniq[None, :]).astype(d.dtype)
    counts = onehot.sum(axis=0)
    tot = d @ onehot
    own = np.searchsorted(uniq, labels)
    rows = np.arange(len(labels))
    a = tot[rows, own] / np.maximum(counts[own] - 1, 1)
    mean_d = tot / np.maximum(counts, 1)
    mean_d[rows, own] = np.inf
    b = mean_d.min(axis=1)
    return np.where(counts[own] > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)


@pytest.mark.parametrize("k", [2, 3, 7])
def test_silhouette_from_group_sums_is_the_textbook_one(k: int) -> None:
    x, y = blobs(300, k, 24, seed=k)
    # Lone points in their own groups score 0 (the convention of Rousseeuw and sklearn); labels need not be 0..k-1.
    y = 3 * y.copy() + 5
    y[0], y[1] = -1, 1000
    got = K.silhouette_values(x, y)
    want = textbook_silhouette(x, y)
    assert got[0] == 0.0 and got[1] == 0.0
    # float32 either way: within a few 1e-6 per point, like the matrix form (2e-6 / 3e-6 here).
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert K.silhouette(x, y) == pytest.approx(want.mean(), abs=5e-7)


@pytest.mark.parametrize("seed", range(6))
def test_silhouette_from_group_sums_is_the_matrix_form(seed: int) -> None:
    """The group-sum silhouette against the float32 matrix form it replaced, on random data with singletons, few
    and many groups: they differ by float rounding only (each is within ~1e-6 of the float64 definition per point,
    ~1e-8 on the mean, on 2,000 BBC texts)."""
    gen = np.random.default_rng(seed)
    n, k = int(gen.integers(40, 700)), int(gen.integers(2, 60))
    x, y = blobs(n, max(2, k // 3), int(gen.integers(8, 100)), seed, spread=float(gen.uniform(0.2, 1.5)))
    y = gen.integers(0, k, n)
    y[gen.choice(n, size=3, replace=False)] = k + np.arange(3)  # three singletons
    d = (1.0 - x @ x.T).astype(np.float32)
    got, old = K.silhouette_values(x, y), matrix_silhouette(d, y)
    assert (got[np.isin(y, k + np.arange(3))] == 0.0).all()
    np.testing.assert_allclose(got, old, atol=3e-6)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got, matrix_silhouette(1.0 - x64 @ x64.T, y), atol=3e-6)
    assert abs(K.silhouette(x, y) - float(old.mean())) < 1e-6


def test_silhouette_of_one_group_or_none_is_zero() -> None:
    x, _ = blobs(50, 3, 16, seed=1)
    assert (K.silhouette_values(x, np.full(50, 4)) == 0.0).all()
    assert K.silhouette(x, np.zeros(50, dtype=np.int64)) == 0.0
    assert K.silhouette(x[:0], np.zeros(0, dtype=np.int64)) == 0.0
    assert K.silhouette_values(x[:1], np.zeros(1, dtype=np.int64)).tolist() == [0.0]


def test_silhouette_from_group_sums_is_sklearns() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    x, y = blobs(400, 6, 32, seed=3, spread=0.6)
    want = metrics.silhouette_score(x.astype(np.float64), y, metric="cosine")
    assert K.silhouette(x, y) == pytest.approx(want, abs=2e-7)
    np.testing.assert_allclose(K.silhouette_values(x, y), metrics.silhouette_samples(x, y, metric="cosine"),
                               atol=2e-6)


def test_weighted_draw_is_generator_choice() -> None:
    for case in range(300):
        gen = np.random.default_rng(case)
        n = int(gen.integers(2, 3000))
        d = gen.random(n).astype(np.float32)
        d[gen.random(n) < 0.3] = 0.0  # k-means++ weights: the chosen centres weigh 0
        if case % 5 == 0:
            d[-gen.integers(1, n):] = 0.0  # trailing zeros: the cumulative sum ends on a flat run
        p = d / float(d.sum())
        a, b = np.random.default_rng(1000 + case), np.random.default_rng(1000 + case)
        for _ in range(4):
            assert K.weighted_draw(a, p) == int(b.choice(n, p=p))
        assert a.random() == b.random()  # the generator is left in the same state


def plain_kmeans_pp(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
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


def plain_kmeans(x: np.ndarray, k: int, *, seed: int, n_init: int, max_iter: int = 40,
                 tol: float = 1e-5) -> tuple[np.ndarray, np.ndarray, int]:
    """spherical_kmeans as it was before issue 27's shortcuts; also returns how many rounds it ran."""
    n = x.shape[0]
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    best = None
    rows = np.arange(n)
    rounds = 0
    for _ in range(n_init):
        c = plain_kmeans_pp(x, k, rng)
        prev = -np.inf
        labels = np.zeros(n, dtype=np.int64)
        score = -np.inf
        for _it in range(max_iter):
            rounds += 1
            sims = x @ c.T
            labels = sims.argmax(axis=1).astype(np.int64)
            fit = sims[rows, labels]
            score = float(fit.sum())
            sums = K.group_sums(labels, x, k)
            counts = np.bincount(labels, minlength=k)
            empty = np.flatnonzero(counts == 0)
            if empty.size:
                sums[empty] = x[np.argsort(fit)[: empty.size]]
            c = K.normalise(sums)
            if score - prev <= tol * n:
                break
            prev = score
        if best is None or score > best[0]:
            best = (score, labels, c)
    assert best is not None
    return best[1], best[2], rounds


@pytest.mark.parametrize(("n", "k", "d", "seed", "n_init", "max_iter"), [
    (400, 5, 16, 0, 2, 40),
    (600, 12, 32, 1, 3, 25),
    (300, 40, 8, 2, 2, 25),  # many groups in few dimensions: empty groups get re-seeded
    (250, 3, 64, 3, 10, 40),
    (500, 20, 24, 4, 1, 3),  # stopped by max_iter
])
def test_kmeans_fast_path_is_the_plain_loop_bit_for_bit(n: int, k: int, d: int, seed: int, n_init: int,
                                                        max_iter: int) -> None:
    x, _ = blobs(n, max(2, k // 2), d, seed, spread=0.8)
    labels, cents = K.spherical_kmeans(x, k, seed=seed, n_init=n_init, max_iter=max_iter)
    want_labels, want_cents, _ = plain_kmeans(x, k, seed=seed, n_init=n_init, max_iter=max_iter)
    np.testing.assert_array_equal(labels, want_labels)
    assert cents.tobytes() == want_cents.tobytes()


@pytest.mark.parametrize("k", [4, 7])
def test_kmeans_with_groups_left_empty_is_the_plain_loop(k: int) -> None:
    """Three distinct points, copied: groups beyond three stay empty round after round (re-seeded on a copy that
    ties with, and goes to, an earlier group), the case the no-point-moved stop must leave to the plain loop."""
    rng = np.random.default_rng(0)
    x = K.normalise(K.normalise(rng.normal(size=(3, 8)))[rng.integers(0, 3, 60)])
    for seed in range(4):
        labels, cents = K.spherical_kmeans(x, k, seed=seed, n_init=2)
        want_labels, want_cents, _ = plain_kmeans(x, k, seed=seed, n_init=2)
        assert (np.bincount(labels, minlength=k) == 0).any()
        np.testing.assert_array_equal(labels, want_labels)
        assert cents.tobytes() == want_cents.tobytes()


def test_kmeans_stops_early_when_no_point_moves() -> None:
    """The shortcut fires on data where it matters (so the equality above is not vacuous): well separated groups
    settle within a few rounds, and the plain loop then spends a round confirming it."""
    x, _ = blobs(600, 6, 32, 5, spread=0.3)
    calls = {"n": 0}
    real = K._group_sums

    def counting(*a: object, **kw: object) -> np.ndarray:
        calls["n"] += 1
        return real(*a, **kw)  # type: ignore[arg-type]

    K._group_sums = counting  # type: ignore[assignment]
    try:
        labels, _ = K.spherical_kmeans(x, 6, seed=0, n_init=3)
    finally:
        K._group_sums = real  # type: ignore[assignment]
    want, _, rounds = plain_kmeans(x, 6, seed=0, n_init=3)
    np.testing.assert_array_equal(labels, want)
    assert calls["n"] < rounds


def plain_ari(a: np.ndarray, b: np.ndarray) -> float:
    n = len(a)
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.zeros((ai.max() + 1, bi.max() + 1), dtype=np.float64)
    np.add.at(table, (ai, bi), 1.0)

    def pairs(v: np.ndarray) -> float:
        return float((v * (v - 1) / 2).sum())

    sum_ij, sum_a, sum_b = pairs(table), pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    expected = sum_a * sum_b / (n * (n - 1) / 2)
    top = (sum_a + sum_b) / 2
    return 1.0 if top == expected else (sum_ij - expected) / (top - expected)


def test_ari_pair_table_is_the_plain_one() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 500))
        a, b = rng.integers(0, rng.integers(1, 30), n), rng.integers(5, 5 + rng.integers(1, 30), n)
        assert K._ari(a, b) == plain_ari(a, b)
    metrics = pytest.importorskip("sklearn.metrics")
    a, b = rng.integers(0, 7, 300), rng.integers(0, 9, 300)
    assert K._ari(a, b) == pytest.approx(metrics.adjusted_rand_score(a, b), abs=1e-12)


def plain_bisect_to(x: np.ndarray, labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """The split path's rule done plainly: every allowed cut applied to a copy and scored by silhouette_values."""
    out = labels.copy()
    groups = int(out.max()) + 1
    cuts: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
    while groups < k:
        sizes = np.bincount(out, minlength=groups)
        best, best_g = -np.inf, -1
        for g in np.flatnonzero(sizes >= (K.SPLIT_MIN if (sizes >= K.SPLIT_MIN).any() else 2)):
            g = int(g)
            if g not in cuts:
                m = np.flatnonzero(out == g)
                sub, _ = K.spherical_kmeans(x[m], 2, seed=int(rng.integers(1 << 31)), n_init=K.SPLIT_RESTARTS,
                                              max_iter=K.SEARCH_ITER)
                cuts[g] = (m, sub) if min(int((sub == 0).sum()), int((sub == 1).sum())) >= K.SPLIT_MIN // 2 else None
            cut = cuts[g]
            if cut is None:
                continue
            trial = out.copy()
            trial[cut[0][cut[1] == 1]] = groups
            score = float(K.silhouette_values(x, trial).mean())
            if score > best:
                best, best_g = score, g
        if best_g < 0:
            break
        m, sub = cuts.pop(best_g)  # type: ignore[misc]
        out[m[sub == 1]] = groups
        groups += 1
    return out


def test_split_path_with_incremental_silhouettes_is_the_plain_one() -> None:
    # The split path scores each candidate cut from kept distance sums (O(n·d) a cut); the plain rule scores the cut
    # partition with silhouette_values. Outliers around a few groups: some cuts peel off a handful of points and
    # are refused (the cached case).
    x, _ = blobs(500, 4, 16, 6, spread=0.5)
    rng = np.random.default_rng(6)
    x = K.normalise(np.vstack([x, rng.normal(size=(12, 16))]).astype(np.float32))
    start, _ = K.spherical_kmeans(x, 3, seed=0, n_init=2)
    for k in (5, 9, 14):
        got = K._bisect_to(x, start, k, np.random.default_rng(k))
        np.testing.assert_array_equal(got, plain_bisect_to(x, start, k, np.random.default_rng(k)))


def one_cut_total(g: int, cut: tuple[np.ndarray, np.ndarray, np.ndarray], tot: np.ndarray, a: np.ndarray,
                  near: np.ndarray, b1: np.ndarray, b2: np.ndarray, sizes: np.ndarray, out: np.ndarray) -> float:
    """The split path's score of one cut as it was computed before the cuts were scored together: group ``g``'s
    members ``m`` split into halves ``sub``, ``s1`` the distance sums to half 1."""
    m, sub, s1 = cut
    c1 = float((sub == 1).sum())
    c0 = float(len(m)) - c1
    s0 = tot[:, g] - s1
    d0, d1 = s0 / c0, s1 / c1
    bx = np.where(near == g, b2, b1)
    b = np.minimum(bx, np.minimum(d0, d1))
    aa = a.copy()
    h0, h1 = m[sub == 0], m[sub == 1]
    aa[h0], b[h0] = s0[h0] / (c0 - 1.0), np.minimum(bx[h0], d1[h0])
    aa[h1], b[h1] = s1[h1] / (c1 - 1.0), np.minimum(bx[h1], d0[h1])
    own = sizes[out]
    own[h0], own[h1] = c0, c1
    s = np.where(own > 1, (b - aa) / np.maximum(np.maximum(aa, b), 1e-12), 0.0)
    return float(s.sum())


@pytest.mark.parametrize(("n", "groups", "d", "seed"), [(400, 7, 16, 0), (2000, 90, 64, 1), (333, 40, 8, 2)])
def test_cuts_scored_together_are_scored_one_at_a_time_bit_for_bit(n: int, groups: int, d: int, seed: int) -> None:
    # The state _bisect_to holds at a step (distance sums to every group, a, the nearest and second nearest other
    # group), random cuts of every group of >= 4 members, groups of 1..many members: the scores must be equal floats.
    rng = np.random.default_rng(seed)
    v = K.normalise(rng.normal(size=(n, d)).astype(np.float32))
    out = np.sort(rng.integers(0, groups, n))
    out = np.unique(out, return_inverse=True)[1].reshape(-1).astype(np.int64)
    groups = int(out.max()) + 1
    sizes = np.bincount(out, minlength=groups).astype(np.float64)
    tot = (sizes[None, :] - v @ K.group_sums(out, v, groups).T).astype(np.float32)
    a, near, b1, b2 = K._step_state(tot, sizes, out)
    cuts: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}
    for g in range(groups):
        m = np.flatnonzero(out == g)
        sub = rng.permutation(np.arange(len(m)) % 2).astype(np.int64)
        cuts[g] = (m, sub, (float((sub == 1).sum()) - v @ v[m[sub == 1]].sum(axis=0)).astype(np.float32)) \
            if len(m) >= 4 else None  # halves of >= 2 (the split path's are >= SPLIT_MIN // 2)
    cand = [g for g in range(groups) if cuts[g] is not None]
    # The split path keeps each cut's halves with it (members, halves, sums, half 0, half 1).
    kept = {g: (*c, c[0][c[1] == 0], c[0][c[1] == 1]) if c is not None else None for g, c in cuts.items()}
    got = K._cut_totals(cand, kept, tot, a, near, b1, b2, sizes[out])
    want = [one_cut_total(g, cuts[g], tot, a, near, b1, b2, sizes, out) for g in cand]  # type: ignore[arg-type]
    assert got == want
    assert K._cut_totals([], kept, tot, a, near, b1, b2, sizes[out]) == []


def test_split_path_scoring_cuts_in_blocks_is_the_plain_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # Blocks of 3 candidate cuts (CUT_BLOCK is 64): the best cut is found across blocks, first of equals kept.
    monkeypatch.setattr(K, "CUT_BLOCK", 3)
    x, _ = blobs(600, 12, 16, 9, spread=0.6)
    start, _ = K.spherical_kmeans(x, 4, seed=0, n_init=2)
    for k in (11, 20):
        got = K._bisect_to(x, start, k, np.random.default_rng(k))
        np.testing.assert_array_equal(got, plain_bisect_to(x, start, k, np.random.default_rng(k)))


def test_split_path_from_the_silhouettes_product_is_the_one_it_computes() -> None:
    # The curve hands _bisect_to the product its silhouette of the previous partition already computed
    # (space @ group sums.T): the same one-hot product, so the same split path bit for bit; labels that skip a
    # group (not 0..k-1) give no product.
    x, _ = blobs(700, 9, 24, 4, spread=0.6)
    reduced = K.pca(x, 8)
    start, _ = K.spherical_kmeans(reduced, 5, seed=1, n_init=1)
    s, sims = K._silhouette_and_sims(x, start)
    assert sims is not None and (s == K.silhouette_values(x, start)).all()
    np.testing.assert_array_equal(sims, x @ K.group_sums(start, x, 5).T)
    for k in (8, 13):
        got = K._bisect_to(reduced, start, k, np.random.default_rng(k), x, sims)
        np.testing.assert_array_equal(got, K._bisect_to(reduced, start, k, np.random.default_rng(k), x))
    assert K._silhouette_and_sims(x, np.where(start == 0, 7, start))[1] is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normalise_without_the_second_copy_equals_the_plain_one_and_leaves_its_input_alone(dtype: type) -> None:
    x = np.random.default_rng(3).normal(size=(50, 16)).astype(dtype)
    x[4] = 0.0
    before = x.copy()
    plain = (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    got = K.normalise(x)
    assert got.dtype == np.float32 and np.array_equal(got, plain) and not np.shares_memory(got, x)
    assert np.array_equal(x, before)


def test_plus_plus_prefixes_are_kmeans_pp_init_bit_for_bit() -> None:
    # The k search draws each seed's k-means++ centres once and hands out prefixes: for every k, asked in any order
    # (growing, then smaller, then larger again), the same centres as kmeans_pp_init from a fresh stream; and a
    # k-means run started from them is the run that draws them itself.
    x, _ = blobs(600, 9, 16, 5, spread=0.7)
    x[5:40] = x[4]  # duplicates: some draws meet zero distances
    pp = K.PlusPlusPrefix(x, 1234)
    for k in (1, 2, 7, 3, 20, 20, 45, 9):
        np.testing.assert_array_equal(pp.first(k), K.kmeans_pp_init(x, k, np.random.default_rng(1234)))
        np.testing.assert_array_equal(pp.first(k), plain_kmeans_pp(x, k, np.random.default_rng(1234)))
        got = K.spherical_kmeans(x, k, seed=1234, n_init=1, max_iter=K.SEARCH_ITER, init=pp.first(k))
        want = K.spherical_kmeans(x, k, seed=1234, n_init=1, max_iter=K.SEARCH_ITER)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    tight = K.normalise(np.repeat(x[:3], 10, axis=0))  # 3 distinct points: from the 4th centre on, total <= 0
    np.testing.assert_array_equal(K.PlusPlusPrefix(tight, 7).first(6), plain_kmeans_pp(tight, 6, np.random.default_rng(7)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_normalise_is_the_linalg_norm_quotient_bit_for_bit(dtype: type) -> None:
    # normalise takes numpy's own formula for np.linalg.norm(axis=1) of a float array (sqrt of add.reduce of
    # x * x) without the call's argument handling: the same norms, so the same unit vectors.
    gen = np.random.default_rng(8)
    for n, d in ((1, 3), (7, 64), (300, 384), (2000, 2)):
        x = (gen.normal(size=(n, d)) * gen.choice([1e-8, 1.0, 1e8], size=(n, 1)) * 100).astype(dtype) \
            if dtype is not np.int64 else gen.integers(-1000, 1000, size=(n, d))
        x[0] = 0
        plain = (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        assert np.array_equal(K.normalise(x), plain, equal_nan=True)


def plain_silhouette_and_sims(x: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """_silhouette_and_sims before this cut: np.unique always, the self-distances computed per call."""
    uniq, own, counts = np.unique(labels, return_inverse=True, return_counts=True)
    if len(uniq) < 2:
        return np.zeros(len(labels)), None
    own = own.reshape(-1).astype(np.int64, copy=False)
    sums = K._group_sums(own, x, len(uniq), labels_ok=True)
    sims = x @ sums.T
    tot = counts.astype(np.float32) - sims
    rows = np.arange(len(labels))
    own_count = counts[own]
    a = (tot[rows, own] - (1.0 - np.einsum("ij,ij->i", x, x))) / np.maximum(own_count - 1, 1)
    mean_d = tot / counts.astype(np.float32)
    mean_d[rows, own] = np.inf
    b = mean_d.min(axis=1)
    s = np.where(own_count > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return s, (sims if uniq[0] == 0 and uniq[-1] == len(uniq) - 1 else None)


def test_silhouette_without_unique_and_with_the_self_distances_given_is_the_plain_one_bit_for_bit() -> None:
    # Issue 27 (ported from the speed40 branch without its threading refactor): labels using every value 0..k-1
    # skip np.unique's sort, and the curve computes the self-distances once.
    x, _ = blobs(500, 9, 48, 5, spread=0.9)
    rng = np.random.default_rng(3)
    cases = [rng.integers(0, 9, 500), rng.integers(0, 60, 500), rng.integers(2, 9, 500),  # all used, some unused
             rng.integers(-1, 6, 500), np.zeros(500, dtype=np.int64), np.arange(500) % 2,
             rng.integers(0, 9, 500).astype(np.int32), np.array([0, 0, 1, 3, 3] * 100)]
    fast = 0
    for labels in cases:
        want_s, want_sims = plain_silhouette_and_sims(x, labels)
        for self_dist in (None, K._self_distances(x)):
            s, sims = K._silhouette_and_sims(x, labels, self_dist)
            assert s.dtype == want_s.dtype and s.tobytes() == want_s.tobytes()
            assert (sims is None) == (want_sims is None)
            assert sims is None or (want_sims is not None and sims.tobytes() == want_sims.tobytes())
        fast += int(labels.min() >= 0 and np.count_nonzero(np.bincount(labels)) == labels.max() + 1)
    assert fast >= 3  # the path without np.unique was taken


def test_bisections_in_lock_step_are_each_ones_two_means_bit_for_bit() -> None:
    # Issue 27 (speed46): the split path's 2-means runs of a step run in lock step (cluster.bisect_many): each run's
    # matrix products as _kmeans_run calls them, the rest batched over all runs. Every problem's labels must be
    # spherical_kmeans' (and the plain loop's) exactly: small groups, groups of two, copies of one or two points (an
    # empty half re-seeded, ties between the centres), restarts 1-3, runs stopped by max_iter, and problems mixed with
    # the sizes the batched arrays must keep apart.
    rng = np.random.default_rng(46)
    fired = {"empty": 0, "moved": 0}
    for _trial in range(120):
        d = int(rng.choice([2, 8, 64]))
        xs, seeds = [], []
        for _ in range(int(rng.integers(1, 10))):
            n = int(rng.choice([2, 3, 5, 10, 31, 200]))
            if rng.random() < 0.25:
                few = K.normalise(rng.normal(size=(int(rng.integers(1, 3)), d)))
                x = few[rng.integers(0, len(few), n)]
            else:
                x, _ = blobs(n, 2, d, int(rng.integers(1 << 30)), spread=float(rng.choice([0.3, 1.5])))
            xs.append(np.ascontiguousarray(x[np.arange(n)]))  # a gather, as the split path's x[members]
            seeds.append(int(rng.integers(1 << 31)))
        restarts, max_iter = int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, K.SEARCH_ITER]))
        got = K.bisect_many(xs, seeds, restarts, max_iter)
        assert len(got) == len(xs)
        for x, seed, labels in zip(xs, seeds, got, strict=True):
            want, _ = K.spherical_kmeans(x, 2, seed=seed, n_init=restarts, max_iter=max_iter)
            assert labels.dtype == want.dtype
            np.testing.assert_array_equal(labels, want)
            plain, _, _ = plain_kmeans(x, 2, seed=seed, n_init=restarts, max_iter=max_iter)
            np.testing.assert_array_equal(labels, plain)
            fired["empty"] += int(len(np.unique(x, axis=0)) == 1)
            fired["moved"] += int(max_iter == K.SEARCH_ITER and len(np.unique(labels)) == 2)
    assert fired["empty"] > 5 and fired["moved"] > 50  # the re-seeding and the no-point-moved stop were exercised


def test_the_split_path_from_lock_step_bisections_is_the_one_cut_by_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    # The split path with each bisection its own spherical_kmeans (as before bisect_many) gives the same partition,
    # at and above SPLIT_BATCH_K.
    x, _ = blobs(900, 40, 24, 11, spread=0.9)
    prev = K.spherical_kmeans(x, 8, seed=0, n_init=1)[0]

    def one_by_one(x: np.ndarray, v: np.ndarray, new: list, restarts: int) -> dict:
        return {g: K._cut(x, v, m, s, restarts) for g, m, s in new}

    for k in (20, 70):
        fast = K._bisect_to(x, prev, k, np.random.default_rng(5))
        with monkeypatch.context() as mp:
            mp.setattr(K, "_cuts", one_by_one)
            slow = K._bisect_to(x, prev, k, np.random.default_rng(5))
        np.testing.assert_array_equal(fast, slow)
        assert int(fast.max()) + 1 == k
