"""An unreadable row is no 500 on Azurite: the backend scenarios of ``tests/unit/core/test_an_unreadable_row_is_no_500.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.core import test_an_unreadable_row_is_no_500

collect_again(test_an_unreadable_row_is_no_500, globals())
