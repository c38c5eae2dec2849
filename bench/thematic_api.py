"""A labelled set of the suite through the HTTP API, the way the external judges measure: NMI / accuracy / k.

    .venv/bin/python bench/thematic_api.py --sets mcid,drugs [--param seed=1]

Per set: the texts are written to a temporary JSONL file (ids 0..n-1; nothing is kept in the repo), run through
``python -m devhost.demo`` (a private Azurite, the local Functions host, submit / poll / download through the
API with the CLI's client), and the downloaded JSON result is scored against the labels: each response's primary
theme, ``other`` and ``unusable`` as one more cluster each (a reader sees them so), NMI, ARI, Hungarian accuracy,
the theme count and its confidence. Same sets and labels as ``bench/thematic.py --suite`` (its ``suite_set``),
so the two paths can be compared; the cluster-stage numbers are ``bench/thematic.py --counts-vs``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.int8_speed import machine  # noqa: E402
from bench.metrics import ari, nmi  # noqa: E402
from bench.thematic import _ratio_ok, hungarian, suite_set  # noqa: E402


def run(name: str, params: list[str]) -> str:
    texts, labels = suite_set(name)
    with tempfile.TemporaryDirectory(prefix="thematiq-api-") as tmp:
        src = Path(tmp) / f"{name}.jsonl"
        src.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)))
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "devhost.demo", "--file", str(src), "--out", str(out)]
        for p in params:
            cmd += ["--param", p]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{name}: demo failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        result = json.loads(next(out.glob("*.json")).read_text())
    primary: dict[str, str] = {}
    for a in result["assignments"]:
        if a["bucket"] == "theme" and a["themes"]:
            primary[a["response_id"]] = a["themes"][0]["theme_id"]
        else:
            primary[a["response_id"]] = a["bucket"]
    keep = [i for i, lab in enumerate(labels) if lab != "unusable"]
    truth = [labels[i].split("|")[0] for i in keep]
    pred = [primary.get(str(i), "missing") for i in keep]
    tc = result["run"]["theme_count"]
    k = len(result["themes"])
    ok = "within" if _ratio_ok(k, len(set(truth))) else "OUTSIDE"
    return (f"| {name} | {len(texts)} | {len(set(truth))} | {k} ({ok} 0.5-2x) | {tc.get('confidence_label')} "
            f"{tc.get('confidence')} | {nmi(truth, pred):.3f} | {ari(truth, pred):.3f} | {hungarian(truth, pred):.3f} | "
            f"{sum(1 for p in pred if p in ('other', 'unusable', 'missing'))} | {wall:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="mcid")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="job parameter (repeatable)")
    args = ap.parse_args()
    print(machine())
    print("| set | n | true k | themes (API) | confidence | NMI | ARI | accuracy | other + unusable | seconds end to end |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|", flush=True)
    for name in [s for s in args.sets.split(",") if s]:
        print(run(name, args.param), flush=True)


if __name__ == "__main__":
    main()
