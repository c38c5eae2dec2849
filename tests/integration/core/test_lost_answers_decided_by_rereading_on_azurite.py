"""Writes whose answer is lost, decided by re-reading, on Azurite: the backend scenarios of ``tests/unit/core/test_lost_answers_decided_by_rereading.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_lost_answers_decided_by_rereading

collect_again(test_lost_answers_decided_by_rereading, globals())
