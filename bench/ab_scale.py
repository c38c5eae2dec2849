"""``bench/thematic.py --scale`` of two checkouts, interleaved, with medians (issue 27: a change's speed on a shared
machine is only read against the other checkout measured in the same minutes).

    .venv/bin/python bench/ab_scale.py --a /work/main --b . --rounds 5 [--cpu-time] [-- --scale 2000 --texts leads]

Each round runs A then B (then B then A on the next round, so neither always runs first), each in its own process
(the checkout's own ``bench/thematic.py`` with this ``.venv``), and prints every run's line: the CPU and load the
bench prints, the job's stage times, wall, the previous release's embed-only time and the ratio. Then per checkout
the medians (and min/max) of wall, the stages and the ratio, and of the load average before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run(checkout: str, extra: list[str]) -> tuple[str, dict[str, Any]]:
    cmd = [sys.executable, str(Path(checkout) / "bench" / "thematic.py"), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=checkout)
    lines = out.stdout.strip().splitlines()
    return lines[0], json.loads(lines[-1])


def fields(r: dict[str, Any]) -> dict[str, float]:
    t = r["timings"]
    f = {"wall": r["wall"], **{k: t.get(k, 0.0) for k in ("clean", "embed", "cluster", "describe", "insight")}}
    f["after_embed"] = r["wall"] - t.get("embed", 0.0)
    for key, v in r.items():
        if key.startswith("baseline_"):
            f["base_embed"] = v["embed_only_wall"]
            f["ratio"] = v["wall_over_baseline"]
            if "cpu_over_baseline" in v:
                f["cpu_ratio"] = v["cpu_over_baseline"]
    for key, v in (r.get("cpu") or {}).items():
        f[f"cpu_{key}"] = v
    f["load"] = r["load_before"][0]
    f["peak_rss_mib"] = r["peak_rss_mib"]
    return f


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else ["--scale", "2000", "--texts", "leads",
                                                                  "--baseline-graph", "legacy"]
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="/work/main")
    ap.add_argument("--b", default=str(ROOT))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true", help="pass --cpu-time (CPU seconds, one embedding thread)")
    args = ap.parse_args(argv)
    if args.cpu_time:
        extra = [*extra, "--cpu-time"]
    got: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    where = {"A": args.a, "B": args.b}
    print(f"A = {args.a}, B = {args.b}; bench/thematic.py {' '.join(extra)}; {args.rounds} rounds, alternating",
          flush=True)
    for i in range(args.rounds):
        for side in ("AB" if i % 2 == 0 else "BA"):
            machine, r = run(where[side], extra)
            f = fields(r)
            got[side].append(f)
            print(f"round {i} {side}: {machine}", flush=True)
            print(f"  {side} wall {f['wall']:.2f} s (after embed {f['after_embed']:.2f}; embed {f['embed']:.2f}, "
                  f"cluster {f['cluster']:.2f}, describe {f['describe']:.2f}, insight {f['insight']:.2f}) "
                  f"baseline embed {f.get('base_embed', 0):.2f} s ratio {f.get('ratio', 0):.3f}"
                  + (f" cpu {json.dumps(r['cpu'])} cpu ratio {f.get('cpu_ratio', 0):.3f}" if "cpu" in r else "")
                  + f" load {r['load_before']} -> {r['load_after']} rss {f['peak_rss_mib']:.0f} MiB", flush=True)
    print(f"\nmedians over {args.rounds} runs each (min-max); CPU: {os.uname().machine}, see the lines above")
    keys = [k for k in got["A"][0] if k in got["B"][0]]
    print("| | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for side in ("A", "B"):
        cells = []
        for k in keys:
            v = [f[k] for f in got[side]]
            cells.append(f"{statistics.median(v):.3f} ({min(v):.2f}-{max(v):.2f})")
        print(f"| {side} {where[side]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
