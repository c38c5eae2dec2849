"""Swagger UI's files for ``GET /api/docs``: from npm, pinned by a lock file, never committed.

npm ``swagger-ui-dist`` is pinned in ``tools/swagger-ui/package.json`` with its ``package-lock.json`` (version and
the tarball's sha512 integrity, which ``npm ci`` verifies). The build step (``python -m blueprints.swagger_assets``,
run by ``scripts/bootstrap`` and by the azd ``prepackage`` hook) installs it with ``npm ci --ignore-scripts`` (the
package's one dependency, ``@scarf/scarf``, is an install-time analytics ping: it never runs) and copies the two
files the page inlines, with the package's LICENSE and NOTICE, into ``web/static/build/swagger-ui/``: git-ignored,
and not excluded by ``.funcignore``, so the deployment package carries it. Next to them it writes
``manifest.json``: the package, its version and integrity from the lock, and the sha256 of every copied file.

At run time :func:`load` refuses a file whose sha256 is not the one recorded when it was copied out of the
integrity-checked package, and, where the lock is present (a development tree; ``tools/`` is not deployed), a
build made from another version than the lock names. Updating Swagger UI is therefore one version change in
``tools/swagger-ui/package.json`` plus its regenerated lock (``npm install --package-lock-only``), then the
build step.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
NPM_DIR: Final = ROOT / "tools" / "swagger-ui"
PACKAGE: Final = "swagger-ui-dist"
#: The files the page inlines.
SERVED: Final = ("swagger-ui-bundle.js", "swagger-ui.css")
#: Shipped beside them: the package's licence terms travel with the files (Apache-2.0 asks for both).
LICENCE_FILES: Final = ("LICENSE", "NOTICE")
MANIFEST: Final = "manifest.json"
BUILD_STEP: Final = "scripts/bootstrap (or: .venv/bin/python -m blueprints.swagger_assets)"


class AssetsMissing(RuntimeError):
    """The build step has not put Swagger UI's files where the app reads them."""


class AssetsMismatch(RuntimeError):
    """A file does not match the sha256 recorded at build time, or the build is of another version than the lock."""


def build_dir() -> Path:
    """``web/static/build/swagger-ui/``, or ``THEMATIQ_SWAGGER_UI_DIR`` (tests point it at an empty folder)."""
    override = os.environ.get("THEMATIQ_SWAGGER_UI_DIR")
    return Path(override) if override else ROOT / "web" / "static" / "build" / "swagger-ui"


@dataclass(frozen=True)
class Pin:
    version: str
    integrity: str


def locked(npm_dir: Path = NPM_DIR) -> Pin | None:
    """The version and integrity ``package-lock.json`` pins, or None where the lock is not shipped (a deployment)."""
    lock = npm_dir / "package-lock.json"
    if not lock.is_file():
        return None
    entry = json.loads(lock.read_text(encoding="utf-8"))["packages"][f"node_modules/{PACKAGE}"]
    return Pin(str(entry["version"]), str(entry["integrity"]))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load(directory: Path | None = None, npm_dir: Path = NPM_DIR) -> dict[str, str]:
    """The served files' texts by name, each checked against the manifest (and the manifest against the lock)."""
    d = directory or build_dir()
    manifest_path = d / MANIFEST
    if not manifest_path.is_file():
        raise AssetsMissing(f"Swagger UI is not installed in {d}: run {BUILD_STEP}")
    try:
        manifest: dict[str, Any] = json.loads(manifest_path.read_text(encoding="utf-8"))
        recorded: dict[str, str] = dict(manifest["files"])
    except (ValueError, KeyError, TypeError) as err:
        raise AssetsMismatch(f"{manifest_path} is not a manifest this build step wrote: run {BUILD_STEP}") from err
    pin = locked(npm_dir)
    if pin is not None and (manifest.get("version"), manifest.get("integrity")) != (pin.version, pin.integrity):
        raise AssetsMismatch(
            f"{d} holds {PACKAGE} {manifest.get('version')} but the lock pins {pin.version}: run {BUILD_STEP}"
        )
    out: dict[str, str] = {}
    for name in SERVED:
        path = d / name
        if not path.is_file():
            raise AssetsMissing(f"{path} is missing: run {BUILD_STEP}")
        data = path.read_bytes()
        if _sha256(data) != recorded.get(name):
            raise AssetsMismatch(f"{path} does not match the sha256 recorded when it was installed: run {BUILD_STEP}")
        out[name] = data.decode("utf-8")
    return out


def watched(directory: Path | None = None) -> tuple[Path, ...]:
    """The files whose change rebuilds the page."""
    d = directory or build_dir()
    return (d / MANIFEST, *(d / n for n in SERVED))


def install(*, fresh: bool = False, npm_dir: Path = NPM_DIR, dest: Path | None = None) -> Path:
    """Install the pinned package with ``npm ci`` (unless already installed at the locked version) and copy it out.

    ``fresh`` (the prepackage hook) always reinstalls, so what ships was just verified against the lock.
    The new build is written into a temp folder and renamed into place; a request that falls between the two
    renames, or between reading the manifest and the files, is refused (503) rather than served a mix.
    """
    pin = locked(npm_dir)
    if pin is None:
        raise AssetsMissing(f"{npm_dir}/package-lock.json is missing")
    src = npm_dir / "node_modules" / PACKAGE
    installed = src / "package.json"
    current = json.loads(installed.read_text(encoding="utf-8")).get("version") if installed.is_file() else None
    if fresh or current != pin.version:
        npm = shutil.which("npm")
        if npm is None:
            raise AssetsMissing("npm is required to install Swagger UI (Node.js 20)")
        subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--silent"], cwd=npm_dir, check=True)
        current = json.loads(installed.read_text(encoding="utf-8")).get("version")
    if current != pin.version:
        raise AssetsMismatch(f"npm installed {PACKAGE} {current}, the lock pins {pin.version}")
    target = dest or build_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".swagger-ui-"))
    files: dict[str, str] = {}
    for name in (*SERVED, *LICENCE_FILES):
        data = (src / name).read_bytes()
        (tmp / name).write_bytes(data)
        files[name] = _sha256(data)
    manifest = {"package": PACKAGE, "version": pin.version, "integrity": pin.integrity, "files": files}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    tmp.chmod(0o755)
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def main(argv: list[str]) -> int:
    """``python -m blueprints.swagger_assets [--fresh]``: install and copy; prints what it wrote."""
    target = install(fresh="--fresh" in argv)
    load(target)
    pin = locked()
    assert pin is not None
    print(f"swagger-ui: {PACKAGE} {pin.version} in {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
