"""The azd prepackage hook: a deployment package carries what the build steps make, or the deploy stops.

Azure's remote build installs requirements.txt only; it never runs the model build or npm, so a package without
the built files would run on the slower fallback model (issue 17), without a tokenizer, or without Swagger UI
(issue 28), none of which is in git.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path

from blueprints import swagger_assets
from pipelines.thematic.models import SPECS, packaged_dir

ROOT = Path(__file__).resolve().parents[3]
HOOK = ROOT / "infra" / "hooks" / "prepackage.sh"


def test_azd_runs_the_hook_before_packaging_the_api() -> None:
    yaml = (ROOT / "azure.yaml").read_text()
    assert re.search(r"\n  api:\n(?:    .*\n)*    hooks:\n(?:      #.*\n)*      prepackage:\n        posix:\n"
                     r"          shell: sh\n          run: \./infra/hooks/prepackage\.sh\n", yaml), yaml
    assert HOOK.stat().st_mode & 0o111


def _shipped() -> list[Path]:
    spec = SPECS["minilm"]
    return [*(packaged_dir() / g.file_name for g in spec.graphs), packaged_dir() / spec.tokenizer_name,
            swagger_assets.build_dir()]


def test_the_hook_builds_or_checks_every_graph_the_tokenizer_and_swagger_ui_and_names_them() -> None:
    out = subprocess.run(["sh", str(HOOK)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    for path in _shipped():
        assert f"{path.relative_to(ROOT).as_posix()} ships with the package (sha256 checked)" in out.stdout
    # Swagger UI was installed afresh from the lock, and what it copied matches.
    assert swagger_assets.load()


def test_the_hook_refuses_without_the_build_environment(tmp_path: Path) -> None:
    env = {**os.environ, "THEMATIQ_PYTHON": str(tmp_path / "no-python")}
    out = subprocess.run(["sh", str(HOOK)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode != 0 and "scripts/bootstrap" in out.stderr


def test_funcignore_does_not_drop_what_the_hook_ships() -> None:
    """azd packages by .funcignore (not .gitignore, where the built files are ignored): nothing there may match them."""
    for path in _shipped():
        built = (path / swagger_assets.MANIFEST if path.is_dir() else path).relative_to(ROOT).as_posix()
        parts = built.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        for line in (ROOT / ".funcignore").read_text().splitlines():
            pattern = line.strip().strip("/")
            if not pattern or pattern.startswith("#"):
                continue
            hit = [p for p in prefixes
                   if fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p.rsplit("/", 1)[-1], pattern)]
            assert not hit, f".funcignore line {line!r} would leave {built} out of the package"
