"""The dev host's stop signal (devhost/stopsignal.py): a handler that records only, and a wait that polls."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from devhost.stopsignal import StopSignal


@pytest.fixture
def sigterm_restored() -> Iterator[None]:
    assert threading.current_thread() is threading.main_thread(), "signal handlers are set from the main thread"
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        signal.signal(signal.SIGTERM, previous)


def test_a_signal_another_thread_takes_still_ends_the_main_wait(sigterm_restored: None) -> None:
    # The kernel may hand a process-directed signal to any thread that does not block it. Then only the C-level
    # flag is set, and a main thread asleep in an untimed Event.wait() (the first dev host) is never woken to
    # run the Python handler: the host keeps serving. Block SIGTERM in the main thread to force that delivery.
    stop = StopSignal(poll_seconds=0.05)
    stop.install((signal.SIGTERM,))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def deliver_to_this_thread() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # a new thread inherits the block
        # Sent once the main thread is (very likely) asleep in wait(). Sent earlier, the handler runs before the
        # wait and the test passes anyway: the delay decides only whether the old design could fail it (with an
        # Event it then waited out its whole timeout), never whether this one passes.
        time.sleep(0.3)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    t = threading.Thread(target=deliver_to_this_thread)
    t.start()
    try:
        # The bound only stops a hang; a polling wait returns one poll step after the signal, however loaded.
        assert stop.wait(timeout=30) == signal.SIGTERM
    finally:
        t.join()


def test_the_handler_takes_no_lock_another_thread_holds() -> None:
    # A handler runs between two bytecodes of the main thread; one that logs waits on the logging locks (or
    # finds the stream mid-write), and one that sets an Event waits on its condition lock. This one does neither.
    stop = StopSignal()
    locks = [logging._lock, *(h.lock for h in logging.getLogger().handlers if h.lock is not None)]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        for lock in locks:
            lock.acquire()
        held.set()
        release.wait(30)
        for lock in reversed(locks):
            lock.release()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        stop.handle(signal.SIGTERM, None)
        assert release.is_set() is False  # it returned while every lock was still held
        assert stop.received == signal.SIGTERM
    finally:
        release.set()
        holder.join()


def test_wait_times_out_without_a_signal() -> None:
    assert StopSignal(poll_seconds=0.01).wait(timeout=0.05) is None
