"""Small counts, on planted effects and null data: the impact star's minimum n, and Fisher's exact test in waves
and in breakdowns.

    .venv/bin/python bench/small_n.py [--seeds 200] [--wave-seeds 2000] [--breakdown-seeds 2000] [--parts 1,2,3]

1. Impact (``impact.MIN_N`` and the interval): NPS 7 + N(0, 2) rounded to 0-10 for 400 responses, one theme held
   by k of them (k = 3 ... 50). Per k: how often the theme's 95 % interval excludes 0 with no effect (null;
   nominal 5 %) and with its responses 3 points lower (planted), for the shipped interval (Welch's t) and, as the
   peer in the same run, the percentile bootstrap it replaced (1,000 resamples, here in the bench only). Below
   ``MIN_N`` a theme is ``small_n`` and never starred; the columns are the interval alone, so the rule can be
   re-chosen from them.
2. Waves (``insight.MIN_EXPECTED``): 15 themes of 0.2-18 % of two waves of n answers drawn from the same shares
   (null), and with the 1 % theme grown 5x (planted). Per n: among the rows the exact test takes, how often
   unadjusted p < 0.05 (z / exact); how often any theme is significant after BH (z everywhere / as shipped);
   how often the planted theme is found (z / as shipped). "z everywhere" is the same code with
   ``MIN_EXPECTED`` 0.
3. Breakdowns (``insight.breakdown``, ``change_test`` per cell): n answers (400, 1,200) with the same 15 theme
   shares (10 % in no theme) and a segment field of four groups: one of 40 answers, the rest split 15 / 30 / 55 %.
   Null: themes independent of the segment. Planted: the 5 % theme (index 8) three times as common in the
   40-answer group (the other themes scaled down there to make room). Per n: the share of cells tested exactly;
   among them how often unadjusted p < 0.05 and p < 0.001 (z / exact); how often any cell is significant after BH (z everywhere
   / as shipped; BH's FDR bound is not a bound on "any", but under the complete null FDR = P(any)); how often the
   planted cell is found (z / as shipped). Through ``insight.breakdowns``, as the pipeline calls it.

Numbers in docs/thematic.md ("Impact on a score", "Small counts: Fisher's exact test") are from this script.
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
from pipelines.thematic import impact, insight  # noqa: E402

KS = (3, 5, 8, 10, 15, 20, 30, 50)
SHARES = np.array([0.0025, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.09, 0.1, 0.12, 0.15, 0.2])
SHARES = SHARES / SHARES.sum() * 0.9
PLANTED = 4  # the 1 % theme


def one_theme(k: int, seed: int, effect: float, n: int = 400) -> tuple[bool, bool]:
    """Whether the theme's interval excludes 0: (Welch's, as shipped; the percentile bootstrap)."""
    rng = np.random.default_rng(seed)
    raw = 7 + rng.normal(0, 2, n) - effect * (np.arange(n) < k)
    scores = [int(min(10, max(0, round(x)))) for x in raw]
    doc = impact.impact(scores, [["a"] if i < k else ["b"] for i in range(n)], [{"id": "a"}, {"id": "b"}],
                        key="nps", scale="nps")
    t = next(t for t in doc["themes"] if t["theme_id"] == "a")
    lo, hi = t["ci_low"], t["ci_high"]
    welch = isinstance(lo, float | int) and isinstance(hi, float | int) and (lo > 0 or hi < 0)
    v = np.array([impact.points(x, "nps") for x in scores])
    blo, bhi = percentile_bootstrap(v, np.arange(n) < k, seed=10_000 + seed)
    return welch, bool(blo > 0 or bhi < 0)


def percentile_bootstrap(v: np.ndarray, has: np.ndarray, *, seed: int, resamples: int = 1000) -> tuple[float, float]:
    """The interval impact.py had until 2026-12-04, kept here as the peer: the 2.5th and 97.5th percentiles of
    the impact (overall mean minus the mean without the theme) over resamples of the responses."""
    rng = np.random.default_rng(seed)
    n = len(v)
    idx = rng.integers(0, n, size=(resamples, n))
    vv, hh = v[idx], has[idx]
    rest = (~hh).sum(axis=1)
    ok = rest > 0
    imp = vv.mean(axis=1)[ok] - (vv * ~hh).sum(axis=1)[ok] / rest[ok]
    return float(np.percentile(imp, 2.5)), float(np.percentile(imp, 97.5))


def impact_table(seeds: int) -> None:
    print(f"\n**Impact: one theme of k among 400 responses, {seeds} seeds** (MIN_N = {impact.MIN_N}; "
          "Welch's t as shipped / the percentile bootstrap, 1,000 resamples)\n")
    print("| k | " + " | ".join(map(str, KS)) + " |\n|---|" + "---:|" * len(KS))
    for name, effect in (("null, interval excludes 0", 0.0), ("planted -3 points, found", 3.0)):
        cells = []
        for k in KS:
            got = [one_theme(k, s, effect) for s in range(seeds)]
            cells.append(f"{sum(w for w, _ in got) / seeds:.1%} / {sum(b for _, b in got) / seeds:.1%}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def draw(rng: np.random.Generator, n: int, shares: np.ndarray) -> dict[str, int]:
    return {str(k): int(v) for k, v in enumerate(rng.multinomial(n, [*shares, 1 - shares.sum()])[:-1])}


def pct(x: int, of: int) -> str:
    return f"{x / of:.1%}" if of else "-"


def waves_row(n: int, seeds: int) -> str:
    grown = SHARES * np.where(np.arange(len(SHARES)) == PLANTED, 5, 1)
    exact_rows = exact_z = exact_now = 0
    any_z = any_now = found_z = found_now = 0
    shipped = insight.MIN_EXPECTED
    for s in range(seeds):
        rng = np.random.default_rng(s)
        then, now, planted = draw(rng, n, SHARES), draw(rng, n, SHARES), draw(rng, n, grown)
        out = {}
        for tag, floor in (("z", 0.0), ("now", shipped)):
            insight.MIN_EXPECTED = floor  # type: ignore[misc]  # "z everywhere": the same code, no exact rows
            try:
                out[tag] = (insight.compare(then, n, now, n), insight.compare(then, n, planted, n))
            finally:
                insight.MIN_EXPECTED = shipped  # type: ignore[misc]
        rows_z = {r["theme_id"]: r for r in out["z"][0]["themes"]}
        for r in out["now"][0]["themes"]:
            if r["test"] == "fisher":
                exact_rows += 1
                exact_now += r["p"] < 0.05
                exact_z += rows_z[r["theme_id"]]["p"] < 0.05
        any_z += any(r["significant"] for r in out["z"][0]["themes"])
        any_now += any(r["significant"] for r in out["now"][0]["themes"])
        found_z += next(r for r in out["z"][1]["themes"] if r["theme_id"] == str(PLANTED))["significant"]
        found_now += next(r for r in out["now"][1]["themes"] if r["theme_id"] == str(PLANTED))["significant"]
    return (f"| {n} | {exact_rows:,} | {pct(exact_z, exact_rows)} / {pct(exact_now, exact_rows)} | "
            f"{pct(any_z, seeds)} / {pct(any_now, seeds)} | {pct(found_z, seeds)} / {pct(found_now, seeds)} |")


SEGMENT = "g40"
SEGMENT_N = 40
PLANTED_BREAKDOWN = 8  # the 5 % theme
REST_SPLIT = (("g15", 0.15), ("g30", 0.30), ("g55", 0.55))


def segment_sizes(n: int) -> dict[str, int]:
    rest = n - SEGMENT_N
    sizes = {g: round(rest * f) for g, f in REST_SPLIT[:-1]}
    sizes[REST_SPLIT[-1][0]] = rest - sum(sizes.values())
    return {SEGMENT: SEGMENT_N, **sizes}


def themed(rng: np.random.Generator, size: int, shares: np.ndarray) -> list[str | None]:
    """``size`` answers' themes drawn from ``shares`` (the remainder: in no theme)."""
    probs = [*shares, 1 - shares.sum()]
    return [str(k) if k < len(shares) else None for k in rng.choice(len(probs), size=size, p=probs)]


def planted_shares() -> np.ndarray:
    """The segment's shares with the planted theme x3 and the others scaled down, the same total."""
    s = SHARES[PLANTED_BREAKDOWN]
    out = SHARES * (SHARES.sum() - 3 * s) / (SHARES.sum() - s)
    out[PLANTED_BREAKDOWN] = 3 * s
    return out


def breakdown_row(n: int, seeds: int) -> str:
    sizes = segment_sizes(n)
    themes = [str(k) for k in range(len(SHARES))]
    grown = planted_shares()
    cells = exact_cells = exact_z = exact_now = tail_z = tail_now = any_z = any_now = found_z = found_now = 0
    shipped = insight.MIN_EXPECTED
    for s in range(seeds):
        rng = np.random.default_rng(10_000 + s)
        meta = [{"segment": g} for g, size in sizes.items() for _ in range(size)]
        null = [t for g, size in sizes.items() for t in themed(rng, size, SHARES)]
        planted = [t for g, size in sizes.items() for t in themed(rng, size, grown if g == SEGMENT else SHARES)]
        out = {}
        for tag, floor in (("z", 0.0), ("now", shipped)):
            insight.MIN_EXPECTED = floor  # type: ignore[misc]  # "z everywhere": the same code, no exact cells
            try:
                out[tag] = [insight.breakdowns(["segment"], meta, of, themes)[0] for of in (null, planted)]
            finally:
                insight.MIN_EXPECTED = shipped  # type: ignore[misc]

        def flat(b: dict[str, object]) -> dict[tuple[str, str], dict[str, object]]:
            return {(g["value"], c["theme_id"]): c for g in b["groups"] for c in g["themes"]}  # type: ignore[index]

        null_z, null_now = flat(out["z"][0]), flat(out["now"][0])
        for key, c in null_now.items():
            cells += 1
            if c["test"] == "fisher":
                exact_cells += 1
                exact_now += c["p"] < 0.05  # type: ignore[operator]
                exact_z += null_z[key]["p"] < 0.05  # type: ignore[operator]
                # The far tail is what BH rejects on: where z's error on a cell of 0-3 answers is largest.
                tail_now += c["p"] < 0.001  # type: ignore[operator]
                tail_z += null_z[key]["p"] < 0.001  # type: ignore[operator]
        any_z += any(c["significant"] for c in null_z.values())
        any_now += any(c["significant"] for c in null_now.values())
        key = (SEGMENT, str(PLANTED_BREAKDOWN))
        found_z += bool(flat(out["z"][1])[key]["significant"])
        found_now += bool(flat(out["now"][1])[key]["significant"])
    return (f"| {n} | {' / '.join(str(v) for v in sizes.values())} | {pct(exact_cells, cells)} | "
            f"{pct(exact_z, exact_cells)} / {pct(exact_now, exact_cells)} | "
            f"{tail_z / max(exact_cells, 1):.2%} / {tail_now / max(exact_cells, 1):.2%} | "
            f"{pct(any_z, seeds)} / {pct(any_now, seeds)} | "
            f"{pct(found_z, seeds)} / {pct(found_now, seeds)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=1000, help="impact: seeds per k")
    ap.add_argument("--wave-seeds", type=int, default=2000, help="waves: seeds per wave size")
    ap.add_argument("--breakdown-seeds", type=int, default=2000, help="breakdowns: seeds per answer count")
    ap.add_argument("--parts", default="1,2,3", help="which parts to run (comma-separated): 1 impact, 2 waves, "
                    "3 breakdowns")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",")}
    print(machine())
    t0 = time.process_time()
    if "1" in parts:
        impact_table(args.seeds)
    if "2" in parts:
        print(f"\n**Waves: 15 themes of 0.2-18 %, {args.wave_seeds} seeds** (exact below an expected count of "
              f"{insight.MIN_EXPECTED:g})\n")
        print("| answers a wave | rows tested exactly | unadjusted p < 0.05 among them: z / exact | "
              "any BH discovery: z / now | planted 1 % theme x5 found: z / now |\n|---:|---:|---|---|---|")
        for n in (300, 900):
            print(waves_row(n, args.wave_seeds), flush=True)
    if "3" in parts:
        print(f"\n**Breakdowns: 15 themes of 0.2-18 %, a segment field of 4 groups, {args.breakdown_seeds} seeds** "
              f"(exact below an expected count of {insight.MIN_EXPECTED:g}; planted: the "
              f"{SHARES[PLANTED_BREAKDOWN]:.1%} theme x3 in the {SEGMENT_N}-answer group)\n")
        print("| answers | group sizes | cells tested exactly | unadjusted p < 0.05 among them: z / exact | "
              "p < 0.001 among them (nominal 0.1 %): z / exact | any cell significant after BH (null): z / now | "
              "planted cell found: z / now |\n|---:|---|---:|---|---|---|---|")
        for n in (400, 1200):
            print(breakdown_row(n, args.breakdown_seeds), flush=True)
    print(f"\nCPU {time.process_time() - t0:.1f} s; load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
