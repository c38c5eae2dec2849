"""The zygote: a warm, single-threaded process that forks one child per attempt.

``python -m shared.runtime.zygote SOCKET`` is started once per worker host by
``shared.runtime.prefork``. It imports the platform, pydantic, the storage SDKs
and every registered pipeline's module, then listens on a Unix socket. Each
connection asks for one attempt: the host sends the child's ends of its pipes
(control in, events out, stderr) with ``SCM_RIGHTS`` and a small JSON request
(the spec path, the environment, the working directory); the zygote forks, answers
``pid N``, and later ``exit CODE`` (``Popen.returncode`` style: negative for a
signal) when it reaps the child.

Fork safety, by construction:

* **No Python threads.** The zygote never starts one, and checks at start-up that
  only the main thread exists (``threading.active_count() == 1``). The one native
  thread present is OpenBLAS's pool (numpy), which shuts itself down around ``fork``
  with ``pthread_atfork`` handlers. onnxruntime is *not* imported here: its import
  starts a thread, and the ONNX session is built in the child on first use.
* **No storage connections.** The SDKs are imported, never instantiated: no client,
  no socket, no connection pool exists before the fork. The child builds its clients
  on first use (``shared.storage.connections``), after resetting the caches.
* **No inherited state.** The child takes the host's environment from the request
  (so a setting changed since the zygote started is seen, as with ``spawn``),
  clears the settings cache, closes every descriptor but its own four, resets the
  signal handlers, and leaves only through ``os._exit``. ``random`` reseeds itself
  after ``fork``; job owners include the child's pid.

Lifetimes: the host holds the write end of the zygote's stdin (the lifeline);
end of file there means the host is gone, and the zygote SIGKILLs every attempt's
process group and exits. Each child is in its own process group (the host kills
the group on cancel and on timeout), has ``PR_SET_PDEATHSIG`` = SIGKILL towards the
zygote, and exits by itself when its control pipe from the host closes
(``shared.runtime.child``). A host that closes an attempt's connection early gets
that attempt's group killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib
import io
import json
import os
import selectors
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

#: Modules every attempt needs; imported once here instead of once per attempt.
WARM_MODULES = (
    "pydantic",
    "shared.runtime.child",
    "shared.runtime.fanout",
    "shared.core.lifecycle",
    "shared.storage.assembly",  # the stores the attempt builds (shared.runtime.child._attempt_stores)
    "shared.storage.blobs",
    "shared.llm.client",
    "azure.core",
    "azure.data.tables",
    "azure.storage.blob",
    "azure.storage.queue",
    "numpy",
)
_PR_SET_PDEATHSIG = 1
_HEADER = struct.Struct("!I")
EXIT_NO_START = 71
#: How long one fork request may take to arrive once its connection is accepted.
_REQUEST_TIMEOUT = 5.0


def warm_up() -> list[str]:
    """Import what attempts need; returns what could not be imported (logged by the host, not fatal)."""
    missing: list[str] = []
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    from shared.core.registry import declared_refs

    for ref in declared_refs().values():
        try:
            importlib.import_module(ref.partition(":")[0])
        except Exception:  # noqa: BLE001 - a broken plug-in fails its own attempts, not the zygote
            missing.append(ref)
    return missing


def _set_pdeathsig() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


#: Passed to the zygote so that its argv area has room for an attempt's title (see :func:`_set_title`).
TITLE_ROOM = "--title-room=" + "-" * 240


def _set_title(title: str) -> None:
    """Show the forked attempt as ``python -m shared.runtime.child SPEC`` in ``ps`` and ``/proc/PID/cmdline``.

    The kernel shows the bytes between ``arg_start`` and ``arg_end`` of the process's memory
    (fields 48 and 49 of ``/proc/self/stat``); overwriting them in place, as ``setproctitle``
    does, renames the process. The zygote's own command line was padded to make room.
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[45]), int(fields[46])  # fields 48 and 49, counted after pid and comm
        room = end - start
        data = title.encode()[: room - 1]
        ctypes.memmove(start, data + b"\0" * (room - len(data)), room)
    except (OSError, ValueError, IndexError):
        pass  # a cosmetic rename: the attempt runs the same without it


def _recv_exact(conn: socket.socket, n: int, first: bytes = b"") -> bytes:
    data = first
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("the host closed the connection mid-request")
        data += chunk
    return data


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    head, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 8)
    try:
        head = _recv_exact(conn, _HEADER.size, head)
        (length,) = _HEADER.unpack(head)
        return json.loads(_recv_exact(conn, length)), fds
    except BaseException:
        # The descriptors arrived with the header: a request that fails after them (a host that stalled past the
        # timeout or hung up, a body that is not JSON) must not leave them open in the long-lived zygote.
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise


def _child(request: dict[str, Any], fds: list[int], zygote_pid: int) -> int:
    """In the forked child: become the attempt process, run it, return its exit code."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _set_pdeathsig()
    if os.getppid() != zygote_pid:
        return EXIT_NO_START  # the zygote died between fork and prctl
    control, events, stderr = fds
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(control, 0)
    os.dup2(devnull, 1)
    os.dup2(stderr, 2)
    os.dup2(events, 3)
    for name in os.listdir("/proc/self/fd"):  # close what the zygote had open (far cheaper than closerange)
        if int(name) > 3:
            with contextlib.suppress(OSError):
                os.close(int(name))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # Nothing process-wide built from the zygote's environment survives into the attempt.
    from shared.config.settings import get_settings

    get_settings.cache_clear()
    connections = sys.modules.get("shared.storage.connections")
    if connections is not None:
        connections.reset_clients()
    _set_title(f"{sys.executable} -m shared.runtime.child {request['spec']} 3")
    from shared.runtime import child

    return child.main(["child", request["spec"], "3"])


def _fork_one(conn: socket.socket, request: dict[str, Any], fds: list[int], zygote_pid: int) -> int | None:
    """Fork the attempt's child; the child's pid, or None after answering ``error …`` (the fork failed).

    ``os.fork`` fails with EAGAIN or ENOMEM when the host is short of processes or memory: that is an
    answer for this one request, never a reason for the zygote (and every attempt it holds) to die.
    """
    try:
        pid = os.fork()
    except OSError as err:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(f"error fork failed: {errno.errorcode.get(err.errno or 0, 'unknown')}\n".encode())
        return None
    if pid == 0:
        code = 1
        try:
            code = _child(request, fds, zygote_pid)
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also set here, so the host can kill the group at once
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    return pid


def _answer(conn: socket.socket, zygote_pid: int, kill_group: Callable[[int], None]) -> int | None:
    """Serve one fork request; the child's pid to watch, or None (the request failed, its connection closed).

    Whatever goes wrong with one request (a malformed one, a failed fork, a host that hung up) ends
    that request only: the zygote goes on serving every other attempt.
    """
    try:
        try:
            # Bounded: a host thread that connected and then stalled must not stall every other attempt.
            conn.settimeout(_REQUEST_TIMEOUT)
            request, fds = _read_request(conn)
            conn.settimeout(None)
        except (OSError, EOFError, ValueError):
            conn.close()
            return None
        if request.get("ping"):
            # The host asks whether we still serve (a fork request of its timed out): answering is the proof.
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            with contextlib.suppress(OSError):
                conn.sendall(b"pong\n")
            conn.close()
            return None
        pid = _fork_one(conn, request, fds, zygote_pid)
        if pid is None:
            conn.close()
            return None
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            kill_group(pid)
        return pid
    except Exception:  # noqa: BLE001 - one request's failure must never end the zygote
        with contextlib.suppress(OSError):
            conn.close()
        return None


def serve(listener: socket.socket) -> None:
    zygote_pid = os.getpid()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(0, selectors.EVENT_READ, "lifeline")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    conns: dict[int, socket.socket] = {}  # child pid -> the host's connection for it

    def kill_group(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    while True:
        for key, _ in sel.select(timeout=1.0):
            if key.data == "lifeline":
                if not os.read(0, 4096):
                    # The host is gone: nobody owns these attempts any more.
                    for pid in conns:
                        kill_group(pid)
                    os._exit(0)
            elif key.data == "wake":
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 4096):
                        pass
            elif key.data == "accept":
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue  # the host gave up connecting (or a descriptor limit): that request only
                forked = _answer(conn, zygote_pid, kill_group)
                if forked is not None:
                    conns[forked] = conn
                    sel.register(conn, selectors.EVENT_READ, forked)
            else:
                # The host closed an attempt's connection before the attempt ended: kill it.
                pid = int(key.data)
                conn = key.fileobj  # type: ignore[assignment]
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    kill_group(pid)
                    sel.unregister(conn)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid not in conns:
                continue
            conn = conns.pop(pid)
            with contextlib.suppress(OSError):
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            with contextlib.suppress(KeyError, ValueError):
                sel.unregister(conn)
            conn.close()


def main(argv: list[str]) -> int:
    missing = warm_up()
    if threading.active_count() != 1:
        print("the zygote must not start threads before forking", file=sys.stderr)
        return 2
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(argv[1])
    listener.listen(64)
    sys.stdout.write(json.dumps({"ready": True, "missing": missing}) + "\n")
    sys.stdout.flush()
    serve(listener)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
