"""``thematiq themes``' levels line (review46u): a result whose broad and fine levels are both the themes (up to 12
themes without sub-themes, and every compared job) has one level. The compared sample wave read "Levels: 13 broad
themes (themes), 13 fine (themes)", as if 13 groups held 13 more themes."""

from __future__ import annotations

from typing import Any

from thematiq_cli.render import themes_table

THEMES = [{"id": f"t{i}", "label": f"Theme {i}", "count": 10, "share": 0.1, "keywords": [], "quotes": []}
          for i in range(1, 4)]


def _doc(levels: dict[str, Any]) -> dict[str, Any]:
    return {"themes": THEMES, "levels": levels,
            "run": {"counts": {"responses": 30, "usable": 30, "themed": 30, "other": 0, "unusable": {}},
                    "theme_count": {"criterion": "fixed", "confidence": None, "confidence_label": None,
                                    "explanation": "3 themes: the compared job's codebook (compare_to j1)."}}}


def test_one_level_is_said_as_one() -> None:
    out = themes_table(_doc({"broad": "themes", "fine": "themes", "broad_count": 3, "fine_count": 3}))
    assert "Levels: one, 3 themes (no broad themes above them, no sub-themes below)" in out
    assert "broad themes (themes)" not in out


def test_two_levels_are_named_as_before() -> None:
    out = themes_table(_doc({"broad": "parents", "fine": "themes", "broad_count": 2, "fine_count": 3}))
    assert "Levels: 2 broad themes (parents), 3 fine (themes)" in out
