"""Who may name a tenant, and where clients see the API: the app's half of the gateway trust (docs/security.md).

Two modes, chosen by ``TRUSTED_GATEWAY_PRINCIPAL_ID``:

* **Gateway** (Azure). API Management calls the app with its managed identity
  (``authentication-managed-identity``); App Service Authentication validates the
  token, admits only that identity, strips any client-sent ``X-MS-CLIENT-PRINCIPAL-*``
  headers and sets ``X-MS-CLIENT-PRINCIPAL-ID`` to the caller's object id. The app
  serves a request only when that id is API Management's, and only then believes
  ``x-thematiq-tenant`` and the ``X-Forwarded-*`` headers. The header is only
  trustworthy where App Service Authentication runs, so this mode also requires the
  platform's ``WEBSITE_AUTH_ENABLED`` and refuses everything without it.
* **Local** (devhost, ``func start``). No gateway: ``DEFAULT_TENANT`` must be set, and
  the tenant header (or that default) is taken as is. With ``DEFAULT_TENANT`` empty and
  no gateway configured, i.e. an Azure-like deployment whose trust is not wired up,
  every request is refused rather than served on a header anyone can send.

A function key is never enough to choose a tenant in gateway mode: host keys are
shared by every route and every tenant.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from typing import Final

from shared.config.constants import TENANT_HEADER, TENANT_RE
from shared.config.settings import get_settings, raw
from shared.core.errors import BadRequest, Unauthorized

#: Set by App Service Authentication from the validated token (the caller's object id).
PRINCIPAL_HEADER: Final = "x-ms-client-principal-id"
FORWARDED_HOST: Final = "x-forwarded-host"
FORWARDED_PROTO: Final = "x-forwarded-proto"
FORWARDED_PREFIX: Final = "x-forwarded-prefix"
#: Where the app serves its routes (host.json routePrefix).
APP_BASE: Final = "/api"

_HOST_RE: Final = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})(?::[0-9]{1,5})?$")
#: Path segments of a prefix: URL-safe characters, never "." or "..".
_SEGMENT: Final = r"/(?!\.{1,2}(?:/|$))[A-Za-z0-9._~-]+"
_PREFIX_RE: Final = re.compile(rf"^(?:{_SEGMENT}){{0,8}}$")
_BASE_URL_RE: Final = re.compile(rf"^https?://[A-Za-z0-9.-]+(?::[0-9]{{1,5}})?(?:{_SEGMENT}){{0,8}}$")


class UntrustedCaller(Unauthorized):
    """The request did not come through the trusted gateway (or trust is not configured)."""


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def gateway_principal() -> str:
    return raw("TRUSTED_GATEWAY_PRINCIPAL_ID").strip().lower()


def auth_level_name() -> str:
    """``function`` or ``anonymous``: the auth level the HTTP routes declare (``HTTP_AUTH_LEVEL``)."""
    value = raw("HTTP_AUTH_LEVEL").strip().lower() or "function"
    if value not in ("function", "anonymous"):
        raise RuntimeError(f"HTTP_AUTH_LEVEL must be function or anonymous, not {value!r}")
    return value


def from_gateway(headers: Mapping[str, str]) -> bool:
    """True when gateway mode is on and App Service Authentication vouches for API Management's identity."""
    expected = gateway_principal()
    if not expected or raw("WEBSITE_AUTH_ENABLED").strip().lower() != "true":
        return False
    sent = _lower(headers).get(PRINCIPAL_HEADER, "").strip().lower()
    return bool(sent) and hmac.compare_digest(sent.encode(), expected.encode())


def check_caller(headers: Mapping[str, str]) -> None:
    """Refuse (401) a request that must not reach a handler: every route but the anonymous health probe."""
    if gateway_principal():
        if raw("WEBSITE_AUTH_ENABLED").strip().lower() != "true":
            raise UntrustedCaller(
                "App Service Authentication is not enabled: no caller can be verified (docs/security.md)"
            )
        if not from_gateway(headers):
            raise UntrustedCaller("this API must be called through API Management")
        return
    if auth_level_name() == "anonymous":
        raise UntrustedCaller("HTTP_AUTH_LEVEL=anonymous needs TRUSTED_GATEWAY_PRINCIPAL_ID (docs/security.md)")
    if not get_settings().default_tenant:
        raise UntrustedCaller(
            "no tenant: this API must be called through API Management (tenant trust is not configured)"
        )


def tenant_of(headers: Mapping[str, str]) -> str:
    """The caller's tenant: from the gateway's header in gateway mode, the header or DEFAULT_TENANT locally."""
    check_caller(headers)
    sent = _lower(headers).get(TENANT_HEADER)
    value = sent if gateway_principal() else (sent or get_settings().default_tenant)
    if not value:
        raise UntrustedCaller("no tenant: this API must be called through API Management")
    if not TENANT_RE.match(value):
        raise BadRequest("invalid tenant header", field=TENANT_HEADER)
    return value


def base_url(headers: Mapping[str, str]) -> str:
    """Where clients reach the API: ``PUBLIC_BASE_URL``; else the trusted gateway's forwarded host, proto and
    prefix; else the app's own ``/api`` (a path, resolved against whatever host the client called)."""
    public = raw("PUBLIC_BASE_URL").strip().rstrip("/")
    if public:
        if not _BASE_URL_RE.match(public):
            raise RuntimeError("PUBLIC_BASE_URL must be an http(s) URL with an optional path, e.g. https://x/thematiq")
        return public
    if not from_gateway(headers):
        return APP_BASE
    h = _lower(headers)
    prefix = h.get(FORWARDED_PREFIX, "").strip().rstrip("/")
    if not _PREFIX_RE.match(prefix):
        prefix = ""
    host = h.get(FORWARDED_HOST, "").split(",")[0].strip()
    proto = h.get(FORWARDED_PROTO, "https").split(",")[0].strip().lower()
    if host and _HOST_RE.match(host) and proto in ("http", "https"):
        return f"{proto}://{host}{prefix}"
    return prefix or APP_BASE
