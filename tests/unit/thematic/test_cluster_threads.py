"""The cluster stage's units on two threads give what one thread gives, bit for bit (issue 27, ``parallel.py``).

Each unit (a k-means run of the curve, a bisection of the split path, a restart of the final partition, a block of
the neighbour search) runs on one BLAS thread whichever thread runs it, and the caller combines the results in its
fixed order, so the arrays are equal, not close. Also: a unit's exception reaches the caller, leaving the block
joins the workers and drops what they had not started, and one thread is the plain in-thread code path.
No test depends on timing: where a unit must run on the worker, it waits for an event the test sets.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import cluster as K
from pipelines.thematic import embed as E
from pipelines.thematic import stages as S
from pipelines.thematic.parallel import Units


def blobs(n: int, k: int, d: int, seed: int, spread: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = K.normalise(rng.normal(size=(k, d)))
    y = rng.integers(0, k, n)
    return K.normalise(centres[y] + spread * rng.normal(size=(n, d)) / np.sqrt(d))


def unit_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("thematiq-cluster", "thematiq-sublevel", "test-units"))]


def same_clustering(a: K.Clustering, b: K.Clustering) -> None:
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    assert a.k == b.k and a.criterion == b.criterion and a.explanation == b.explanation
    assert a.scores == b.scores  # every float of the curve, exactly (dicts compare floats with ==)
    assert a.count == b.count


@pytest.mark.parametrize(("n", "k_true", "d", "seed"), [(600, 6, 24, 0), (1400, 40, 32, 3)])
def test_cluster_on_two_threads_is_bit_identical(n: int, k_true: int, d: int, seed: int) -> None:
    # The second shape searches counts above SPLIT_BATCH_K (cap 4 sqrt(n) = 149): the split path's batched round.
    x = blobs(n, k_true, d, seed)
    one = K.cluster(x, num_themes=None, max_themes=None, min_theme_size=5, seed=seed, threads=1)
    two = K.cluster(x, num_themes=None, max_themes=None, min_theme_size=5, seed=seed, threads=2)
    three = K.cluster(x, num_themes=None, max_themes=None, min_theme_size=5, seed=seed, threads=3)
    same_clustering(one, two)
    same_clustering(one, three)
    assert max(r["k"] for r in one.scores) > (K.SPLIT_BATCH_K if n > 1000 else 10)
    assert not unit_threads()


def test_fixed_count_and_parts_on_two_threads_are_bit_identical() -> None:
    x = blobs(900, 9, 24, 5)
    same_clustering(K.cluster(x, num_themes=7, max_themes=None, min_theme_size=5, seed=1, threads=1),
                    K.cluster(x, num_themes=7, max_themes=None, min_theme_size=5, seed=1, threads=2))
    with Units(2, name="test-units") as units:
        np.testing.assert_array_equal(K.knn_smooth(x, seed=1), K.knn_smooth(x, seed=1, units=units))
        np.testing.assert_array_equal(K.neighbours(x, 5), K.neighbours(x, 5, units=units))
        for n_init in (1, 5):
            a = K.spherical_kmeans(x, 9, seed=2, n_init=n_init)
            b = K.spherical_kmeans(x, 9, seed=2, n_init=n_init, units=units)
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
        ks = K.candidate_ks(2, 40)
        assert K.silhouette_curve(x, ks, seed=4) == K.silhouette_curve(x, ks, seed=4, units=units)
        start, _ = K.spherical_kmeans(x, 3, seed=0, n_init=2)
        for k in (30, K.SPLIT_BATCH_K + 20):  # one bisection a step, then a batched round of many (shared out)
            np.testing.assert_array_equal(K._bisect_to(x, start, k, np.random.default_rng(7)),
                                          K._bisect_to(x, start, k, np.random.default_rng(7), units=units))


def test_plus_plus_prefix_gives_the_same_centres_in_any_call_order() -> None:
    # The curve's runs of one seed share a PlusPlusPrefix and may ask for their centres in any order.
    x = blobs(300, 5, 16, 2)
    in_order = K.PlusPlusPrefix(x, 11)
    wanted = [in_order.first(k) for k in (2, 3, 9, 20)]
    backwards = K.PlusPlusPrefix(x, 11)
    got = [backwards.first(k) for k in (20, 9, 3, 2)][::-1]
    for a, b in zip(wanted, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_one_thread_runs_every_unit_at_submit_in_the_calling_thread() -> None:
    ran: list[str] = []
    def double(v: int) -> int:
        ran.append(threading.current_thread().name)
        return v * 2

    with Units(1, name="test-units") as units:
        u = units.submit(double, 21)
        assert ran == [threading.current_thread().name]  # already ran, here
        assert not unit_threads()
        assert u.result() == 42
        with pytest.raises(ZeroDivisionError):  # the plain code path: the error leaves submit itself
            units.submit(lambda: 1 / 0)


def test_a_workers_exception_reaches_the_caller_and_the_workers_are_joined() -> None:
    started, release = threading.Event(), threading.Event()
    where: list[str] = []

    def failing() -> None:
        where.append(threading.current_thread().name)
        started.set()
        release.wait()
        raise ValueError("unit failed")

    with pytest.raises(ValueError, match="unit failed"), Units(2, name="test-units") as units:
        u = units.submit(failing)
        started.wait()  # the worker holds it (the calling thread never waited on it, so never ran it)
        release.set()
        u.result()
    assert where == ["test-units-0"]
    assert not unit_threads()


def test_leaving_the_block_drops_units_not_started_and_joins() -> None:
    hold, holding = threading.Event(), threading.Event()
    ran: list[int] = []

    def blocker() -> None:
        holding.set()
        hold.wait()

    units = Units(2, name="test-units")
    real_stop = units._stop_workers

    def stop() -> None:  # the worker is released only once the queued units are dropped
        hold.set()
        real_stop()

    units._stop_workers = stop  # type: ignore[method-assign]
    with pytest.raises(KeyError), units:
        first = units.submit(blocker)
        holding.wait()  # the worker is inside blocker: the next units stay queued
        later = [units.submit(ran.append, i) for i in range(20)]
        raise KeyError("cancelled")  # what a cancellation or another unit's error looks like to the block
    assert not unit_threads()
    assert ran == []  # nothing queued ran after the block was left
    assert first.result() is None  # the one the worker held, it finished
    for u in later:
        with pytest.raises(RuntimeError, match="dropped"):
            u.result()
    with pytest.raises(RuntimeError, match="outside"):
        units.submit(ran.append, 99)


def test_an_exception_inside_the_cluster_stage_propagates_and_leaves_no_thread(monkeypatch: Any) -> None:
    real = K._curve_run

    def run(reduced: Any, full: Any, self_dist: Any, plus: Any, k: int, seed: int) -> Any:
        if k == 9:
            raise MemoryError("k=9 failed")
        return real(reduced, full, self_dist, plus, k, seed)

    monkeypatch.setattr(K, "_curve_run", run)
    with pytest.raises(MemoryError, match="k=9 failed"):
        K.cluster(blobs(500, 6, 16, 1), num_themes=None, max_themes=None, min_theme_size=5, seed=0, threads=2)
    assert not unit_threads()


def test_the_stage_uses_the_embeddings_thread_count(monkeypatch: Any) -> None:
    assert S.stage_threads() == E.DEFAULT_THREADS
    monkeypatch.setattr(E, "DEFAULT_THREADS", 1)
    assert S.stage_threads() == 1
    seen: list[int] = []
    real = K.cluster

    def spy(*a: Any, threads: int = 1, **k: Any) -> K.Clustering:
        seen.append(threads)
        return real(*a, threads=threads, **k)

    monkeypatch.setattr(K, "cluster", spy)
    monkeypatch.setattr(E, "DEFAULT_THREADS", 3)

    class P:
        num_themes, max_themes, min_theme_size, seed = "auto", None, 5, 0

    class St:
        emb, params, texts = blobs(120, 3, 8, 0), P(), ["t"] * 120

    S._cluster(St())  # type: ignore[arg-type]
    assert seen == [3]


def test_a_neighbour_block_holds_only_its_own_rows() -> None:
    # Every block's result waits for the caller (all are submitted before the curve): a view of argpartition's
    # block x n array would hold all of it (3.7 GiB peak RSS at 20,000 answers before the copy).
    x = blobs(3000, 5, 16, 0)
    got = K._neighbour_block(x, 5, 0, 64)
    assert got.shape == (64, 5) and (got.base is None or got.base.nbytes <= got.nbytes)


def test_sub_themes_on_two_threads_are_bit_identical() -> None:
    # speed45: each theme's split is a unit, so some run on the worker thread.
    x = blobs(1200, 24, 32, 7, spread=0.3)
    labels = np.arange(1200, dtype=np.int64) % 6  # 6 themes, each a mixture of the 24 blobs
    labels[:5] = -1  # outliers keep -1
    one = K.sub_level(x, labels, 6, min_size=10, seed=2, threads=1)
    two = K.sub_level(x, labels, 6, min_size=10, seed=2, threads=2)
    three = K.sub_level(x, labels, 6, min_size=10, seed=2, threads=3)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[0], three[0])
    assert one[1] == two[1] == three[1]
    assert len(one[1]) > 6 and (one[0][:5] == -1).all()  # some theme was split; outliers untouched
    assert not unit_threads()
