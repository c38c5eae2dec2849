"""A theme's impact on a score (``params.score``): how many points of NPS, CSAT or a numeric rating it costs.

Thematic's definition: impact = the overall score minus the overall score of the responses *without* that
theme. A theme whose answers score below the rest has a negative impact (without it the score would be
higher). The population is the usable responses that carry a score; a response "has" a theme when it is
among its themes (all of them under ``multi_label``).

Scores per response: ``nps`` takes integers 0–10 and scores a promoter (9–10) +100, a passive (7–8) 0 and a
detractor (0–6) −100, so the mean is the NPS; ``csat`` takes 1–5, a declared range (``0-5``, ``1-5``, ``1-7``,
``1-10``; researcher46) the numbers in it, and ``numeric`` any finite number, all scored as they are (the mean).

The 95 % interval (``permutation_interval``, stats46) is Welch's, centred on the impact with Welch's standard
error, but its critical values come from 999 permutations of the scores instead of Student's t; the theme's
interval excludes 0 exactly when a permutation test of Welch's statistic rejects at 5 %, which has that size on
any score shape when the theme is unrelated to the score. Impact is exactly ``f * (mean_with - mean_without)``
with ``f`` the theme's share of the scored responses (the overall mean is ``f * mean_with + (1 - f) *
mean_without``), so its standard error is ``f * sqrt(s_with² / n_with + s_without² / n_without)``. Welch's t
interval (``welch_interval``, 2026-12-04 to stats46) replaced a percentile bootstrap, which on NPS data with no
effect excluded 0 in 9.8 % of 10-response themes (bench/small_n.py); but with t quantiles, skewed scores (CSAT,
most answers 5) still starred 8.7-13 % of unrelated 20-50-response themes, permutations 1.6-3.6 %, and at most
5 % within Monte-Carlo error on every shape and size tried (bench/impact_null.py, CHECK seeds; DOCS.md). The
permutations come from a fixed seed: the same input gives the same result on every run.

Caveat (docs/thematic.md): with one theme per response, a theme that is merely average is not exactly 0 when
another theme drags the score down, because its responses are then above the rest. That is the definition,
not noise; with independent themes (multi-label) an unaffected theme's impact is 0. The result says so
(``single_label``, ``note``), and a theme whose interval excludes 0 only against such themes is ``explained_by``
them and not starred (``_mark_reflections``; schema 1.5).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import numpy as np

from .insight import number

Scale = Literal["nps", "csat", "numeric", "0-5", "1-5", "1-7", "1-10"]
#: The declared ranges of a rating (``params.ScoreRange``): its bounds. Scored as it is (the mean), like csat.
RANGES: Final[dict[str, tuple[float, float]]] = {"0-5": (0, 5), "1-5": (1, 5), "1-7": (1, 7), "1-10": (1, 10)}
#: The two-sided level of the interval.
LEVEL: Final = 0.95
#: Below this many scored responses a theme is `small_n` and never starred; its interval is still given. With the
#: percentile bootstrap (until 2026-12-04) 5-response themes excluded 0 in 12.5 % of null runs; with Welch's
#: interval a 5-response theme still does in ~8 % (its two variances rest on 4 degrees of freedom, and NPS
#: points take three values), 10 and more in 5-6 % (bench/small_n.py).
MIN_N: Final = 10


def problem(values: Sequence[Any], scale: Scale) -> tuple[str, str] | None:
    """Why these metadata values cannot be a score on ``scale``: (the field of ``params.score`` at fault, a
    message), or None. Missing values are allowed (those responses have no score)."""
    present = [v for v in values if v is not None and v != ""]
    if not present:
        return "key", "no response has a value"
    bad = next((v for v in present if number(v) is None), None)
    if bad is not None:
        return "key", f"not a number: {json.dumps(bad, ensure_ascii=False)[:40]}"  # as sent (true, not True)
    nums = [number(v) for v in present]
    if scale == "nps" and any(x is None or not x.is_integer() or not 0 <= x <= 10 for x in nums):
        return "scale", "an NPS score is an integer from 0 to 10"
    if scale == "csat" and any(x is None or not 1 <= x <= 5 for x in nums):
        return "scale", "a CSAT score is a number from 1 to 5"
    if scale in RANGES:
        lo, hi = RANGES[scale]
        out = next((v for v, x in zip(present, nums, strict=True) if x is None or not lo <= x <= hi), None)
        if out is not None:
            return "scale", (f"a {scale} rating is a number from {lo:g} to {hi:g}, not "
                             f"{json.dumps(out, ensure_ascii=False)[:40]}")
    return None


def points(x: float, scale: Scale) -> float:
    if scale == "nps":
        return 100.0 if x >= 9 else 0.0 if x >= 7 else -100.0
    return x


@np.errstate(over="ignore", invalid="ignore")  # sums of scores near 1e308 overflow: _round makes those None
def impact(
    values: Sequence[Any], themes_of: Sequence[Sequence[str]], themes: Sequence[Mapping[str, Any]], *,
    key: str, scale: Scale,
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
    # The sums are of the scores less their mean: impact does not depend on where the scores sit, and scores around
    # 1e9 keep the digits of their spread (impact is a difference of means of values that large).
    shift = overall if overall is not None and math.isfinite(overall) else 0.0
    c = v - shift
    n_t = m.sum(axis=0)
    s_t = c @ m
    low, high = permutation_interval(c, m)
    rows = []
    for j, theme in enumerate(themes):
        nt, rest = int(n_t[j]), n - int(n_t[j])
        score = float(s_t[j] / nt + shift) if nt else None
        imp = float(c.sum() / n - (c.sum() - s_t[j]) / rest) if nt and rest and overall is not None else None
        rows.append({
            "theme_id": str(theme["id"]), "label": str(theme.get("label", theme["id"])), "n": nt,
            "score": _round(score), "impact": _round(imp),
            "ci_low": _round(float(low[j])) if imp is not None and math.isfinite(low[j]) else None,
            "ci_high": _round(float(high[j])) if imp is not None and math.isfinite(high[j]) else None,
            "small_n": 0 < nt < MIN_N,
        })
    rows.sort(key=lambda r: (r["impact"] is None, r["impact"] if r["impact"] is not None else 0.0))
    # One theme per scored response (no multi_label, or no response given two): the "without" side of every theme
    # holds all the others, so one theme far below the rest lifts the others' impacts above 0 (bench/impact.py
    # --single: with one theme 3 points lower the unaffected themes' intervals covered 0 in 5-45 % of seeds, 4.0 of
    # them starred a run). The definition is kept (Thematic's, and "the score without this theme" is what it says);
    # the result says how to read it, and a star that is only another theme's mirror is taken away (0.10 a run).
    single = n > 0 and bool(m.sum(axis=1).max() <= 1) and int((n_t > 0).sum()) >= 2
    if single:
        _mark_reflections(c, m, rows, pos)
    return {"key": key, "scale": scale, "overall": _round(overall), "n": n, "min_n": MIN_N, "interval": "permutation",
            "themes": rows, "single_label": single, "note": SINGLE_LABEL_NOTE if single else None}


def _mark_reflections(c: np.ndarray[Any, np.dtype[np.float64]], m: np.ndarray[Any, np.dtype[np.float64]],
                      rows: list[dict[str, Any]], pos: Mapping[str, int]) -> None:
    """With one theme per response, a starred theme whose interval excludes 0 only because of other starred themes
    of the opposite sign gets ``explained_by`` (their ids): without their responses its interval covers 0.

    In order of how far its responses' mean is from the rest's (|impact| / its share: the largest first, never
    explained by a smaller one; by |impact| a large theme came first and its small mirror was "explained" by it),
    each starred theme is recomputed on the responses that have none of the starred themes of the opposite sign
    kept so far; if its interval still excludes 0 on the same side, or nothing is left to compare it with (two
    themes that split the responses are each other's rest), or it had nothing of the opposite sign to answer to,
    it is kept, else it is a reflection. It only ever takes a star's meaning away, never adds one: on null data (no theme
    planted) it can make no more themes look sure. bench/impact.py --single: with one theme planted 3 points lower,
    the unaffected themes were starred 4.0 times a run; those not explained by it, as often as on null data."""
    n = m.shape[0]
    kept: list[dict[str, Any]] = []
    for row in sorted((r for r in rows if _excludes_0(r)), key=lambda r: -abs(float(r["impact"])) * n / r["n"]):
        sign = float(row["impact"]) > 0
        against = [k for k in kept if (float(k["impact"]) > 0) != sign]
        if against:
            keep = m[:, [pos[k["theme_id"]] for k in against]].sum(axis=1) == 0
            j = pos[row["theme_id"]]
            lo, hi = permutation_interval(c[keep], m[keep][:, [j]])
            # NaN: fewer than 2 responses outside the theme are left, nothing to compare it with.
            still = bool(not (np.isfinite(lo[0]) and np.isfinite(hi[0])) or (lo[0] > 0 if sign else hi[0] < 0))
            if not still:
                row["explained_by"] = [k["theme_id"] for k in against]
                continue
        kept.append(row)


#: ``impact.note`` when every scored response has at most one theme (``impact.single_label``). The report, the dashboard
#: and ``thematiq impact`` print it as it is, above a table that marks such a theme "(against X, Y only)": it said
#: "names them in explained_by and is not marked as sure", a JSON field and a mark no view has (review46u).
SINGLE_LABEL_NOTE: Final = (
    "One theme per response: a theme's impact is the overall score minus the score of all the other responses, "
    "so it is relative to the other themes together. When one theme scores far below (or above) the rest, every "
    "other theme's impact moves the other way, even for themes that score like most: a theme whose interval "
    "excludes 0 only against such themes is shown \"(against those themes only)\" and gets no * (not bold): read "
    "it as not shown to differ.")


def starred(row: Mapping[str, Any]) -> bool:
    """Whether a renderer marks a theme's impact as sure: its interval excludes 0 and it has enough responses
    (``small_n`` rows never are: their intervals exclude 0 far more often than 5 % with no effect), and it is not
    ``explained_by`` other themes (one theme per response: its interval excludes 0 only against them; schema 1.5).
    (The CLI has a copy: thematiq_cli/render.py ``impact_starred``.)"""
    return _excludes_0(row) and not row.get("explained_by")


def _excludes_0(row: Mapping[str, Any]) -> bool:
    lo, hi = row.get("ci_low"), row.get("ci_high")
    return (not row.get("small_n") and isinstance(lo, int | float) and isinstance(hi, int | float)
            and (lo > 0 or hi < 0))


def _round(x: float | None) -> float | None:
    # Finite scores can still overflow a sum (1e308 + 1e308): such a statistic is no number, and the document
    # (stored as is after a codebook edit, derive.refresh) must stay JSON, which has no Infinity or NaN.
    # "+ 0.0" turns -0.0 into 0.0: a mean of exactly 0, computed about the overall mean, leaves a -1e-17 residue that
    # rounds to -0.0 and read "-0.00" beside the Sentiment table's "+0.00" for the same theme (review46u).
    return None if x is None or not math.isfinite(x) else round(x, 4) + 0.0


def welch_interval(
    v: np.ndarray[Any, np.dtype[np.float64]], m: np.ndarray[Any, np.dtype[np.float64]], level: float = LEVEL,
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """Per theme (column of the 0/1 matrix ``m``) Welch's ``level`` interval of its impact on the scores ``v``:
    ``f (a - b) ± t · f · sqrt(s_a² / n_a + s_b² / n_b)``, a and b the responses with and without the theme. NaN
    where a side has fewer than 2 responses (no variance to estimate). The sides' variances are
    :func:`_sides`', as :func:`permutation_interval`'s are; only the critical value differs (Student's t with
    Welch-Satterthwaite degrees of freedom)."""
    n, k = m.shape
    low, high = np.full(k, np.nan), np.full(k, np.nan)
    centred = _centred(v) if n >= 2 else None
    if centred is None:
        return low, high
    v, s, q, whole = centred
    n_a = m.sum(axis=0)
    diff, va, vb, bad = _sides(v @ m, (v * v) @ m, n_a, s, q, n, whole)
    f = n_a / n
    for j in np.flatnonzero(~bad):
        na, nb, a, b = float(n_a[j]), float(n - n_a[j]), float(va[j]), float(vb[j])
        # Welch-Satterthwaite; with no variance on either side the interval is the point (df is then moot).
        df = (a + b) ** 2 / (a * a / (na - 1) + b * b / (nb - 1)) if a + b > 0 else na + nb - 2
        half = t_quantile(0.5 + level / 2, df) * f[j] * math.sqrt(a + b)
        low[j], high[j] = f[j] * diff[j] - half, f[j] * diff[j] + half
    return low, high


def _centred(
    v: np.ndarray[Any, np.dtype[np.float64]],
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], float, float, float] | None:
    """Of two or more scores: the scores less their mean, their sum and sum of squares, and the variance of them all (``whole``: what a side
    whose scores are all equal is given, :func:`_sides`); None when the sums are no numbers (squares that overflow).

    Centred first: the variances are sums of squares less n * mean^2, which lose every digit of the spread of scores
    that sit far from 0 (around 1e9 with a spread of 1, a theme's interval shrank to its point)."""
    n = len(v)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(v.mean())
        if math.isfinite(mean):
            v = v - mean
        s, q = float(v.sum()), float((v * v).sum())
        whole = max(0.0, (q - s * s / n) / (n - 1))
    if not (math.isfinite(s) and math.isfinite(q)):
        return None
    return v, s, q, whole


def _sides(
    s_a: np.ndarray[Any, Any], q_a: np.ndarray[Any, Any], n_a: np.ndarray[Any, Any], s: float, q: float, n: int,
    whole: float,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Elementwise, from the sums ``s_a`` and sums of squares ``q_a`` of the scores with the theme (``n_a`` of them;
    the totals ``s``, ``q`` over ``n``): the difference of the means with and without it, each side's variance of
    its mean (``s² / n_a``, ``s² / n_b``), and where there is none (a side of fewer than 2, or sums that are no
    numbers).

    A side whose scores are all equal (ten satisfied 5s) has a sample variance of 0, and Welch's error then rests on
    the other side alone: on skewed scores with no effect at all, a 10-response theme of 5s was starred in 33 % of
    runs (nominal 5 %; bench/impact_constant_side.py). Its spread is not known to be 0, only unseen: it is given the
    spread of all the scores ``whole``, as under no effect both sides share it (review46). (A constant side's sum of
    squares less n * mean^2 is rounding, not spread: within 1e-9 of the whole's.)"""
    n_b = n - n_a
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ma, mb = s_a / n_a, (s - s_a) / n_b
        ra = (q_a - n_a * ma * ma) / (n_a - 1)
        rb = ((q - q_a) - n_b * mb * mb) / (n_b - 1)
        ra = np.where(ra <= whole * 1e-9, whole, ra)
        rb = np.where(rb <= whole * 1e-9, whole, rb)
        va, vb = np.maximum(ra, 0.0) / n_a, np.maximum(rb, 0.0) / n_b
        diff = ma - mb
        bad = (n_a < 2) | (n_b < 2) | ~np.isfinite(va + vb) | ~np.isfinite(diff)
    return diff, va, vb, bad


#: Permutations behind ``permutation_interval``: the critical values are the 25th smallest and 25th largest of
#: 999 permuted statistics, so a test "the interval excludes 0" has size (25 + 25) / (999 + 1) = 5 % exactly under
#: exchangeability (Monte Carlo test: the observed statistic is one of 1,000 equally likely).
PERMUTATIONS: Final = 999
#: The permutations' seed: the same scores and themes give the same interval on every run.
SEED: Final = 23
#: Scores with at most this many distinct values are permuted as counts per value (multivariate hypergeometric).
DISCRETE: Final = 64


def _studentised(
    s_a: np.ndarray[Any, Any], q_a: np.ndarray[Any, Any], n_a: np.ndarray[Any, Any], s: float, q: float, n: int,
    whole: float,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Welch's statistic and the standard error of the difference in means, elementwise (:func:`_sides`' arguments).
    NaN where a side has fewer than 2 responses or a sum is not finite."""
    diff, va, vb, bad = _sides(s_a, q_a, n_a, s, q, n, whole)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        se = np.sqrt(va + vb)
        t = np.where(se > 0, diff / np.where(se > 0, se, 1.0), 0.0)
    return np.where(bad, np.nan, t), np.where(bad, np.nan, se)


def permutation_interval(
    v: np.ndarray[Any, np.dtype[np.float64]], m: np.ndarray[Any, np.dtype[np.float64]], level: float = LEVEL,
    permutations: int = PERMUTATIONS, seed: int = SEED, tails: Literal["equal", "symmetric"] = "equal",
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """Per theme (column of the 0/1 matrix ``m``) a ``level`` interval of its impact on the scores ``v`` whose
    critical values come from permuting the scores, not from Student's t (stats46):
    ``f (a - b) - c_hi · f · se`` to ``f (a - b) - c_lo · f · se``, with ``se`` Welch's standard error of the
    difference ``a - b`` of the means with and without the theme, and ``c_lo`` / ``c_hi`` the ``(1 - level) / 2``
    lower and upper order statistics of Welch's statistic ``(a - b) / se`` over ``permutations`` random
    reassignments of the scores to the responses (one set for every theme, from ``seed``).

    The interval excludes 0 exactly when the observed statistic is beyond ``c_lo`` or ``c_hi``: a two-sided
    permutation test of the studentised difference, whose size is ``1 - level`` whatever the scores' shape when a
    theme is unrelated to the score (its answers and the rest's exchangeable), and asymptotically so when only the
    means are equal (Janssen 1997: a studentised statistic makes the permutation test robust to unequal spreads).
    Welch's interval is that with t quantiles, which on skewed scores (most answers 5) put the 2.5 % tails in the
    wrong places: 8.7-13 % of unrelated 20-50-response themes were starred (bench/impact_null.py, CHECK seeds).
    NaN where a side has fewer than 2 responses. ``tails="symmetric"``: ``c_hi = -c_lo`` the upper order statistic
    of ``|(a - b) / se|`` (a symmetric interval; bench/impact_null.py compares the two: power holes on skewed
    scores)."""
    n, k = m.shape
    low, high = np.full(k, np.nan), np.full(k, np.nan)
    centred = _centred(v) if n >= 2 and k > 0 else None
    if centred is None:
        return low, high
    v, s, q, whole = centred
    n_a = m.sum(axis=0)
    t_obs, se = _studentised(v @ m, (v * v) @ m, n_a, s, q, n, whole)
    r = math.floor((1 - level) / 2 * (permutations + 1) + 1e-9)  # 25 of 999: the tails' order statistic
    if r < 1:
        return low, high
    rng = np.random.default_rng(seed)
    # Only the themes with an interval to give; the permuted statistics in chunks (memory ~ chunk * n floats).
    cols = np.flatnonzero(np.isfinite(t_obs))
    if cols.size == 0:
        return low, high
    sizes = n_a[cols].astype(np.int64)
    stats = np.empty((permutations, cols.size))
    values, counts = np.unique(v, return_counts=True)
    if values.size <= DISCRETE:
        # Few distinct scores (NPS, CSAT, a rating): a permutation puts in the theme a multivariate hypergeometric
        # draw of the values' counts, the same law, at the cost of one count per value (not one per response).
        for z in np.unique(sizes):
            draws = rng.multivariate_hypergeometric(counts, int(z), size=permutations, method="marginals")
            at = sizes == z
            s_p, q_p = draws @ values, draws @ (values * values)
            t, _ = _studentised(s_p, q_p, np.full(permutations, float(z)), s, q, n, whole)
            stats[:, at] = t[:, None]
    else:
        # A permutation puts a random n_a of the scores in the theme: the first n_a of a random ordered sample of
        # the largest theme's size (Generator.choice without replacement: CPU ~ that size, not n), so one running
        # sum per permutation serves every theme (themes of one size share their permuted statistics; each theme's
        # own null distribution is all its test needs). CPU ~ permutations * the largest theme.
        top = int(sizes.max())
        chunk = max(1, min(permutations, 2_000_000 // top))
        for start in range(0, permutations, chunk):
            rows = min(chunk, permutations - start)
            vp = np.stack([v[rng.choice(n, size=top, replace=False)] for _ in range(rows)])
            s_p, q_p = np.cumsum(vp, axis=1)[:, sizes - 1], np.cumsum(vp * vp, axis=1)[:, sizes - 1]
            stats[start:start + rows], _ = _studentised(s_p, q_p, n_a[cols], s, q, n, whole)
    if tails == "symmetric":
        a = np.sort(np.abs(stats), axis=0)
        c_hi = a[permutations - 2 * r]
        c_lo = -c_hi
    else:
        stats.sort(axis=0)
        c_lo, c_hi = stats[r - 1], stats[permutations - r]
    f = n_a[cols] / n
    est = f * t_obs[cols] * se[cols]
    low[cols] = est - c_hi * f * se[cols]
    high[cols] = est - c_lo * f * se[cols]
    return low, high


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (0.5 <= p < 1) of Student's t with ``df`` > 0 degrees of freedom (a real number, as
    Welch's are): Newton's method on the distribution function from the normal quantile. numpy has no t
    distribution and the deployment carries no scipy."""
    from statistics import NormalDist

    if p == 0.5:
        return 0.0
    x = NormalDist().inv_cdf(p)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(100):
        pdf = math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))
        step = (_t_cdf(x, df) - p) / pdf
        x -= step
        if abs(step) < 1e-12 * max(1.0, abs(x)):
            break
    return x


def _t_cdf(x: float, df: float) -> float:
    """P(T <= x) for x >= 0: 1 - I_{df / (df + x²)}(df / 2, 1 / 2) / 2, the regularised incomplete beta."""
    return 1.0 - 0.5 * _betainc(df / 2, 0.5, df / (df + x * x))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta I_x(a, b), by its continued fraction (modified Lentz), on the side where
    the fraction converges fast (x < (a + 1) / (a + b + 2)), else by symmetry."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    out = d
    for i in range(1, 500):
        for num in (i * (b - i) * x / ((a + 2 * i - 1) * (a + 2 * i)),
                    -(a + i) * (a + b + i) * x / ((a + 2 * i) * (a + 2 * i + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            out *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * out
