"""Storage clients, created once per process and reused, plus a transaction meter.

Locally ``AzureWebJobsStorage`` holds a connection string (Azurite). In Azure
the app uses identity-based access: ``AzureWebJobsStorage__accountName`` (or
the per-service ``__blobServiceUri`` etc.) with ``__credential=managedidentity``
and ``__clientId``; no key ever appears in settings or code.

Every client carries a response hook (``shared.observability.metering``) that counts HTTP
requests by service and operation: each is a billed Storage transaction.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from azure.core.credentials import TokenCredential
from azure.core.pipeline import PipelineResponse
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.blob import ExponentialRetry as BlobRetry
from azure.storage.queue import ExponentialRetry as QueueRetry
from azure.storage.queue import QueueClient, QueueServiceClient, TextBase64EncodePolicy

from shared.config.settings import get_settings, raw
from shared.observability.metering import METER
from shared.storage.tables import TableClient, TableServiceClient

# Fail fast enough for the API to answer 503 while Storage is down, but ride
# out a blip. Storage's default backoff starts at 15 s, far too slow for an API.
_CONNECT_TIMEOUT = 5
_READ_TIMEOUT = 30
_RETRIES = 2
# Storage SDK backoff is initial + base**n, then ±jitter: here 1-3 s per retry, 6 s at most in all.
# The earlier 1/2/jitter 3 slept up to 14 s, so while Storage was down an API request (e.g. health)
# hung for 10 s+ before its 503 (tests/e2e/fault/test_faults.py: storage outage).
_BACKOFF_INITIAL, _BACKOFF_BASE, _BACKOFF_JITTER = 1, 1, 1


class _Clients:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.table_service: TableServiceClient | None = None
        self.queue_service: QueueServiceClient | None = None
        self.blob_service: BlobServiceClient | None = None
        self.tables: dict[str, TableClient] = {}
        self.queues: dict[str, QueueClient] = {}
        self.containers: dict[str, ContainerClient] = {}
        self.created: set[str] = set()


_clients = _Clients()


def reset_clients() -> None:
    """Forget cached clients (tests change settings between cases)."""
    global _clients
    _clients = _Clients()


def _credential() -> TokenCredential:
    # Imported lazily: azure.identity costs ~0.3 s of cold start and local runs never need it.
    from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

    client_id = raw("AzureWebJobsStorage__clientId") or None
    if raw("AzureWebJobsStorage__credential").lower() == "managedidentity":
        return ManagedIdentityCredential(client_id=client_id)
    return DefaultAzureCredential(managed_identity_client_id=client_id)


def _endpoint(service: str) -> str:
    uri = raw(f"AzureWebJobsStorage__{service}ServiceUri")
    if uri:
        return uri
    account = raw("AzureWebJobsStorage__accountName")
    if not account:
        raise RuntimeError("Storage is not configured: set AzureWebJobsStorage or AzureWebJobsStorage__accountName")
    return f"https://{account}.{service}.core.windows.net"


#: What ``requests`` reads from the environment on every request when it is allowed to (``trust_env``):
#: proxies and netrc are left to it; a CA bundle is passed on explicitly instead (see ``_transport``).
_PROXY_SETTINGS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "netrc")
_CA_BUNDLE_SETTINGS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def _transport() -> Any | None:
    """A requests transport that skips requests' per-request scan of the environment, where that scan finds nothing.

    That scan (proxies, no_proxy, the CA bundle, netrc) costs about 6 % of a submission's CPU (py-spy on
    ``bench/platform.py --sections submit``). With a proxy or netrc setting requests keeps reading the
    environment as before (None: the SDK's default transport); a CA bundle setting is honoured by passing it.
    """
    if any(name.lower() in _PROXY_SETTINGS for name in os.environ):
        return None
    from azure.core.pipeline.transport import RequestsTransport

    bundle = next((os.environ[n] for n in _CA_BUNDLE_SETTINGS if os.environ.get(n)), None)
    return RequestsTransport(
        use_env_settings=False, connection_timeout=_CONNECT_TIMEOUT, read_timeout=_READ_TIMEOUT,
        **({"connection_verify": bundle} if bundle else {}),
    )


def _common(service: str) -> dict[str, Any]:
    # The hook feeds the process's METER, not a platform's meter: these clients are cached per process (one
    # connection pool per account, each resource created once), so one hook per process. The platform on Azure
    # Storage (``Platform.from_settings``) takes METER as its meter; a platform on the fake has its own, which the
    # fake's clients count on (``memory_stores(fake, meter)``).
    hook: Callable[[PipelineResponse[Any, Any]], None] = partial(METER.hook, service)
    options: dict[str, Any] = {
        "raw_response_hook": hook, "connection_timeout": _CONNECT_TIMEOUT, "read_timeout": _READ_TIMEOUT,
    }
    transport = _transport()
    if transport is not None:
        options["transport"] = transport
    return options


_Service = TypeVar("_Service", TableServiceClient, QueueServiceClient, BlobServiceClient)


def _build(kind: str, cls: type[_Service], **options: Any) -> _Service:
    """A service client from the connection string (local) or the identity settings (Azure)."""
    kw = {**_common(kind), **options}
    conn = raw("AzureWebJobsStorage")
    if conn:
        # The SDK types from_connection_string as returning its own class, not Self (our tables subclass).
        return cls.from_connection_string(conn, **kw)  # type: ignore[return-value]
    return cls(_endpoint(kind), credential=_credential(), **kw)


def _retry(cls: type[QueueRetry] | type[BlobRetry]) -> QueueRetry | BlobRetry:
    return cls(
        initial_backoff=_BACKOFF_INITIAL,
        increment_base=_BACKOFF_BASE,
        retry_total=_RETRIES,
        random_jitter_range=_BACKOFF_JITTER,
    )


def table_service() -> TableServiceClient:
    with _clients.lock:
        if _clients.table_service is None:
            _clients.table_service = _build("table", TableServiceClient, retry_total=_RETRIES, retry_backoff_factor=0.5)
        return _clients.table_service


def queue_service() -> QueueServiceClient:
    with _clients.lock:
        if _clients.queue_service is None:
            # The Functions queue trigger expects base64 text.
            _clients.queue_service = _build(
                "queue",
                QueueServiceClient,
                retry_policy=_retry(QueueRetry),
                message_encode_policy=TextBase64EncodePolicy(),
            )
        return _clients.queue_service


def blob_service() -> BlobServiceClient:
    with _clients.lock:
        if _clients.blob_service is None:
            _clients.blob_service = _build("blob", BlobServiceClient, retry_policy=_retry(BlobRetry))
        return _clients.blob_service


def get_table_client(name: str | None = None) -> TableClient:
    """The jobs table (or ``name``); created in Storage on first use in this process."""
    name = name or get_settings().jobs_table
    client = _clients.tables.get(name)
    if client is None:
        client = table_service().get_table_client(name)
        _ensure(f"table:{name}", lambda: table_service().create_table_if_not_exists(name))
        _clients.tables[name] = client
    return client


def get_queue_client(name: str | None = None) -> QueueClient:
    """The jobs queue (or ``name``), sending base64 text as the queue trigger expects."""
    name = name or get_settings().jobs_queue
    client = _clients.queues.get(name)
    if client is None:
        client = queue_service().get_queue_client(name, message_encode_policy=TextBase64EncodePolicy())
        _ensure(f"queue:{name}", lambda: _create_queue(client))
        _clients.queues[name] = client
    return client


def get_container_client(name: str | None = None) -> ContainerClient:
    name = name or get_settings().results_container
    client = _clients.containers.get(name)
    if client is None:
        client = blob_service().get_container_client(name)
        _ensure(f"container:{name}", lambda: _create_container(client))
        _clients.containers[name] = client
    return client


def _create_queue(client: QueueClient) -> None:
    from azure.core.exceptions import ResourceExistsError

    try:
        client.create_queue()
    except ResourceExistsError:
        pass


def _create_container(client: ContainerClient) -> None:
    from azure.core.exceptions import ResourceExistsError

    try:
        client.create_container()
    except ResourceExistsError:
        pass


def _ensure(key: str, create: Callable[[], object]) -> None:
    # Creating resources lazily keeps the API usable on a fresh Azurite; in
    # Azure the Bicep template has created them already and this is one
    # idempotent call per process.
    if key in _clients.created:
        return
    create()
    _clients.created.add(key)
