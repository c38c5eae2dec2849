"""Start, stop and find the pinned Azurite (npm ``azurite@3.35.0``) for local runs and tests.

``python -m devhost.azurite`` runs it in the foreground. Tests and scripts use
:class:`Azurite` to start a private instance on free ports, or reuse one that is
already listening on the default ports.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
AZURITE_BIN = REPO_ROOT / "tools" / "azurite" / "node_modules" / ".bin" / "azurite"
DEFAULT_PORTS = (10000, 10001, 10002)
HOST = "127.0.0.1"
# Azurite's well-known development account. It is public and documented by
# Microsoft; it only ever opens a local emulator.
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _free_ports() -> tuple[int, int, int]:
    return free_port(), free_port(), free_port()


PORT_ATTEMPTS = 3


class _PortTaken(Exception):
    """A port Azurite was to listen on is another process's."""


def connection_string(blob: int, queue: int, table: int) -> str:
    if (blob, queue, table) == DEFAULT_PORTS:
        return "UseDevelopmentStorage=true"
    return (
        f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
        f"BlobEndpoint=http://{HOST}:{blob}/{DEV_ACCOUNT};"
        f"QueueEndpoint=http://{HOST}:{queue}/{DEV_ACCOUNT};"
        f"TableEndpoint=http://{HOST}:{table}/{DEV_ACCOUNT};"
    )


@dataclass
class Azurite:
    """One Azurite process with its own data folder."""

    ports: tuple[int, int, int] = DEFAULT_PORTS
    location: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _own_location: bool = field(default=False, repr=False)
    _own_ports: bool = field(default=False, repr=False)  # picked by private(): may be picked again

    @property
    def connection_string(self) -> str:
        return connection_string(*self.ports)

    def running(self) -> bool:
        return all(port_open(p) for p in self.ports)

    def start(self, timeout: float = 120.0) -> Azurite:
        """Start Azurite and wait for its ports (at most ``timeout`` s: it returns as soon as they open)."""
        if not AZURITE_BIN.exists():
            raise RuntimeError(f"{AZURITE_BIN} is missing: run scripts/bootstrap (npm install in tools/azurite)")
        if self.location is None:
            self.location = Path(tempfile.mkdtemp(prefix="azurite-"))
            self._own_location = True
        for attempt in range(PORT_ATTEMPTS):
            try:
                return self._start_once(timeout)
            except _PortTaken:
                # Ports picked free and bound later by node can be taken in between (parallel test workers
                # start many processes at once). Ports of our own choosing can be chosen again.
                if not self._own_ports or attempt == PORT_ATTEMPTS - 1:
                    raise RuntimeError(f"azurite could not bind its ports {self.ports}") from None
                self.ports = _free_ports()
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> Azurite:
        assert self.location is not None
        blob, queue, table = self.ports
        if any(port_open(p) for p in self.ports):
            raise _PortTaken
        cmd = [
            str(AZURITE_BIN), "--location", str(self.location), "--silent",
            "--skipApiVersionCheck", "--disableTelemetry", "--loose",
            "--blobHost", HOST, "--queueHost", HOST, "--tableHost", HOST,
            "--blobPort", str(blob), "--queuePort", str(queue), "--tablePort", str(table),
        ]
        # Own process group: a SIGKILL of a test never leaves node orphans behind.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.running():
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                if any(port_open(p) for p in self.ports):
                    raise _PortTaken  # another process has one of them: it exited with EADDRINUSE
                raise RuntimeError(f"azurite exited with {code}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("azurite did not open its ports in time")
            time.sleep(0.1)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the process but keep its data, so :meth:`start` resumes with the same state."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        deadline = time.monotonic() + 10
        while any(port_open(p) for p in self.ports) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.stop()
        if self._own_location and self.location is not None:
            shutil.rmtree(self.location, ignore_errors=True)

    @classmethod
    def private(cls) -> Azurite:
        """A new instance on free ports with a temporary data folder (not started)."""
        return cls(ports=_free_ports(), _own_ports=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devhost.azurite", description=__doc__)
    parser.add_argument("--location", type=Path, default=REPO_ROOT / ".azurite")
    args = parser.parse_args(argv)
    az = Azurite(location=args.location)
    if az.running():
        print("azurite is already listening on 10000-10002", file=sys.stderr)
        return 0
    args.location.mkdir(parents=True, exist_ok=True)
    az.start()
    print(f"azurite running (data in {args.location}); Ctrl-C stops it", file=sys.stderr)
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        signal.sigwait(signals)
    finally:
        az.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
