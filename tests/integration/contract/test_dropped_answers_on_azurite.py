"""Dropped answers on Azurite: the backend scenarios of ``tests/unit/contract/test_dropped_answers.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.contract import test_dropped_answers

collect_again(test_dropped_answers, globals())
