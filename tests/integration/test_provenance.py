"""The repository holds what this project wrote (issue 28): third-party code and data come from package managers.

* No tracked file over 200 KB except the project's own images and lock files (an explicit allow-list).
* No tracked file is a byte-for-byte copy of a file that an installed package ships (the Python venv, the npm
  tools), whatever its size: that is how Swagger UI and the MiniLM tokenizer used to be committed.
* What the build steps copy out of packages is git-ignored, and NOTICE names each package and what it brings.
"""

from __future__ import annotations

import fnmatch
import hashlib
import subprocess
import sysconfig
from collections import defaultdict
from pathlib import Path

from blueprints import swagger_assets
from pipelines.thematic.models import SPECS, packaged_dir

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 200_000
#: Large files the project itself makes: screenshots its browser tests take, and the package managers' locks.
ALLOWED_LARGE = ("docs/img/*.png", "tools/*/package-lock.json", "requirements*.txt")
#: Below this, copies are too likely to be coincidental boilerplate (an empty __init__.py, a short licence line).
MIN_COPY_BYTES = 2_048


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_large_file_the_project_did_not_write() -> None:
    large = {p.relative_to(ROOT).as_posix(): p.stat().st_size for p in _tracked() if p.stat().st_size > LIMIT}
    unexpected = {p: n for p, n in large.items() if not any(fnmatch.fnmatch(p, pat) for pat in ALLOWED_LARGE)}
    assert not unexpected, f"files over {LIMIT} bytes that are not the project's own images or locks: {unexpected}"


def _package_roots() -> list[Path]:
    roots = {Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"])}
    roots |= set((ROOT / "tools").glob("*/node_modules"))
    return sorted(r for r in roots if r.is_dir())


def test_no_tracked_file_is_a_copy_of_a_file_an_installed_package_ships() -> None:
    tracked = [p for p in _tracked() if p.stat().st_size >= MIN_COPY_BYTES]
    by_size: dict[int, list[Path]] = defaultdict(list)
    for p in tracked:
        by_size[p.stat().st_size].append(p)
    roots = _package_roots()
    assert roots, "no installed packages found: run scripts/bootstrap"
    copies: list[str] = []
    for root in roots:
        for f in root.rglob("*"):
            if any(part.startswith(("thematiq-", "__editable__")) for part in f.relative_to(root).parts):
                continue  # this project's own editable install: its metadata copies our NOTICE
            try:
                if not f.is_file() or f.is_symlink():
                    continue
                size = f.stat().st_size
            except OSError:
                continue
            same = by_size.get(size)
            if not same:
                continue
            digest = _sha256(f)
            copies += [f"{p.relative_to(ROOT)} = {f}" for p in same if _sha256(p) == digest]
    assert not copies, "tracked files copied from installed packages (install them instead):\n" + "\n".join(copies)


def test_what_the_build_steps_copy_out_of_packages_is_git_ignored() -> None:
    spec = SPECS["minilm"]
    built = [packaged_dir() / g.file_name for g in spec.graphs] + [packaged_dir() / spec.tokenizer_name]
    built += [swagger_assets.ROOT / "web/static/build/swagger-ui" / n for n in (*swagger_assets.SERVED, "manifest.json")]
    rel = [p.relative_to(ROOT).as_posix() for p in built]
    out = subprocess.run(["git", "check-ignore", "--no-index", *rel], cwd=ROOT, capture_output=True, text=True)
    assert sorted(out.stdout.split()) == sorted(rel), out.stdout + out.stderr


def test_notice_names_every_package_and_what_it_brings() -> None:
    notice = (ROOT / "NOTICE").read_text(encoding="utf-8")
    pin = swagger_assets.locked()
    assert pin is not None
    assert f"swagger-ui-dist@{pin.version}" in notice and pin.integrity in notice
    for spec in SPECS.values():
        name, version = spec.weights.distribution.split()[0].split("==")
        assert name in notice and f"=={version}" in notice, spec.key
        assert spec.weights.tokenizer[2] in notice, f"the {spec.key} tokenizer's sha256"
        for g in spec.graphs:
            assert g.file_name in notice and g.sha256 in notice, g.file_name
    for name in ("pipelines/thematic/assets/NOTICE", "web/static/vendor"):
        assert not (ROOT / name).exists(), f"{name}: nothing is vendored any more"
