"""Impact's interval when every response on one side of a theme has the same score (review46).

    .venv/bin/python bench/impact_constant_side.py [--seeds 2000]

Skewed scores, no effect (null): a theme's responses drawn from the same distribution as the rest. A theme of k
responses that all gave the commonest answer has a sample variance of 0, and Welch's standard error then rests on
the other side alone. Per k, how often the theme's interval excludes 0 (nominal 5 %), and with a planted effect how
often it is found, for ``impact.welch_interval`` as it stands on this checkout. Run it on two checkouts to compare.

* ``csat``: 1-5, P(5) = 0.90, P(4) = 0.07, P(3) = P(2) = P(1) = 0.01 (a satisfied panel); planted: the theme's P(5)
  drops to 0.60 (the rest 4).
* ``rare``: numeric, 3 % of responses score 10, the rest 0; planted: the theme's responses score 10 at 25 %.
* ``nps``: bench/small_n.py's 7 + N(0, 2) rounded to 0-10 (the shipped bench's case); planted: 3 points lower.
400 responses, the theme's k first, the rest one other theme.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from pipelines.thematic import impact  # noqa: E402

KS = (10, 20, 30, 50)
N = 400


def draw(kind: str, rng: np.random.Generator, size: int, planted: bool) -> list[float]:
    if kind == "csat":
        p = [0.01, 0.01, 0.01, 0.07, 0.90] if not planted else [0.01, 0.01, 0.01, 0.37, 0.60]
        return [float(x) for x in rng.choice([1, 2, 3, 4, 5], size=size, p=p)]
    if kind == "rare":
        return [10.0 if u < (0.25 if planted else 0.03) else 0.0 for u in rng.random(size)]
    raw = 7 + rng.normal(0, 2, size) - (3 if planted else 0)
    return [float(min(10, max(0, round(x)))) for x in raw]


def excludes(kind: str, k: int, seed: int, planted: bool) -> bool:
    rng = np.random.default_rng(seed)
    scores = draw(kind, rng, k, planted) + draw(kind, rng, N - k, False)
    scale = "csat" if kind == "csat" else "nps" if kind == "nps" else "numeric"
    doc = impact.impact(scores, [["a"] if i < k else ["b"] for i in range(N)], [{"id": "a"}, {"id": "b"}],
                        key="s", scale=scale)  # type: ignore[arg-type]
    t = next(t for t in doc["themes"] if t["theme_id"] == "a")
    return impact.starred(t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2000)
    args = ap.parse_args()
    t0 = time.process_time()
    print(f"{args.seeds} seeds, n = {N}; the theme's interval excludes 0 (starred), null / planted")
    print("| scores | " + " | ".join(f"k = {k}" for k in KS) + " |")
    print("|---|" + "---:|" * len(KS))
    for kind in ("csat", "rare", "nps"):
        cells = []
        for k in KS:
            null = np.mean([excludes(kind, k, s, False) for s in range(args.seeds)])
            hit = np.mean([excludes(kind, k, s, True) for s in range(args.seeds)])
            cells.append(f"{100 * null:.1f} / {100 * hit:.1f} %")
        print(f"| {kind} | " + " | ".join(cells) + " |")
    print(f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
