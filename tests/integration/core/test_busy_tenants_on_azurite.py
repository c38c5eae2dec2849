"""The busy tenants on Azurite: the backend scenarios of ``tests/unit/core/test_busy_tenants.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_busy_tenants

collect_again(test_busy_tenants, globals())
