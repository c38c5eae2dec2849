"""Storage clients for bindings, found through the binding's ``connection`` setting.

A binding names an app setting (``connection``, default ``AzureWebJobsStorage``)
that holds the connection string, as in the real host. Clients are cached per
connection string and shared between threads (the sync SDK clients are
thread-safe for independent calls).

Retries are close to the .NET host's (Azure.Core: 3 retries, 0.8-3.2 s apart,
~5 s in all), not the Python SDK's default (15, 18, 24 s apart, ~90 s per call):
with that, a queue poll during a storage outage hung in one call for up to a
minute and a half and resumed up to ~25 s after Storage was back, instead of
failing with a warning and backing off as the queue listener does.
"""

from __future__ import annotations

import os
import threading

from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobServiceClient
from azure.storage.blob import ExponentialRetry as BlobRetry
from azure.storage.queue import ExponentialRetry as QueueRetry
from azure.storage.queue import QueueClient, QueueServiceClient

DEFAULT_CONNECTION = "AzureWebJobsStorage"
# Backoff is initial + base**n (n >= 1) +- jitter: about 1, 2, 2 s.
_INITIAL, _BASE, _RETRIES, _JITTER = 1, 1, 3, 1
_CONNECT_TIMEOUT = 5

_lock = threading.Lock()
_queue_services: dict[str, QueueServiceClient] = {}
_blob_services: dict[str, BlobServiceClient] = {}
_created: set[tuple[str, str]] = set()


def connection_string(connection: str | None) -> str:
    """The connection string in the app setting ``connection`` (also tried with the
    ``AzureWebJobs`` prefix, as the host does for short names)."""
    name = connection or DEFAULT_CONNECTION
    for candidate in (name, f"AzureWebJobs{name}"):
        value = os.environ.get(candidate)
        if value:
            return value
    raise KeyError(f"storage connection setting {name!r} is not set")


def queue_service(connection: str | None) -> QueueServiceClient:
    conn = connection_string(connection)
    with _lock:
        if conn not in _queue_services:
            _queue_services[conn] = QueueServiceClient.from_connection_string(
                conn,
                retry_policy=QueueRetry(
                    initial_backoff=_INITIAL, increment_base=_BASE, retry_total=_RETRIES, random_jitter_range=_JITTER
                ),
                connection_timeout=_CONNECT_TIMEOUT,
            )
        return _queue_services[conn]


def blob_service(connection: str | None) -> BlobServiceClient:
    conn = connection_string(connection)
    with _lock:
        if conn not in _blob_services:
            _blob_services[conn] = BlobServiceClient.from_connection_string(
                conn,
                retry_policy=BlobRetry(
                    initial_backoff=_INITIAL, increment_base=_BASE, retry_total=_RETRIES, random_jitter_range=_JITTER
                ),
                connection_timeout=_CONNECT_TIMEOUT,
            )
        return _blob_services[conn]


def queue(connection: str | None, name: str, create: bool = True) -> QueueClient:
    """A client for queue ``name``; creates the queue once per process if asked.

    No message encode/decode policy is set: the host encodes and decodes base64
    itself, because the SDK's decode policy raises on text that isn't base64.
    """
    client = queue_service(connection).get_queue_client(name)
    key = (connection_string(connection), name)
    if create and key not in _created:
        try:
            client.create_queue()
        except ResourceExistsError:
            pass
        _created.add(key)
    return client
