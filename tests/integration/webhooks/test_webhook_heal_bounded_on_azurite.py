"""The webhook sweep without a daily scan of the table, on Azurite: the backend scenarios of ``tests/unit/webhooks/test_webhook_heal_bounded.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.webhooks import test_webhook_heal_bounded

collect_again(test_webhook_heal_bounded, globals())
