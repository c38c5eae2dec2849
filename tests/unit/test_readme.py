"""The README's settings table is generated from shared.config.settings and must stay in sync."""

from __future__ import annotations

import re
from pathlib import Path

from shared.config.settings import markdown_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_settings_table_matches_the_code() -> None:
    text = README.read_text()
    block = re.search(r"<!-- settings-table:start.*?-->\n(.*?)\n<!-- settings-table:end -->", text, re.S)
    assert block, "README lost its settings-table markers"
    assert block.group(1).strip() == markdown_table().strip(), "run: python -m shared.config.settings and paste into README"


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text()[:600]
    assert "scripts/demo" in head and "scripts/test" in head
