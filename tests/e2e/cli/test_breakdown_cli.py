"""``thematiq breakdown ID --by FIELD`` against a real dev host: a thematic job with a planted segment effect."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.e2e.cli.conftest import Cli
from tests.support.thematic_data import feedback
from thematiq_cli.main import EXIT_OK


def test_breakdown_prints_one_row_per_theme_with_the_planted_segment_starred(cli: Cli, tmp_path: Path) -> None:
    items, truth = feedback(per_theme=30, seed=4)
    rng = random.Random(4)
    f = tmp_path / "survey.jsonl"
    with f.open("w", encoding="utf-8") as out:
        for it, t in zip(items, truth, strict=True):
            plan = "pro" if rng.random() < (0.8 if t == "delivery" else 0.1) else "free"
            out.write(json.dumps({"id": it["id"], "text": it["text"], "plan": plan}) + "\n")
    code, out, err = cli("submit", str(f), "--param", "llm=off", "--param", "num_themes=4",
                         "--param", 'breakdown_by=["plan"]', "--wait", "--timeout", "240")
    assert code == EXIT_OK, err
    job_id = out.strip()
    code, out, err = cli("breakdown", job_id, "--by", "plan")
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert lines[0].startswith("By plan (categorical)")
    header = lines[2]
    assert "pro n=" in header and "free n=" in header
    body = lines[4:]
    code, res, _ = cli("result", job_id)
    doc = json.loads(res)
    assert len(body) == len(doc["themes"])
    # A row is starred exactly where the result has a significant cell, and the planted effect is there.
    groups = doc["breakdowns"][0]["groups"]
    for theme, line in zip(doc["themes"], body, strict=True):
        significant = any(c["significant"] for g in groups for c in g["themes"] if c["theme_id"] == theme["id"])
        assert ("*" in line) == significant, (line, theme["id"])
    assert any("*" in line for line in body), out
    code, _, err = cli("breakdown", job_id, "--by", "region")
    assert code == 1 and "no breakdown by 'region'" in err
