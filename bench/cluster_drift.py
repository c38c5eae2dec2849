"""Theme count and NMI of the cluster stage at a git ref vs now, each tree with its own silhouette curve (issue 27).

``bench/thematic.py --counts-vs`` reads both decision rules on one cached curve, which isolates the rule; a change
to how the curve is *computed* (the silhouette from group sums instead of the distance matrix, which differs from
the old one by float rounding) needs each tree's own curve instead. Per set and seed: the count each tree chooses
(``cluster.cluster`` with the automatic count, as the pipeline calls it), the NMI of its final partition after
small themes are folded (``assign.fold_small``, min size 5, as ``--counts-vs``), and for every seed where the two
counts differ, the curve rows of both trees at those counts (mean silhouette and split path), so a near-tie is
visible. ``--restarts N`` also scores the current tree's final partition with N k-means restarts instead of
``FINAL_RESTARTS`` at the count it chose (the count does not depend on the restarts).

Tune and check sets are printed apart (``bench/thematic.py``'s ``TUNE`` / ``CHECK``). One thread is advised
(``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``): BLAS's thread count changes the rounding too.

Usage::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/cluster_drift.py --ref main \\
        --sets leads,banking,dominant-20ng,small-20ng,feedback,clinc,stackoverflow,drugs,mcid --seeds 3
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/platform.py would shadow the stdlib module (as in bench/thematic.py): drop the script's own folder first.
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]
ROOT = Path(_HERE).parent
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench import thematic as B  # noqa: E402  (puts the repository first on sys.path)
from bench.int8_speed import machine  # noqa: E402


def _row(curve: list[dict[str, float]], k: int) -> str:
    r = next((r for r in curve if int(r["k"]) == k), None)
    return "-" if r is None else f"k={k}: {r['silhouette']:.5f} / split {r.get('split', float('nan')):.5f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="main")
    ap.add_argument("--sets", default="leads,banking,dominant-20ng,small-20ng,feedback,clinc,stackoverflow,drugs,mcid")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--restarts", type=int, default=0, help="also score the final partition with N restarts")
    args = ap.parse_args()
    from pipelines.thematic.assign import fold_small

    print(machine())
    old, new = B._cluster_module(args.ref), B._cluster_module(None)
    names = [s for s in args.sets.split(",") if s]
    notes: list[str] = []
    for group in ("tune", "check"):
        members = [n for n in names if B._group(n) == group]
        if not members:
            continue
        extra = f" | NMI now, {args.restarts} restarts" if args.restarts else ""
        print(f"\n**{group} sets**\n\n| set | n | true k | k {args.ref} | k now | NMI {args.ref} | NMI now{extra} | "
              f"CPU s {args.ref} / now |")
        print("|---|---:|---:|---|---|---:|---:|" + ("---:|" if args.restarts else "") + "---|", flush=True)
        for name in members:
            x, pos, truth = B.cluster_input(name)
            res: dict[str, dict[str, list[Any]]] = {}
            for tag, mod in (("ref", old), ("now", new)):
                res[tag] = {"k": [], "nmi": [], "curve": [], "cpu": 0.0}
                for seed in range(args.seeds):
                    c0 = time.process_time()
                    cl = mod.cluster(x, num_themes=None, max_themes=None, min_theme_size=5, seed=seed)
                    res[tag]["cpu"] += time.process_time() - c0
                    lab, _ = fold_small(cl.labels, x, cl.k, 5)
                    res[tag]["k"].append(int(cl.k))
                    res[tag]["nmi"].append(B.nmi(truth, [int(lab[i]) for i in pos]))
                    res[tag]["curve"].append(cl.scores)
            cells = ""
            if args.restarts:
                saved = new.FINAL_RESTARTS
                new.FINAL_RESTARTS = args.restarts
                try:
                    nm = []
                    for seed, k in enumerate(res["now"]["k"]):
                        cl = new.cluster(x, num_themes=k, max_themes=None, min_theme_size=5, seed=seed)
                        lab, _ = fold_small(cl.labels, x, cl.k, 5)
                        nm.append(B.nmi(truth, [int(lab[i]) for i in pos]))
                finally:
                    new.FINAL_RESTARTS = saved
                cells = f" {', '.join(f'{v:.3f}' for v in nm)} (mean {np.mean(nm):.3f}) |"
            r, w = res["ref"], res["now"]
            print(f"| {name} | {len(x)} | {len(set(truth))} | {', '.join(map(str, r['k']))} | "
                  f"{', '.join(f'**{b}**' if a != b else str(b) for a, b in zip(r['k'], w['k'], strict=True))} | "
                  f"{', '.join(f'{v:.3f}' for v in r['nmi'])} (mean {np.mean(r['nmi']):.3f}) | "
                  f"{', '.join(f'{v:.3f}' for v in w['nmi'])} (mean {np.mean(w['nmi']):.3f}) |{cells} "
                  f"{r['cpu']:.1f} / {w['cpu']:.1f} |", flush=True)
            for seed, (a, b) in enumerate(zip(r["k"], w["k"], strict=True)):
                if a != b:
                    notes.append(f"{name} seed {seed}: k {a} -> {b}; {args.ref} curve {_row(r['curve'][seed], a)}, "
                                 f"{_row(r['curve'][seed], b)}; now {_row(w['curve'][seed], a)}, "
                                 f"{_row(w['curve'][seed], b)}")
    print("\nmoved counts:" + ("".join(f"\n- {n}" for n in notes) if notes else " none"))


if __name__ == "__main__":
    main()
