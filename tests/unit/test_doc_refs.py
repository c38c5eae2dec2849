"""Paths and dotted names the docs write in backticks, and their relative links, point at something that exists.

A newcomer follows README.md and docs/*.md to files: a path that was moved or renamed (a test folder split into
tiers, a module moved to another layer) sends them to nothing, and nothing else fails when it happens. This reads
every single-backticked word that starts with one of the repository's own top-level folders or files
(``shared/core/lifecycle.py``, ``tests/unit/``, ``host.json``) or with one of its packages as a dotted name
(``shared.llm.scope_to_job``), every backticked test function name, and every relative Markdown link with its
heading anchor, and checks each exists. Placeholders (``<area>``, ``{id}``, ``…``, ``*``) and what bootstrap or a
run creates (git-ignored) are not checked.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from tests.unit.test_docstring_refs import resolves

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Top-level entries a backticked path may start with (the tracked ones; a word like `app.js` alone is not checked).
TOPS = (
    ".ci",
    ".funcignore",
    ".github",
    "NOTICE",
    "README.md",
    "azure.yaml",
    "bench",
    "blueprints",
    "devhost",
    "docs",
    "function_app.py",
    "host.json",
    "infra",
    "local.settings.sample.json",
    "pipelines",
    "pyproject.toml",
    "requirements-dev.txt",
    "requirements-models.txt",
    "requirements-quality.txt",
    "requirements.in",
    "requirements.txt",
    "samples",
    "scripts",
    "shared",
    "tests",
    "thematiq_cli",
    "thematiq_client",
    "tools",
    "web",
)
PACKAGES = ("shared", "pipelines", "blueprints", "devhost", "thematiq_client", "thematiq_cli")
#: Created by scripts/bootstrap or a run, git-ignored: may be absent in a checkout.
GENERATED = (
    "pipelines/thematic/assets/models",
    "web/static/build",
    "tools/azurite/node_modules",
    "tools/swagger-ui/node_modules",
)
_TICK = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"\]\(([^)\s#]*)(?:#([^)\s]*))?\)")
_TEST = re.compile(r"`(?:[\w/]+\.py::)?(test_\w+)(?:\[[^\]`]*\])?`")
_PLACEHOLDER = re.compile(r"[<>{}…*$]|\.\.\.")


def _words(text: str) -> list[str]:
    """Backticked words that are meant as this repository's paths or dotted names, with trailing punctuation off."""
    words = []
    for m in _TICK.finditer(text):
        word = m.group(1).strip().split(" ")[0].split("::")[0]
        word = re.sub(r"(:\d+(-\d+)?|[,;:.)]+)$", "", word)
        if word and not _PLACEHOLDER.search(word):
            words.append(word)
    return words


def _path_exists(word: str) -> bool:
    """A file or folder, or ``folder/module.name``: a name defined at the top of ``folder/module.py``."""
    if (ROOT / word).exists():
        return True
    module, _, name = word.rpartition(".")
    source = ROOT / f"{module}.py"
    return (
        bool(module)
        and source.is_file()
        and re.search(
            rf"^(?:def|class|async def) {re.escape(name)}\b|^{re.escape(name)}\s*[:=]", source.read_text(), re.M
        )
        is not None
    )


#: Stale references in docs that other work owns, each with why it stays for now; remove an entry when its doc is
#: fixed (the test then holds the fix).
KNOWN: set[tuple[str, str]] = set()


def anchors(doc: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown file (lower case, punctuation dropped, spaces to hyphens, -1, -2
    for repeats), headings inside fenced code not counted."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6}\s+(.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


@cache
def defined_tests() -> frozenset[str]:
    """Every test function defined under tests/."""
    names: set[str] = set()
    for source in (ROOT / "tests").rglob("*.py"):
        names.update(re.findall(r"def (test_\w+)", source.read_text(encoding="utf-8")))
    return frozenset(names)


def stale_refs(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    stale = [f"test {m.group(1)}" for m in _TEST.finditer(text) if m.group(1) not in defined_tests()]
    for word in _words(text):
        top = word.split("/")[0]
        if top in TOPS and ("/" in word or top == word):
            if not word.startswith(GENERATED) and not _path_exists(word):
                stale.append(word)
        elif top.split(".")[0] in PACKAGES and "." in top and "/" not in word and re.fullmatch(r"[\w.]+", word):
            if not resolves(word.rstrip("()")):
                stale.append(word)
    for m in _LINK.finditer(text):
        target, anchor = m.group(1), m.group(2)
        if re.match(r"[a-z]+:", target) or _PLACEHOLDER.search(target):
            continue
        linked = doc.parent / target if target else doc
        if not linked.exists():
            stale.append(f"link {target}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            stale.append(f"link {target}#{anchor}")
    return stale


def test_the_check_finds_a_moved_path_and_a_moved_name(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "See `test_the_check_finds_a_moved_path_and_a_moved_name`, `test_gone`, `shared/core/lifecycle.py`, `shared/lifecycle.py`, `tests/e2e/conftest.host_env`, `tests/e2e/conftest.nope`, `tests/unit/<area>/`, `shared.sdk.errors.Cancelled`,"
        " `shared.errors.Cancelled`, [gone](nowhere.md), [here](#a-heading), [there](#no-heading).\n## A heading\n"
    )
    assert stale_refs(doc) == [
        "test test_gone",
        "shared/lifecycle.py",
        "tests/e2e/conftest.nope",
        "shared.errors.Cancelled",
        "link nowhere.md",
        "link #no-heading",
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_and_names_in_a_doc_exist(doc: Path) -> None:
    name = str(doc.relative_to(ROOT))
    assert [ref for ref in stale_refs(doc) if (name, ref) not in KNOWN] == []
