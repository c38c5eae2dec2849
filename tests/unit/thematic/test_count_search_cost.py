"""Issue 27: the cheaper count search (a coarser candidate grid above 20, the split path in one scoring round and
with one restart per bisection above ``SPLIT_BATCH_K`` groups), chosen on the TUNE sets (docs/embedding-speed.md).

Pinned here: the grid itself; that above ``SPLIT_BATCH_K`` the path scores its cuts once and makes the best-scoring
ones, each group cut at most once, with one restart per bisection, and below it step by step as before (two
restarts); and that a synthetic structure of many themes, where the changed path runs, still gets a count in range.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipelines.thematic import cluster as K


def blobs(n: int, k: int, d: int, seed: int, spread: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = K.normalise(rng.normal(size=(k, d)))
    y = np.arange(n) % k
    return K.normalise(centres[y] + spread * rng.normal(size=(n, d)) / np.sqrt(d)), y


def test_candidate_counts_above_20_grow_by_a_quarter() -> None:
    assert K.candidate_ks(2, 178) == [*range(2, 21), 25, 31, 39, 49, 61, 76, 95, 119, 149, 178]
    assert K.candidate_ks(2, 200)[-3:] == [149, 186, 200]
    assert K.candidate_ks(3, 12) == list(range(3, 13))


class _Recorder:
    """Wraps _cut_totals, spherical_kmeans and bisect_many of the cluster module: the cut scores of each round, the
    restarts of each bisection (the split path's bisections run in lock step in bisect_many since speed46)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rounds: list[list[tuple[int, float]]] = []
        self.n_init: list[int] = []
        cut_totals, kmeans, many = K._cut_totals, K.spherical_kmeans, K.bisect_many

        def totals(cand: list[int], *a: Any) -> list[float]:
            got = cut_totals(cand, *a)
            self.rounds.append(list(zip(cand, got, strict=True)))
            return got

        def km(x: Any, k: int, **kw: Any) -> Any:
            if k == 2:
                self.n_init.append(kw["n_init"])
            return kmeans(x, k, **kw)

        def bisect(xs: list[Any], seeds: list[int], restarts: int, *a: Any) -> Any:
            self.n_init += [restarts] * len(xs)
            return many(xs, seeds, restarts, *a)

        monkeypatch.setattr(K, "_cut_totals", totals)
        monkeypatch.setattr(K, "spherical_kmeans", km)
        monkeypatch.setattr(K, "bisect_many", bisect)


def test_above_split_batch_k_the_path_makes_its_cuts_from_one_scoring_round(monkeypatch: pytest.MonkeyPatch) -> None:
    x, _ = blobs(900, 24, 32, 0, spread=0.6)
    start, _ = K.spherical_kmeans(x, 8, seed=0, n_init=2)
    monkeypatch.setattr(K, "SPLIT_BATCH_K", 10)
    rec = _Recorder(monkeypatch)
    out = K._bisect_to(x, start, 14, np.random.default_rng(0))
    assert len(rec.rounds) == 1, "the cuts were re-scored after each one"
    assert set(rec.n_init) == {K.SPLIT_RESTARTS_LARGE_K} == {1}
    assert sorted(np.unique(out)) == list(range(14))
    # Each of the 8 groups cut at most once, the 6 best-scoring cuts (the order of eligible on ties).
    scored = rec.rounds[0]
    best = {g for g, _ in sorted(scored, key=lambda gt: -gt[1])[:6]}
    cut = {g for g in range(8) if len(np.unique(out[start == g])) == 2}
    assert all(len(np.unique(out[start == g])) <= 2 for g in range(8))
    assert cut == best


def test_up_to_split_batch_k_the_path_rescores_after_each_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    x, _ = blobs(900, 24, 32, 0, spread=0.6)
    start, _ = K.spherical_kmeans(x, 8, seed=0, n_init=2)
    rec = _Recorder(monkeypatch)
    out = K._bisect_to(x, start, 14, np.random.default_rng(0))
    assert 14 <= K.SPLIT_BATCH_K
    assert len(rec.rounds) == 6 and set(rec.n_init) == {K.SPLIT_RESTARTS} == {2}
    assert sorted(np.unique(out)) == list(range(14))


@pytest.mark.parametrize("seed", [0, 1])
def test_many_themes_get_a_count_in_range(seed: int) -> None:
    # 90 themes of 20 answers: the candidates above 60 (61, 76, 95, 119, 149) run the one-round split path.
    x, _ = blobs(1800, 90, 48, seed, spread=0.9)
    cl = K.cluster(x, num_themes=None, max_themes=None, min_theme_size=5, seed=seed)
    assert cl.count is not None and 60 <= cl.k <= 135, cl.explanation
    ks = [int(r["k"]) for r in cl.count.scores]
    assert {61, 76, 95, 119} <= set(ks)
    assert all(r["split"] > 0 for r in cl.count.scores if r["k"] > K.SPLIT_BATCH_K)  # the path reached every k
