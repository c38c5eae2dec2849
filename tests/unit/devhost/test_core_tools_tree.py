"""The tree runs under Azure Functions Core Tools (``func start``) as it does under devhost: checked statically.

Core Tools cannot be installed on this project's machines (its npm package downloads a prebuilt binary from outside
the registries), so what it needs is checked in the files: host.json's extension bundle (it brings the queue and
timer extensions devhost implements itself), the worker runtime setting, the runtime pin Azure and Core Tools load
for a Python 3.13 app, an app module with no devhost-only assumptions, and docs that name the pinned version.
"""

from __future__ import annotations

import ast
import json
import re
from importlib import metadata
from pathlib import Path

from devhost import config

ROOT = Path(__file__).resolve().parents[3]
APP_CODE = [ROOT / "function_app.py", *sorted((ROOT / "blueprints").glob("*.py"))]


def _pin(name: str) -> str:
    m = re.search(rf"^{re.escape(name)}==([^\s\\]+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert m, f"{name} is not pinned in requirements.txt"
    return m.group(1)


def test_host_json_is_v2_with_the_v4_extension_bundle() -> None:
    host = json.loads((ROOT / "host.json").read_text())
    assert host["version"] == "2.0"
    bundle = host["extensionBundle"]
    assert bundle["id"] == "Microsoft.Azure.Functions.ExtensionBundle"
    # Queue and timer triggers come from the bundle under func start; [4.*, 5.0.0) is the Functions 4.x range.
    assert re.fullmatch(r"\[4\.\*?[\d.]*,\s*5\.0\.0\)", bundle["version"]), bundle["version"]
    # Both hosts read the same timeout; devhost enforces it as the host does.
    assert config.function_timeout(host.get("functionTimeout")) == 30 * 60


def test_local_settings_sample_runs_the_python_worker_on_local_storage() -> None:
    sample = json.loads((ROOT / "local.settings.sample.json").read_text())
    assert sample["IsEncrypted"] is False
    values = sample["Values"]
    assert values["FUNCTIONS_WORKER_RUNTIME"] == "python"
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"  # Azurite's default ports, as func start
    assert int(values["PYTHON_THREADPOOL_THREAD_COUNT"]) == 32  # the thread budget, in both hosts
    assert all(isinstance(v, str) for v in values.values())  # Core Tools refuses non-string values


def test_requirements_pin_the_runtime_that_runs_locally() -> None:
    text = (ROOT / "requirements.txt").read_text()
    runtime = _pin("azure-functions-runtime")
    # Hash-checked, so Azure's build and scripts/bootstrap install the same files.
    block = text.split(f"azure-functions-runtime=={runtime}", 1)[1].split("\n\n", 1)[0]
    assert "--hash=sha256:" in block.split("\n", 3)[1], "the runtime pin has no hash"
    # What is installed here (devhost's worker runs it) is what the app pins.
    assert metadata.version("azure-functions-runtime") == runtime
    assert metadata.version("azure-functions") == _pin("azure-functions")


def test_the_app_has_no_devhost_only_assumptions() -> None:
    for path in APP_CODE:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                names = []
            assert not any(n == "devhost" or n.startswith("devhost.") for n in names), f"{path.name} imports devhost"
        # devhost's own settings (keys, log level) are not app settings in Azure or under func start.
        assert "DEVHOST_" not in path.read_text(), f"{path.name} reads a devhost setting"
    # The runtime indexes function_app.py (PYTHON_SCRIPT_FILE_NAME's default) and finds a module-level FunctionApp.
    tree = ast.parse((ROOT / "function_app.py").read_text())
    apps = [n for n in tree.body if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "app" for t in n.targets)]
    assert apps and "FunctionApp" in ast.unparse(apps[0].value)


def test_docs_name_the_pinned_runtime_and_how_to_move_it() -> None:
    runtime = _pin("azure-functions-runtime")
    docs = (ROOT / "docs" / "architecture.md").read_text()
    assert f"azure-functions-runtime=={runtime}" in docs
    assert "Moving the pin" in docs and "func start" in docs
    assert f"azure-functions-runtime=={runtime}" in (ROOT / "README.md").read_text()
