"""``thematiq responses ID``: table, CSV (formula-safe, one column per metadata key), JSON and JSONL, with
filters, against a real host on Azurite running the real thematic pipeline (the file submitted by the CLI)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli.conftest import Cli
from tests.support.thematic_data import feedback


@pytest.fixture(scope="module")
def job(cli_host: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict[str, str]]]:
    rng = random.Random(9)
    items, _ = feedback(per_theme=9, seed=9)
    rows = {str(it["id"]): {"text": it["text"], "plan": rng.choice(["free", "pro"])} for it in items}
    rows["900"] = {"text": "=HYPERLINK(\"http://evil\") delivery was late", "plan": "@pro"}
    path = tmp_path_factory.mktemp("responses") / "survey.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "plan"])
        for rid, r in rows.items():
            w.writerow([rid, r["text"], r["plan"]])
    cli = Cli(cli_host.url, cli_host.env["DEVHOST_FUNCTION_KEY"])
    code, out, err = cli("submit", str(path), "--param", "llm=off", "--param", "min_theme_size=3", "--wait", "-q")
    assert code == 0, err
    return out.split()[0], rows


def test_json_and_jsonl_carry_every_row(cli: Cli, job: Any) -> None:
    job_id, rows = job
    code, out, err = cli("responses", job_id, "--format", "json")
    assert code == 0, err
    items = json.loads(out)
    assert [r["id"] for r in items] == list(rows) and [r["text"] for r in items] == [r["text"] for r in rows.values()]
    code, out, _ = cli("responses", job_id, "--format", "jsonl", "--limit", "5")
    assert code == 0 and [json.loads(line)["id"] for line in out.splitlines()] == list(rows)[:5]


def test_csv_is_formula_safe_with_metadata_columns_and_filters(cli: Cli, job: Any, tmp_path: Path) -> None:
    job_id, rows = job
    code, out, err = cli("responses", job_id, "--format", "json")
    theme = json.loads(out)[0]["themes"][0]["theme_id"]
    target = tmp_path / "rows.csv"
    code, _, err = cli("responses", job_id, "--theme", theme, "--format", "csv", "-o", str(target))
    assert code == 0, err
    table = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert list(table[0])[:3] == ["response_id", "text", "bucket"] and "plan" in table[0]
    assert table and all(theme in r["theme_ids"].split(";") for r in table)
    for r in table:
        want = rows[r["response_id"]]
        assert r["text"] == ("'" + want["text"] if want["text"][:1] in "=+-@" else want["text"])
        assert r["plan"] == ("'" + want["plan"] if want["plan"][:1] in "=+-@" else want["plan"])
    code, out, _ = cli("responses", job_id, "--where", "plan=pro", "--format", "json")
    assert code == 0 and [r["id"] for r in json.loads(out)] == [k for k, v in rows.items() if v["plan"] == "pro"]


def test_table_and_errors(cli: Cli, job: Any) -> None:
    job_id, rows = job
    code, out, err = cli("responses", job_id, "--limit", "3")
    assert code == 0 and "3 responses" in err
    assert f"of the {len(rows)} matching are usable (the n a breakdown states)" in err
    assert out.splitlines()[0].split() == ["id", "theme", "sentiment", "text"]
    assert next(iter(rows.values()))["text"][:20] in out
    code, _, err = cli("responses", job_id, "--theme", "t999")
    assert code == 3 and "theme:" in err
    code, _, err = cli("responses", job_id, "--where", "plan")
    assert code == 1 and "KEY=VALUE" in err
    code, _, err = cli("responses", "0" * 28)
    assert code == 3 and "404" in err


def test_a_breakdowns_synthetic_groups_are_listed_apart_from_a_real_missing_answer(cli: Cli, cli_host: Any,
                                                                                   tmp_path: Path) -> None:
    # A survey whose plan column has the answer "(missing)", blank cells and rare values: the breakdown has a real
    # "(missing)" column beside the synthetic (missing) and other values (schema 1.6), and each is listed by its
    # own filter: --where plan=(missing), --missing plan, --other-values plan.
    items, _ = feedback(per_theme=15, seed=4)
    plans = ["(missing)", "", "pro", "rare", "pro", "(missing)"]
    rows = {str(it["id"]): plans[n % 6] + (str(n) if plans[n % 6] == "rare" else "") for n, it in enumerate(items)}
    path = tmp_path / "survey.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "plan"])
        for it in items:
            w.writerow([it["id"], it["text"], rows[str(it["id"])]])
    code, out, err = cli("submit", str(path), "--param", "llm=off", "--param", "min_theme_size=3",
                         "--param", 'breakdown_by=["plan"]', "--param", "min_group_size=5", "--wait", "-q")
    assert code == 0, err
    job_id = out.split()[0]
    code, table, err = cli("breakdown", job_id, "--by", "plan")
    assert code == 0, err
    header = table.splitlines()[2]
    assert '"(missing)" n=' in header and " (missing) n=" in header and "other values n=" in header

    def ids(*args: str) -> set[str]:
        code, out, err = cli("responses", job_id, *args, "--format", "json")
        assert code == 0, err
        return {str(r["id"]) for r in json.loads(out)}

    assert ids("--where", "plan=(missing)") == {k for k, v in rows.items() if v == "(missing)"}
    assert ids("--missing", "plan") == {k for k, v in rows.items() if v == ""}
    other = ids("--other-values", "plan")
    assert other and other <= {k for k, v in rows.items() if v.startswith("rare")}
    code, _, err = cli("responses", job_id, "--other-values", "region")
    assert code == 3 and "other_values" in err
