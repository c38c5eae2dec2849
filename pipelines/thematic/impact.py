"""A theme's impact on a score (``params.score``): how many points of NPS, CSAT or a numeric rating it costs.

Thematic's definition: impact = the overall score minus the overall score of the responses *without* that
theme. A theme whose answers score below the rest has a negative impact (without it the score would be
higher). The population is the usable responses that carry a score; a response "has" a theme when it is
among its themes (all of them under ``multi_label``).

Scores per response: ``nps`` takes integers 0–10 and scores a promoter (9–10) +100, a passive (7–8) 0 and a
detractor (0–6) −100, so the mean is the NPS; ``csat`` takes 1–5 and ``numeric`` any finite number, both
scored as they are (the mean). The 95 % interval is a percentile bootstrap over responses (``RESAMPLES``
resamples, seeded by ``params.seed``), each resample recomputing the overall score and every theme's
"without" score, so an interval reflects both.

Caveat (docs/thematic.md): with one theme per response, a theme that is merely average is not exactly 0 when
another theme drags the score down, because its responses are then above the rest. That is the definition,
not noise; with independent themes (multi-label) an unaffected theme's impact is 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import numpy as np

from .insight import finite

Scale = Literal["nps", "csat", "numeric"]
RESAMPLES: Final = 1000
#: Resamples drawn per matrix product: bounds the memory of one step to BATCH × responses weights.
BATCH: Final = 50
#: Below this many scored responses a theme's percentile interval is too narrow to star. Chosen on a scratch run
#: (NPS independent of the themes: 17.5 % of 5-response themes excluded 0, 13.5 % at 8, 7 % at 10); the
#: re-runnable bench/small_n.py gives 12.5 % at 5 and 7-9.5 % from 8 to 50 (nominal 5 %; docs/thematic.md,
#: "Impact on a score"). Such a row is `small_n` and never starred; its interval is still given.
MIN_N: Final = 10


def number(value: Any) -> float | None:
    """A score as a number: an int or float, or a string that reads as one (a spreadsheet cell); else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return finite(value)
    if isinstance(value, str) and value.strip():
        try:
            x = float(value.strip())
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def problem(values: Sequence[Any], scale: Scale) -> tuple[str, str] | None:
    """Why these metadata values cannot be a score on ``scale``: (the field of ``params.score`` at fault, a
    message), or None. Missing values are allowed (those responses have no score)."""
    present = [v for v in values if v is not None and v != ""]
    if not present:
        return "key", "no response has a value"
    bad = next((v for v in present if number(v) is None), None)
    if bad is not None:
        return "key", f"not a number: {str(bad)[:40]!r}"
    nums = [number(v) for v in present]
    if scale == "nps" and any(x is None or not x.is_integer() or not 0 <= x <= 10 for x in nums):
        return "scale", "an NPS score is an integer from 0 to 10"
    if scale == "csat" and any(x is None or not 1 <= x <= 5 for x in nums):
        return "scale", "a CSAT score is a number from 1 to 5"
    return None


def points(x: float, scale: Scale) -> float:
    if scale == "nps":
        return 100.0 if x >= 9 else 0.0 if x >= 7 else -100.0
    return x


@np.errstate(over="ignore", invalid="ignore")  # sums of scores near 1e308 overflow: _round makes those None
def impact(
    values: Sequence[Any], themes_of: Sequence[Sequence[str]], themes: Sequence[Mapping[str, Any]], *,
    key: str, scale: Scale, seed: int = 0, resamples: int = RESAMPLES,
) -> dict[str, Any]:
    """``values[i]`` is response i's raw score (None: no score), ``themes_of[i]`` its theme ids; ``themes``
    the result's themes (id, label). Returns ``{key, scale, overall, n, themes: [...]}``, ranked by impact
    (most negative first; themes no scored response has come last)."""
    keep = [i for i, v in enumerate(values) if number(v) is not None]
    v = np.array([points(float(number(values[i]) or 0.0), scale) for i in keep], dtype=np.float64)
    ids = [str(t["id"]) for t in themes]
    pos = {t: j for j, t in enumerate(ids)}
    m = np.zeros((len(keep), len(ids)), dtype=np.float64)
    for r, i in enumerate(keep):
        for t in themes_of[i]:
            if t in pos:
                m[r, pos[t]] = 1.0
    n = len(keep)
    overall = float(v.mean()) if n else None
    n_t = m.sum(axis=0)
    s_t = v @ m
    low, high = _bootstrap(v, m, seed=seed, resamples=resamples)
    rows = []
    for j, theme in enumerate(themes):
        nt, rest = int(n_t[j]), n - int(n_t[j])
        score = float(s_t[j] / nt) if nt else None
        imp = float(overall - (v.sum() - s_t[j]) / rest) if nt and rest and overall is not None else None
        rows.append({
            "theme_id": str(theme["id"]), "label": str(theme.get("label", theme["id"])), "n": nt,
            "score": _round(score), "impact": _round(imp),
            "ci_low": _round(float(low[j])) if imp is not None and math.isfinite(low[j]) else None,
            "ci_high": _round(float(high[j])) if imp is not None and math.isfinite(high[j]) else None,
            "small_n": 0 < nt < MIN_N,
        })
    rows.sort(key=lambda r: (r["impact"] is None, r["impact"] if r["impact"] is not None else 0.0))
    return {"key": key, "scale": scale, "overall": _round(overall), "n": n, "min_n": MIN_N, "themes": rows}


def starred(row: Mapping[str, Any]) -> bool:
    """Whether a renderer marks a theme's impact as sure: its interval excludes 0 and it has enough responses
    (``small_n`` rows never are: their intervals exclude 0 far more often than 5 % with no effect)."""
    lo, hi = row.get("ci_low"), row.get("ci_high")
    return (not row.get("small_n") and isinstance(lo, int | float) and isinstance(hi, int | float)
            and (lo > 0 or hi < 0))


def _round(x: float | None) -> float | None:
    # Finite scores can still overflow a sum (1e308 + 1e308): such a statistic is no number, and the document
    # (stored as is after a codebook edit, derive.refresh) must stay JSON, which has no Infinity or NaN.
    return None if x is None or not math.isfinite(x) else round(x, 4)


def _bootstrap(
    v: np.ndarray[Any, np.dtype[np.float64]], m: np.ndarray[Any, np.dtype[np.float64]], *, seed: int,
    resamples: int,
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """Percentile 95 % interval of each theme's impact over ``resamples`` resamples of the responses.

    A resample is a draw of n response indices with replacement (``rng.integers``, in batches of BATCH); its
    weights W (how often each response was drawn) give every statistic as a product: overall = W·v / n,
    without-theme = (W·v − W·(m∘v)) / (n − W·m).
    """
    n, k = m.shape
    if n == 0 or k == 0 or resamples <= 0:
        nan = np.full(k, np.nan)
        return nan, nan.copy()
    rng = np.random.default_rng(seed)
    mv = m * v[:, None]
    out = np.empty((resamples, k))
    done = 0
    while done < resamples:
        b = min(BATCH, resamples - done)
        idx = rng.integers(0, n, size=(b, n))
        w = np.bincount((np.arange(b)[:, None] * n + idx).ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
        s = w @ v
        st, nt = w @ mv, w @ m
        with np.errstate(divide="ignore", invalid="ignore"):
            out[done:done + b] = (s / n)[:, None] - (s[:, None] - st) / (n - nt)
        done += b
    # A resample in which every response has the theme has no "without" score: it is left out (NaN).
    out[~np.isfinite(out)] = np.nan
    low, high = np.full(k, np.nan), np.full(k, np.nan)
    ok = ~np.isnan(out).all(axis=0)
    if ok.any():
        low[ok] = np.nanpercentile(out[:, ok], 2.5, axis=0)
        high[ok] = np.nanpercentile(out[:, ok], 97.5, axis=0)
    return low, high
