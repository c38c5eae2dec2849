"""Sending messages: jobs and chunks to their queues (optionally delayed), and to the poison queues."""

from __future__ import annotations

from datetime import timedelta

from shared.connections import get_queue_client
from shared.constants import POISON_SUFFIX
from shared.messages import ChunkMessage, JobMessage
from shared.settings import get_settings
from shared.storage_errors import storage_call

# A message may stay invisible for at most 7 days.
_MAX_DELAY = timedelta(days=7)


def send(message: JobMessage | ChunkMessage, delay: timedelta | None = None) -> None:
    """A job message to the jobs queue, a chunk message to the chunks queue."""
    queue = get_settings().chunks_queue if isinstance(message, ChunkMessage) else None
    seconds = 0 if delay is None else int(min(delay, _MAX_DELAY).total_seconds())
    with storage_call("enqueue"):
        get_queue_client(queue).send_message(message.encode(), visibility_timeout=seconds or None)


def send_poison(text: str, queue: str | None = None) -> None:
    """Park a message in ``<queue>-poison`` (the jobs queue by default) for an operator, as the Functions host does."""
    with storage_call("enqueue poison"):
        get_queue_client((queue or get_settings().jobs_queue) + POISON_SUFFIX).send_message(text)
