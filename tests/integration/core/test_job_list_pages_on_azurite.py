"""Job list pages on Azurite: the backend scenarios of ``tests/unit/core/test_job_list_pages.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_job_list_pages

collect_again(test_job_list_pages, globals())
