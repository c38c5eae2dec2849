"""Prove that every test of a base revision still exists after the suite moved into tiers (issue 26).

Usage (each list is ``pytest --collect-only -q`` output, one node id a line)::

    .venv/bin/python -m pytest --collect-only -q -p no:cacheprovider > /tmp/after.txt
    .venv/bin/python bench/test_inventory.py /tmp/before.txt /tmp/after.txt --base main [--table]

Each old node id is mapped to new ones: its file follows git's rename detection (``git diff -M --base``), a
scenario that took the ``backend`` fixture is found by (test name, its other parameters, backend) in the renamed
file, its Azurite twin (``tests/integration/…_on_azurite.py``) or a file the change added (a module split in
two). What may be missing is only the deliberate de-duplication, and it is counted apart:

* ``sweep``: the ``fake-sweep`` run of a scenario that never calls the reaper (the sweep flag is read only there,
  so the run repeated the ``fake`` one);
* ``fake, moved to integration``: a scenario that needs a real child process now runs once, on Azurite, in
  tests/integration (its fake runs repeated the Azurite one with a process each).

Anything else unmatched is printed and the exit code is 1.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import PurePosixPath

BACKENDS = ("fake-sweep", "azurite", "fake")
_BACKEND = re.compile(r"(?:^|-)(fake-sweep|azurite|fake)(?=-|$)")


def node_ids(path: str) -> list[str]:
    with open(path) as f:
        return [line.strip() for line in f if "::" in line and not line.startswith(("ERROR", "FAILED"))]


def split(node: str) -> tuple[str, str, str, str | None]:
    """(file, test name, other parameters, backend) of a node id."""
    file, _, rest = node.partition("::")
    name, _, params = rest.partition("[")
    params = params.removesuffix("]")
    m = _BACKEND.search(params)
    backend = m.group(1) if m else None
    others = (params[: m.start()] + params[m.end():]).strip("-") if m else params
    return file, name, others, backend


def renames(base: str) -> tuple[dict[str, str], set[str]]:
    out = subprocess.run(["git", "diff", "-M", "--name-status", f"{base}...HEAD", "--", "tests"],  # from the merge base
                         capture_output=True, text=True, check=True).stdout
    moved, added = {}, set()
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0].startswith("R"):
            moved[parts[1]] = parts[2]
        elif parts[0] == "A":
            added.add(parts[1])
    return moved, added


def twin_of(path: str) -> str:
    p = PurePosixPath(path)
    if p.parts[:2] != ("tests", "unit"):
        return ""
    return str(PurePosixPath("tests", "integration", *p.parts[2:-1], p.stem + "_on_azurite.py"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--base", default="main")
    ap.add_argument("--table", action="store_true", help="print old file -> new files with item counts")
    args = ap.parse_args(argv)
    old, new = node_ids(args.before), node_ids(args.after)
    moved, added = renames(args.base)
    index: dict[tuple[str, str, str, str | None], str] = {}
    for n in new:
        index[split(n)] = n
    by_name: dict[str, set[str]] = defaultdict(set)
    for n in new:
        by_name[split(n)[1]].add(split(n)[0])
    mapped: dict[str, list[str]] = {}
    dedup: Counter[str] = Counter()
    missing: list[str] = []
    files: dict[str, Counter[str]] = defaultdict(Counter)
    for o in old:
        file, name, others, backend = split(o)
        home = moved.get(file, file)
        others = moved.get(others, others)  # a test parametrised by file path (tests/unit/test_docstring_refs.py)
        family = [home, twin_of(home), *sorted(added)]
        hit = next((index[(f, name, others, backend)] for f in family if (f, name, others, backend) in index), None)
        if hit is not None:
            mapped[o] = [hit]
            files[file][split(hit)[0]] += 1
        elif backend == "fake-sweep" and any((f, name, others, "fake") in index for f in family):
            dedup["sweep"] += 1
        elif backend in ("fake", "fake-sweep") and any((f, name, others, "azurite") in index for f in added):
            dedup["fake, moved to integration"] += 1
        else:
            missing.append(o)
    print(f"before: {len(old)} items, after: {len(new)} items")
    print(f"mapped one to one: {len(mapped)}; de-duplicated: {dict(dedup)} ({sum(dedup.values())}); "
          f"missing: {len(missing)}")
    fresh = len(new) - len({v[0] for v in mapped.values()})
    print(f"new items not derived from an old one: {fresh}")
    tiers = Counter(PurePosixPath(split(n)[0]).parts[1] for n in new)
    print("per tier: " + ", ".join(f"{t} {c}" for t, c in sorted(tiers.items())))
    if args.table:
        for f in sorted(files):
            print(f"{f} -> " + ", ".join(f"{g} ({c})" for g, c in sorted(files[f].items())))
    for o in missing:
        print("MISSING", o, flush=False)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
