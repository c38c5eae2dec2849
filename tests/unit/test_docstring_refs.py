"""Dotted names in docstrings and comments point at modules and objects that exist.

A docstring that still names an error class under its old module (shared.errors, since moved to shared.sdk)
sends the reader, often a pipeline author on their first file, to nothing. This walks the project's own Python
files, takes every dotted name of the project written in double backticks or a Sphinx role, and resolves it by
importing the longest importable prefix and following attributes.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "pipelines", "blueprints", "devhost", "thematiq_client", "thematiq_cli")
_REF = re.compile(
    r"(?:``|:(?:class|func|mod|meth|attr|data|exc):`)((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`"
)


def _sources() -> list[Path]:
    files: list[Path] = []
    for top in (*PACKAGES, "tests", "bench"):
        files.extend(p for p in (ROOT / top).rglob("*.py") if "node_modules" not in p.parts)
    return files


def resolves(name: str) -> bool:
    """Import the longest prefix of ``name`` that is a module, then follow the rest as attributes."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_the_resolver_tells_a_moved_name_from_a_real_one() -> None:
    assert resolves("shared.sdk.errors.Cancelled")
    assert not resolves("shared.errors.Cancelled")
    assert not resolves("shared.sdk.errors.NoSuchError")


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_dotted_names_in_a_file_exist(path: Path) -> None:
    names = sorted({m.group(1) for m in _REF.finditer(path.read_text(encoding="utf-8"))})
    assert [n for n in names if not resolves(n)] == []
