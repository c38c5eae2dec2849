"""The stores on Azure Storage (or Azurite), and the one place they are wired together."""

from __future__ import annotations

from shared.core.ports import Stores


def azure_stores() -> Stores:
    """The stores on the storage account of this deployment's settings (clients are cached per process)."""
    from shared.storage.blobs import BlobStore
    from shared.storage.chunk_store import ChunkStore
    from shared.storage.job_store import JobStore
    from shared.storage.queues import Queues

    return Stores(jobs=JobStore(), chunks=ChunkStore(), messages=Queues(), blobs=BlobStore())


# Registers the fairness window's store with shared.core.fairness (which may not import this layer).
from shared.storage import fairness_store as _fairness_store  # noqa: E402, F401
