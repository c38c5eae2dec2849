"""A theme's impact on a score (issue 23): planted effects on synthetic responses, over many seeds.

    .venv/bin/python bench/impact.py [--seeds 100] [--n 600] [--single] [--effect 3]

Per seed: ``--n`` responses, six themes; each response has each theme independently (multi-label, shares
25/20/20/15/15/10 %). A score of 7 + N(0, 2) on 0–10, minus 3 points when the response has theme t3 (the
planted effect). Scales: ``numeric`` (the score as drawn), ``nps`` (rounded and clipped to 0–10 integers).
Reported per scale: how often t3 ranks first (most negative impact), how often its 95 % interval excludes 0,
and how often each unaffected theme's interval covers 0 (target ≥ 90 %; a 95 % interval should be near 95 %).

``--single`` draws one theme per response instead. Then an unaffected theme's true impact is not 0: when t3
drags the score down, every other theme's answers are above the rest, and removing one lowers the overall
score (impact = p_t · (mean_t − mean_rest) / …, the definition's, not noise); the table shows how often, how many
unaffected themes a run are starred (interval excludes 0, not small n), and how often the result carries
``impact.single_label`` and its ``note`` (stats44: the result says how to read such impacts). ``--effect 0`` is the
null (no theme planted).

Last, the null across a whole result: 20 themes of the bundled sample's sizes (one per response), NPS independent
of them, 400 responses: how often a run stars at least one theme (the intervals are per theme, not corrected for
the number of themes; the legends say so), and how many a run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]  # bench/platform.py shadows the stdlib
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from pipelines.thematic.impact import impact, starred  # noqa: E402

SHARES = (0.25, 0.2, 0.2, 0.15, 0.15, 0.1)
PLANTED = "t3"
#: ``--boost``: a second, real effect (points higher with this theme), which ``explained_by`` must not take away.
BOOSTED = "t1"


def draw(seed: int, n: int, scale: str, single: bool, effect: float = 3.0,
         boost: float = 0.0) -> tuple[list[Any], list[list[str]]]:
    rng = np.random.default_rng(seed)
    ids = [f"t{j + 1}" for j in range(len(SHARES))]
    if single:
        pick = rng.choice(len(SHARES), size=n, p=np.array(SHARES) / sum(SHARES))
        has = np.zeros((n, len(SHARES)), dtype=bool)
        has[np.arange(n), pick] = True
    else:
        has = rng.random((n, len(SHARES))) < np.array(SHARES)
    score = 7 + rng.normal(0, 2, size=n) - effect * has[:, ids.index(PLANTED)] + boost * has[:, ids.index(BOOSTED)]
    values: list[Any] = (np.clip(np.rint(score), 0, 10).astype(int).tolist() if scale == "nps" else score.tolist())
    return values, [[ids[j] for j in np.flatnonzero(row)] for row in has]


def trial(seed: int, n: int, scale: str, single: bool, effect: float = 3.0, boost: float = 0.0) -> dict[str, Any]:
    values, themes = draw(seed, n, scale, single, effect, boost)
    planted = (PLANTED, BOOSTED) if boost else (PLANTED,)
    doc = impact(values, themes, [{"id": f"t{j + 1}", "label": f"t{j + 1}"} for j in range(len(SHARES))],
                 key="score", scale=scale)  # type: ignore[arg-type]
    rows = {r["theme_id"]: r for r in doc["themes"]}
    p = rows[PLANTED]
    return {
        "first": doc["themes"][0]["theme_id"] == PLANTED,
        "excludes": p["ci_high"] < 0,
        "covers": {t: r["ci_low"] <= 0 <= r["ci_high"] for t, r in rows.items() if t not in planted},
        "impact": p["impact"],
        # Starred before explained_by (2026-12-07): the interval excludes 0 and the theme is not small n.
        "unaffected_starred": sum(starred({**r, "explained_by": None}) for t, r in rows.items()
                                  if t not in planted),
        "unaffected_unexplained": sum(starred(r) and not r.get("explained_by") for t, r in rows.items()
                                      if t not in planted),
        "planted_unexplained": starred(p) and not p.get("explained_by"),
        "boosted_unexplained": starred(rows[BOOSTED]) and not rows[BOOSTED].get("explained_by")
                               and rows[BOOSTED]["impact"] > 0,
        "note": doc["single_label"] and doc["note"] is not None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--single", action="store_true", help="one theme per response (see the docstring)")
    ap.add_argument("--effect", type=float, default=3.0, help="points lower with the planted theme (0: null)")
    ap.add_argument("--boost", type=float, default=0.0, help=f"points higher with {BOOSTED} (a second real effect)")
    args = ap.parse_args()
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    flags = next((ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")), "")
    print(json.dumps({"cpu": cpu, "flags": [f for f in ("avx2", "avx512_vnni", "avx_vnni") if f" {f}" in flags],
                      "load": [round(x, 2) for x in os.getloadavg()], "args": vars(args)}), flush=True)
    for scale in ("numeric", "nps"):
        t0 = time.perf_counter()
        rs = [trial(s, args.n, scale, args.single, args.effect, args.boost) for s in range(args.seeds)]
        k = len(rs)
        covers = {t: sum(r["covers"][t] for r in rs) / k for t in rs[0]["covers"]}
        print(json.dumps({
            "scale": scale, "seeds": k, "n": args.n, "planted_first": f"{sum(r['first'] for r in rs)}/{k}",
            "planted_interval_excludes_0": f"{sum(r['excludes'] for r in rs)}/{k}",
            "planted_impact_mean": round(float(np.mean([r["impact"] for r in rs])), 3),
            "unaffected_covers_0": {t: round(v, 3) for t, v in covers.items()},
            "unaffected_covers_0_min": round(min(covers.values()), 3),
            "unaffected_starred_per_run": round(sum(r["unaffected_starred"] for r in rs) / k, 2),
            "unaffected_starred_not_explained_per_run": round(sum(r["unaffected_unexplained"] for r in rs) / k, 2),
            "planted_starred_not_explained": f"{sum(r['planted_unexplained'] for r in rs)}/{k}",
            "boosted_starred_not_explained": f"{sum(r['boosted_unexplained'] for r in rs)}/{k}",
            "runs_with_single_label_note": f"{sum(r['note'] for r in rs)}/{k}",
            "seconds_per_seed": round((time.perf_counter() - t0) / k, 3),
            "load": [round(x, 2) for x in os.getloadavg()],
        }), flush=True)
    print(json.dumps(null_result(args.seeds)), flush=True)


#: The bundled sample's theme sizes (19 themes of 413 responses, 2026-12-03), padded to 20.
SAMPLE_SIZES = (48, 40, 33, 30, 27, 25, 23, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 8)


def null_result(seeds: int, n: int = 400) -> dict[str, Any]:
    p = np.array(SAMPLE_SIZES, dtype=float) / sum(SAMPLE_SIZES)
    ids = [f"t{j + 1}" for j in range(len(p))]
    any_star = stars = any_before = stars_before = 0
    for s in range(seeds):
        rng = np.random.default_rng(50_000 + s)
        pick = rng.choice(len(p), size=n, p=p)
        values = np.clip(np.rint(7 + rng.normal(0, 2, size=n)), 0, 10).astype(int).tolist()
        doc = impact(values, [[ids[j]] for j in pick], [{"id": t} for t in ids], key="nps", scale="nps")
        k = sum(starred(t) for t in doc["themes"])
        before = sum(starred({**t, "explained_by": None}) for t in doc["themes"])
        any_star += k > 0
        stars += k
        any_before += before > 0
        stars_before += before
    return {"null_20_themes": {"seeds": seeds, "runs_with_a_star": round(any_star / seeds, 3),
                               "stars_per_run": round(stars / seeds, 2),
                               "per_theme": round(stars / seeds / len(p), 4),
                               "before_explained_by": {"runs_with_a_star": round(any_before / seeds, 3),
                                                       "stars_per_run": round(stars_before / seeds, 2)}}}


if __name__ == "__main__":
    main()
