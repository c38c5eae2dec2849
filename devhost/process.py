"""Run ``python -m devhost`` as a child process from tests, benchmarks and scripts.

Example::

    from devhost.process import HostProcess

    with HostProcess(app_dir, env={"AzureWebJobsStorage": conn}) as host:
        urllib.request.urlopen(host.url + "/api/health")
    print(host.logs)

* The child runs in its own session (process group), so :meth:`kill` also
  takes down anything it started, and Ctrl-C in the terminal doesn't reach it.
* Its stdout and stderr go to a log file (never a pipe, which could fill up and
  block the host); :attr:`logs` reads it back, :attr:`log_path` locates it.
* :meth:`start` returns when ``GET /admin/host/status`` answers or, with
  ``--no-http`` or an app without HTTP functions, when the ready line appears.
  It raises with the log tail if the host exits or doesn't get ready in time.
* ``env`` is added to this process's environment (it wins over
  local.settings.json in the child). ``port=None`` picks a free port.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_LINE = "devhost ready"


# The host's ready line: "devhost ready: 7 functions, http://127.0.0.1:50123, pid …" (or "no HTTP").
_READY = re.compile(re.escape(READY_LINE) + r": \d+ functions, (?:http://[^:\s]+:(\d+)|no HTTP)")


class HostProcess:
    """One ``python -m devhost`` child process."""

    def __init__(
        self,
        app_dir: str | Path = REPO_ROOT,
        env: dict[str, str] | None = None,
        port: int | None = None,
        args: list[str] | None = None,
        grace: float | None = None,
        python: str = sys.executable,
        log_path: str | Path | None = None,
    ) -> None:
        self.app_dir = Path(app_dir).resolve()
        self.env = dict(env or {})
        # None: the host binds port 0 and the ready line says which port it got. A port picked here and bound
        # there could be taken in between by another process (a parallel test run did so: "Address already in use").
        self.port: int | None = port
        self.args = list(args or [])
        self.grace = grace
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="devhost-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:50123`` (routes add ``/api/...``); known once the host is ready."""
        if self.port is None:
            raise RuntimeError("the host's port is known once it is ready: call start() first")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def worker_pid(self) -> int | None:
        """The pid of the host's language worker, where the functions run (the latest, after a restart)."""
        pids = re.findall(r"worker pid (\d+)|language worker restarted \(pid (\d+)\)", self.logs)
        return int(next(p for p in pids[-1] if p)) if pids else None

    @property
    def logs(self) -> str:
        """Everything the host wrote so far (stderr and stdout)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 120.0) -> HostProcess:
        """Start the host and wait until it is ready (at most ``timeout`` s: it returns as soon as it is; a host's
        imports and its language worker's start take several times longer on a loaded machine)."""
        # A restart keeps the port the first start got, so URLs handed out stay valid.
        port = 0 if self.port is None else self.port
        cmd = [self.python, "-m", "devhost", "--app-dir", str(self.app_dir), "--port", str(port), *self.args]
        if self.grace is not None:
            cmd += ["--grace", str(self.grace)]
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        # devhost must be importable whatever the app dir is.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self._wait_ready(timeout)
        return self

    def _http_ready(self) -> bool:
        try:
            # S310: the URL is always http://127.0.0.1.
            with urllib.request.urlopen(self.url + "/admin/host/status", timeout=1) as r:  # noqa: S310
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"devhost exited with {self.proc and self.proc.returncode}:\n{self.logs[-4000:]}")
            logs = self.logs
            ready = _READY.search(logs)
            if ready and ready.group(1) is None:
                return  # no HTTP
            if ready:
                self.port = int(ready.group(1))
                # Also wait for the port to answer: the ready line is printed just after it opens.
                if self._http_ready():
                    return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"devhost not ready after {timeout}s:\n{self.logs[-4000:]}")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to the host process only (not its group)."""
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def wait(self, timeout: float | None = None) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 60.0) -> int | None:
        """Graceful stop: SIGTERM, wait up to ``timeout``, then SIGKILL. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the whole process group at once (simulates a crashed instance)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def __enter__(self) -> HostProcess:
        return self if self.proc else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
