"""The azd prepackage hook: a deployment package carries the built int8 encoder, or the deploy stops (issue 17).

Azure's remote build installs requirements.txt only; it never runs the model build, so a package without the
built file would run on the slower fallback model without saying so.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path

from pipelines.thematic.models import SPECS, packaged_dir

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "infra" / "hooks" / "prepackage.sh"


def test_azd_runs_the_hook_before_packaging_the_api() -> None:
    yaml = (ROOT / "azure.yaml").read_text()
    assert re.search(r"\n  api:\n(?:    .*\n)*    hooks:\n(?:      #.*\n)*      prepackage:\n        posix:\n"
                     r"          shell: sh\n          run: \./infra/hooks/prepackage\.sh\n", yaml), yaml
    assert HOOK.stat().st_mode & 0o111


def test_the_hook_builds_or_checks_the_model_and_names_it() -> None:
    out = subprocess.run(["sh", str(HOOK)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{SPECS['minilm'].file_name} ships with the package (sha256 checked)" in out.stdout


def test_the_hook_refuses_without_the_build_environment(tmp_path: Path) -> None:
    env = {**os.environ, "THEMATIQ_PYTHON": str(tmp_path / "no-python")}
    out = subprocess.run(["sh", str(HOOK)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode != 0 and "scripts/bootstrap" in out.stderr


def test_funcignore_does_not_drop_the_built_model() -> None:
    """azd packages by .funcignore (not .gitignore, where the built file is ignored): nothing there may match it."""
    built = (packaged_dir() / SPECS["minilm"].file_name).relative_to(ROOT).as_posix()
    parts = built.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for line in (ROOT / ".funcignore").read_text().splitlines():
        pattern = line.strip().strip("/")
        if not pattern or pattern.startswith("#"):
            continue
        hit = [p for p in prefixes if fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p.rsplit("/", 1)[-1], pattern)]
        assert not hit, f".funcignore line {line!r} would leave {built} out of the package"
