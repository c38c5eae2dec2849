"""The chaos outcome table: echo jobs through a fault proxy at several write-drop rates (issue 11, Proof).

    .venv/bin/python bench/chaos.py                          # 30 jobs per rate, 0/5/12/25 % (~2-6 min on 2 cores)
    .venv/bin/python bench/chaos.py --jobs 60 --deadline 300 # the issue's full size
    .venv/bin/python bench/chaos.py --rates 12 --json out.json

For each drop rate it starts a fault proxy in front of one private Azurite, an API host and a worker host, submits
``--jobs`` echo jobs with their own Idempotency-Key from a retrying client, waits up to ``--deadline`` seconds and
counts what happened (``tests/fault/test_chaos.py:run_chaos``). Table writes are dropped after commit at the given
rate and refused (503) at ``--refuse``; queue and blob writes at a third of the drop rate and 2 % refused. A rate of 0
turns every fault off (the baseline).

Columns: submitted keys, accepted keys (answered 200/202), jobs (rows the API lists or answered with), succeeded,
failed, stuck (queued/running/retrying at the deadline), run twice (a job whose pipeline ran more than once),
attempts>1, dup keys (keys with more than one job), restarted (a host process exited), wall s (submission to all
terminal, or the deadline), then the proxy's dropped/refused counts per service and all writes it saw.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# bench/platform.py shadows the stdlib ``platform`` module (which the SDKs import via
# uuid): take the bench folder off the path before anything else loads.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from devhost.azurite import Azurite  # noqa: E402
from tests.fault.test_chaos import default_faults, describe, outcome_table, run_chaos, violations  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=30, help="echo jobs (keys) per rate (default 30)")
    parser.add_argument("--deadline", type=float, default=90.0, help="seconds to wait for all jobs per rate (default 90)")
    parser.add_argument("--rates", default="0,5,12,25", help="table drop rates in percent (default 0,5,12,25)")
    parser.add_argument("--refuse", type=float, default=5.0, help="table writes refused with 503, percent (default 5)")
    parser.add_argument("--clients", type=int, default=6, help="concurrent submitting clients (default 6)")
    parser.add_argument("--seed", type=int, default=11, help="the proxy's RNG seed")
    parser.add_argument("--heal-after", type=float, default=None, help="turn faults off this many seconds in")
    parser.add_argument("--queued-stale", type=float, default=900, help="QUEUED_STALE_SECONDS of the hosts (900)")
    parser.add_argument("--verbose", action="store_true", help="print each run's details as it finishes")
    parser.add_argument("--json", type=Path, help="also write every outcome to this file")
    args = parser.parse_args(argv)
    rates = [float(r) / 100 for r in args.rates.split(",") if r.strip()]

    az = Azurite.private().start()
    outcomes = []
    t0 = time.monotonic()
    try:
        for rate in rates:
            faults = default_faults(rate, args.refuse / 100 if rate else 0.0)
            print(f"chaos: drop {rate:.0%}, {args.jobs} jobs ...", file=sys.stderr, flush=True)
            outcome = run_chaos(
                az.connection_string,
                n_jobs=args.jobs,
                faults=faults,
                deadline_s=args.deadline,
                clients=args.clients,
                seed=args.seed,
                heal_after_s=args.heal_after,
                extra_env={"QUEUED_STALE_SECONDS": str(int(args.queued_stale))},
            )
            outcome["violations"] = violations(outcome)
            outcomes.append(outcome)
            if args.verbose:
                print(describe(outcome), file=sys.stderr, flush=True)
    finally:
        az.close()
    print(
        f"\nchaos: {args.jobs} echo jobs per rate, Table refuse {args.refuse:g} % (queue/blob: drop/3, refuse 2 %), "
        f"deadline {args.deadline:g} s, seed {args.seed}, {time.monotonic() - t0:.0f} s in all\n"
    )
    print(outcome_table(outcomes))
    print()
    for o in outcomes:
        verdict = "holds" if not o["violations"] else "BROKEN: " + "; ".join(v[:160] for v in o["violations"])
        print(f"- drop {o['faults']['table'][0]:.0%}: {verdict}")
    if args.json:
        args.json.write_text(json.dumps(outcomes, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
