"""Impact's star on null data across score shapes and theme sizes, and its power on planted effects (stats46).

    nice -n 10 .venv/bin/python bench/impact_null.py [--set tune|check] [--seeds 1000] [--power-seeds 300]

The star is "the theme's 95 % interval excludes 0" (impact.starred; every theme here has >= impact.MIN_N
responses). Per seed: 1,000 responses; six themes of exactly 10, 20, 50, 100, 200 and 400 responses, each a random
subset drawn independently of the others (multi-label) and of the scores. Score shapes:

* ``nps``: 7 + N(0, 2) rounded and clipped to 0-10, scored as NPS points (+100 / 0 / -100);
  planted: the theme's raw score 1 point lower.
* ``csat``: 1-5, P(1..5) = .01 .01 .01 .07 .90 (most answers 5); planted: .01 .01 .03 .15 .80.
* ``rare``: numeric, 3 % of responses score 10, the rest 0; planted: 8 %.
* ``numeric``: N(0, 1), symmetric; planted: 0.3 lower.
* ``bimodal``: 1-5, P = .40 .05 .10 .05 .40; planted: .50 .05 .10 .05 .30.

Null: every response's score from the shape's distribution, whatever its themes: the share of themes of each size
that are starred (nominal 5 %; Monte-Carlo sd at 1,000 seeds ±0.7 points). Power: per size, one theme of that size
drawn from the planted distribution and the rest (one other theme) from the null one: how often it is starred.

Methods (all computed on the same draws):

* ``welch``: impact.welch_interval (shipped until stats46).
* ``max_pooled``: review46's proposal, the wider of Welch's interval and the pooled-variance t interval.
* ``perm_t``: impact.permutation_interval, Welch's interval with its critical values from 999 permutations of the
  scores (equal tails); the star is then a permutation test of Welch's statistic.
* ``perm_t_sym``: the same with symmetric critical values (|t|).
* ``perm_diff``: a permutation test of the raw difference in means (test only: it has no interval of its own).

Seeds, fixed before any number was looked at: TUNE = seeds 1000-1999 (power 1000-1299), on which the method was
chosen; CHECK = seeds 0-999 (power 0-299), run once, after the choice, and only reported.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]  # bench/platform.py shadows the stdlib
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from pipelines.thematic import impact  # noqa: E402

N = 1000
SIZES = (10, 20, 50, 100, 200, 400)
SHAPES = ("nps", "csat", "rare", "numeric", "bimodal")
METHODS = ("welch", "max_pooled", "perm_t", "perm_t_sym", "perm_diff")
NPS = np.array([-100.0] * 7 + [0.0] * 2 + [100.0] * 2)  # points of 0..10


def draw(shape: str, rng: np.random.Generator, size: int, planted: bool) -> np.ndarray[Any, Any]:
    if shape == "nps":
        raw = np.clip(np.rint(7 + rng.normal(0, 2, size) - (1.0 if planted else 0.0)), 0, 10).astype(int)
        return NPS[raw]
    if shape == "csat":
        p = [.01, .01, .03, .15, .80] if planted else [.01, .01, .01, .07, .90]
        return rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=size, p=p)
    if shape == "rare":
        return np.where(rng.random(size) < (0.08 if planted else 0.03), 10.0, 0.0)
    if shape == "numeric":
        return rng.normal(0, 1, size) - (0.3 if planted else 0.0)
    p = [.50, .05, .10, .05, .30] if planted else [.40, .05, .10, .05, .40]
    return rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=size, p=p)


def max_pooled(v: np.ndarray[Any, Any], m: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    lo_w, hi_w = impact.welch_interval(v, m)
    n = len(v)
    lo, hi = lo_w.copy(), hi_w.copy()
    for j in range(m.shape[1]):
        a, b = v[m[:, j] > 0], v[m[:, j] == 0]
        na, nb = len(a), len(b)
        if na < 2 or nb < 2 or not math.isfinite(lo_w[j]):
            continue
        sp = ((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2)
        f = na / n
        est = f * (a.mean() - b.mean())
        half = max(hi_w[j] - est, impact.t_quantile(0.975, na + nb - 2) * f * math.sqrt(sp * (1 / na + 1 / nb)))
        lo[j], hi[j] = est - half, est + half
    return lo, hi


def perm_diff(v: np.ndarray[Any, Any], m: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Whether a two-sided permutation test (999, equal tails) of the difference in means rejects, per theme."""
    rng = np.random.default_rng(impact.SEED)
    n = len(v)
    sizes = m.sum(axis=0).astype(int)
    total = v.sum()
    obs = (v @ m) / sizes - (total - v @ m) / (n - sizes)
    values, counts = np.unique(v, return_counts=True)
    if values.size <= impact.DISCRETE:  # as impact.permutation_interval draws them: counts per value
        s = np.stack([rng.multivariate_hypergeometric(counts, int(z), size=999, method="marginals") @ values
                      for z in sizes], axis=1)
    else:
        vp = np.stack([v[rng.choice(n, size=int(sizes.max()), replace=False)] for _ in range(999)])
        s = np.cumsum(vp, axis=1)[:, sizes - 1]
    d = np.sort(s / sizes - (total - s) / (n - sizes), axis=0)
    eps = 1e-9 * (np.abs(d).max() + 1)
    return (obs > d[999 - 25] + eps) | (obs < d[24] - eps)


def stars(v: np.ndarray[Any, Any], m: np.ndarray[Any, Any]) -> dict[str, np.ndarray[Any, Any]]:
    def ex(f: Callable[..., tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]], **kw: Any) -> np.ndarray[Any, Any]:
        lo, hi = f(v, m, **kw)
        # As the result rounds them (impact._round) and impact.starred reads them.
        lo, hi = np.round(lo, 4), np.round(hi, 4)
        return np.isfinite(lo) & np.isfinite(hi) & ((lo > 0) | (hi < 0))

    return {"welch": ex(impact.welch_interval), "max_pooled": ex(max_pooled),
            "perm_t": ex(impact.permutation_interval),
            "perm_t_sym": ex(impact.permutation_interval, tails="symmetric"), "perm_diff": perm_diff(v, m)}


def null_run(shape: str, seed: int) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    v = draw(shape, rng, N, False)
    m = np.zeros((N, len(SIZES)))
    for j, k in enumerate(SIZES):
        m[rng.choice(N, size=k, replace=False), j] = 1.0
    return stars(v, m)


def power_run(shape: str, seed: int, k: int) -> dict[str, bool]:
    rng = np.random.default_rng(seed)
    v = np.concatenate([draw(shape, rng, k, True), draw(shape, rng, N - k, False)])
    m = np.zeros((N, 1))
    m[:k, 0] = 1.0
    return {name: bool(x[0]) for name, x in stars(v, m).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("tune", "check"), default="tune")
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--power-seeds", type=int, default=300)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    args = ap.parse_args()
    first = 1000 if args.set == "tune" else 0
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(json.dumps({"cpu": cpu, "load": [round(x, 2) for x in os.getloadavg()], "args": vars(args)}), flush=True)
    for shape in args.shapes.split(","):
        t0 = time.process_time()
        null = {name: np.zeros(len(SIZES)) for name in METHODS}
        for s in range(first, first + args.seeds):
            for name, x in null_run(shape, s).items():
                null[name] += x
        power = {name: np.zeros(len(SIZES)) for name in METHODS}
        for j, k in enumerate(SIZES):
            for s in range(first, first + args.power_seeds):
                for name, hit in power_run(shape, s, k).items():
                    power[name][j] += hit
        print(json.dumps({
            "shape": shape, "set": args.set, "sizes": SIZES,
            "null_starred_pct": {name: [round(100 * x / args.seeds, 1) for x in null[name]] for name in METHODS},
            "power_pct": {name: [round(100 * x / args.power_seeds, 1) for x in power[name]] for name in METHODS},
            "cpu_s": round(time.process_time() - t0, 1), "load": [round(x, 2) for x in os.getloadavg()],
        }), flush=True)


if __name__ == "__main__":
    main()
