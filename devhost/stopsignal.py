"""The host's stop signal: a handler that only records, and a main-thread wait that polls.

Python runs a signal handler in the main thread, between two bytecodes of whatever that thread was doing. The
first dev host's handler logged and called ``threading.Event.set()`` there, and the main thread parked in
``Event.wait()`` with no timeout. Three ways that can stop a host from ever stopping, all timing-dependent, which
fits the one parallel CI run in which a SIGTERM'd host kept answering for 60 s:

- the kernel may deliver a process-directed signal to any thread that does not block it; the C-level handler
  then only sets a flag, and a main thread asleep in an untimed lock wait is never woken to run the Python one;
- ``Event.set()`` takes the event's condition lock, which the main thread itself holds for a few bytecodes on
  its way into (and out of) ``wait()``: a signal landing there waits on a lock its own thread holds;
- logging takes the stream handler's lock and writes to a buffered stream that the interrupted code may be in
  the middle of writing (``RuntimeError: reentrant call``), and the error skips the ``set()`` after it.

So the handler here touches no lock and does no I/O beyond ``os.write`` and ``os._exit`` for a second signal,
and :meth:`StopSignal.wait` sleeps in short steps: each wake-up runs bytecode, and with it any pending handler.
"""

from __future__ import annotations

import os
import signal
import time
from types import FrameType

SECOND_SIGNAL_EXIT = 130  # 128 + SIGINT, what a shell reports for ^C


class StopSignal:
    """SIGTERM/SIGINT: the first asks for a graceful stop, a second exits at once."""

    def __init__(self, poll_seconds: float = 0.2) -> None:
        self.poll_seconds = poll_seconds
        self.received: int | None = None  # The first signal's number; written only by the handler.
        self._seen = 0

    def install(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        for signum in signals:
            signal.signal(signum, self.handle)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        # No logging, no locks: see the module docstring. The main loop logs once wait() returns.
        self._seen += 1
        if self._seen > 1:
            os.write(2, b"second signal: exiting now\n")
            os._exit(SECOND_SIGNAL_EXIT)
        self.received = signum

    def wait(self, timeout: float | None = None) -> int | None:
        """Block the main thread until the first signal; its number, or None after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.received is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(self.poll_seconds)
        return self.received
