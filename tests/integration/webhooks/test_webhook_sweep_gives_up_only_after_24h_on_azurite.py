"""On Azurite: the scenarios of ``tests/unit/webhooks/test_webhook_sweep_gives_up_only_after_24h.py`` (``tests.support.twin``)."""

from tests.support.twin import collect_again
from tests.unit.webhooks import test_webhook_sweep_gives_up_only_after_24h

collect_again(test_webhook_sweep_gives_up_only_after_24h, globals())
