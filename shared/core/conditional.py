"""The one primitive every state change is built on: a conditional write whose outcome is decided by re-reading.

A write to Table Storage can end three ways, and the caller cannot tell two of
them apart from the answer alone:

* it failed cleanly (a 412 because someone else wrote first, a 503 that was never applied);
* it committed and the answer was lost (a connection reset or read timeout after the
  service applied it: azure-core does not retry MERGE or ``$batch`` then, so we see
  ``StorageUnavailable``);
* it committed, the answer was a 5xx, and the SDK's own retry came back 412 or 409
  for the write that had already happened.

So after a 412 or an ambiguous error the primitive re-reads the row and asks the
transition whether the fresh row shows *its* write (``landed``: the ``op`` token it
wrote, or an owner it set). If so the transition happened. If not, it plans again on
the fresh row: the transition may still apply (only a heartbeat or a cancel request
changed the row), or no longer apply (someone else claimed, finished or cancelled
the job), and the caller learns which. It never guesses.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shared.config.constants import (
    AMBIGUOUS_REREAD_DELAYS,
    CONDITIONAL_BACKOFF_CAP_SECONDS,
    CONDITIONAL_BACKOFF_SECONDS,
    CONDITIONAL_TRIES,
)
from shared.core.errors import Contended, EtagMismatch, StorageUnavailable

log = logging.getLogger(__name__)

Row = TypeVar("Row")


@dataclass(frozen=True)
class Applied(Generic[Row]):
    """The result of a transition: the latest row, and whether this transition is what made it so."""

    row: Row
    applied: bool


def new_op() -> str:
    return uuid.uuid4().hex[:16]


def reread(read: Callable[[], Row]) -> Row:
    """Read the row after an ambiguous write, riding out a short outage; StorageUnavailable if it stays away."""
    last: StorageUnavailable | None = None
    for delay in (0.0, *AMBIGUOUS_REREAD_DELAYS):
        if delay:
            time.sleep(delay)
        try:
            return read()
        except StorageUnavailable as err:
            last = err
    assert last is not None
    raise last


def apply(
    current: Row,
    *,
    read: Callable[[], Row],
    write: Callable[[Row, dict[str, Any]], Row],
    plan: Callable[[Row], dict[str, Any] | None],
    name: str,
    landed: Callable[[Row], bool] | None = None,
    tries: int = CONDITIONAL_TRIES,
) -> Applied[Row]:
    """Apply ``plan(current)`` with a conditional write, re-planning on the fresh row until it lands or no longer applies.

    ``plan`` returns the fields to MERGE, or None when the transition does not apply to
    that row. Every write carries this call's ``op`` token, so a fresh row whose ``op`` is
    ours shows that our write landed; ``landed`` can add another sign (the owner a claim
    set), for when someone else wrote after us. ``tries`` bounds the rounds lost to other
    writers before :class:`Contended`.
    """
    op = new_op()
    row = current
    for tried in range(tries):
        fields = plan(row)
        if fields is None:
            return Applied(row, False)
        try:
            return Applied(write(row, {**fields, "op": op}), True)
        except EtagMismatch:
            # A 412 is exactly what the SDK's retry of a committed write returns: the read that
            # decides must ride out a blip like any other.
            fresh = reread(read)
        except StorageUnavailable as err:
            if not err.maybe_applied:
                raise  # never sent: nothing to decide, the caller retries or answers 503
            # The write may have committed: only the row can say.
            log.info("%s: storage did not answer a write; re-reading to decide", name)
            fresh = reread(read)
        if getattr(fresh, "op", None) == op or (landed is not None and landed(fresh)):
            return Applied(fresh, True)
        row = fresh
        if tried + 1 == tries:
            break
        # Lost to another writer. A writer that chains on the ETag its own last write returned
        # needs one round trip where a loser needs two (read, write), so it can starve the
        # loser: a cancel between two heartbeat loops lost 8 rounds in a row on Azurite. A
        # full-jitter, doubling pause (capped) spreads the rounds out.
        time.sleep(random.uniform(0, min(CONDITIONAL_BACKOFF_CAP_SECONDS, CONDITIONAL_BACKOFF_SECONDS * 2**tried)))
    raise Contended(f"{name}: the row kept changing under {tries} attempts")
