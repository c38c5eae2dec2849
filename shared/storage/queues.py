"""Sending messages: jobs, chunks and webhook deliveries to their queues (optionally delayed), and to the poison
queues."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from shared.config.constants import POISON_SUFFIX
from shared.config.settings import get_settings
from shared.core.messages import ChunkMessage, JobMessage
from shared.core.webhooks import WebhookMessage
from shared.storage.connections import get_queue_client
from shared.storage.errors import storage_call

# A message may stay invisible for at most 7 days.
_MAX_DELAY = timedelta(days=7)

#: Returns the client of a queue by name (None: the jobs queue). Clients encode text as base64,
#: as the Functions queue trigger expects.
QueueFor = Callable[[str | None], Any]


class Queues:
    def __init__(self, queue_for: QueueFor | None = None) -> None:
        self._queue_for = queue_for or get_queue_client

    def send(self, message: JobMessage | ChunkMessage | WebhookMessage, delay: timedelta | None = None) -> None:
        """A job message to the jobs queue, a chunk message to the chunks queue, a webhook delivery to the
        callbacks queue."""
        settings = get_settings()
        queue = (settings.chunks_queue if isinstance(message, ChunkMessage)
                 else settings.callbacks_queue if isinstance(message, WebhookMessage) else None)
        # Whole seconds, rounded up: a backoff is never shorter than asked.
        seconds = 0 if delay is None else math.ceil(min(delay, _MAX_DELAY).total_seconds())
        with storage_call("enqueue"):
            self._queue_for(queue).send_message(message.encode(), visibility_timeout=seconds or None)

    def send_poison(self, text: str, queue: str | None = None) -> None:
        """Park a message in ``<queue>-poison`` (the jobs queue by default), as the Functions host does."""
        with storage_call("enqueue poison"):
            self._queue_for((queue or get_settings().jobs_queue) + POISON_SUFFIX).send_message(text)

    def oldest_visible(self, queue: str | None = None) -> datetime | None:
        with storage_call("peek queue"):
            for message in self._queue_for(queue).peek_messages(max_messages=1):
                inserted: datetime | None = message.inserted_on
                return inserted
        return None

    def depth(self, queue: str | None = None) -> int:
        with storage_call("queue depth"):
            return int(self._queue_for(queue).get_queue_properties().approximate_message_count or 0)
