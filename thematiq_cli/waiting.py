"""Poll a job until it ends, showing progress.

On a terminal the progress is one line redrawn in place (status, stage, a bar,
processed/total, elapsed time); otherwise (CI logs, pipes) a plain line is
printed when something changes, and at most every ``quiet_every`` seconds
while nothing does, so logs stay short.

Polling is cheap and paced by the service: each look is a conditional GET
(304 while nothing changed), spaced by the job's ``Retry-After``, and it honours
``Retry-After`` when the service is briefly unavailable.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from .client import ApiError, Client, ConnectionFailed, dump_job
from .terminal import visible

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
BAR_WIDTH = 24
#: Consecutive transient errors tolerated while polling before giving up.
MAX_TRANSIENT_ERRORS = 10


@dataclass
class Poller:
    """Timing knobs, separate so tests can make them fast."""

    min_interval: float = 0.25
    max_interval: float = 5.0
    factor: float = 1.5
    quiet_every: float = 15.0
    sleep: Callable[[float], None] = time.sleep


def fmt_elapsed(seconds: float) -> str:
    s = int(max(0, seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def progress_text(job: dict[str, Any], elapsed: float, width: int | None = None, bar: bool = True) -> str:
    """One line: ``running  embed  [#####.....]  120/400  30%  0:07  message``."""
    p = job.get("progress") or {}
    status = str(job.get("status", "?"))
    parts = [f"{status:<9}"]
    stage = str(p.get("stage") or "")
    if stage:
        parts.append(f"{stage:<9}")
    processed, total = p.get("processed") or 0, p.get("total")
    if isinstance(total, int) and total > 0:
        frac = min(1.0, max(0.0, processed / total))
        if bar:
            filled = round(frac * BAR_WIDTH)
            parts.append("[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]")
        parts.append(f"{processed}/{total} {frac:4.0%}")
    elif processed:
        parts.append(f"{processed}")
    parts.append(fmt_elapsed(elapsed))
    if status == "retrying":
        parts.append(f"attempt {job.get('attempts')}/{job.get('max_attempts')}")
    if job.get("cancel_requested") and status not in TERMINAL:
        parts.append("cancelling")
    if p.get("message"):
        parts.append(str(p["message"]))
    # The message is the pipeline's text: one line, nothing in it acts on the terminal (thematiq_cli.terminal).
    line = visible("  ".join(parts)).replace("\n", " ")
    if width is not None and len(line) > width:
        line = line[: max(0, width - 1)] + "…"
    return line


class ProgressLine:
    """Writes progress to ``out``: redrawn in place on a TTY, periodic lines otherwise."""

    def __init__(self, out: TextIO, tty: bool | None = None, quiet_every: float = 15.0) -> None:
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self.quiet_every = quiet_every
        self._last_key: tuple[Any, ...] | None = None
        self._last_print = 0.0
        self._drawn = False

    def update(self, job: dict[str, Any], elapsed: float) -> None:
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            # \r + clear-to-end-of-line: redraw in place without leftovers from a longer line.
            self.out.write("\r\x1b[K" + progress_text(job, elapsed, width))
            self.out.flush()
            self._drawn = True
            return
        p = job.get("progress") or {}
        key = (job.get("status"), p.get("stage"), p.get("processed"), p.get("total"), job.get("attempts"))
        now = time.monotonic()
        if key != self._last_key or now - self._last_print >= self.quiet_every:
            self.out.write(progress_text(job, elapsed, bar=False) + "\n")
            self.out.flush()
            self._last_key, self._last_print = key, now

    def finish(self) -> None:
        """End the in-place line so later output starts on a fresh line."""
        if self.tty and self._drawn:
            self.out.write("\n")
            self.out.flush()
            self._drawn = False


def wait_for_job(
    client: Client,
    job_id: str,
    out: TextIO | None = None,
    poller: Poller | None = None,
    timeout: float | None = None,
    show: bool = True,
    tty: bool | None = None,
) -> dict[str, Any]:
    """Poll ``job_id`` until it reaches a terminal status; returns the final job JSON.

    Each look is a conditional GET (the client sends the last ETag, so an unchanged job is
    a 304), paced by the ``Retry-After`` the service suggests for this job, within
    ``poller.min_interval``..``poller.max_interval``; without a suggestion the pace backs
    off while the job sits still. Raises :class:`TimeoutError` after ``timeout`` seconds.
    ``KeyboardInterrupt`` propagates (after ending the progress line) so the caller can
    print a hint.
    """
    poller = poller or Poller()
    line = ProgressLine(out or sys.stderr, tty=tty, quiet_every=poller.quiet_every) if show else None
    started = time.monotonic()
    interval = poller.min_interval
    errors = 0
    try:
        while True:
            try:
                seen = client.poll(job_id)
                errors = 0
            except (ApiError, ConnectionFailed) as err:
                # A restarting host or a storage blip should not abort a long wait.
                transient = isinstance(err, ConnectionFailed) or err.transient
                errors += 1
                if not transient or errors > MAX_TRANSIENT_ERRORS:
                    raise
                delay = err.retry_after if isinstance(err, ApiError) and err.retry_after else interval
                poller.sleep(min(poller.max_interval * 2, delay))
                interval = min(poller.max_interval, interval * poller.factor)
                continue
            job = dump_job(seen.job)
            elapsed = time.monotonic() - started
            if line:
                line.update(job, elapsed)
            if job.get("status") in TERMINAL:
                return job
            if timeout is not None and elapsed > timeout:
                raise TimeoutError(f"job {job_id} is still {job.get('status')} after {timeout:g}s")
            if seen.retry_after is not None:
                interval = seen.retry_after
            elif seen.changed:
                interval = poller.min_interval * 2  # moving jobs are polled quickly
            else:
                interval = interval * poller.factor  # idle ones less and less often
            interval = max(poller.min_interval, min(poller.max_interval, interval))
            if timeout is not None:
                interval = min(interval, max(0.05, timeout - elapsed))
            poller.sleep(interval)
    finally:
        if line:
            line.finish()
