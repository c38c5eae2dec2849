"""CPU of result.impact for a 20,000-response job with 60 themes (stats46: the permutation interval's cost).

    nice -n 10 .venv/bin/python bench/impact_cost.py [--repeat 3]

Scores 7 + N(0, 2): ``nps`` rounded to 0-10 (3 distinct points), ``numeric`` as drawn (all distinct); theme sizes of a long tail (share of theme j proportional to 1 / (j + 5)).
``multi``: each response has each theme independently; ``single``: one theme per response, with 6 themes planted
2 points lower and 6 one point higher, so explained_by recomputes the starred themes' intervals (the costly path).
Reported: process CPU seconds per impact() call (the best of --repeat), with the permutation interval and, for
comparison, with Welch's t interval (the shipped one until stats46; patched in for the measure).
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

from pipelines.thematic import impact  # noqa: E402

N, K = 20_000, 60


def job(single: bool, scale: str) -> tuple[list[Any], list[list[str]]]:
    rng = np.random.default_rng(3)
    p = 1 / (np.arange(K) + 5)
    p = p / p.sum()
    raw = 7 + rng.normal(0, 2, N)
    if single:
        pick = rng.choice(K, size=N, p=p)
        raw = raw - 2 * (pick % 10 == 3) + 1 * (pick % 10 == 7)
        themes = [[f"t{j}"] for j in pick]
    else:
        has = rng.random((N, K)) < p * 3
        themes = [[f"t{j}" for j in np.flatnonzero(row)] for row in has]
    if scale == "numeric":  # continuous: every score distinct, the permuted path (not counts per value)
        return raw.tolist(), themes
    return np.clip(np.rint(raw), 0, 10).astype(int).tolist(), themes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(json.dumps({"cpu": cpu, "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    ids = [{"id": f"t{j}"} for j in range(K)]
    shipped = impact.permutation_interval
    for scale, single in (("nps", False), ("nps", True), ("numeric", False), ("numeric", True)):
        values, themes = job(single, scale)
        out: dict[str, Any] = {"scale": scale, "design": "single" if single else "multi", "responses": N,
                               "themes": K}
        for name, f in (("permutation", shipped), ("welch", lambda v, m, **_: impact.welch_interval(v, m))):
            impact.permutation_interval = f  # type: ignore[assignment]
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.process_time()
                doc = impact.impact(values, themes, ids, key="s", scale=scale)  # type: ignore[arg-type]
                best = min(best, time.process_time() - t0)
            out[f"{name}_cpu_s"] = round(best, 3)
            out[f"{name}_starred"] = sum(impact.starred(t) for t in doc["themes"])
            out[f"{name}_explained"] = sum(bool(t.get("explained_by")) for t in doc["themes"])
        impact.permutation_interval = shipped  # type: ignore[assignment]
        out["load"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
