"""What a tenant sees of a lost worker on Azurite: the backend scenarios of ``tests/unit/core/test_what_a_tenant_sees_of_a_lost_worker.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_what_a_tenant_sees_of_a_lost_worker

collect_again(test_what_a_tenant_sees_of_a_lost_worker, globals())
