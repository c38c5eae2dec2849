"""``thematiq impact ID`` against a real dev host: a job with a planted score effect (app crashes cost 3 points)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.e2e.cli.conftest import Cli
from tests.support.thematic_data import feedback
from thematiq_cli.main import EXIT_OK


def test_impact_prints_the_themes_in_rank_with_the_planted_one_first_and_starred(cli: Cli, tmp_path: Path) -> None:
    items, truth = feedback(per_theme=30, seed=6)
    rng = random.Random(6)
    f = tmp_path / "survey.jsonl"
    with f.open("w", encoding="utf-8") as out:
        for it, t in zip(items, truth, strict=True):
            nps = max(0, min(10, round(rng.gauss(8, 1.5)) - (3 if t == "app" else 0)))
            out.write(json.dumps({"id": it["id"], "text": it["text"], "nps": nps}) + "\n")
    code, out, err = cli("submit", str(f), "--param", "llm=off", "--param", "num_themes=4",
                         "--param", 'score={"key": "nps", "scale": "nps"}', "--wait", "--timeout", "240")
    assert code == EXIT_OK, err
    job_id = out.strip()
    code, out, err = cli("impact", job_id)
    assert code == EXIT_OK, err
    lines = out.splitlines()
    _, res, _ = cli("result", job_id)
    imp = json.loads(res)["impact"]
    if imp.get("note"):  # one theme per response (schema 1.5): what an impact is relative to, first
        assert lines[0] == imp["note"]
        lines = lines[1:]
    assert lines[0].startswith("Impact on nps (nps): overall NPS")
    body = lines[4:]
    assert len(body) == len(imp["themes"])
    for row, line in zip(imp["themes"], body, strict=True):
        assert line.rstrip().endswith(row["label"][:20]) or row["label"][:20] in line
        assert line.split()[0].rstrip("*") == f"{row['impact']:+.1f}"
        sure = (row["ci_low"] > 0 or row["ci_high"] < 0) and not row.get("small_n") and not row.get("explained_by")
        assert line.split()[0].endswith("*") == sure, line
    assert body[0].split()[0].endswith("*") and imp["themes"][0]["impact"] < 0
    # A job without params.score says how to get one.
    code, out, err = cli("submit", str(f), "--param", "llm=off", "--param", "num_themes=4", "--wait", "--timeout", "240")
    code, _, err = cli("impact", out.strip())
    assert code == 1 and "has no impact" in err and "score=" in err


def test_a_0_to_5_rating_is_declared_from_the_cli_and_a_range_it_does_not_fit_is_refused(cli: Cli,
                                                                                        tmp_path: Path) -> None:
    # researcher46 (schema 1.7): a 0-5 satisfaction score had no scale to declare (numeric took any number).
    from thematiq_cli.main import EXIT_API

    items, truth = feedback(per_theme=20, seed=7)
    rng = random.Random(7)
    f = tmp_path / "survey.jsonl"
    sats = []
    with f.open("w", encoding="utf-8") as out:
        for it, t in zip(items, truth, strict=True):
            sat = max(0, min(5, rng.choice([3, 4, 5]) - (3 if t == "app" else 0)))
            sats.append(sat)
            out.write(json.dumps({"id": it["id"], "text": it["text"], "sat": sat}) + "\n")
    code, out, err = cli("submit", str(f), "--param", "llm=off", "--param", 'score={"key": "sat", "scale": "1-5"}')
    assert code == EXIT_API and out == "" and any(line.startswith("  - params.score.scale: ") for line in err.splitlines())
    code, out, err = cli("submit", str(f), "--param", "llm=off", "--param", "num_themes=4",
                         "--param", 'score={"key": "sat", "scale": "0-5"}',
                         "--param", 'sentiment_from={"key": "sat", "scale": "0-5"}', "--wait", "--timeout", "240")
    assert code == EXIT_OK, err
    job_id = out.strip()
    code, out, err = cli("impact", job_id)
    assert code == EXIT_OK, err
    _, res, _ = cli("result", job_id)
    doc = json.loads(res)
    assert doc["impact"]["scale"] == "0-5" and doc["sentiment"]["rating_range"] == "0-5"
    head = next(line for line in out.splitlines() if line.startswith("Impact on sat"))
    assert head.startswith(f"Impact on sat (0-5): overall mean {doc['impact']['overall']:.2f}")
    assert doc["impact"]["themes"][0]["impact"] < 0  # the planted theme costs points
