"""Retention's order (row, then blobs) on Azurite: the backend scenarios of ``tests/unit/core/test_retention_order.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_retention_order

collect_again(test_retention_order, globals())
