"""The stores on Azure Storage (or Azurite) and the in-memory fake; ``shared.storage.assembly`` puts them together."""

# Registers the fairness window's store with shared.core.fairness (which may not import this layer).
from shared.storage import fairness_store as _fairness_store  # noqa: F401
