"""The azd postdeploy hook, run for real against the local stand-ins: the host as in Azure (gateway trust on, no
default tenant) behind ``devhost.gateway``, and an ``az`` on PATH that answers the one call the hook makes.

It must pass when the trust chain holds and fail when it does not (the gateway's identity is not the one the
app trusts), which is what the hook is for after a real `azd deploy`.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from devhost.gateway import Gateway
from devhost.process import HostProcess
from tests.e2e.conftest import host_env

HOOK = Path(__file__).resolve().parents[3] / "infra" / "hooks" / "postdeploy.sh"


def _run_hook(where: Path, api_url: str, function_url: str, key: str) -> subprocess.CompletedProcess[str]:
    # The one az call the hook makes: `az rest --method post --url …/subscriptions/smoke/listSecrets …`.
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True)
    az = bin_dir / "az"
    az.write_text(f'#!/bin/sh\ncase "$*" in *subscriptions/smoke/listSecrets*) echo {key};; *) exit 3;; esac\n')
    az.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "AZURE_RESOURCE_GROUP": "rg-test",
        "AZURE_APIM_NAME": "apim-test",
        "THEMATIQ_API_URL": api_url,
        "THEMATIQ_FUNCTION_URL": function_url,
        "THEMATIQ_SMOKE_PAUSE": "0.2",
        "THEMATIQ_SMOKE_TRIES": "3",
    }
    return subprocess.run(["sh", str(HOOK)], env=env, capture_output=True, text=True, timeout=120)


def test_the_hook_passes_when_the_trust_chain_holds_and_fails_when_it_does_not(azurite: str, tmp_path: Path) -> None:
    gateway_id, key = str(uuid.uuid4()), "smoke-" + uuid.uuid4().hex
    env = host_env(azurite, DEFAULT_TENANT="", TRUSTED_GATEWAY_PRINCIPAL_ID=gateway_id, WEBSITE_AUTH_ENABLED="True")
    with HostProcess(env=env) as host:
        function_url = host.url + "/api"
        with Gateway(host.url, env["DEVHOST_FUNCTION_KEY"], gateway_id, {"smoke": key}) as gw:
            ok = _run_hook(tmp_path / "ok", gw.url, function_url, key)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "/health -> 200" in ok.stdout and "/jobs?limit=1 -> 200" in ok.stdout and "-> 401" in ok.stdout
        # A gateway whose identity the app does not trust: health still answers, the trust chain does not.
        with Gateway(host.url, env["DEVHOST_FUNCTION_KEY"], str(uuid.uuid4()), {"smoke": key}) as wrong:
            bad = _run_hook(tmp_path / "bad", wrong.url, function_url, key)
        assert bad.returncode != 0
        assert "/health -> 200" in bad.stdout and "TRUSTED_GATEWAY_PRINCIPAL_ID" in bad.stderr, bad.stdout + bad.stderr
