"""Pre-forked attempt processes: ``ATTEMPT_PROCESS=fork`` (the default on Linux).

Starting a fresh interpreter per attempt costs 0.3–0.5 s of CPU (the platform,
pydantic, the SDKs and the pipeline module are imported again each time). Here
each worker host keeps one *zygote* (``shared.runtime.zygote``) that has already
imported them, and every attempt is a fresh ``fork`` of it: the same isolation as
``spawn`` (its own process, its own process group, its own memory; a crash, an
out-of-memory kill, a segfault or a SIGKILL fails that attempt only and its exit
status is recorded), without the import tax.

:class:`ForkRunner` is an :class:`~shared.runtime.runner.AttemptRunner` that only
changes how the process starts: supervision, heartbeats, fencing, cancellation
(the whole process group is SIGKILLed) and the timeout are the same code.

The zygote is started by the host on first use, without threads of its own (the
host's threads are irrelevant: it is started with ``fork``+``exec`` by
``subprocess``, so it begins single-threaded). A zygote that died is replaced on
the next attempt; an attempt whose zygote died before the fork is started on the
replacement. The host's death ends everything: the zygote reads end of file on its
lifeline (its stdin) and kills its children, who also have ``PR_SET_PDEATHSIG`` and
watch their own control pipe from the host. See ``shared.runtime.zygote`` for the
fork-safety rules.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from shared.runtime.runner import APP_ROOT, AttemptRunner, ChildProcess, child_env
from shared.runtime.zygote import TITLE_ROOM

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!I")
#: How long a zygote may take to import everything on start.
_READY_TIMEOUT = 120.0
#: How long to wait for the zygote to report a killed child's exit status.
_REAP_TIMEOUT = 10.0
#: How long a fork request may wait for the zygote's answer (a fork takes milliseconds; this is for a loaded host).
_FORK_ANSWER_TIMEOUT = 30.0
#: How long the zygote has to answer a ping once a request failed: past it, it is wedged and is replaced.
_PING_TIMEOUT = 5.0


def fork_supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")


class ZygoteError(RuntimeError):
    """The zygote could not start an attempt (after one replacement)."""


class ForkRefused(ZygoteError):
    """The zygote answered that it could not fork this attempt (``os.fork`` failed): this attempt fails, it lives on."""


class ForkedProcess:
    """A child of the zygote, seen through the zygote's connection: ``pid``, ``poll``, ``wait``, ``stdin``."""

    def __init__(self, conn: socket.socket, pid: int, control: IO[bytes], buffered: bytes = b"") -> None:
        self._conn = conn
        self.pid = pid
        self.stdin: IO[bytes] | None = control
        self._returncode: int | None = None
        self._buffer = b""
        if buffered:  # read together with the pid: a quick child's exit status
            self._take(buffered)

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def _read(self, timeout: float | None) -> None:
        if self._returncode is not None:
            return
        self._conn.settimeout(timeout)
        try:
            chunk = self._conn.recv(4096)
        except (BlockingIOError, TimeoutError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            # The zygote died without reporting: PR_SET_PDEATHSIG has SIGKILLed the child.
            self._done(-int(signal.SIGKILL))
            return
        self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line.startswith(b"exit "):
                self._done(int(line[5:]))

    def _done(self, code: int) -> None:
        self._returncode = code
        with contextlib.suppress(OSError):
            self._conn.close()

    def poll(self) -> int | None:
        self._read(0.0)
        return self._returncode

    def wait(self, timeout: float | None = None) -> int:
        """Like ``Popen.wait``: the exit status, or ``TimeoutExpired`` after ``timeout`` seconds.

        Without a timeout (after a SIGKILL of the group) it waits up to ``_REAP_TIMEOUT`` for the
        zygote's report, then treats the child as gone.
        """
        deadline = time.monotonic() + (_REAP_TIMEOUT if timeout is None else timeout)
        while self._returncode is None:
            left = deadline - time.monotonic()
            if left <= 0:
                if timeout is not None:
                    raise subprocess.TimeoutExpired(f"attempt {self.pid}", timeout)
                # The zygote does not answer: the group was SIGKILLed; treat it as gone.
                self._done(-int(signal.SIGKILL))
                break
            self._read(min(left, 1.0))
        assert self._returncode is not None
        return self._returncode


def read_fork_answer(conn: socket.socket) -> tuple[int, bytes]:
    """The zygote's ``pid N`` line, and any bytes after it.

    A quick child's ``exit CODE`` may arrive in the same read as its pid; those bytes belong to the
    :class:`ForkedProcess`. (Taking them for a malformed answer once made the host replace a healthy
    zygote, which killed every other attempt on it.)
    """
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(64)
        if not chunk:
            raise ConnectionError("the zygote closed the connection before forking")
        data += chunk
    line, _, rest = data.partition(b"\n")
    if line.startswith(b"error "):
        raise ForkRefused(line[6:200].decode("utf-8", "replace"))
    if not line.startswith(b"pid "):
        raise ConnectionError(f"unexpected answer from the zygote: {line[:40]!r}")
    return int(line[4:]), rest


class Zygote:
    """The host's zygote: started on first use, replaced when it died. One per host process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None
        self._owner = os.getpid()
        self.started = 0
        #: A background start (:func:`prewarm`) is under way.
        self.warming = False

    @property
    def socket_path(self) -> str:
        assert self._dir is not None
        return os.path.join(self._dir, "zygote.sock")

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._owner == os.getpid()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        self._stop()
        self._owner = os.getpid()
        self._dir = tempfile.mkdtemp(prefix="thematiq-zygote-")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "shared.runtime.zygote", self.socket_path, TITLE_ROOM],
            stdin=subprocess.PIPE,  # the lifeline: end of file means this host is gone
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(APP_ROOT),
            env=child_env(),
            start_new_session=True,
        )
        assert self._proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self._proc.stdout, selectors.EVENT_READ)
        ready = sel.select(_READY_TIMEOUT)
        sel.close()
        line = self._proc.stdout.readline() if ready else b""
        if not line:
            self._stop()
            raise ZygoteError("the zygote did not start")
        missing = json.loads(line).get("missing") or []
        if missing:
            log.warning("the zygote could not preload %s; attempts import them themselves", ", ".join(missing))
        self.started += 1
        log.info("zygote %d ready (pre-imported the platform, the SDKs and the pipelines)", self._proc.pid)

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(5)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def close(self) -> None:
        with self._lock:
            self._stop()

    def ping(self, timeout: float | None = None) -> bool:
        """Whether the zygote answers a ping within ``timeout`` (``_PING_TIMEOUT``): it is serving, not wedged.

        A zygote that is alive but does not answer (stopped, stuck in a system call, its accept queue not
        drained) would fail every attempt after ``_FORK_ANSWER_TIMEOUT``, for ever, since ``alive()`` only asks
        the kernel whether the process exists.
        """
        deadline = time.monotonic() + (_PING_TIMEOUT if timeout is None else timeout)
        with self._lock:
            if not self.alive():
                return False
            path = self.socket_path
        request = b'{"ping":true}'
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(max(0.001, deadline - time.monotonic()))
            conn.connect(path)
            conn.sendall(_HEADER.pack(len(request)) + request)
            data = b""
            while b"\n" not in data:
                conn.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = conn.recv(16)
                if not chunk:
                    return False
                data += chunk
            return data.startswith(b"pong\n")
        except OSError:
            return False
        finally:
            conn.close()

    def ensure(self) -> None:
        with self._lock:
            if not self.alive():
                if self._proc is not None:
                    log.warning("zygote %d died (%s); starting a new one", self._proc.pid, self._proc.poll())
                self._start()

    def fork(self, spec_path: Path, fds: list[int]) -> tuple[socket.socket, int, bytes]:
        """Ask the zygote for a child running ``spec_path`` on ``fds`` (control, events, stderr).

        Returns the connection, the child's pid and whatever the zygote sent after the pid line.
        """
        request = json.dumps(
            {"spec": str(spec_path), "cwd": str(APP_ROOT),
             "env": child_env()}
        ).encode()
        last: Exception | None = None
        for _ in range(2):
            self.ensure()
            target = self.pid
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.settimeout(_FORK_ANSWER_TIMEOUT)
                conn.connect(self.socket_path)
                socket.send_fds(conn, [_HEADER.pack(len(request))], fds)
                conn.sendall(request)
                pid, rest = read_fork_answer(conn)
                return conn, pid, rest
            except ForkRefused:
                conn.close()
                raise
            except (OSError, ValueError) as err:
                conn.close()
                last = err
                if self.pid == target and self.ping():
                    # This request failed (a bad descriptor, a timeout, a reset), the zygote did not: it answers.
                    # Replacing it would SIGKILL every attempt it holds. Only this attempt fails.
                    log.warning("zygote could not fork this attempt (%s); it answers a ping and stays",
                                type(err).__name__)
                    raise ZygoteError(f"the zygote could not start the attempt: {err}") from err
                with self._lock:
                    if self.pid == target:  # not replaced meanwhile by another attempt's thread
                        # Gone, or alive and not answering within _PING_TIMEOUT (wedged): its attempts cannot be
                        # reported on either, so they are lost with it (PR_SET_PDEATHSIG ends them).
                        log.warning("zygote %s could not fork an attempt (%s) and is gone or does not answer a "
                                    "ping; replacing it", target, type(err).__name__)
                        self._stop()
        raise ZygoteError(f"the zygote could not start the attempt: {last}")


_ZYGOTE = Zygote()
_ZYGOTE_LOCK = threading.Lock()


def zygote() -> Zygote:
    """This host process's zygote."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE._owner != os.getpid():
            _ZYGOTE = Zygote()  # a forked copy of a host must not share its parent's zygote
        return _ZYGOTE


#: With :func:`prewarm` ``(spawn_meanwhile=True)``, an attempt that arrives while the host's *first* zygote is still
#: importing runs in a fresh interpreter (as ``ATTEMPT_PROCESS=spawn``) instead of waiting for it: the host starts
#: its zygote at its first queue invocation (``Platform.warm_attempts``), not at import, so that an instance that
#: serves only HTTP never keeps one, and a spawned attempt imports only its own pipeline (0.6 s of CPU for a
#: no-op one) where the zygote imports numpy and every pipeline. A module switch, so a bench can turn it off.
SPAWN_WHILE_WARMING = True
_SPAWN_MEANWHILE = threading.Event()


def prewarm(*, spawn_meanwhile: bool = False) -> None:
    """Start this host's zygote in the background, so the first attempt does not wait for its imports (with
    ``spawn_meanwhile``, attempts run spawned until the first zygote is ready: :data:`SPAWN_WHILE_WARMING`)."""
    z = zygote()
    if spawn_meanwhile and SPAWN_WHILE_WARMING:
        _SPAWN_MEANWHILE.set()
    z.warming = True

    def start() -> None:
        try:
            z.ensure()
        except Exception:
            log.warning("could not start the zygote ahead of the first attempt", exc_info=True)
        finally:
            z.warming = False

    threading.Thread(target=start, name="thematiq-zygote-start", daemon=True).start()


def spawn_meanwhile() -> bool:
    """Whether an attempt starting now should be spawned: the host's first zygote is still starting."""
    if not _SPAWN_MEANWHILE.is_set():
        return False
    z = zygote()
    return z.warming and z.started == 0  # its process may exist already: ready is when it answered "ready"


class ForkRunner(AttemptRunner):
    """An attempt in a fresh fork of the host's zygote; everything else as :class:`AttemptRunner`."""

    def _start(self, spec_path: Path, event_fd: int, stderr_fd: int) -> ChildProcess:
        if spawn_meanwhile():
            log.info("%s: the zygote is still starting; this attempt runs in a fresh interpreter", self.lease.label)
            return super()._start(spec_path, event_fd, stderr_fd)
        control_r, control_w = os.pipe()
        try:
            conn, pid, rest = zygote().fork(spec_path, [control_r, event_fd, stderr_fd])
        except BaseException:
            os.close(control_w)
            raise
        finally:
            os.close(control_r)
        conn.settimeout(None)
        return ForkedProcess(conn, pid, os.fdopen(control_w, "wb"), rest)


def child_rss_mb(pid: int) -> float | None:
    """Resident memory of a process in MiB (tests and the admission log), or None if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


__all__ = ["ForkRefused", "ForkRunner", "ForkedProcess", "Zygote", "ZygoteError", "fork_supported", "prewarm", "read_fork_answer", "zygote"]
