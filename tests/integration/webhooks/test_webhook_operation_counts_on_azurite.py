"""Operations per webhook delivery on Azurite (the clients' response meter): the backend scenarios of
``tests/unit/webhooks/test_webhook_operation_counts.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.webhooks import test_webhook_operation_counts

collect_again(test_webhook_operation_counts, globals())
