"""Audit the targets of issue 26 on this checkout, and print them as one table (exit 1 if any is missed).

Usage::

    .venv/bin/python bench/house.py              # the static checks and the test counts (collection only)
    .venv/bin/python bench/house.py --run-fast   # also runs ``scripts/test --fast`` once and times it

Checks, each from the code as it is (AST or the tools themselves, nothing recorded):

* the fast tier: ``tests/unit`` items against all items (``pytest --collect-only``), target at least half; with
  ``--run-fast``, the wall time of ``scripts/test --fast`` (target < 60 s on 2 cores), with the load average and CPU;
* no storage default outside the composition root: no ``x or azure_stores()``-style fallback, no parameter
  ``stores`` with a default, no concrete store or stores bundle built outside ``shared/platform.py``,
  ``shared/storage/assembly.py`` and the attempt process's entry (``shared/runtime/child.py``);
* no module-level mutable singleton in ``blueprints/``: no ``global`` statement, and every module-level value is
  immutable (a constant, a tuple, a path, a read-only mapping) or one of the two objects a module must hold at
  import: the ``func.Blueprint`` the v2 programming model registers functions on, and a ``logging`` logger (the
  logging module's own registry);
* no function over 80 lines in ``shared/`` and ``pipelines/`` (AST: ``def`` to last line); an exception must say
  why in its docstring (the words "80 lines");
* the lifecycle: at most 26 public methods, each returning one of at most 3 outcome types (``None``, a procedure
  with no outcome, is counted apart);
* import-linter: every contract kept (``.venv/bin/lint-imports``, as ``scripts/test`` runs it);
* small rot: every ``shared.…`` / ``pipelines.…`` dotted name in a docstring resolves, backticked or not (module,
  then attributes, by ``tests/unit/test_docstring_refs.py``'s resolver, which checks backticked names everywhere);
  every repository path a docstring names exists; the README's layout table names every tracked top-level folder
  and every trigger module; ``docs/glossary.md`` has an entry for each word issue 26 lists.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")

#: The modules that may build concrete stores: the composition roots and the module that assembles them.
COMPOSITION = {"shared/platform.py", "shared/storage/assembly.py", "shared/runtime/child.py"}
STORE_BUILDERS = {"azure_stores", "memory_stores", "JobStore", "ChunkStore", "Queues", "BlobStore", "FakeStorage"}
#: The words issue 26 asks docs/glossary.md to define.
GLOSSARY = ("job", "attempt", "claim", "lease", "fence", "zygote", "chunk", "fan-in", "sweep", "index", "tenant",
            "theme", "sub-theme", "parent", "codebook", "wave")
MAX_LINES, MAX_METHODS, MAX_OUTCOMES = 80, 26, 3


@dataclass
class Row:
    target: str
    measured: str
    ok: bool
    detail: list[str]


def _files(*dirs: str) -> Iterator[Path]:
    for d in dirs:
        base = ROOT / d
        if base.is_file():
            yield base
            continue
        for p in sorted(base.rglob("*.py")):
            if "proto" not in p.parts and "__pycache__" not in p.parts:
                yield p


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _tree(p: Path) -> ast.Module:
    return ast.parse(p.read_text(encoding="utf-8"), filename=str(p))


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


# -- the fast tier -------------------------------------------------------------------------------------------------


def _collected(*args: str) -> int:
    out = subprocess.run([PY, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    return sum(1 for line in out.stdout.splitlines() if "::" in line)


def fast_tier(run: bool) -> list[Row]:
    unit, integration, every = _collected("tests/unit"), _collected("tests/integration"), _collected()
    rows = [Row("scripts/test --fast: >= half of all test items", f"{unit:,} of {every:,} ({unit / every:.0%})",
                unit * 2 >= every, [f"tests/unit {unit:,}, tests/integration {integration:,}, "
                                    f"tests/e2e {every - unit - integration:,} (the rest of the collection)"])]
    if run:
        load = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(["scripts/test", "--fast"], cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        summary = next((line for line in reversed(out.stdout.splitlines()) if " in " in line and "passed" in line),
                       out.stdout.splitlines()[-1] if out.stdout else "")
        load_after = os.getloadavg()
        rows.append(Row("scripts/test --fast: < 60 s wall on 2 cores", f"{wall:.1f} s wall, {cpu:.1f} s CPU",
                        wall < 60 and out.returncode == 0,
                        [f"exit {out.returncode}: {summary.strip()}",
                         f"load average {load[0]:.1f} before, {load_after[0]:.1f} after; {os.cpu_count()} cores"]))
    return rows


# -- storage defaults ----------------------------------------------------------------------------------------------


def storage_defaults() -> Row:
    found: list[str] = []
    for p in _files("shared", "pipelines", "blueprints", "function_app.py"):
        rel = _rel(p)
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                for v in node.values[1:]:
                    if isinstance(v, ast.Call) and _name(v.func) in STORE_BUILDERS and rel not in COMPOSITION:
                        found.append(f"{rel}:{node.lineno}: `... or {_name(v.func)}()`")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = [*args.posonlyargs, *args.args]
                pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
                pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
                for a, _default in pairs:
                    if a.arg == "stores":
                        found.append(f"{rel}:{node.lineno}: {node.name}(stores=...) has a default")
            if isinstance(node, ast.Call) and _name(node.func) in STORE_BUILDERS and rel not in COMPOSITION \
                    and not rel.startswith("shared/storage/"):
                found.append(f"{rel}:{node.lineno}: builds {_name(node.func)}()")
    return Row("no storage default outside the composition root", f"{len(found)} found", not found, found)


# -- blueprints ----------------------------------------------------------------------------------------------------


def _immutable(v: ast.expr) -> bool:
    if isinstance(v, (ast.Constant, ast.JoinedStr)):
        return True
    if isinstance(v, ast.Tuple):
        return all(_immutable(e) for e in v.elts)
    if isinstance(v, ast.BinOp):  # Path(...) / "web", "a" + "b"
        return _immutable(v.left) and _immutable(v.right)
    if isinstance(v, ast.Attribute):  # Path(__file__).resolve().parent
        return _immutable(v.value) if not isinstance(v.value, ast.Name) else True
    if isinstance(v, ast.Name):
        return True  # another module-level name (checked where it is bound) or a builtin constant
    if isinstance(v, ast.Call):
        fn = v.func
        allowed = {"Path", "resolve", "frozenset", "MappingProxyType", "getLogger", "Blueprint"}
        return _name(fn) in allowed and (not isinstance(fn, ast.Attribute) or _immutable(fn.value)) \
            and all(_immutable(a) or (isinstance(a, ast.Dict) and _name(fn) == "MappingProxyType") for a in v.args)
    return False


def blueprint_singletons() -> Row:
    found: list[str] = []
    for p in _files("blueprints"):
        tree, rel = _tree(p), _rel(p)
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.append(f"{rel}:{node.lineno}: global {', '.join(node.names)}")
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign):
                target, value = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target, value = stmt.target, stmt.value
            else:
                continue
            if not _immutable(value):
                found.append(f"{rel}:{stmt.lineno}: {ast.unparse(target)} = {ast.unparse(value)[:60]}")
    return Row("no module-level mutable singleton in blueprints/", f"{len(found)} found", not found, found)


# -- function length -----------------------------------------------------------------------------------------------


def long_functions() -> Row:
    over: list[str] = []
    excused: list[str] = []
    longest = (0, "")
    for p in _files("shared", "pipelines"):
        for node in ast.walk(_tree(p)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                longest = max(longest, (n, f"{_rel(p)}:{node.lineno} {node.name}"))
                if n <= MAX_LINES:
                    continue
                doc = ast.get_docstring(node) or ""
                where = f"{_rel(p)}:{node.lineno} {node.name}: {n} lines"
                if "80 lines" in doc:
                    reason = next(s for s in re.split(r"(?<=[.:])\s+", " ".join(doc.split())) if "80 lines" in s)
                    excused.append(f"{where} (exception: {reason})")
                else:
                    over.append(where)
    return Row(f"no function over {MAX_LINES} lines in shared/ and pipelines/",
               f"{len(over)} over, {len(excused)} excepted; longest {longest[0]} lines", not over,
               [*over, *excused, f"longest: {longest[1]} ({longest[0]} lines)"])


# -- the lifecycle -------------------------------------------------------------------------------------------------


def lifecycle() -> Row:
    tree = _tree(ROOT / "shared" / "core" / "lifecycle.py")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Lifecycle")
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    outcomes: dict[str, list[str]] = {}
    for m in methods:
        ann = m.returns
        kind = "None" if ann is None or (isinstance(ann, ast.Constant) and ann.value is None) else \
            _name(ann.value) if isinstance(ann, ast.Subscript) else ast.unparse(ann)
        outcomes.setdefault(kind, []).append(m.name)
    types = {k: v for k, v in outcomes.items() if k != "None"}
    detail = [f"{k}: {', '.join(v)}" for k, v in sorted(outcomes.items())]
    return Row(f"lifecycle: <= {MAX_METHODS} public methods, <= {MAX_OUTCOMES} outcome types",
               f"{len(methods)} methods, {len(types)} outcome types ({', '.join(sorted(types))}) + None",
               len(methods) <= MAX_METHODS and len(types) <= MAX_OUTCOMES, detail)


# -- import-linter -------------------------------------------------------------------------------------------------


def import_contracts() -> Row:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "lint-imports")], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("Contracts:")), out.stdout.strip()[-200:])
    broken = [x for x in out.stdout.splitlines() if "BROKEN" in x]
    return Row("import-linter contracts pass", line, out.returncode == 0, broken)


# -- small rot -----------------------------------------------------------------------------------------------------

_DOTTED = re.compile(r"\b((?:shared|pipelines)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_PATH = re.compile(r"(?<![\w./-])((?:shared|pipelines|blueprints|devhost|bench|docs|scripts|tests|web|infra|"
                   r"thematiq_client|thematiq_cli)/[\w/.-]*[\w])")


def _docstrings(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield (getattr(node, "lineno", 1), doc)


def docstring_references() -> list[Row]:
    # This script's folder holds bench/platform.py, which would shadow the standard library's platform module.
    here = Path(__file__).resolve().parent
    sys.path[:] = [str(ROOT), *(x for x in sys.path if Path(x or ".").resolve() != here)]
    # The resolver of the unit test that checks backticked names in every file; here: every name in a docstring.
    from tests.unit.test_docstring_refs import resolves

    names: list[str] = []
    paths: list[str] = []
    seen = checked = 0
    for p in _files("shared", "pipelines", "blueprints", "devhost", "thematiq_client", "thematiq_cli",
                    "function_app.py"):
        for line, doc in _docstrings(_tree(p)):
            for m in _DOTTED.finditer(doc):
                seen += 1
                if not resolves(m.group(1)):
                    names.append(f"{_rel(p)}:{line}: {m.group(1)}")
            for m in _PATH.finditer(doc):
                ref = m.group(1).rstrip(".")
                if "*" in ref or "{" in ref or "<" in ref:
                    continue
                checked += 1
                if not (ROOT / ref).exists():
                    paths.append(f"{_rel(p)}:{line}: {ref}")
    return [Row("docstrings: shared./pipelines. names resolve", f"{seen} names, {len(names)} unresolved", not names,
                names),
            Row("docstrings: repository paths exist", f"{checked} paths, {len(paths)} missing", not paths, paths)]


def readme_layout() -> Row:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `([^`/]+)/?`", table, flags=re.M))
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    folders = {f.split("/", 1)[0] for f in tracked.splitlines() if "/" in f and not f.startswith(".")}
    triggers = sorted(p.stem for p in (ROOT / "blueprints").glob("*.py") if "func.Blueprint()" in p.read_text())
    row = next((line for line in table.splitlines() if line.startswith("| `blueprints/`")), "")
    missing = [f"folder {f}/ not in the table" for f in sorted(folders - named)]
    missing += [f"trigger module {t} not described" for t in triggers if f"`{t}`" not in row]
    missing += [f"{n} in the table but not a tracked folder or file" for n in sorted(named - folders)
                if not (ROOT / n).exists()]
    return Row("README layout: every top-level folder and trigger module",
               f"{len(folders)} folders, {len(triggers)} trigger modules, {len(missing)} missing", not missing, missing)


def glossary() -> Row:
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8").lower()
    entries = set(re.findall(r"^\| \*\*([^*]+)\*\*", text, flags=re.M))
    words = {w.strip() for e in entries for w in re.split(r",| / | \(", e)}
    missing = [t for t in GLOSSARY if t not in words and f"{t}s" not in words]
    return Row("docs/glossary.md covers the issue's words", f"{len(GLOSSARY) - len(missing)} of {len(GLOSSARY)}",
               not missing, [f"no entry: {t}" for t in missing])


def cpu() -> str:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    return f"{model}; flags: {' '.join(f for f in ('avx2', 'avx512_vnni', 'amx_tile') if f in flags) or 'none'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-fast", action="store_true", help="also run scripts/test --fast once and time it")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every finding, also of targets met")
    a = ap.parse_args()
    print(f"CPU: {cpu()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    rows = [*fast_tier(a.run_fast), storage_defaults(), blueprint_singletons(), long_functions(), lifecycle(),
            import_contracts(), *docstring_references(), readme_layout(), glossary()]
    width = max(len(r.target) for r in rows)
    print(f"\n| {'target':<{width}} | measured | met |\n|{'-' * (width + 2)}|---|---|")
    for r in rows:
        print(f"| {r.target:<{width}} | {r.measured} | {'yes' if r.ok else 'NO'} |")
    for r in rows:
        if r.detail and (a.verbose or not r.ok or "excepted" in r.measured):
            print(f"\n{r.target}:")
            for d in r.detail:
                print(f"  {d}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
