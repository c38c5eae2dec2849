"""Chunk rows on Azurite: the backend scenarios of ``tests/unit/core/test_chunk_rows.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_chunk_rows

collect_again(test_chunk_rows, globals())
