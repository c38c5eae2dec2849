"""scripts/bootstrap repairs a .venv it cannot install into, rather than stopping at its first pip call.

A venv without pip is what `python -m venv` leaves when ensurepip is missing or interrupted, or what `uv venv`
makes; its python is the right version, so the version check alone kept it, and every later run stopped at
"No module named pip".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_venv_without_pip_is_recreated(tmp_path: Path) -> None:
    tree = tmp_path / "clone"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "bootstrap", tree / "scripts" / "bootstrap")
    for name in ("requirements.in", "requirements.txt", "requirements-models.txt", "pyproject.toml"):
        (tree / name).write_text("")
    # A package no index holds: with PIP_NO_INDEX the first real install fails at once, after the venv step.
    (tree / "requirements-dev.txt").write_text("thematiq-bootstrap-probe-that-does-not-exist==1\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tree / ".venv")], check=True, timeout=120)
    venv_python = tree / ".venv" / "bin" / "python"
    assert subprocess.run([venv_python, "-m", "pip", "--version"], capture_output=True).returncode != 0
    links = tmp_path / "no-wheels"
    links.mkdir()
    env = {**os.environ, "PYTHON": sys.executable, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    out = subprocess.run(["bash", str(tree / "scripts" / "bootstrap")], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=300)
    assert "No module named pip" not in out.stderr, out.stdout + out.stderr
    assert "bootstrap: .venv has no pip: recreating it" in out.stdout, out.stdout + out.stderr
    assert subprocess.run([venv_python, "-m", "pip", "--version"], capture_output=True).returncode == 0
    # It went on to the packages (and stopped there only because this test's index is empty).
    assert "thematiq-bootstrap-probe-that-does-not-exist" in out.stderr, out.stdout + out.stderr
