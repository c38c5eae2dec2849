"""The per-tenant fairness window on Azurite: the backend scenarios of ``tests/unit/core/test_fairness.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_fairness

collect_again(test_fairness, globals())
