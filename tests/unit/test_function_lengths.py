"""No function in ``shared/`` or ``pipelines/`` is over 80 lines (issue 26's target), so each reads on one screen.

A table-like builder may be longer if its docstring says why (it contains "longer than 80 lines because").
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80


def _long_functions() -> list[str]:
    found = []
    for package in ("shared", "pipelines"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.end_lineno is None:
                    continue
                lines = node.end_lineno - node.lineno + 1
                if lines > LIMIT and "longer than 80 lines because" not in (ast.get_docstring(node) or ""):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_shared_or_pipelines_is_over_80_lines() -> None:
    assert _long_functions() == []
