"""Full-size reliability scenarios (not run in CI; ``tests/e2e/fault`` runs them scaled down).

    .venv/bin/python bench/reliability.py              # every scenario, full size (~10-15 min on 2 cores)
    .venv/bin/python bench/reliability.py --only load  # one scenario
    .venv/bin/python bench/reliability.py --scale 0.2  # quicker, smaller

Starts its own private Azurite and local host processes (``python -m devhost``),
checks each scenario's invariants and prints one table row per scenario. Each
scenario is bounded by its own timeout; a violated invariant is reported as FAIL.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# bench/platform.py shadows the stdlib ``platform`` module (which the SDKs import via
# uuid): take the bench folder off the path before anything else loads.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from devhost.azurite import Azurite  # noqa: E402
from tests.support import cluster as scenarios  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["kill", "outage", "duplicate", "poison", "load", "reaper"], action="append")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply job counts and the outage by this")
    args = parser.parse_args(argv)
    s = args.scale

    def n(value: int) -> int:
        return max(4, int(value * s))

    az = Azurite.private().start()
    conn = az.connection_string
    plan: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
        (
            "kill",
            f"worker host SIGKILLed mid-run ({n(200)} jobs, 2 worker hosts)",
            lambda: scenarios.worker_killed(conn, n_jobs=n(200), seconds=1.0, timeout=600),
        ),
        (
            "outage",
            f"Azurite stopped for {20 * s:.0f} s mid-run",
            lambda: scenarios.storage_outage(n_jobs=n(40), outage_s=20 * s, timeout=600),
        ),
        (
            "duplicate",
            "one message to 3 consumer processes at once",
            lambda: scenarios.duplicate_delivery(conn, consumers=3),
        ),
        (
            "poison",
            "pipeline crashes on every attempt (SIGKILL, raise) among good jobs",
            lambda: scenarios.poison(conn, good=n(20)),
        ),
        (
            "load",
            f"{n(1000)} echo jobs, 20 clients, concurrent status reads",
            lambda: scenarios.sustained_load(conn, n_jobs=n(1000), clients=20, workers=2, timeout=1200),
        ),
        (
            "reaper",
            f"2 reaper processes at once over {n(200)} stale jobs",
            lambda: scenarios.reaper_race(conn, n_jobs=n(200), reapers=2),
        ),
    ]
    rows = []
    try:
        for key, title, run in plan:
            if args.only and key not in args.only:
                continue
            print(f"running: {title} ...", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            try:
                result, ok = run(), "PASS"
            except Exception as err:
                traceback.print_exc()
                result, ok = {"error": f"{type(err).__name__}: {str(err)[:300]}"}, "FAIL"
            rows.append((title, ok, round(time.monotonic() - t0), result))
            print(f"  {ok}: {result}", file=sys.stderr, flush=True)
    finally:
        az.close()
    print("\n| scenario | result | wall s | observed |\n|---|---|---|---|")
    for title, ok, wall, result in rows:
        observed = ", ".join(f"{k}={v}" for k, v in result.items())
        print(f"| {title} | {ok} | {wall} | {observed} |")
    return 0 if all(r[1] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
