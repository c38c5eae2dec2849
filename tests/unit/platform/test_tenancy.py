"""Tenant trust and public URLs, in-process (shared/api/tenancy.py; docs/security.md). The same rules run over real
HTTP in tests/e2e/fault/test_security.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.api import tenancy
from shared.config.settings import get_settings
from shared.core.errors import BadRequest, Unauthorized

GW = "6f1c1a5e-0000-4000-8000-00000000a9e1"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("TRUSTED_GATEWAY_PRINCIPAL_ID", "WEBSITE_AUTH_ENABLED", "PUBLIC_BASE_URL", "HTTP_AUTH_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DEFAULT_TENANT", "local")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _azure(monkeypatch: pytest.MonkeyPatch, auth_enabled: str = "True") -> None:
    monkeypatch.setenv("DEFAULT_TENANT", "")
    monkeypatch.setenv("TRUSTED_GATEWAY_PRINCIPAL_ID", GW.upper())
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", auth_enabled)
    get_settings.cache_clear()


def test_local_mode_takes_the_header_or_the_default() -> None:
    assert tenancy.tenant_of({}) == "local"
    assert tenancy.tenant_of({"X-Thematiq-Tenant": "acme"}) == "acme"
    with pytest.raises(BadRequest):
        tenancy.tenant_of({"x-thematiq-tenant": "a/b"})


def test_without_gateway_or_default_every_request_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12's finding: DEFAULT_TENANT empty (as in Azure) used to serve any tenant header."""
    monkeypatch.setenv("DEFAULT_TENANT", "")
    get_settings.cache_clear()
    for headers in ({}, {"x-thematiq-tenant": "victim"}):
        with pytest.raises(Unauthorized):
            tenancy.tenant_of(headers)


def test_gateway_mode_needs_the_gateways_principal(monkeypatch: pytest.MonkeyPatch) -> None:
    _azure(monkeypatch)
    assert tenancy.tenant_of({"x-ms-client-principal-id": GW, "x-thematiq-tenant": "acme"}) == "acme"
    for headers in (
        {"x-thematiq-tenant": "acme"},
        {"x-thematiq-tenant": "acme", "x-ms-client-principal-id": "11111111-2222-3333-4444-555555555555"},
        {"x-thematiq-tenant": "acme", "x-ms-client-principal-id": ""},
        {"x-ms-client-principal-id": GW},  # the gateway always names a tenant; no default in Azure
    ):
        with pytest.raises(Unauthorized):
            tenancy.tenant_of(headers)


def _claims(*pairs: tuple[str, str]) -> str:
    import base64
    import json

    body = {"auth_typ": "aad", "claims": [{"typ": t, "val": v} for t, v in pairs], "name_typ": "", "role_typ": ""}
    return base64.b64encode(json.dumps(body).encode()).decode()


def test_gateway_identity_is_also_read_from_the_oid_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """The -ID header is documented only as "an identifier"; the token's oid claim settles it."""
    _azure(monkeypatch)
    oid = "http://schemas.microsoft.com/identity/claims/objectidentifier"
    other = "11111111-2222-3333-4444-555555555555"
    trusted = {"x-thematiq-tenant": "acme", "x-ms-client-principal-id": "not-an-oid",
               "x-ms-client-principal": _claims(("appid", other), (oid, GW.upper()))}
    assert tenancy.tenant_of(trusted) == "acme"
    assert tenancy.tenant_of({"x-thematiq-tenant": "acme", "x-ms-client-principal": _claims(("oid", GW))}) == "acme"
    for claims in (
        _claims((oid, other)),
        _claims(("appid", GW)),  # the right value under another claim is not the caller's object id
        "!!not base64!!",
        _claims((oid, GW))[:-8],  # truncated
        "A" * 20_000,
    ):
        with pytest.raises(Unauthorized):
            tenancy.tenant_of({"x-thematiq-tenant": "acme", "x-ms-client-principal": claims})


def test_gateway_mode_fails_closed_without_app_service_authentication(monkeypatch: pytest.MonkeyPatch) -> None:
    _azure(monkeypatch, auth_enabled="")
    with pytest.raises(Unauthorized, match="App Service Authentication"):
        tenancy.check_caller({"x-ms-client-principal-id": GW, "x-thematiq-tenant": "acme"})


def test_anonymous_routes_need_a_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_AUTH_LEVEL", "anonymous")
    with pytest.raises(Unauthorized, match="HTTP_AUTH_LEVEL"):
        tenancy.check_caller({"x-thematiq-tenant": "acme"})
    monkeypatch.setenv("HTTP_AUTH_LEVEL", "sometimes")
    with pytest.raises(RuntimeError):
        tenancy.auth_level_name()


def test_base_url_from_the_trusted_gateway_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fwd = {"x-forwarded-host": "apim.example.net", "x-forwarded-proto": "https", "x-forwarded-prefix": "/thematiq"}
    assert tenancy.base_url(fwd) == "/api", "forwarded headers from an untrusted caller are ignored"
    _azure(monkeypatch)
    trusted = {**fwd, "x-ms-client-principal-id": GW}
    assert tenancy.base_url(trusted) == "https://apim.example.net/thematiq"
    assert tenancy.base_url({**trusted, "x-forwarded-host": "evil.example/x?"}) == "/thematiq"
    assert tenancy.base_url({**trusted, "x-forwarded-prefix": "/../x"}) == "https://apim.example.net"
    assert tenancy.base_url({**trusted, "x-forwarded-proto": "javascript"}) == "/thematiq"
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://api.example.com/thematiq/")
    assert tenancy.base_url({}) == "https://api.example.com/thematiq"
    monkeypatch.setenv("PUBLIC_BASE_URL", "javascript:alert(1)")
    with pytest.raises(RuntimeError):
        tenancy.base_url({})
