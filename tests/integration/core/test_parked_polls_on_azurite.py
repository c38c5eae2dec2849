"""Parked jobs' polls on Azurite: the backend scenarios of ``tests/unit/core/test_parked_polls.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_parked_polls

collect_again(test_parked_polls, globals())
