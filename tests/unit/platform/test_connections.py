"""The storage clients' transport: requests' environment scan is skipped only where it would find nothing."""

from __future__ import annotations

import pytest

from shared.storage import connections


@pytest.fixture
def plain_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy", "NETRC", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_without_proxy_settings_requests_does_not_scan_the_environment(plain_env: pytest.MonkeyPatch) -> None:
    transport = connections._transport()
    assert transport is not None
    assert transport._use_env_settings is False
    assert transport.connection_config.verify is True
    assert (transport.connection_config.timeout, transport.connection_config.read_timeout) == (5, 30)


def test_a_ca_bundle_setting_is_passed_on_explicitly(plain_env: pytest.MonkeyPatch) -> None:
    plain_env.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/custom.pem")
    transport = connections._transport()
    assert transport is not None and transport.connection_config.verify == "/etc/ssl/custom.pem"


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "http_proxy", "NO_PROXY", "NETRC"])
def test_with_a_proxy_or_netrc_setting_requests_keeps_reading_the_environment(plain_env: pytest.MonkeyPatch, name: str) -> None:
    plain_env.setenv(name, "http://proxy.internal:3128")
    assert connections._transport() is None
    assert "transport" not in connections._common("table")
