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

import base64
import hmac
import json
import re
from collections.abc import Mapping
from typing import Final

from shared.config.constants import TENANT_HEADER, TENANT_RE
from shared.config.settings import get_settings, raw
from shared.core.errors import BadRequest, Unauthorized

#: Set by App Service Authentication from the validated token (the caller's object id).
PRINCIPAL_HEADER: Final = "x-ms-client-principal-id"
#: Also set by App Service Authentication: every claim of the validated token, base64 JSON.
CLAIMS_HEADER: Final = "x-ms-client-principal"
#: The token's object id as App Service Authentication names it after its claim mapping, and unmapped.
_OID_CLAIMS: Final = ("http://schemas.microsoft.com/identity/claims/objectidentifier", "oid")
_MAX_CLAIMS_HEADER: Final = 16 * 1024
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


def _caller_ids(h: Mapping[str, str]) -> list[str]:
    """The caller's object id as App Service Authentication states it: its ``-ID`` header, and the ``oid`` claim.

    Microsoft documents ``X-MS-CLIENT-PRINCIPAL-ID`` only as "an identifier for the caller set by the
    identity provider"; for Entra ID it is the token's ``oid``, which for a managed identity is the
    ``principalId`` that ``TRUSTED_GATEWAY_PRINCIPAL_ID`` holds. The claims header carries the ``oid``
    itself, so the check does not rest on that one undocumented mapping. Both headers are set only by
    App Service Authentication, which drops any copy a client sent.
    """
    ids = [h.get(PRINCIPAL_HEADER, "").strip().lower()]
    encoded = h.get(CLAIMS_HEADER, "").strip()
    if encoded and len(encoded) <= _MAX_CLAIMS_HEADER:
        try:
            principal = json.loads(base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True))
            claims = principal.get("claims", []) if isinstance(principal, dict) else []
            ids += [
                str(c.get("val", "")).strip().lower()
                for c in claims
                if isinstance(c, dict) and str(c.get("typ", "")).lower() in _OID_CLAIMS
            ]
        except (ValueError, TypeError):
            pass  # not what App Service Authentication writes: no id from it
    return [i for i in ids if i]


def from_gateway(headers: Mapping[str, str]) -> bool:
    """True when gateway mode is on and App Service Authentication vouches for API Management's identity."""
    expected = gateway_principal()
    if not expected or raw("WEBSITE_AUTH_ENABLED").strip().lower() != "true":
        return False
    return any(hmac.compare_digest(i.encode(), expected.encode()) for i in _caller_ids(_lower(headers)))


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
    if not TENANT_RE.fullmatch(value):
        raise BadRequest("invalid tenant header", field=TENANT_HEADER)
    return value


def base_url(headers: Mapping[str, str]) -> str:
    """Where clients reach the API: ``PUBLIC_BASE_URL``; else the trusted gateway's forwarded host, proto and
    prefix; else the app's own ``/api`` (a path, resolved against whatever host the client called)."""
    public = raw("PUBLIC_BASE_URL").strip().rstrip("/")
    if public:
        if not _BASE_URL_RE.fullmatch(public):
            raise RuntimeError("PUBLIC_BASE_URL must be an http(s) URL with an optional path, e.g. https://x/thematiq")
        return public
    if not from_gateway(headers):
        return APP_BASE
    h = _lower(headers)
    prefix = h.get(FORWARDED_PREFIX, "").strip().rstrip("/")
    if not _PREFIX_RE.fullmatch(prefix):
        prefix = ""
    host = h.get(FORWARDED_HOST, "").split(",")[0].strip()
    proto = h.get(FORWARDED_PROTO, "https").split(",")[0].strip().lower()
    if host and _HOST_RE.fullmatch(host) and proto in ("http", "https"):
        return f"{proto}://{host}{prefix}"
    return prefix or APP_BASE
