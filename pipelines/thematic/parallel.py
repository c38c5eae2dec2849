"""Independent units of a stage's numpy work on a few threads, with the results of running them one by one.

Every attempt's numpy runs one BLAS thread (``shared/runtime/blas.py``: 1- and 2-thread OpenBLAS products round
differently, so a result would depend on the instance). The embedding uses both cores anyway, as two one-thread
onnxruntime sessions; this is the same idea for the cluster stage (issue 27): units that do not depend on each other
(a k-means run of the silhouette curve, a bisection of the split path, a restart of the final partition, a block of
the neighbour search) run on worker threads, each still on one BLAS thread, so each unit computes exactly the floats
it computes alone, and the caller combines the results in its own fixed order. numpy releases the GIL inside its
matrix products and most array loops, which is where these units spend their time.

``Units(threads)``: ``threads - 1`` worker threads beside the calling thread, which works too: when it asks for a
unit no worker has started, it runs that unit itself, and while it waits for one a worker runs, it runs queued
units no worker has started (so it never idles while work is queued, and nothing deadlocks however units are
nested). ``threads <= 1``: no thread at all; ``submit`` calls the function there and then, so the work runs in
the calling thread in the order the caller submits it (an exception is raised by ``submit`` itself).

A unit's exception is raised where its result is asked for, in that thread. Leaving the ``with`` block (normally
or by an exception, e.g. a cancellation or a unit's error raised in the caller) starts no further unit: the units
no worker has started are dropped, the workers finish the one they hold and are joined before the block is left
(as the embedding's sessions do, ``embed._run_parallel``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_PENDING, _RUNNING, _DONE, _DROPPED = range(4)


class Unit(Generic[T]):
    """One submitted unit: ``result()`` waits for it, or runs it now if no worker has started it."""

    __slots__ = ("_call", "_done", "_error", "_lock", "_state", "_units", "_value")

    def __init__(self, call: Callable[[], T] | None, units: Units | None) -> None:
        self._call, self._units = call, units
        self._state = _PENDING
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    def _claim(self, state: int = _RUNNING) -> bool:
        with self._lock:
            if self._state != _PENDING:
                return False
            self._state = state
            return True

    def _run(self) -> None:
        call, self._call = self._call, None  # a finished unit holds only its result, not its inputs
        try:
            assert call is not None
            self._value = call()
        except BaseException as err:  # noqa: BLE001 - raised again by result(), in the thread that asks
            self._error = err
        finally:
            self._state = _DONE
            self._done.set()

    def result(self) -> T:
        if self._claim():
            self._run()
        # A worker runs it: meanwhile run queued units no worker has started (the caller would idle otherwise).
        while not self._done.is_set() and self._units is not None and self._units._help():
            pass
        self._done.wait()
        if self._error is not None:
            raise self._error
        if self._state == _DROPPED:
            raise RuntimeError("unit dropped: its Units block was left before it ran")
        return self._value  # type: ignore[return-value]  # set by _run when there is no error


class Units:
    """Run units on ``threads - 1`` worker threads and the calling thread (see the module docstring)."""

    def __init__(self, threads: int, *, name: str = "thematiq-units") -> None:
        self.threads = max(1, int(threads))
        self._name = name
        self._queue: queue.SimpleQueue[Unit[Any] | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._open = False

    def __enter__(self) -> Units:
        self._open = True
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Drop the units no worker has started, let the workers finish theirs, and join them."""
        self._open = False
        self._drop_queued()
        self._stop_workers()

    def _drop_queued(self) -> None:
        while True:
            try:
                u = self._queue.get_nowait()
            except queue.Empty:
                break
            if u is not None and u._claim(_DROPPED):
                u._call = None
                u._done.set()

    def _stop_workers(self) -> None:
        for _ in self._workers:
            self._queue.put(None)
        for w in self._workers:
            w.join()
        self._workers.clear()

    def submit(self, fn: Callable[..., T], *args: Any) -> Unit[T]:
        """``fn(*args)`` as a unit. ``fn`` must not depend on when, or in which thread, it runs."""
        if self.threads == 1:
            # One thread: the call, here and now, as the code ran before units (an exception leaves submit).
            u: Unit[T] = Unit(None, None)
            u._value, u._state = fn(*args), _DONE
            u._done.set()
            return u
        if not self._open:
            raise RuntimeError("Units.submit outside its with block")
        if len(self._workers) < self.threads - 1:
            w = threading.Thread(target=self._work, name=f"{self._name}-{len(self._workers)}", daemon=True)
            w.start()
            self._workers.append(w)
        u = Unit(lambda: fn(*args), self)
        self._queue.put(u)
        return u

    def _help(self) -> bool:
        """Run the next queued unit, if no worker has started it, in the calling thread; False when none is queued."""
        try:
            u = self._queue.get_nowait()
        except queue.Empty:
            return False
        if u is None:  # a worker's stop sentinel (close() is under way): leave it for the worker
            self._queue.put(None)
            return False
        if u._claim():
            u._run()
        return True

    def _work(self) -> None:
        while True:
            u = self._queue.get()
            if u is None:
                return
            if u._claim():
                u._run()
