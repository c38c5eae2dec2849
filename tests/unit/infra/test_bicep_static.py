"""What `bicep build` would refuse, checked without the Bicep CLI (it cannot be installed here: it is a .NET
binary that is downloaded, not in a package registry).

pycep-parser (the grammar Checkov uses) parses every file, so a syntax error fails here. On the parsed tree
we then check what the compiler checks across files and that a parser alone would not: every parameter a
module call passes is declared by that module (BCP037), every required one is passed (BCP035), every
``<module>.outputs.<name>`` exists (BCP053), and main.parameters.json names only declared parameters.
The first real `azd provision` still has the last word (docs/deploy.md); these are the mistakes that used
to reach it.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pycep = pytest.importorskip("pycep", reason="pycep-parser is in requirements-dev.txt")

INFRA = Path(__file__).resolve().parents[3] / "infra"
FILES = sorted(INFRA.rglob("*.bicep"))


@cache
def parsed(path: Path) -> dict[str, Any]:
    return dict(pycep.BicepParser().parse(file_path=path))


def _calls(path: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """(symbolic name, module file, params passed) of every local module a file calls."""
    out = []
    for name, module in (parsed(path).get("modules") or {}).items():
        if module["type"] != "local":
            continue  # registry modules (AVM) are versioned and validated by their publisher
        config = module["config"]
        config = config.get("config", config)  # a conditional module nests its body one level down
        out.append((name, (path.parent / module["detail"]["path"]).resolve(), dict(config.get("params") or {})))
    return out


def _required(params: dict[str, Any]) -> set[str]:
    return {n for n, p in params.items() if p.get("default") is None and not str(p.get("type", "")).endswith("?")}


def test_infra_has_bicep_files() -> None:
    assert INFRA / "main.bicep" in FILES and len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_every_file_parses(path: Path) -> None:
    assert "parameters" in parsed(path) or "resources" in parsed(path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_module_calls_match_the_modules_parameters(path: Path) -> None:
    for name, target, given in _calls(path):
        assert target.exists(), f"{path.name}: module {name} points at a missing {target}"
        declared = parsed(target).get("parameters") or {}
        unknown = set(given) - set(declared)
        missing = _required(declared) - set(given)
        assert not unknown, f"{path.name}: module {name} passes {sorted(unknown)}, not parameters of {target.name}"
        assert not missing, f"{path.name}: module {name} leaves required {sorted(missing)} of {target.name} unset"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_module_outputs_that_are_read_exist(path: Path) -> None:
    modules = {name: target for name, target, _ in _calls(path)}
    text = path.read_text()
    for name, output in set(re.findall(r"\b(\w+)(?:!)?\.outputs\.(\w+)", text)):
        if name not in modules:
            continue
        outputs = parsed(modules[name]).get("outputs") or {}
        assert output in outputs, f"{path.name}: {name}.outputs.{output} is not an output of {modules[name].name}"


def test_the_parameters_file_names_only_declared_parameters() -> None:
    declared = parsed(INFRA / "main.bicep").get("parameters") or {}
    given = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert not set(given) - set(declared), sorted(set(given) - set(declared))


def test_the_checks_catch_what_they_claim(tmp_path: Path) -> None:
    """The checks fail on a broken copy: a typo in a module parameter, a missing output, bad syntax."""
    (tmp_path / "child.bicep").write_text("param name string\nparam size int = 1\noutput id string = name\n")
    (tmp_path / "main.bicep").write_text(
        "module c 'child.bicep' = {\n  name: 'c'\n  params: {\n    nmae: 'x'\n  }\n}\noutput o string = c.outputs.idd\n"
    )
    (_, target, given), = _calls(tmp_path / "main.bicep")
    declared = parsed(target)["parameters"]
    assert set(given) - set(declared) == {"nmae"} and _required(declared) - set(given) == {"name"}
    assert "idd" not in parsed(target)["outputs"]
    from lark.exceptions import UnexpectedInput

    with pytest.raises(UnexpectedInput):
        pycep.BicepParser().parse(text="resource x 'a@b' = {\n  name: 'x'\n")


def test_the_sealing_key_parameter_refuses_a_short_value_at_provision() -> None:
    """An empty ``webhookSecretsKey`` used to provision an empty vault secret, which the app then (since
    review45w) refuses at run time; ``@minLength(32)`` makes ``azd provision`` refuse it first. The documented
    value (``openssl rand -base64 32``) is 44 characters."""
    for path in (INFRA / "main.bicep", INFRA / "app" / "keyvault.bicep"):
        decorators = parsed(path)["parameters"]["webhookSecretsKey"]["decorators"]
        lengths = [d["argument"] for d in decorators if d["type"] == "min_length"]
        assert lengths and int(lengths[0]) >= 32, path
        assert any(d["type"] == "secure" for d in decorators), path
