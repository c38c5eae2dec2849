"""Tiny segments in breakdowns, on null and planted data: the rule that a group (or its rest) below
``insight.MIN_TESTED_N`` answers is ``small_n`` and never significant (stats44, review43).

    .venv/bin/python bench/segments.py [--seeds 400] [--first-seed 0] [--n 800] [--thresholds 0,5,10,20]

Per seed: ``--n`` answers with 15 theme shares of 0.2-18 % (10 % in no theme, bench/small_n.py's) and one segment
field: groups A / B / C of 40 / 30 / 20 % of the rest, D of 40 answers and E of 20, a ``(missing)`` group of 1-8
answers and six values given by 2-6 answers each, with ``min_group_size`` 1 so every value is a group (what a
researcher who lowers it sees; ``(missing)`` is never pooled at any size).

* Null (random segment labels: the themes are drawn independently of the field): any significant cell is false.
  Per threshold: the share of runs with any significant cell (BH's FDR under the complete null is this chance),
  with one in a group of fewer than 10 answers ("rests on a handful"), and significant cells a run.
* Planted (adequately sized segments): the 5 % theme x3 in D (40 answers) and the 12 % theme x2 in C; per
  threshold how often each planted cell is significant, and how many false cells a run (an unplanted theme in an
  unplanted group).
* Planted tiny: the ``(missing)`` group's answers all in the 1 % theme (a real association on 1-8 answers): how
  often it is called significant (the rule suppresses it by design: "small n" is said instead).

Threshold 0 is the behaviour before 2026-12-07 (every group tested). ``--first-seed 1000`` are the tune seeds the
threshold was looked at on; 0-399 the check seeds, reported only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]  # bench/platform.py shadows the stdlib
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from bench.int8_speed import machine  # noqa: E402
from pipelines.thematic import insight  # noqa: E402

SHARES = np.array([0.0025, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.09, 0.1, 0.12, 0.15, 0.2])
SHARES = SHARES / SHARES.sum() * 0.9
THEMES = [str(k) for k in range(len(SHARES))]
X3_THEME, X2_THEME, RARE_THEME = 8, 12, 4  # the 5 %, 12 % and 1 % themes (of the scaled shares: ~5.7 / 13.7 / 1.1 %)
HANDFUL = 10


def sizes_of(rng: np.random.Generator, n: int) -> dict[str, int]:
    """The field's groups and their sizes for one seed."""
    missing = int(rng.integers(1, 9))
    tiny = {f"v{j}": int(rng.integers(2, 7)) for j in range(6)}
    fixed = {"D": 40, "E": 20}
    rest = n - missing - sum(tiny.values()) - sum(fixed.values())
    a, b = round(rest * 0.4), round(rest * 0.3)
    return {"A": a, "B": b, "C": rest - a - b, **fixed, **tiny, insight.MISSING: missing}


def scaled(theme: int, factor: float) -> np.ndarray:
    """SHARES with ``theme`` times ``factor`` and the other themes scaled down: the same share in no theme."""
    s = SHARES[theme]
    out = SHARES * (SHARES.sum() - factor * s) / (SHARES.sum() - s)
    out[theme] = factor * s
    return out


def draw(rng: np.random.Generator, size: int, shares: np.ndarray) -> list[str | None]:
    probs = [*shares, 1 - shares.sum()]
    return [str(k) if k < len(shares) else None for k in rng.choice(len(probs), size=size, p=probs)]


def cells(b: dict[str, object]) -> list[tuple[dict[str, object], dict[str, object]]]:
    return [(g, c) for g in b["groups"] for c in g["themes"]]  # type: ignore[attr-defined, index]


def run(seeds: int, first: int, n: int, thresholds: list[int]) -> None:
    keys = ("null_any", "null_handful", "null_cells", "x3", "x2", "planted_false", "tiny_called")
    tally = {t: dict.fromkeys(keys, 0) for t in thresholds}
    for s in range(first, first + seeds):
        rng = np.random.default_rng(70_000 + s)
        sizes = sizes_of(rng, n)
        groups = [g for g, k in sizes.items() for _ in range(k)]
        meta = [{"segment": None if g == insight.MISSING else g} for g in groups]
        null = [t for g, k in sizes.items() for t in draw(rng, k, SHARES)]
        planted = [t for g, k in sizes.items()
                   for t in draw(rng, k, scaled(X3_THEME, 3) if g == "D" else scaled(X2_THEME, 2) if g == "C"
                                 else SHARES)]
        tiny = [str(RARE_THEME) if g == insight.MISSING else t for g, t in zip(groups, null, strict=True)]
        for t in thresholds:
            got = [insight.breakdowns(["segment"], meta, of, THEMES, min_group_size=1, min_tested_n=t)[0]
                   for of in (null, planted, tiny)]
            sig = [[(g, c) for g, c in cells(b) if c["significant"]] for b in got]
            row = tally[t]
            row["null_any"] += bool(sig[0])
            row["null_handful"] += any(int(g["n"]) < HANDFUL for g, _ in sig[0])  # type: ignore[call-overload]
            row["null_cells"] += len(sig[0])
            hits = {(g["value"], c["theme_id"]) for g, c in sig[1]}
            row["x3"] += ("D", str(X3_THEME)) in hits
            row["x2"] += ("C", str(X2_THEME)) in hits
            # False: a theme not planted, in a group not planted (the planted groups' other themes are scaled
            # down to make room, a real if small difference; so is the rest's share of a planted theme).
            row["planted_false"] += sum(1 for g, th in hits if g not in ("C", "D")
                                        and th not in (str(X3_THEME), str(X2_THEME)))
            row["tiny_called"] += any(g.get("synthetic") == "missing" and c["theme_id"] == str(RARE_THEME)
                                      for g, c in sig[2])
    print(f"\n**Segments: {n} answers, 15 themes, groups A/B/C (40/30/20 % of the rest), D 40, E 20, (missing) 1-8, "
          f"six values of 2-6; min_group_size 1; seeds {first}-{first + seeds - 1}**\n")
    print("| min n tested | null: runs with any significant cell | null: with one in a group < 10 | null: "
          "significant cells a run | planted x3 in D (40) found | planted x2 in C found | planted: false cells a "
          "run | (missing) all in the 1 % theme: called significant |\n|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in thresholds:
        r = tally[t]
        print(f"| {t}{' (before)' if t == 0 else ' (shipped)' if t == insight.MIN_TESTED_N else ''} | "
              f"{r['null_any'] / seeds:.1%} | {r['null_handful'] / seeds:.1%} | {r['null_cells'] / seeds:.3f} | "
              f"{r['x3'] / seeds:.1%} | {r['x2'] / seeds:.1%} | {r['planted_false'] / seeds:.3f} | "
              f"{r['tiny_called'] / seeds:.1%} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=800)
    ap.add_argument("--thresholds", default="0,5,10,20")
    args = ap.parse_args()
    print(machine())
    t0 = time.process_time()
    run(args.seeds, args.first_seed, args.n, [int(x) for x in args.thresholds.split(",")])
    print(f"\nCPU {time.process_time() - t0:.1f} s; load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
