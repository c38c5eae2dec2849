"""Jobs in flight and the webhook sweep on Azurite: the backend scenarios of
``tests/unit/webhooks/test_webhook_sweep_in_flight.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.webhooks import test_webhook_sweep_in_flight

collect_again(test_webhook_sweep_in_flight, globals())
