"""The per-tenant receiver circuit on Azurite: the backend scenarios of
``tests/unit/webhooks/test_webhook_tenant_circuit.py``, collected again here (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.webhooks import test_webhook_tenant_circuit

collect_again(test_webhook_tenant_circuit, globals())
