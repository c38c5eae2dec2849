"""CPU seconds of the job's stages after embedding (clean, cluster, describe, ...) at a git ref vs now, on the same
cached embeddings, and whether the two results are identical (issue 27: cut the cluster stage's cost without
changing what it computes).

Each (code tree, set) runs in a fresh process with one thread everywhere (BLAS, onnxruntime), so CPU seconds
(user + system of that process, per stage) measure the work, not the other processes of a shared machine; the
trees alternate round by round (ref, now, ref, now, ...) so both see the same load. The ref's ``pipelines`` and
``shared`` packages are taken with ``git archive`` into a temporary folder (the models are the worktree's).

Sets: ``scale2000`` is what ``bench/thematic.py --scale 2000`` runs (2,000 BBC leads, headlines and sentences);
any name of the quality suite (``bench/thematic.py --suite``: ``leads``, ``banking``, ``clinc``, ...) works too.
The embeddings come from the bench cache (``~/.cache/thematiq-bench``), so the first run of a set embeds it.

"identical" compares the whole result document (every theme, label, assignment and the run metadata with the
theme count's scores and confidence) after removing what depends on the clock (timings, timestamps).

Usage::

    .venv/bin/python bench/cluster_speed.py --ref main                      # scale2000, 3 rounds
    .venv/bin/python bench/cluster_speed.py --ref main --sets leads,banking,clinc --rounds 1
    .venv/bin/python bench/cluster_speed.py --ref main --threads 2          # identity at the production setting
    .venv/bin/python bench/cluster_speed.py --ref main --counts --seeds 3 --sets leads,banking,...
                                    # a change to the k search's cost knobs: the count each tree chooses itself

``--counts``: for a change that alters the count's evidence (the curve itself), which ``bench/thematic.py
--counts-vs`` cannot show (it runs both decision rules on the current tree's curve): each tree runs the whole
cluster stage (its own curve, decision and final partition, then folding) per set and seed, and the table gives k,
confidence and NMI at the chosen k of both, with the TUNE and CHECK sets apart. ``--knobs NAME=VALUE,...`` sets
module constants of this tree's ``cluster.py`` first (to try a cost knob before changing the code).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import hashlib, json, os, resource, sys, time
from pathlib import Path
code_root, bench_root, name, seed, out, cold = sys.argv[1:7]
sys.path.insert(0, bench_root)
import bench.thematic as b  # puts bench_root first on sys.path; the code under test must come before it
sys.path.insert(0, code_root)
import importlib
R = importlib.import_module("pipelines.thematic.run")  # the module (the package's ``run`` is the function)
import pipelines.thematic.mapped as mapped
from pipelines.thematic import embed as E
E.LocalEmbedder.__init__.__defaults__ = (int(os.environ["OMP_NUM_THREADS"]), None)  # as bench/thematic.py --scale
assert R.__file__.startswith(code_root), R.__file__  # the tree under test, not the bench's

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

if name == "scale2000":
    texts = b.scale_texts(2000)
else:
    texts = b.suite_set(name)[0]

stage_cpu = {}
real_run_stages = R.run_stages
def timed(f):
    def run(ctx, s):
        c0 = cpu()
        try:
            return f(ctx, s)
        finally:
            key = f.__name__.removesuffix("_stage")
            stage_cpu[key] = stage_cpu.get(key, 0.0) + cpu() - c0
    return run
from pipelines.thematic import stages as S
R.run_stages = lambda ctx, s: real_run_stages(ctx, s, tuple(timed(f) for f in S.STAGES))
real_embedder = mapped.job_embedder
mapped.job_embedder = lambda *a, **k: b.CachedEmbedder(real_embedder(*a, **k))
from pipelines.thematic import ThematicParams
params = ThematicParams(llm="off", seed=int(seed), num_themes="auto")
items = [{"id": i, "text": t} for i, t in enumerate(texts)]
R.run_with(b.Ctx(), params, items, client=None)  # warm-up: embeddings cached, imports and first calls paid
if cold == "1":
    # As a fresh worker meets the job: the per-text memos (bounded lru caches: keywords._analyse, _terms, _stem,
    # clean._word) empty again; the per-process loads (unbounded functools.cache: lexicons, models) stay.
    for mod in [m for k, m in list(sys.modules.items()) if k.startswith("pipelines.thematic")]:
        for f in list(vars(mod).values()):
            info = getattr(f, "cache_info", None)
            if callable(info) and getattr(f, "__module__", "") == mod.__name__ and info().maxsize is not None:
                f.cache_clear()
    # clean.near_key's character table fills as characters are met (a dict, not an lru cache): empty it too.
    getattr(sys.modules.get("pipelines.thematic.clean"), "_KEY_TABLE", {}).clear()
stage_cpu.clear()
c0, w0 = cpu(), time.perf_counter()
doc = R.run_with(b.Ctx(), params, items, client=None)
job, job_wall = cpu() - c0, time.perf_counter() - w0

CLOCK = ("timings_seconds", "started_at", "finished_at", "created_at", "duration_seconds", "elapsed_seconds")
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in CLOCK}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
doc = strip(doc)
blob = json.dumps(doc, sort_keys=True, ensure_ascii=False)
Path(out).write_text(blob, encoding="utf-8")
tc = doc["run"]["theme_count"]
print(json.dumps({"n": len(texts), "k": len(doc["themes"]), "confidence": tc.get("confidence"),
                  "sha": hashlib.sha256(blob.encode()).hexdigest()[:16], "job_cpu": round(job, 3),
                  "job_wall": round(job_wall, 3),
                  "stage_cpu": {k: round(v, 3) for k, v in stage_cpu.items()}}))
"""


COUNTS_WORKER = r"""
import json, os, sys, time
code_root, bench_root, names, seeds, knobs, out = sys.argv[1:7]
sys.path.insert(0, bench_root)
import bench.thematic as b
sys.path.insert(0, code_root)
import importlib
K = importlib.import_module("pipelines.thematic.cluster")
assert K.__file__.startswith(code_root), K.__file__
from pipelines.thematic.assign import fold_small
for kv in [x for x in knobs.split(",") if x]:
    name, val = kv.split("=")
    setattr(K, name, type(getattr(K, name))(float(val)) if isinstance(getattr(K, name), int) else float(val))
res = {}
for name in names.split(","):
    x, pos, truth = b.cluster_input(name)
    for seed in range(int(seeds)):
        c0 = time.process_time()
        cl = K.cluster(x, num_themes=None, max_themes=None, min_theme_size=5, seed=seed)
        cpu = time.process_time() - c0
        lab, k = fold_small(cl.labels, x, cl.k, 5)
        pred = [int(lab[i]) for i in pos]
        res[f"{name}/{seed}"] = {"k": int(cl.k), "true_k": len(set(truth)), "nmi": b.nmi(truth, pred),
                                 "conf": cl.count.confidence_label, "conf_v": cl.count.confidence, "cpu": cpu}
        print(name, seed, res[f"{name}/{seed}"], file=sys.stderr, flush=True)
open(out, "w").write(json.dumps(res))
"""


def counts(args: argparse.Namespace, tmp: Path) -> None:
    """k, confidence and NMI at the chosen k of the whole cluster stage in both trees, per set and seed."""
    sys.path.insert(0, str(ROOT))
    from bench.thematic import TUNE

    names = [s for s in args.sets.split(",") if s]
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    got = {}
    from bench.thematic import cache_dir

    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.ref], capture_output=True, text=True,
                         check=True).stdout.strip()
    now = ROOT
    if args.snapshot:
        # This tree's pipelines as they are now, so that editing it while the run goes on does not change "now".
        now = tmp / "now"
        (now / "pipelines").mkdir(parents=True)
        subprocess.run(["cp", "-r", str(ROOT / "shared"), str(now)], check=True)
        subprocess.run(["cp", "-r", str(ROOT / "pipelines" / "thematic"), str(now / "pipelines")], check=True)
        subprocess.run(["cp", str(ROOT / "pipelines" / "__init__.py"), str(now / "pipelines")], check=False)
    for tag, code, knobs in (("ref", ref_tree(args.ref, tmp / "ref"), ""), ("now", now, args.knobs)):
        # The ref's results are kept (by commit, sets and seeds): a second knob against the same ref reruns only now.
        out = (cache_dir() / f"cluster-counts-{sha[:12]}-{hashlib.sha256(f'{names} {args.seeds}'.encode()).hexdigest()[:12]}.json"
               if tag == "ref" else tmp / f"counts-{tag}.json")
        if tag == "ref" and out.exists():
            got[tag] = json.loads(out.read_text())
            continue
        subprocess.run([sys.executable, "-c", COUNTS_WORKER, str(code), str(ROOT), ",".join(names), str(args.seeds),
                        knobs, str(out)], check=True, env=env, cwd=str(code))
        got[tag] = json.loads(out.read_text())
    print(f"knobs now: {args.knobs or '(none)'}")
    for group, members in (("tune", [n for n in names if n in TUNE]), ("check", [n for n in names if n not in TUNE])):
        if not members:
            continue
        print(f"\n**{group} sets** ({'CHECK' if group == 'check' else 'TUNE'})\n")
        print("| set | true k | k ref | k now | NMI ref | NMI now | ΔNMI | conf. ref | conf. now | cpu s ref / now |")
        print("|---|---:|---|---|---:|---:|---:|---|---|---|")
        d_all = []
        for name in members:
            rows = {tag: [got[tag][f"{name}/{s}"] for s in range(args.seeds)] for tag in got}
            t = rows["now"][0]["true_k"]

            def ks(rs: list[dict[str, Any]], t: int = t) -> str:
                return ", ".join(str(r["k"]) if 0.5 * min(t, 200) <= r["k"] <= 2 * min(t, 200) else f"**{r['k']}**"
                                 for r in rs)

            def conf(rs: list[dict[str, Any]]) -> str:
                return ", ".join(f"{r['conf']} {r['conf_v']:.2f}" for r in rs)

            nr, nn = (statistics.mean(r["nmi"] for r in rows[tag]) for tag in ("ref", "now"))
            d_all.append(nn - nr)
            cr, cn = (sum(r["cpu"] for r in rows[tag]) for tag in ("ref", "now"))
            print(f"| {name} | {t} | {ks(rows['ref'])} | {ks(rows['now'])} | {nr:.3f} | {nn:.3f} | {nn - nr:+.3f} | "
                  f"{conf(rows['ref'])} | {conf(rows['now'])} | {cr:.1f} / {cn:.1f} |")
        high_out = [f"{n}/{s}" for n in members for s in range(args.seeds)
                    for r in [got["now"][f"{n}/{s}"]] if r["conf"] == "high"
                    and not 0.5 * min(r["true_k"], 200) <= r["k"] <= 2 * min(r["true_k"], 200)]
        print(f"\nmean ΔNMI over the {group} sets: {statistics.mean(d_all):+.4f}; 'high' outside 0.5-2x now: "
              f"{high_out or 'none'}")


def ref_tree(ref: str, into: Path) -> Path:
    """``pipelines`` and ``shared`` at ``ref`` under ``into``, with this worktree's models linked in."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "pipelines", "shared"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    models = into / "pipelines" / "thematic" / "assets" / "models"
    if not models.exists():
        models.symlink_to((ROOT / "pipelines" / "thematic" / "assets" / "models").resolve())
    return into


def run_one(code: Path, name: str, seed: int, threads: int, out: Path, blas: int | None = None,
            cold: bool = False) -> dict[str, Any]:
    """One worker run of ``name`` at ``threads`` (onnxruntime and BLAS; ``blas`` sets BLAS apart); ``cold``: the
    per-text memos emptied before the timed run."""
    env = dict(os.environ)
    b = str(threads if blas is None else blas)
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=b, MKL_NUM_THREADS=b)
    p = subprocess.run([sys.executable, "-c", WORKER, str(code), str(ROOT), name, str(seed), str(out), str(int(cold))],
                       capture_output=True, text=True, env=env, cwd=str(code))
    if p.returncode:
        raise SystemExit(f"{code} {name}: worker failed\n{p.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ (a path and both values), or None."""
    if type(a) is not type(b):
        return f"{path}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'now' if k not in a else 'ref'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="main", help="git ref to compare with (default main)")
    ap.add_argument("--sets", default="scale2000", help="comma-separated: scale2000 and/or suite set names")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per tree and set (min/median shown)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="BLAS/onnxruntime threads of each run (CPU time: 1)")
    ap.add_argument("--counts", action="store_true", help="k, confidence and NMI of each tree's own cluster stage")
    ap.add_argument("--seeds", type=int, default=3, help="--counts: seeds 0..N-1")
    ap.add_argument("--snapshot", action="store_true", help="--counts: run a copy of this tree taken at the start")
    ap.add_argument("--knobs", default="", help="--counts: NAME=VALUE,... constants of this tree's cluster.py")
    ap.add_argument("--cold", action="store_true",
                    help="empty the per-text memos (keywords, clean) before the timed run, as in a fresh worker")
    args = ap.parse_args()
    if args.counts:
        with tempfile.TemporaryDirectory(prefix="cluster-counts-") as tmp:
            counts(args, Path(tmp))
        return
    sys.path.insert(0, str(ROOT))
    from bench.int8_speed import machine

    print(machine())
    print(f"ref {args.ref} vs this tree; {args.threads} thread(s); seed {args.seed}; {args.rounds} round(s)"
          f"{'; per-text memos emptied before the timed run (--cold)' if args.cold else ''}")
    with tempfile.TemporaryDirectory(prefix="cluster-speed-") as tmp:
        trees = {"ref": ref_tree(args.ref, Path(tmp) / "ref"), "now": ROOT}
        all_same = True
        for name in [s for s in args.sets.split(",") if s]:
            runs: dict[str, list[dict[str, Any]]] = {"ref": [], "now": []}
            for r in range(args.rounds):
                for tag in (("ref", "now") if r % 2 == 0 else ("now", "ref")):
                    out = Path(tmp) / f"{name}-{tag}-{r}.json"
                    runs[tag].append(run_one(trees[tag], name, args.seed, args.threads, out, cold=args.cold))
            a = json.loads((Path(tmp) / f"{name}-now-0.json").read_text(encoding="utf-8"))
            b = json.loads((Path(tmp) / f"{name}-ref-0.json").read_text(encoding="utf-8"))
            diff = first_difference(a, b)
            all_same &= diff is None
            shas = {tag: {x["sha"] for x in v} for tag, v in runs.items()}
            print(f"\n{name}: n={runs['now'][0]['n']} k ref/now {runs['ref'][0]['k']}/{runs['now'][0]['k']}, "
                  f"confidence {runs['ref'][0]['confidence']}/{runs['now'][0]['confidence']}; result "
                  f"{'IDENTICAL' if diff is None else 'DIFFERS at ' + diff} (sha ref {sorted(shas['ref'])} "
                  f"now {sorted(shas['now'])})")
            stages = list(runs["now"][0]["stage_cpu"])
            print(f"  {'CPU s':10s} {'ref min':>8s} {'ref med':>8s} {'now min':>8s} {'now med':>8s} {'now/ref':>8s}")
            for st in [*stages, "job"]:
                vals = {tag: [x["job_cpu"] if st == "job" else x["stage_cpu"].get(st, 0.0) for x in v]
                        for tag, v in runs.items()}
                lo_r, lo_n = min(vals["ref"]), min(vals["now"])
                print(f"  {st:10s} {lo_r:8.3f} {statistics.median(vals['ref']):8.3f} {lo_n:8.3f} "
                      f"{statistics.median(vals['now']):8.3f} {lo_n / lo_r if lo_r else float('nan'):8.2f}")
        load = os.getloadavg()
        print(f"\nload average after: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; all identical: {all_same}")


if __name__ == "__main__":
    main()
