"""A deferred job claims without a read on Azurite: the backend scenarios of ``tests/unit/core/test_a_deferred_job_claims_without_a_read.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_a_deferred_job_claims_without_a_read

collect_again(test_a_deferred_job_claims_without_a_read, globals())
