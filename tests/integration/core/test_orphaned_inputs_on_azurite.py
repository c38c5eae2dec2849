"""Orphaned input blobs on Azurite: the backend scenarios of ``tests/unit/core/test_orphaned_inputs.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_orphaned_inputs

collect_again(test_orphaned_inputs, globals())
