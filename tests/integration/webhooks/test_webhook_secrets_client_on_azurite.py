"""The typed client's webhook-secret calls with faults at the transport, on Azurite: the scenarios of ``tests/unit/webhooks/test_webhook_secrets_client.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.webhooks import test_webhook_secrets_client

collect_again(test_webhook_secrets_client, globals())
