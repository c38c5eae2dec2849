"""The concrete stores: the one module that puts a :class:`Stores` together, on Azure Storage or on the fake.

Only the composition roots import it (``shared.platform`` for a host process, ``shared.runtime.child``'s entry for
an attempt's process); import-linter holds everything else to the ports (``shared.core.ports.Stores``), so no
worker, service or reaper can reach past its injected stores to an account of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from shared.config.settings import get_settings
from shared.core.ports import Stores
from shared.storage.blobs import BlobStore
from shared.storage.chunk_store import ChunkStore
from shared.storage.job_store import JobStore
from shared.storage.queues import Queues

if TYPE_CHECKING:  # an attempt's process builds Azure stores only: it need not import the fake
    from azure.storage.blob import ContainerClient

    from shared.observability.metering import TransactionMeter
    from shared.storage.fake import FakeStorage
    from shared.storage.tables import TableClient


def azure_stores() -> Stores:
    """The stores on the storage account of this deployment's settings.

    Each store finds its SDK client when it is called (clients are cached per process by
    ``shared.storage.connections``), so a bundle built once stays right after the settings cache is cleared.
    """
    return Stores(jobs=JobStore(), chunks=ChunkStore(), messages=Queues(), blobs=BlobStore())


def memory_stores(fake: FakeStorage, meter: TransactionMeter | None = None) -> Stores:
    """The stores on one in-memory account, named by the settings as they are now (the fast tier's backend).

    With a ``meter``, every request these stores make is counted on it (as a real client's response hook counts
    on ``METER``); another bundle on the same account counts on its own.
    """
    s = get_settings()
    # The fake's clients answer as the SDK's do (tests/contract holds them to Azurite's answers); they are not
    # subclasses of them, hence the casts.
    table = cast("TableClient", fake.table(s.jobs_table, meter=meter))
    return Stores(
        jobs=JobStore(table=table),
        chunks=ChunkStore(table=table),
        messages=Queues(queue_for=lambda name: fake.queue(name or s.jobs_queue, meter=meter)),
        blobs=BlobStore(container=cast("ContainerClient", fake.container(s.results_container, meter=meter))),
    )


__all__ = ["azure_stores", "memory_stores"]
