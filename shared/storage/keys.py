"""RowKey ranges for Table Storage queries: every row whose key starts with a prefix is one range query."""

from __future__ import annotations


def prefix_range(prefix: str) -> dict[str, str]:
    """``lo``/``hi`` bounds of the RowKeys that start with ``prefix`` (for ``RowKey ge @lo and RowKey lt @hi``)."""
    return {"lo": prefix, "hi": prefix[:-1] + chr(ord(prefix[-1]) + 1)}
