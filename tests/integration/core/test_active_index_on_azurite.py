"""The active-jobs index on Azurite: the backend scenarios of ``tests/unit/core/test_active_index.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_active_index

collect_again(test_active_index, globals())
