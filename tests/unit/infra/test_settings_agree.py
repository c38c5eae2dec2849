"""Structural checks of the deployment files (no Bicep compiler, no Azure).

The Bicep files, ``local.settings.sample.json``, the README's settings table and
``shared.config.settings.SETTINGS`` must agree; the infra must not carry keys; the
APIM policy must do what docs/deploy.md says it does; every function must have
an auth level and only ``health`` may be anonymous.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from shared.config.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[3]
INFRA = ROOT / "infra"
API_BICEP = INFRA / "app" / "api.bicep"
POLICY = INFRA / "apim" / "policy.xml"

# Settings that are runtime-derived in Azure, so their Bicep value is an
# expression rather than the (empty) local default.
DERIVED_IN_AZURE = {
    "AzureWebJobsStorage__accountName",
    "AzureWebJobsStorage__credential",
    "AzureWebJobsStorage__clientId",
    "AzureWebJobsStorage__blobServiceUri",
    "AzureWebJobsStorage__queueServiceUri",
    "AzureWebJobsStorage__tableServiceUri",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    # API Management's identity: the only caller the app trusts (docs/security.md).
    "TRUSTED_GATEWAY_PRINCIPAL_ID",
}
# Settings whose Azure value differs from the local default on purpose.
DIFFERS_IN_AZURE = {
    # The platform's test pipelines are not for tenants.
    "DISABLED_PIPELINES": "echo,sleep,fanout",
    # No function key in Azure: App Service Authentication admits only API Management's identity.
    "HTTP_AUTH_LEVEL": "anonymous",
}


def _app_settings_block() -> str:
    text = API_BICEP.read_text()
    m = re.search(r"// BEGIN app settings\n(.*?)// END app settings", text, re.S)
    assert m, "api.bicep must mark its app settings with // BEGIN app settings ... // END app settings"
    return m.group(1)


def _bicep_app_settings() -> dict[str, str]:
    """Top-level keys of ``var appSettings = {...}`` and their raw value expressions."""
    block = _app_settings_block()
    return {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r"^\s{2}'?([A-Za-z_][A-Za-z0-9_]*)'?\s*:\s*(.+)$", block, re.M)
    }


def _bicep_param_defaults(path: Path) -> dict[str, str]:
    return {
        m.group(1): m.group(2) for m in re.finditer(r"^param\s+(\w+)\s+\w+\s*=\s*'([^']*)'\s*$", path.read_text(), re.M)
    }


def _literal(expr: str, params: dict[str, str]) -> str | None:
    """The string a Bicep value expression stands for, if it is a literal or a param with a literal default."""
    m = re.fullmatch(r"'([^']*)'", expr)
    if m:
        return m.group(1)
    return params.get(expr)


def _infra_files() -> list[Path]:
    return [p for p in INFRA.rglob("*") if p.is_file()] + [ROOT / "azure.yaml"]


# ---------------------------------------------------------------------------
# Settings agree everywhere
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.source == "app"], ids=lambda s: s.name)
def test_bicep_sets_every_app_setting(setting: Any) -> None:
    settings = _bicep_app_settings()
    assert setting.name in settings, f"infra/app/api.bicep app settings lack {setting.name}"
    if setting.name in DERIVED_IN_AZURE:
        return
    value = _literal(settings[setting.name], _bicep_param_defaults(API_BICEP))
    if value is not None:
        assert value == DIFFERS_IN_AZURE.get(setting.name, setting.default), (
            f"{setting.name}: Bicep default {value!r} != settings default {setting.default!r}"
        )


def test_bicep_default_tenant_is_empty() -> None:
    assert _bicep_app_settings()["DEFAULT_TENANT"] == "''"


def test_bicep_identity_storage_and_aad_telemetry() -> None:
    settings = _bicep_app_settings()
    assert settings["AzureWebJobsStorage__credential"] == "'managedidentity'"
    assert "AzureWebJobsStorage" not in settings, "no connection string in Azure: identity-based settings only"
    assert "Authorization=AAD;ClientId=" in settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"]
    assert "LLM_API_KEY" not in settings


def test_main_bicep_storage_names_match_settings_defaults() -> None:
    defaults = {s.name: s.default for s in SETTINGS}
    params = _bicep_param_defaults(INFRA / "main.bicep")
    assert params["jobsTable"] == defaults["JOBS_TABLE"]
    assert params["jobsQueue"] == defaults["JOBS_QUEUE"]
    assert params["resultsContainer"] == defaults["RESULTS_CONTAINER"]
    assert params["llmCacheTable"] == defaults["LLM_CACHE_TABLE"]


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.source != "app"], ids=lambda s: s.name)
def test_secret_and_platform_settings_are_accounted_for(setting: Any) -> None:
    """Not set as a plain app setting: either replaced by identity settings or documented in deploy.md."""
    deploy_md = (ROOT / "docs" / "deploy.md").read_text()
    assert f"`{setting.name}`" in deploy_md, f"docs/deploy.md must say how {setting.name} is handled in Azure"
    if setting.name == "APPLICATIONINSIGHTS_CONNECTION_STRING":
        assert setting.name in _bicep_app_settings()
    else:
        assert setting.name not in _bicep_app_settings(), f"{setting.name} is a secret: never a plain app setting"


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_local_settings_sample_sets_it(setting: Any) -> None:
    values = json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]
    assert setting.name in values, f"local.settings.sample.json lacks {setting.name}"


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_readme_documents_it(setting: Any) -> None:
    readme = ROOT / "README.md"
    text = readme.read_text() if readme.exists() else ""
    assert re.search(rf"^\|\s*`{re.escape(setting.name)}`", text, re.M), (
        f"README.md settings table lacks a row for `{setting.name}`"
    )


# ---------------------------------------------------------------------------
# Security properties of the infra
# ---------------------------------------------------------------------------


def test_storage_disallows_shared_keys_and_public_blobs() -> None:
    text = (INFRA / "app" / "storage.bicep").read_text()
    assert re.search(r"^\s*allowSharedKeyAccess:\s*false\s*$", text, re.M)
    assert re.search(r"^\s*allowBlobPublicAccess:\s*false\s*$", text, re.M)
    assert re.search(r"^\s*minimumTlsVersion:\s*'TLS1_2'\s*$", text, re.M)
    assert "allowSharedKeyAccess: true" not in "".join(p.read_text() for p in INFRA.rglob("*.bicep"))


def test_storage_creates_every_resource_the_app_uses() -> None:
    main = (INFRA / "main.bicep").read_text()
    storage = (INFRA / "app" / "storage.bicep").read_text()
    for name in ("jobsTable", "jobsQueue", "resultsContainer", "llmCacheTable", "deploymentContainer"):
        assert re.search(rf"\{{\s*name:\s*{name}\b", storage), f"storage.bicep does not create {name}"
    assert "'${jobsQueue}-poison'" in storage
    assert "deploymentContainer:" in main


def test_monitoring_disables_local_auth() -> None:
    text = (INFRA / "app" / "monitoring.bicep").read_text()
    assert len(re.findall(r"^\s*disableLocalAuth:\s*true\s*$", text, re.M)) >= 2, "App Insights and Log Analytics"
    assert "3913510d-42f4-4e42-8a64-420c390055eb" in text, "Monitoring Metrics Publisher for the app identity"


def test_role_assignments_are_the_documented_minimum() -> None:
    storage = (INFRA / "app" / "storage.bicep").read_text()
    assert "b7e6dc6d-f1e8-4753-8033-0f276bb0955b" in storage  # Storage Blob Data Owner
    assert "974c5e8b-45b9-4653-ba55-5f855dd0fb88" in storage  # Storage Queue Data Contributor
    assert "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3" in storage  # Storage Table Data Contributor
    all_bicep = "".join(p.read_text() for p in INFRA.rglob("*.bicep"))
    assert "17d1049b-9a84-46fb-8f53-869881c3d3ab" not in all_bicep, "no Storage Account Contributor (allows listKeys)"
    assert "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd" in (INFRA / "app" / "openai.bicep").read_text()


SECRET_PATTERNS = [
    re.compile(r"AccountKey=", re.I),
    re.compile(r"InstrumentationKey=", re.I),
    re.compile(r"[?&]sig=", re.I),
    re.compile(r"SharedAccessSignature", re.I),
    re.compile(r"listKeys\(\s*\)\.keys"),  # storage account keys
    re.compile(r"\bsk-[A-Za-z0-9]{20,}"),
    re.compile(r"x-functions-key[^\n]*[A-Za-z0-9_-]{30,}={0,2}"),
]


@pytest.mark.parametrize("path", _infra_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_literal_keys_in_infra(path: Path) -> None:
    text = path.read_text(errors="replace")
    for pattern in SECRET_PATTERNS:
        assert not pattern.search(text), f"{path.relative_to(ROOT)} matches {pattern.pattern}"


def test_function_app_is_flex_consumption_python_313() -> None:
    text = API_BICEP.read_text()
    assert "skuName: 'FC1'" in text
    assert re.search(r"runtime:\s*\{\s*name:\s*'python'\s*version:\s*'3\.13'\s*\}", text)
    assert "maximumInstanceCount: maximumInstanceCount" in text
    assert "instanceMemoryMB: instanceMemoryMB" in text
    assert "type: 'UserAssignedIdentity'" in text
    assert "'azd-service-name': 'api'" in text


def test_modules_use_azure_verified_modules() -> None:
    refs = re.findall(
        r"'br/public:(avm/res/[a-z0-9/-]+):(\d+\.\d+\.\d+)'", "".join(p.read_text() for p in INFRA.rglob("*.bicep"))
    )
    used = {r[0] for r in refs}
    for module in (
        "avm/res/web/site",
        "avm/res/web/serverfarm",
        "avm/res/storage/storage-account",
        "avm/res/insights/component",
        "avm/res/operational-insights/workspace",
        "avm/res/managed-identity/user-assigned-identity",
        "avm/res/cognitive-services/account",
    ):
        assert module in used, module


# ---------------------------------------------------------------------------
# API Management
# ---------------------------------------------------------------------------


def _policy() -> ET.Element:
    return ET.parse(POLICY).getroot()


def test_policy_parses_and_sets_tenant_from_subscription() -> None:
    inbound = _policy().find("inbound")
    assert inbound is not None
    headers = [(e.get("name", "").lower(), e.get("exists-action"), e) for e in inbound.iter("set-header")]
    tenant = [h for h in headers if h[0] == "x-thematiq-tenant"]
    actions = [h[1] for h in tenant]
    assert actions and actions[0] == "delete", "client-sent tenant header must be deleted first"
    override = [h[2] for h in tenant if h[1] == "override"]
    assert override, "tenant header must be set with exists-action=override"
    value = override[0].find("value")
    assert value is not None and value.text is not None and "context.Subscription.Id" in value.text


def test_policy_rate_limits_per_subscription() -> None:
    limits = list(_policy().iter("rate-limit-by-key"))
    assert limits and limits[0].get("counter-key") == "@(context.Subscription.Id)"
    # apim.bicep swaps this exact element on the Consumption tier.
    apim = (INFRA / "app" / "apim.bicep").read_text()
    m = re.search(r"var rateLimitByKey = '(.*)'", apim)
    assert m and m.group(1) in POLICY.read_text()


def test_policy_calls_the_app_with_apims_identity_not_a_key() -> None:
    """Keyless (issue 12): no function key is created, read or sent; the backend call carries APIM's token."""
    inbound = _policy().find("inbound")
    assert inbound is not None
    keys = [e for e in inbound.iter("set-header") if e.get("name", "").lower() == "x-functions-key"]
    assert [k.get("exists-action") for k in keys] == ["delete"], "a client-sent key is dropped, none is added"
    mi = list(inbound.iter("authentication-managed-identity"))
    assert len(mi) == 1 and mi[0].get("resource") == "__API_APP_ID__"
    assert mi[0].get("client-id") == "__APIM_IDENTITY_CLIENT_ID__"
    apim = (INFRA / "app" / "apim.bicep").read_text()
    assert "'__APIM_IDENTITY_CLIENT_ID__', identityClientId" in apim and "'__API_APP_ID__', apiAppId" in apim
    assert "{{function-key}}" not in POLICY.read_text()


def test_policy_strips_backend_errors() -> None:
    root = _policy()
    outbound, on_error = root.find("outbound"), root.find("on-error")
    assert outbound is not None and on_error is not None
    assert any("StatusCode >= 500" in (w.get("condition") or "") for w in outbound.iter("when"))
    assert on_error.find("set-body") is not None


def test_apim_api_requires_subscription_and_imports_openapi() -> None:
    apim = (INFRA / "app" / "apim.bicep").read_text()
    assert "subscriptionRequired: true" in apim
    assert "loadTextContent('../apim/openapi.json')" in apim
    assert "loadTextContent('../apim/policy.xml')" in apim
    assert "param sku string = 'Consumption'" in apim


# ---------------------------------------------------------------------------
# Function auth levels
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def functions() -> list[Any]:
    # get_functions() can be called once per process: the shared index.
    from tests.support.app_index import app_functions

    return list(app_functions())


def _http_auth_level(fn: Any) -> str | None:
    for binding in fn.get_bindings():
        if binding.type == "httpTrigger":
            level = binding.auth_level
            return str(getattr(level, "value", level)).lower()
    return None


def test_only_health_is_anonymous(functions: list[Any]) -> None:
    http = {fn.get_function_name(): _http_auth_level(fn) for fn in functions if _http_auth_level(fn) is not None}
    assert "health" in http
    for name, level in http.items():
        assert level in {"function", "anonymous", "admin"}, f"{name} has no auth level"
        if name == "health":
            assert level == "anonymous"
        else:
            # Locally (HTTP_AUTH_LEVEL=function) every other route needs a key; in Azure api.bicep sets
            # HTTP_AUTH_LEVEL=anonymous and App Service Authentication + the app's caller check are the gate
            # (tests/unit/infra/test_gateway_infra.py, tests/e2e/fault/test_security.py).
            assert level == "function", f"{name} must be FUNCTION-level locally, is {level}"


def test_every_function_accounted_for(functions: list[Any]) -> None:
    names = {fn.get_function_name() for fn in functions}
    assert {
        "submit_job",
        "list_jobs",
        "get_job",
        "cancel_job",
        "get_job_result",
        "health",
        "job_worker",
        "reaper",
    } <= names


# ---------------------------------------------------------------------------
# azure.yaml (no PyYAML: a tiny indentation-based reader for this file's subset)
# ---------------------------------------------------------------------------


def _read_simple_yaml(text: str) -> dict[str, Any]:
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        assert "\t" not in line[:indent], f"azure.yaml:{lineno}: tab indentation"
        m = re.fullmatch(r"([A-Za-z0-9_.-]+):(?:\s+(.*))?", line.strip())
        assert m, f"azure.yaml:{lineno}: not a `key: value` line: {raw!r}"
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        key, value = m.group(1), m.group(2)
        assert key not in parent, f"azure.yaml:{lineno}: duplicate key {key}"
        if value is None:
            child: dict[str, Any] = {}
            parent[key] = child
            stack.append((indent, child))
        else:
            parent[key] = value.strip().strip("'\"")
    return root


def test_azure_yaml_declares_the_function_service() -> None:
    doc = _read_simple_yaml((ROOT / "azure.yaml").read_text())
    assert doc["name"] == "thematiq"
    assert doc["infra"]["provider"] == "bicep" and doc["infra"]["path"] == "infra"
    api = doc["services"]["api"]
    assert {k: v for k, v in api.items() if k != "hooks"} == {"project": ".", "language": "python", "host": "function"}
    assert set(api.get("hooks", {})) == {"prepackage"}  # the built int8 encoder goes into the package
    assert (INFRA / "main.bicep").exists() and (INFRA / "main.parameters.json").exists()


def test_main_parameters_follow_azd_convention() -> None:
    params = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert params["environmentName"]["value"] == "${AZURE_ENV_NAME}"
    assert params["location"]["value"] == "${AZURE_LOCATION}"
    declared = set(re.findall(r"^param\s+(\w+)", (INFRA / "main.bicep").read_text(), re.M))
    assert set(params) <= declared, f"parameters not declared in main.bicep: {set(params) - declared}"


def test_apim_openapi_covers_the_apps_api() -> None:
    """The document API Management imports lists the same operations the app serves (except the docs themselves)."""
    from shared.api.openapi import document
    from shared.core.jobs import Status

    def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
        return {(path, method) for path, item in doc["paths"].items() for method in item
                if method in {"get", "post", "put", "patch", "delete"}}

    placeholder = json.loads((INFRA / "apim" / "openapi.json").read_text())
    assert placeholder["openapi"].startswith("3.")
    assert operations(placeholder) == operations(document()) - {("/openapi.json", "get")}
    # Status values a client may filter on must be the app's.
    statuses = json.dumps(placeholder)
    assert all(f'"{s.value}"' in statuses for s in Status), "infra/apim/openapi.json lacks a job status"


def test_apim_openapi_declares_the_apps_idempotency_keys() -> None:
    """Every operation that takes an ``Idempotency-Key`` in the app's document declares it in the placeholder APIM
    imports too, with the same rule (platform46: ``POST /webhooks/secrets`` had it only in the app's document)."""
    from shared.api.openapi import document

    def keys(doc: dict[str, Any]) -> dict[tuple[str, str], str | None]:
        return {(path, method): p["schema"].get("pattern") for path, item in doc["paths"].items()
                for method, op in item.items() if isinstance(op, dict)
                for p in op.get("parameters", []) if p.get("in") == "header" and p["name"] == "Idempotency-Key"}

    app = keys(document())
    assert ("/webhooks/secrets", "post") in app and ("/jobs", "post") in app
    assert keys(json.loads((INFRA / "apim" / "openapi.json").read_text())) == app
