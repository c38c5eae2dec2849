"""Races decided by one conditional write on Azurite: the backend scenarios of ``tests/unit/core/test_races_decided_by_one_conditional_write.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_races_decided_by_one_conditional_write

collect_again(test_races_decided_by_one_conditional_write, globals())
