"""Load a script of ``bench/`` as a module, for the unit tests of what a bench computes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> Any:
    """``bench/<name>.py`` as a fresh module. bench/ is scripts, not a package, and its scripts trim ``sys.path``
    (bench/platform.py would shadow the stdlib's), so the path is restored after."""
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}_under_test", BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path[:] = saved
