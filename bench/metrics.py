"""Clustering agreement metrics shared by the benchmarks (numpy only, matching scikit-learn's definitions)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _contingency(a: list[Any], b: list[Any]) -> np.ndarray:
    _, ai = np.unique(np.array(a, dtype=str), return_inverse=True)
    _, bi = np.unique(np.array(b, dtype=str), return_inverse=True)
    m = np.zeros((ai.max() + 1, bi.max() + 1))
    np.add.at(m, (ai, bi), 1)
    return m


def nmi(a: list[Any], b: list[Any]) -> float:
    """Normalised mutual information, arithmetic mean normalisation (sklearn's default)."""
    p = _contingency(a, b)
    p /= p.sum()
    pa, pb = p.sum(1), p.sum(0)
    nz = p > 0
    mi = float((p[nz] * np.log(p[nz] / np.outer(pa, pb)[nz])).sum())
    ha, hb = -float((pa * np.log(pa)).sum()), -float((pb * np.log(pb)).sum())
    return 2 * mi / (ha + hb) if ha + hb > 0 else 1.0


def ari(a: list[Any], b: list[Any]) -> float:
    m = _contingency(a, b)
    n = m.sum()

    def c2(x: np.ndarray) -> float:
        return float((x * (x - 1) / 2).sum())

    idx, ea, eb = c2(m), c2(m.sum(1)), c2(m.sum(0))
    exp = ea * eb / (n * (n - 1) / 2)
    mx = (ea + eb) / 2
    return (idx - exp) / (mx - exp) if mx != exp else 1.0
