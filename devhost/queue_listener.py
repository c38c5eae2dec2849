"""The queue trigger: poll a storage queue and invoke a function per message.

Semantics follow the WebJobs storage queues extension (QueueListener,
QueueProcessor and QueuesOptions, and the queue-trigger article on Learn):

* messages are received in batches of ``batchSize``; a new batch is fetched when
  the number still running drops to ``newBatchThreshold``, so at most
  ``batchSize + newBatchThreshold`` run at once per function and host;
* polling: 100 ms after a batch was found; on an empty queue the wait starts at
  about 200 ms and doubles (randomized) up to ``maxPollingInterval``;
* a message is received with a 10-minute visibility timeout that is renewed at
  half of it while the function runs (each update returns a new pop receipt);
  ``DEVHOST_QUEUE_VISIBILITY_SECONDS`` shortens it for tests;
* success deletes the message; failure (the function raised, or the worker died while running it) makes it
  visible again after
  ``visibilityTimeout``, or, once ``dequeue_count >= maxDequeueCount``, copies it
  to ``<queue>-poison`` and deletes it. A message received with
  ``dequeue_count > maxDequeueCount`` (its earlier runs crashed the host) goes
  to the poison queue without being run;
* with ``messageEncoding`` base64, a message that isn't valid base64 goes to the
  poison queue at once without being run (storage extension 5.x behaviour);
* the queue and the poison queue are created if missing.

Storage outages never stop a listener: a failed receive is a warning and
polling backs off as on an empty queue (up to ``maxPollingInterval``), then
resumes; a failed visibility renewal is retried every second (an unreachable
Storage is not a lost message); a queue that could not be created at start-up
is created once Storage answers.

Every host polls independently, so several hosts on one queue are competing
consumers: the visibility timeout is the only coordination, as in Azure.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import random
import threading
from concurrent.futures import ThreadPoolExecutor

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.queue import QueueClient, QueueMessage

from devhost import config, convert, invoker, storage
from devhost.config import QueueOptions
from devhost.functions import FunctionSpec

log = logging.getLogger("devhost")

MIN_POLL_SECONDS = 0.1  # QueuePollingIntervals.Minimum
EMPTY_POLL_START_SECONDS = 0.2
RENEW_RETRY_SECONDS = 1.0
DEFAULT_VISIBILITY_SECONDS = 600  # The host's receive visibility timeout: 10 minutes.


def visibility_seconds() -> int:
    return int(os.environ.get("DEVHOST_QUEUE_VISIBILITY_SECONDS") or DEFAULT_VISIBILITY_SECONDS)


def _gone(exc: HttpResponseError) -> bool:
    """The message was deleted or taken over by someone else: nothing left to do."""
    code = getattr(exc, "error_code", None)
    return isinstance(exc, ResourceNotFoundError) or code in ("PopReceiptMismatch", "MessageNotFound")


class _Renewer:
    """Keeps a running message invisible: updates it every half visibility timeout.

    Each update returns a new pop receipt, which later updates and the final
    delete must use; :meth:`stop` returns the latest one.
    """

    def __init__(self, client: QueueClient, message_id: str, pop_receipt: str | None, seconds: int) -> None:
        self._client = client
        self._id = message_id
        self.pop_receipt = pop_receipt
        self._seconds = seconds
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="devhost-renew", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wait = self._seconds / 2
        while not self._done.wait(wait):
            try:
                updated = self._client.update_message(
                    self._id, pop_receipt=self.pop_receipt, visibility_timeout=self._seconds
                )
                self.pop_receipt = updated.pop_receipt
                wait = self._seconds / 2
            except Exception as exc:  # noqa: BLE001 - Storage unreachable: retry, never die silently.
                code = getattr(exc, "error_code", None) or exc
                log.warning("could not renew visibility of message %s: %s", self._id, code)
                if isinstance(exc, HttpResponseError) and _gone(exc):
                    return
                wait = min(RENEW_RETRY_SECONDS, self._seconds / 2)

    def stop(self) -> str | None:
        self._done.set()
        self._thread.join()
        return self.pop_receipt


class QueueListener:
    """Polls one function's queue in a thread and runs messages in a thread pool."""

    def __init__(self, spec: FunctionSpec, options: QueueOptions, stopping: threading.Event) -> None:
        self.spec = spec
        self.options = options
        self.stopping = stopping
        self.connection = spec.trigger.get("connection")
        self.queue_name = config.resolve(str(spec.trigger["queueName"]))
        self.poison_name = f"{self.queue_name}-poison"
        self.visibility = visibility_seconds()
        self._running = 0
        self._cond = threading.Condition()
        self._pool = ThreadPoolExecutor(
            max_workers=options.batch_size + options.new_batch_threshold,
            thread_name_prefix=f"devhost-{spec.name}",
        )
        self._thread = threading.Thread(target=self._poll, name=f"devhost-poll-{spec.name}", daemon=True)

    def start(self) -> None:
        self.client = storage.queue(self.connection, self.queue_name, create=False)
        self._queue_ready = self._ensure_queue()
        self._thread.start()

    def _ensure_queue(self) -> bool:
        """Create the queue (once per process); False, with a warning, if Storage is unreachable."""
        try:
            storage.queue(self.connection, self.queue_name)
            return True
        except Exception as exc:  # noqa: BLE001 - Storage down at start-up: retried from the poll loop.
            log.warning("could not create queue %s (retrying while polling): %s", self.queue_name, exc)
            return False

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _poll(self) -> None:
        delay = EMPTY_POLL_START_SECONDS
        while not self.stopping.is_set():
            with self._cond:
                # Fetch a new batch only once the running count drops to newBatchThreshold.
                self._cond.wait_for(
                    lambda: self._running <= self.options.new_batch_threshold or self.stopping.is_set()
                )
            if self.stopping.is_set():
                break
            messages: list[QueueMessage] = []
            if not self._queue_ready:
                self._queue_ready = self._ensure_queue()
            if self._queue_ready:
                try:
                    messages = list(
                        self.client.receive_messages(
                            messages_per_page=self.options.batch_size,
                            max_messages=self.options.batch_size,
                            visibility_timeout=self.visibility,
                        )
                    )
                except Exception as exc:  # noqa: BLE001 - storage hiccups must not kill the listener.
                    log.warning("receive from queue %s failed: %s", self.queue_name, exc)
            if messages:
                for message in messages:
                    with self._cond:
                        self._running += 1
                    # Counted as activity from receipt on, so shutdown waits for it.
                    invoker.ACTIVITY.enter()
                    self._pool.submit(self._process_and_count, message)
                delay = EMPTY_POLL_START_SECONDS
                self.stopping.wait(MIN_POLL_SECONDS)
            else:
                self.stopping.wait(delay)
                # Randomized exponential back-off, capped at maxPollingInterval.
                delay = min(self.options.max_polling_interval, delay * 2 * random.uniform(0.8, 1.2))
        self._pool.shutdown(wait=False)

    def _process_and_count(self, message: QueueMessage) -> None:
        try:
            self.process(message)
        except Exception:
            log.exception("error handling message %s of queue %s", message.id, self.queue_name)
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()
            invoker.ACTIVITY.exit()

    def _decode(self, message: QueueMessage) -> bytes | None:
        text = message.content or ""
        if self.options.message_encoding == "base64":
            try:
                return base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                return None
        return text.encode("utf-8")

    def process(self, message: QueueMessage) -> None:
        body = self._decode(message)
        if body is None:
            self._poison(message, message.pop_receipt, "it is not valid base64")
            return
        if message.dequeue_count is not None and message.dequeue_count > self.options.max_dequeue_count:
            why = f"its dequeue count {message.dequeue_count} exceeds MaxDequeueCount"
            self._poison(message, message.pop_receipt, why)
            return
        renewer = _Renewer(self.client, message.id, message.pop_receipt, self.visibility)
        trigger, metadata = convert.queue_trigger(
            body,
            message_id=message.id,
            dequeue_count=message.dequeue_count,
            pop_receipt=message.pop_receipt,
            inserted_on=message.inserted_on,
            expires_on=message.expires_on,
            next_visible_on=message.next_visible_on,
        )
        try:
            reason = f"New queue message detected on '{self.queue_name}'."
            result = invoker.invoke(self.spec, trigger, reason=reason, trigger_metadata=metadata)
        finally:
            pop_receipt = renewer.stop()
        if result.succeeded:
            self._delete(message.id, pop_receipt)
        elif (message.dequeue_count or 0) >= self.options.max_dequeue_count:
            self._poison(message, pop_receipt, f"it has reached MaxDequeueCount of {self.options.max_dequeue_count}")
        else:
            try:
                self.client.update_message(
                    message.id, pop_receipt=pop_receipt, visibility_timeout=int(self.options.visibility_timeout)
                )
            except HttpResponseError as exc:
                if not _gone(exc):
                    raise

    def _delete(self, message_id: str, pop_receipt: str | None) -> None:
        try:
            self.client.delete_message(message_id, pop_receipt)
        except HttpResponseError as exc:
            # Someone else owns or deleted it (e.g. our visibility lapsed): theirs to finish.
            if not _gone(exc):
                raise
            log.warning("message %s of queue %s was taken over before it could be deleted", message_id, self.queue_name)

    def _poison(self, message: QueueMessage, pop_receipt: str | None, why: str) -> None:
        log.warning("Moving message %s to queue '%s': %s.", message.id, self.poison_name, why)
        # The text is copied unchanged (still encoded), as the host copies the message.
        storage.queue(self.connection, self.poison_name).send_message(message.content)
        self._delete(message.id, pop_receipt)
