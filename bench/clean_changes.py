"""How many responses the cleaning stage (pipelines/thematic/clean.py) marks differently from a git ref.

Runs the stage as it is at ``--ref`` (default ``main``) and as it is now over every set of the quality suite
(``bench/thematic.py``: SUITE, TUNE and CHECK sets, read with its readers), the language sets of
``bench/embedding_suite.py`` (chat lines in en/it/es/nl, Chinese sets) and the bundled sample
(``samples/feedback.csv``, with its labels), and prints per set how many responses change status (``ok`` ->
``gibberish`` etc.) and every changed response, then the unchanged gibberish / no_answer ones
(``--show`` caps each list per set). Only statuses are compared:
no set's labels are read, except the sample's, printed next to its changes so a reader can judge them.

Usage::

    .venv/bin/python bench/clean_changes.py [--ref main] [--sets banking,feedback] [--show 40] [--speed]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (_HERE, "")]

import argparse  # noqa: E402
import csv  # noqa: E402
import importlib.util  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.int8_speed import machine  # noqa: E402  (the CPU, its flags and the load: with every speed number)
from pipelines.thematic import clean as current  # noqa: E402


def clean_at(ref: str) -> tuple[str, types.ModuleType]:
    """The clean module as it is at git ``ref`` (loaded inside the package, so relative imports resolve)."""
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.strip()
    source = subprocess.run(["git", "show", f"{commit}:pipelines/thematic/clean.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("pipelines.thematic._clean_ref", loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "pipelines.thematic"
    sys.modules[spec.name] = mod
    exec(compile(source, f"{commit}:pipelines/thematic/clean.py", "exec"), mod.__dict__)
    return commit, mod


def sample() -> tuple[list[str], list[str], list[str]]:
    rows = list(csv.DictReader((ROOT / "samples" / "feedback.csv").open(encoding="utf-8")))
    labels = {r["id"]: r for r in csv.DictReader((ROOT / "samples" / "feedback_labels.csv").open(encoding="utf-8"))}
    notes = [f"{r['id']} label={labels[r['id']]['theme']}" + (f" ({labels[r['id']]['note']})"
                                                              if labels[r['id']]['note'] else "") for r in rows]
    return [r["text"] for r in rows], [r["id"] for r in rows], notes


def sets(names: list[str] | None) -> dict[str, list[str]]:
    from bench import embedding_suite as es
    from bench import thematic as th

    suite = list(dict.fromkeys([*th.SUITE, *th.TUNE, *th.CHECK]))
    lang = [n for n in es.SETS if n not in suite]
    out: dict[str, list[str]] = {}
    for name in suite + lang:
        if names and name not in names:
            continue
        if name == "feedback":
            continue  # the sample: printed on its own, with ids and labels
        try:
            texts = th.suite_set(name)[0] if name in suite else es.load_set(name, es.SETS[name][1])[0]
        except (ImportError, FileNotFoundError, AssertionError, SystemExit) as err:
            print(f"{name}: not read ({type(err).__name__}: {err})")
            continue
        out[name] = list(texts)
    return out


def statuses(mod: Any, texts: list[str]) -> list[str]:
    return [r.status for r in mod.clean([{"id": i, "text": t} for i, t in enumerate(texts)])]


def compare(name: str, texts: list[str], ref: Any, notes: list[str] | None, show: int) -> tuple[int, int]:
    before, after = statuses(ref, texts), statuses(current, texts)
    changed = [i for i in range(len(texts)) if before[i] != after[i]]
    moves = Counter(f"{before[i]} -> {after[i]}" for i in changed)
    now = Counter(after)
    print(f"\n### {name}: {len(texts)} responses, {len(changed)} change status"
          + (f" ({', '.join(f'{k} {v}' for k, v in moves.most_common())})" if moves else "")
          + f"; now unusable: {', '.join(f'{k} {v}' for k, v in sorted(now.items()) if k != 'ok') or 'none'}")
    for i in changed[:show]:
        note = f"  [{notes[i]}]" if notes else ""
        print(f"  {before[i]:>15} -> {after[i]:<15} {texts[i][:100]!r}{note}")
    if len(changed) > show:
        print(f"  ... {len(changed) - show} more")
    # What stays (or now is) gibberish / no_answer, so a reader can judge the rule on what it keeps out too.
    kept = [i for i in range(len(texts)) if after[i] in ("gibberish", "no_answer") and i not in set(changed)]
    for i in kept[:show]:
        print(f"  {'(unchanged)':>15}    {after[i]:<15} {texts[i][:100]!r}")
    return len(texts), len(changed)


def speed(ref: Any, texts: list[str], repeats: int = 3) -> None:
    """CPU seconds of the stage at the ref and now over the same texts (best of ``repeats``)."""
    items = [{"id": i, "text": t} for i, t in enumerate(texts)]
    current.clean(items[:10])  # the lexicon is read once per process: timed on its own below
    best: dict[str, float] = {}
    for r in range(repeats):  # interleaved, so both trees see the same load
        for name, mod in ((("ref", ref), ("now", current)) if r % 2 == 0 else (("now", current), ("ref", ref))):
            # A memo a job fills (a word's reading, issue 27) starts empty, as in a fresh worker; the lexicon,
            # read once per process, stays (timed on its own below).
            for f in vars(mod).values():
                if callable(getattr(f, "cache_clear", None)) and f is not getattr(mod, "_lexicon", None):
                    f.cache_clear()
            t0 = time.process_time()
            mod.clean(items)
            best[name] = min(best.get(name, float("inf")), time.process_time() - t0)
    current._lexicon.cache_clear()
    t0 = time.process_time()
    current._lexicon()
    lexicon = time.process_time() - t0
    print(f"\n{machine()}\nclean() over {len(items)} texts, CPU s (best of {repeats}, interleaved, memos emptied): ref {best['ref']:.3f}, "
          f"now {best['now']:.3f} ({1e6 * best['now'] / len(items):.1f} us a text); reading the lexicon once: "
          f"{lexicon:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default="main", help="git ref of the clean stage to compare with (default main)")
    ap.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    ap.add_argument("--show", type=int, default=60, help="changed responses printed per set")
    ap.add_argument("--speed", action="store_true", help="also time the stage at the ref and now over every set")
    args = ap.parse_args()
    commit, ref = clean_at(args.ref)
    names = [n for n in args.sets.split(",") if n] or None
    print(f"clean stage at {args.ref} ({commit}) vs the working tree")
    total = changed = 0
    read = sets(names)
    for name, texts in read.items():
        n, c = compare(name, texts, ref, None, args.show)
        total, changed = total + n, changed + c
    print(f"\nbenchmark sets: {changed} of {total} responses change status ({changed / max(1, total):.3%})")
    if not names or "feedback" in names:
        texts, _ids, notes = sample()
        compare("samples/feedback.csv", texts, ref, notes, args.show)
    if args.speed:
        speed(ref, [t for texts in read.values() for t in texts])


if __name__ == "__main__":
    main()
