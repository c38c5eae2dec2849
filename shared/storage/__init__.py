"""The stores on Azure Storage (or Azurite) and the in-memory fake; ``shared.storage.assembly`` puts them together."""

# Registers the fairness window's store with shared.core.fairness, and the webhook index's "job ended: due" write
# with shared.core.webhooks (the lifecycle's hook): the core layer may not import this one.
from shared.storage import fairness_store as _fairness_store  # noqa: F401
from shared.storage import webhook_store as _webhook_store  # noqa: F401
