"""Structural checks of the keyless gateway wiring and the first-deploy guards (issue 12). No Bicep compiler here:
the checks read the text, so each names the exact construct it relies on."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
INFRA = ROOT / "infra"
MAIN = INFRA / "main.bicep"
API = INFRA / "app" / "api.bicep"
APIM = INFRA / "app" / "apim.bicep"
ACCESS = INFRA / "app" / "access.bicep"
POLICY = INFRA / "apim" / "policy.xml"


def _all_bicep() -> str:
    return "\n".join(p.read_text() for p in INFRA.rglob("*.bicep"))


def _code(text: str) -> str:
    """Bicep without its // comments, so that a comment cannot satisfy (or fail) a check."""
    return "\n".join(re.sub(r"(^|\s)//.*$", "", line) for line in text.splitlines())


def _param_block(text: str, name: str) -> str:
    """The decorators and the declaration of ``param name``."""
    m = re.search(rf"((?:^@.*\n|^//.*\n)*)^param {name}\b.*$", text, re.M)
    assert m, f"param {name} not declared"
    return m.group(0)


# -- keyless ------------------------------------------------------------------------------


def test_no_function_key_is_created_or_read_at_provision_time() -> None:
    code = _code(_all_bicep())
    assert "Microsoft.Web/sites/host/functionKeys" not in code, "no host key resource (azure-functions-host#11379)"
    assert "Microsoft.Web/sites/functions/keys" not in code
    assert not re.search(r"listKeys\([^)]*host", code), "no listKeys() of the Functions host's keys"
    assert "functionKeys" not in code
    assert "apimKeyName" not in code, "the output read a resource that has no GET"
    assert "function-key" not in code and "{{function-key}}" not in POLICY.read_text()


def test_apim_calls_with_its_user_assigned_identity_and_the_app_trusts_only_it() -> None:
    main, api, apim = _code(MAIN.read_text()), _code(API.read_text()), _code(APIM.read_text())
    # One identity, created before both, passed to both: no cycle and no second provision.
    assert "module apimIdentity 'br/public:avm/res/managed-identity/user-assigned-identity:" in main
    assert "identityResourceId: apimIdentity.outputs.resourceId" in main
    assert "identityClientId: apimIdentity.outputs.clientId" in main
    assert "apimPrincipalId: apimIdentity.outputs.principalId" in main
    assert "apimClientId: apimIdentity.outputs.clientId" in main
    assert re.search(r"identity:\s*\{\s*type:\s*'UserAssigned'\s*userAssignedIdentities:\s*\{\s*'\$\{identityResourceId\}'", apim)
    # App Service Authentication: a token is required on every path but health, and only APIM's identity passes.
    assert "name: 'authsettingsV2'" in api
    assert re.search(r"requireAuthentication:\s*true", api)
    assert "unauthenticatedClientAction: 'Return401'" in api
    assert re.search(r"excludedPaths:\s*\['/api/health'\]", api)
    assert re.search(r"allowedPrincipals:\s*\{\s*identities:\s*\[apimPrincipalId\]", api)
    assert "allowedApplications: [apimClientId]" in api
    assert re.search(r"allowedAudiences:\s*\[apiAppId", api)
    # The app's own check, and no function key needed by the routes in Azure.
    assert "TRUSTED_GATEWAY_PRINCIPAL_ID: apimPrincipalId" in api
    assert "HTTP_AUTH_LEVEL: 'anonymous'" in api
    assert "DEFAULT_TENANT: ''" in api
    # Links point at the gateway: its URL is known before APIM exists.
    assert "PUBLIC_BASE_URL: publicBaseUrl" in api and "publicBaseUrl: clientBaseUrl" in main
    assert "'https://${apimServiceName}.azure-api.net/thematiq'" in main


def test_policy_strips_client_identity_and_forwarded_headers_then_sets_them() -> None:
    inbound = ET.parse(POLICY).getroot().find("inbound")
    assert inbound is not None
    order = [(e.tag, (e.get("name") or "").lower(), e.get("exists-action")) for e in inbound.iter()
             if e.tag in ("set-header", "authentication-managed-identity")]
    deleted = [name for tag, name, action in order if action == "delete"]
    for header in ("x-thematiq-tenant", "x-functions-key", "authorization", "x-ms-client-principal-id",
                   "x-ms-client-principal", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-prefix"):
        assert header in deleted, f"policy.xml must delete a client-sent {header}"
    overridden = {name: e for e in inbound.iter("set-header")
                  if (name := (e.get("name") or "").lower()) and e.get("exists-action") == "override"}
    for header, expr in (("x-forwarded-host", "OriginalUrl.Host"), ("x-forwarded-proto", "OriginalUrl.Scheme"),
                         ("x-forwarded-prefix", "context.Api.Path")):
        value = overridden[header].find("value")
        assert value is not None and expr in (value.text or ""), header
    # Deletes come before the sets, and the token is the last thing added.
    first_override = next(i for i, (_, _, a) in enumerate(order) if a == "override")
    assert all(a == "delete" for _, _, a in order[:first_override])
    assert order[-1][0] == "authentication-managed-identity"


def test_smoke_subscription_may_call_health_and_its_own_list_only() -> None:
    policy = POLICY.read_text()
    assert 'context.Subscription.Id == "smoke"' in policy and 'UrlTemplate != "/health"' in policy
    assert 'context.Operation.UrlTemplate == "/jobs" &amp;&amp; context.Request.Method == "GET"' in policy
    assert "name: 'smoke'" in APIM.read_text()


def test_dashboard_has_an_apim_operation() -> None:
    apim = _code(APIM.read_text())
    assert re.search(r"apis/operations@[^']+' = \{\s*parent: api\s*name: 'ui'", apim)
    assert "urlTemplate: '/ui'" in apim


def test_entra_app_registration_is_created_or_given() -> None:
    main = _code(MAIN.read_text())
    assert "module entra 'app/entra.bicep' = if (empty(apiAppId))" in main
    entra = (INFRA / "app" / "entra.bicep").read_text()
    assert "extension microsoftGraphV1" in entra and "Microsoft.Graph/servicePrincipals@v1.0" in entra
    assert "passwordCredentials" not in entra and "keyCredentials" not in entra, "the registration has no secret"
    config = json.loads((INFRA / "bicepconfig.json").read_text())
    assert "microsoftGraphV1" in config["extensions"]


# -- first-deploy guards ------------------------------------------------------------------


def test_maximum_instance_count_is_at_least_40() -> None:
    for path in (MAIN, API):
        block = _param_block(path.read_text(), "maximumInstanceCount")
        m = re.search(r"@minValue\((\d+)\)", block)
        assert m and int(m.group(1)) >= 40, f"{path.name}: maximumInstanceCount needs @minValue(40), has {block!r}"
    m = re.search(r"param maximumInstanceCount int = (\d+)", MAIN.read_text())
    assert m and int(m.group(1)) >= 40


def test_restrict_to_apim_cannot_deny_all() -> None:
    main, access = _code(MAIN.read_text()), _code(ACCESS.read_text())
    # Only the tiers with static outbound IPs...
    m = re.search(r"module access 'app/access.bicep' = if \((.*)\)", main)
    assert m and "restrictToApim" in m.group(1) and "contains(staticIpTiers, apimSku)" in m.group(1), m
    tiers = re.search(r"var staticIpTiers = \[(.*)\]", main)
    assert tiers and not re.search(r"V2|Consumption", tiers.group(1)), tiers
    # ...and even then never Deny without an allow rule.
    assert "var restrict = !empty(apimPublicIps)" in access
    assert "ipSecurityRestrictionsDefaultAction: restrict ? 'Deny' : 'Allow'" in access
    assert "ipSecurityRestrictionsDefaultAction: 'Deny'" not in access


def test_chat_model_is_a_parameter_with_a_documented_check() -> None:
    main = MAIN.read_text()
    assert re.search(r"^param openAIModelName string", main, re.M)
    assert re.search(r"^param openAIModelVersion string", main, re.M)
    params = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert "THEMATIQ_OPENAI_MODEL" in params["openAIModelName"]["value"]
    assert "az cognitiveservices model list" in (ROOT / "docs" / "deploy.md").read_text()


def test_operator_principal_gets_data_plane_read_only() -> None:
    main, storage = MAIN.read_text(), (INFRA / "app" / "storage.bicep").read_text()
    assert re.search(r"^param principalId string = ''", main, re.M)
    params = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert params["principalId"]["value"] == "${AZURE_PRINCIPAL_ID=}"
    assert "operatorPrincipalId: principalId" in main
    readers = re.search(r"var readerRoles = \{(.*?)\}", storage, re.S)
    assert readers, "storage.bicep: readerRoles"
    ids = set(re.findall(r"'([0-9a-f-]{36})'", readers.group(1)))
    assert ids == {
        "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",  # Storage Blob Data Reader
        "19e7f393-937e-4f77-808e-94535e297925",  # Storage Queue Data Reader
        "76199698-9eea-4c19-bc75-cec21354c6b6",  # Storage Table Data Reader
    }


def test_postdeploy_hook_smoke_tests_health_through_the_gateway() -> None:
    yaml = (ROOT / "azure.yaml").read_text()
    assert re.search(r"^hooks:\n\s+# .*\n(?:\s+#.*\n)*\s+postdeploy:\n\s+posix:\n\s+shell: sh\n\s+run: \./infra/hooks/postdeploy\.sh",
                     yaml, re.M), yaml
    hook = INFRA / "hooks" / "postdeploy.sh"
    text = hook.read_text()
    assert hook.stat().st_mode & 0o111, "the hook must be executable"
    assert "set -eu" in text
    # What it checks is tested by running it: tests/e2e/infra/test_postdeploy_hook.py.


def test_azd_state_is_not_committed_or_deployed() -> None:
    assert re.search(r"^/?\.azure/?$", (ROOT / ".gitignore").read_text(), re.M)
    assert re.search(r"^/?\.azure/?$", (ROOT / ".funcignore").read_text(), re.M)


def test_funcignore_has_no_negation_and_ships_the_dashboard() -> None:
    """`!pattern` lines are unreliable in .funcignore; the dashboard ships because nothing excludes it."""
    lines = [ln.strip() for ln in (ROOT / ".funcignore").read_text().splitlines() if ln.strip()]
    assert not [ln for ln in lines if ln.startswith("!")], lines
    for ln in lines:
        pattern = ln.rstrip("/").lstrip("/")
        assert not re.fullmatch(pattern.replace(".", r"\.").replace("*", ".*"), "web"), ln
        assert not re.fullmatch(pattern.replace(".", r"\.").replace("*", ".*"), "web/static"), ln
    # web/ holds only what is served, so shipping all of it is right.
    files = {p.relative_to(ROOT / "web").as_posix() for p in (ROOT / "web").rglob("*") if p.is_file()}
    assert files and all(f.startswith("static/") for f in files), files
