"""The life cycle's promises on Azurite: the backend scenarios of ``tests/unit/core/test_lifecycle_promises.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_lifecycle_promises

collect_again(test_lifecycle_promises, globals())
