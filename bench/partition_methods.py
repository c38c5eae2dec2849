"""The final partition at a GIVEN k: the pipeline's (spherical k-means on 5-NN-smoothed embeddings, restarts) against
graph-based candidates, on the suite's own cached embeddings (issue 22 follow-up: spectral clustering was never tried).

Per set and seed (the cluster stage as ``bench/thematic.py --counts-vs`` sees it: embeddings of the cleaned texts from
the bench cache, ``fold_small`` at ``min_theme_size`` 5 after every method) NMI, ARI and Hungarian accuracy at the
TRUE k (at most 200) and at the k the pipeline chooses (``cluster.decide`` on the cached silhouette curve of that
seed, :func:`bench.thematic.curve_cached`). TUNE and CHECK are ``bench.thematic.TUNE`` / ``CHECK`` exactly (the stress
variants belong to the set they are drawn from); ``--api`` reports the sets ``bench/thematic_api.py`` runs (mcid,
drugs, hwu), at their chosen k, apart.

Methods (``METHODS``; a method is a name and a few settings):

* ``current``   the pipeline's ``cluster.cluster`` final partition: ``spherical_kmeans(knn_smooth(x), k, n_init=
                FINAL_RESTARTS)``.
* ``spec<m>``   spectral clustering (Ng, Jordan & Weiss 2002): symmetric m-nearest-neighbour cosine graph (an edge
                when either point is among the other's m nearest, weight max(cos, 0)), normalised adjacency
                D^-1/2 W D^-1/2, its top-k eigenvectors (scipy ``eigsh``), rows normalised, spherical k-means with
                ``FINAL_RESTARTS`` restarts on them.
* ``sst<m>``    the same with self-tuning weights (Zelnik-Manor & Perona 2004): exp(-d_ij^2 / (s_i s_j)), d the
                cosine distance, s_i the distance to the 7th neighbour.
* ``hyb<m>``    k-means initialised from the spectral partition: the ``spec<m>`` labels' centroids on the smoothed
                vectors start one spherical k-means run there (refined in the pipeline's space).
* ``best<m>``   the pipeline's restarts plus that spectral start, the best k-means objective of all of them.
* ``diff<m>t<t>`` graph diffusion instead of one smoothing step (label-propagation style): t steps of
                x <- normalise(x + mean of its m neighbours' current vectors), then the pipeline's k-means.

Usage::

    nice -n 10 .venv/bin/python bench/partition_methods.py --tune [--seeds 3] [--methods current,spec10,...]
    nice -n 10 .venv/bin/python bench/partition_methods.py --check --methods current,<chosen>   # once; all CHECK
                                    # sets, then the API sets' rows (mcid, drugs, hwu: check sets) apart
    nice -n 10 .venv/bin/python bench/partition_methods.py --api --methods current,<chosen>     # those three only
    nice -n 10 .venv/bin/python bench/partition_methods.py --speed --methods current,<chosen>   # CPU s, peak RSS

``--speed`` runs each method at n = 2,000 and 20,000 (``bench/thematic.py --scale``'s texts, embeddings from the
bench cache) in a fresh process on one BLAS thread: CPU seconds (user + system) of the k search and of the final
partition apart, and the process's peak RSS; the CPU model, flags and load average are printed with them.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.thematic as B  # noqa: E402, I001  (sets one BLAS thread before numpy loads)
import numpy as np  # noqa: E402

from bench.metrics import ari, nmi  # noqa: E402
from pipelines.thematic import cluster as K  # noqa: E402
from pipelines.thematic.assign import fold_small  # noqa: E402

API_SETS = ("mcid", "drugs", "hwu")
MIN_SIZE = 5


# -- graph and spectral embedding ---------------------------------------------------------------------------------


def knn_graph(x: np.ndarray, m: int, kind: str = "cos") -> Any:
    """Symmetric m-NN affinity (scipy CSR): edge i-j when either is among the other's m nearest (exact, cosine)."""
    import scipy.sparse as sp

    n = len(x)
    nb = K.neighbours(x, m)
    sims = np.einsum("id,imd->im", x, x[nb])
    if kind == "cos":
        w = np.maximum(sims, 0.0)
    else:  # self-tuning (Zelnik-Manor & Perona): local scale = distance to the 7th neighbour
        d = 1.0 - sims
        s = np.sort(d, axis=1)[:, min(6, m - 1)]
        s = np.maximum(s, 1e-6)
        w = np.exp(-(d**2) / (s[:, None] * s[nb]))
    rows = np.repeat(np.arange(n), m)
    a = sp.csr_matrix((w.ravel().astype(np.float64), (rows, nb.ravel())), shape=(n, n))
    return a.maximum(a.T).tocsr()


def spectral_embedding(w: Any, k: int, seed: int) -> np.ndarray:
    """Top-k eigenvectors of D^-1/2 W D^-1/2, rows normalised (Ng-Jordan-Weiss)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    deg = np.asarray(w.sum(axis=1)).ravel()
    dinv = sp.diags(1.0 / np.sqrt(np.maximum(deg, 1e-12)))
    a = dinv @ w @ dinv
    n = a.shape[0]
    if k + 1 >= n // 2:
        _, vecs = np.linalg.eigh(a.toarray())
        vecs = vecs[:, -k:]
    else:
        v0 = np.random.default_rng(seed).standard_normal(n)
        _, vecs = eigsh(a, k=k, which="LA", v0=v0, tol=1e-6)
    return K.normalise(vecs.astype(np.float32))


def _spectral_labels(x: np.ndarray, k: int, seed: int, m: int, kind: str) -> np.ndarray:
    emb = spectral_embedding(knn_graph(x, m, kind), k, seed)
    labels, _ = K.spherical_kmeans(emb, k, seed=seed, n_init=K.FINAL_RESTARTS)
    return labels


def _objective(x: np.ndarray, labels: np.ndarray, k: int) -> float:
    c = K.normalise(K.group_sums(labels, x, k))
    return float((x * c[labels]).sum())


def diffuse(x: np.ndarray, m: int, steps: int) -> np.ndarray:
    nb = K.neighbours(x, m)
    y = x
    for _ in range(steps):
        y = K.normalise(y + y[nb].mean(axis=1))
    return y


# -- methods: (x, k, seed) -> labels ------------------------------------------------------------------------------


def m_current(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    labels, _ = K.spherical_kmeans(K.knn_smooth(x, seed=seed), k, seed=seed, n_init=K.FINAL_RESTARTS)
    return labels


def make(name: str) -> Callable[[np.ndarray, int, int], np.ndarray]:
    if name == "current":
        return m_current
    if name == "shipped":  # cluster.cluster at a fixed k, whatever its final partition is now
        return lambda x, k, seed: K.cluster(x, num_themes=k, max_themes=None, min_theme_size=MIN_SIZE,
                                            seed=seed).labels
    mt = re.fullmatch(r"(spec|sst|hyb|best)(\d+)", name)
    if mt:
        how, m = mt.group(1), int(mt.group(2))
        kind = "st" if how == "sst" else "cos"

        def f(x: np.ndarray, k: int, seed: int) -> np.ndarray:
            lab = _spectral_labels(x, k, seed, m, kind)
            if how in ("spec", "sst"):
                return lab
            xs = K.knn_smooth(x, seed=seed)
            init = K.normalise(K.group_sums(lab, xs, k))
            ref, _ = K.spherical_kmeans(xs, k, seed=seed, n_init=1, init=init)
            if how == "hyb":
                return ref
            cur, _ = K.spherical_kmeans(xs, k, seed=seed, n_init=K.FINAL_RESTARTS)
            return ref if _objective(xs, ref, k) > _objective(xs, cur, k) else cur
        return f
    mt = re.fullmatch(r"diff(\d+)t(\d+)", name)
    if mt:
        m, steps = int(mt.group(1)), int(mt.group(2))
        return lambda x, k, seed: K.spherical_kmeans(diffuse(x, m, steps), k, seed=seed, n_init=K.FINAL_RESTARTS)[0]
    raise SystemExit(f"unknown method {name!r}")


# -- quality ------------------------------------------------------------------------------------------------------


def chosen_k(x: np.ndarray, seed: int) -> int:
    curve = B.curve_cached(K, x, seed)
    return int(K.decide([dict(r) for r in curve], len(x), 2, K.auto_cap(len(x), MIN_SIZE, None)).k)


def score(x: np.ndarray, labels: np.ndarray, k: int, pos: list[int], truth: list[str]) -> tuple[float, float, float]:
    lab, _ = fold_small(np.asarray(labels, dtype=np.int64), x, k, MIN_SIZE)
    pred = [int(lab[i]) for i in pos]
    return nmi(truth, pred), ari(truth, pred), B.hungarian(truth, pred)


def quality(group: str, names: list[str], methods: list[str], n_seeds: int, out: Path | None) -> list[dict[str, Any]]:
    print(f"\n**{group} sets** (seeds 0-{n_seeds - 1}; cluster stage; {B.__name__} sets and caches)\n", flush=True)
    rows: list[dict[str, Any]] = []
    for name in names:
        x, pos, truth = B.cluster_input(name)
        true_k = min(len(set(truth)), 200)
        for seed in range(n_seeds):
            ks = {"true": true_k, "chosen": chosen_k(x, seed)}
            for method in methods:
                f = make(method)
                for which, k in ks.items():
                    c0 = time.process_time()
                    lab = f(x, k, seed)
                    secs = time.process_time() - c0
                    n_, a_, acc = score(x, lab, k, pos, truth)
                    r = {"set": name, "n": len(x), "seed": seed, "method": method, "at": which, "k": k,
                         "nmi": n_, "ari": a_, "acc": acc, "cpu": secs}
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    if out:
        with out.open("a") as fh:
            for r in rows:
                fh.write(json.dumps({"group": group, **r}) + "\n")
    table(rows, methods)
    return rows


def table(rows: list[dict[str, Any]], methods: list[str]) -> None:
    sets = list(dict.fromkeys(r["set"] for r in rows))
    for which in ("chosen", "true"):
        print(f"\nat the {which} k (mean over seeds; NMI / ARI / acc; Δ vs current)\n")
        print("| set | k | " + " | ".join(methods) + " |")
        print("|---|---|" + "---|" * len(methods))
        means: dict[str, list[float]] = {m: [] for m in methods}
        for s in sets:
            cells = []
            ks = sorted({r["k"] for r in rows if r["set"] == s and r["at"] == which})
            base = None
            for m in methods:
                rs = [r for r in rows if r["set"] == s and r["at"] == which and r["method"] == m]
                if not rs:
                    cells.append("-")
                    continue
                v = [float(np.mean([r[q] for r in rs])) for q in ("nmi", "ari", "acc")]
                means[m].append(v[0])
                if base is None:
                    base = v[0]
                cells.append(f"{v[0]:.3f} / {v[1]:.3f} / {v[2]:.3f} ({v[0] - base:+.3f})")
            print(f"| {s} | {', '.join(map(str, ks))} | " + " | ".join(cells) + " |")
        b0 = float(np.mean(means[methods[0]])) if means[methods[0]] else 0.0
        print("| **mean NMI** | | " + " | ".join(
            f"{np.mean(means[m]):.4f} ({np.mean(means[m]) - b0:+.4f})" if means[m] else "-" for m in methods) + " |")
        worst = []
        for m in methods:
            d = [float(np.mean([r["nmi"] for r in rows if r["set"] == s and r["at"] == which and r["method"] == m])
                       - np.mean([r["nmi"] for r in rows if r["set"] == s and r["at"] == which
                                  and r["method"] == methods[0]])) for s in sets]
            worst.append(f"{min(d):+.3f}")
        print("| worst set ΔNMI | | " + " | ".join(worst) + " |", flush=True)


# -- speed --------------------------------------------------------------------------------------------------------

WORKER = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import bench.partition_methods as P
from pipelines.thematic import cluster as K
from pipelines.thematic.clean import clean
import bench.thematic as B
n, method = int(sys.argv[2]), sys.argv[3]
texts = B.scale_texts(n)
rows = [r for r in clean([{"id": i, "text": t} for i, t in enumerate(texts)]) if r.status == "ok"]
x, _ = B.embed_cached([r.text for r in rows])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
c0 = cpu()
k = K.choose_k(x, 2, max(2, K.auto_cap(len(x), 5, None)), seed=0).k
c1 = cpu()
P.make(method)(x, k, 0)
c2 = cpu()
print(json.dumps({"n": len(x), "k": k, "method": method, "choose_k_cpu": round(c1 - c0, 2),
                  "partition_cpu": round(c2 - c1, 2), "peak_rss_gib": round(
                      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
                  "rss_before_gib": round(rss0 / 2**20, 3)}))
"""


def speed(methods: list[str], sizes: list[int]) -> None:
    from bench.int8_speed import machine

    print(machine(), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    print("\n| n | k | method | k search CPU s | final partition CPU s | cluster stage CPU s | peak RSS GiB |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for n in sizes:
        for method in methods:
            p = subprocess.run([sys.executable, "-c", WORKER, str(ROOT), str(n), method], capture_output=True,
                               text=True, env=env, cwd=ROOT)
            if p.returncode:
                print(p.stderr[-2000:])
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            print(f"| {r['n']} | {r['k']} | {method} | {r['choose_k_cpu']:.2f} | {r['partition_cpu']:.2f} | "
                  f"{r['choose_k_cpu'] + r['partition_cpu']:.2f} | {r['peak_rss_gib']:.2f} |", flush=True)
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--tune", action="store_true")
    g.add_argument("--check", action="store_true")
    g.add_argument("--api", action="store_true")
    g.add_argument("--speed", action="store_true")
    ap.add_argument("--methods", default="current,spec10,spec15,hyb10,best10,diff5t2")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sets", default="")
    ap.add_argument("--sizes", default="2000,20000")
    ap.add_argument("--out", type=Path, default=None, help="append every row as JSON lines")
    a = ap.parse_args()
    methods = a.methods.split(",")
    from bench.int8_speed import machine

    print(machine(), flush=True)
    if a.speed:
        speed(methods, [int(s) for s in a.sizes.split(",")])
        return
    group, names = ("tune", B.TUNE) if a.tune else ("check", B.CHECK) if a.check else ("api", API_SETS)
    if a.sets:
        names = tuple(s for s in a.sets.split(",") if s in names)
    rows = quality(group, list(names), methods, a.seeds, a.out)
    if group == "check" and any(r["set"] in API_SETS for r in rows):
        print("\n**the API sets (bench/thematic_api.py's mcid, drugs, hwu), from the same check run**")
        table([r for r in rows if r["set"] in API_SETS], methods)
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


if __name__ == "__main__":
    main()
