"""A cancel during a map stage on Azurite: the backend scenarios of ``tests/unit/core/test_cancel_during_a_map_stage.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_cancel_during_a_map_stage

collect_again(test_cancel_during_a_map_stage, globals())
