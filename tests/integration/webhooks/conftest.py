"""The webhook scenarios' settings, as in tests/unit/webhooks (their Azurite twins run here)."""

from tests.unit.webhooks.conftest import _webhook_settings  # noqa: F401 - the autouse fixture, shared
