"""The stores on Azure Storage (or Azurite) and the in-memory fake; ``shared.storage.assembly`` puts them together."""
