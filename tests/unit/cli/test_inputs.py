"""Unit tests of the CLI's file parsing, parameter parsing and text rendering (no host needed)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from thematiq_cli.client import ApiError, Client, CliError
from thematiq_cli.inputs import InputError, load_responses, parse_csv, parse_jsonl, parse_params, parse_text
from thematiq_cli.render import themes_table
from thematiq_cli.waiting import ProgressLine, progress_text


def test_csv_autodetects_text_and_id_and_keeps_other_columns_as_metadata() -> None:
    items = parse_csv("id,channel,Feedback,plan\na1,ios,Too slow,free\na2,web,\"Love it, thanks\",pro\n")
    assert items == [
        {"id": "a1", "text": "Too slow", "metadata": {"channel": "ios", "plan": "free"}},
        {"id": "a2", "text": "Love it, thanks", "metadata": {"channel": "web", "plan": "pro"}},
    ]


def test_csv_without_id_column_uses_row_numbers_and_keeps_empty_answers() -> None:
    items = parse_csv("response\nfirst\n\"\"\nthird\n")
    assert [(i["id"], i["text"]) for i in items] == [(1, "first"), (2, ""), (3, "third")]


def test_csv_explicit_columns_semicolons_and_bom(tmp_path: Path) -> None:
    f = tmp_path / "export.csv"
    f.write_text("\ufeffref;note;verbatim\nx9;a;App crashes\nx10;b;Cold food\n", encoding="utf-8")
    items = load_responses(f, column="verbatim", id_column="REF")
    assert items[0] == {"id": "x9", "text": "App crashes", "metadata": {"note": "a"}}
    assert items[1]["id"] == "x10"


def test_csv_unknown_or_ambiguous_column_is_a_readable_error() -> None:
    with pytest.raises(InputError, match="--column"):
        parse_csv("a,b\n1,2\n")
    with pytest.raises(InputError, match="no text column 'nope'; the columns are: a, b"):
        parse_csv("a,b\n1,2\n", column="nope")


def test_jsonl_reads_id_text_and_metadata() -> None:
    text = '{"id": "r1", "text": "Great", "metadata": {"plan": "pro"}, "score": 9}\n\n{"text": "Meh"}\n'
    assert parse_jsonl(text) == [
        {"id": "r1", "text": "Great", "metadata": {"plan": "pro", "score": 9}},
        {"id": 3, "text": "Meh"},
    ]
    assert parse_jsonl('{"ref": 7, "answer": "ok"}', id_column="ref") == [{"id": 7, "text": "ok"}]


def test_jsonl_errors_name_the_line() -> None:
    with pytest.raises(InputError, match="line 2 is not valid JSON"):
        parse_jsonl('{"id": 1, "text": "a"}\n{oops\n')
    with pytest.raises(InputError, match="line 1: no text field"):
        parse_jsonl('{"id": 1, "body": "a"}\n')


def test_text_file_is_one_response_per_nonblank_line(tmp_path: Path) -> None:
    assert parse_text("one\n\n  two  \n") == [{"id": 1, "text": "one"}, {"id": 3, "text": "two"}]
    f = tmp_path / "answers.txt"
    f.write_text("a\nb\n", encoding="utf-8")
    assert len(load_responses(f)) == 2


def test_missing_empty_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_responses(tmp_path / "missing.csv")
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="contains no responses"):
        load_responses(tmp_path / "empty.txt")
    (tmp_path / "bin.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(InputError, match="not text in UTF-8, UTF-16 or Windows-1252"):
        load_responses(tmp_path / "bin.txt")


def test_params_are_json_when_possible_and_override_params_json() -> None:
    params = parse_params(
        ["min_theme_size=5", "multi_label=true", "llm=off", "num_themes=auto", "x=null", "s=\"5\""],
        '{"min_theme_size": 3, "seed": 1}',
    )
    assert params == {"min_theme_size": 5, "seed": 1, "multi_label": True, "llm": "off", "num_themes": "auto",
                      "x": None, "s": "5"}
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_params(["novalue"])
    with pytest.raises(InputError, match="JSON object"):
        parse_params([], "[1]")


def test_problem_json_renders_title_detail_and_field_errors() -> None:
    err = ApiError(422, {"title": "Request validation failed", "detail": "invalid params: params.x",
                         "errors": [{"field": "params.x", "message": "Extra inputs are not permitted"}]})
    assert err.render().splitlines() == [
        "error: Request validation failed (HTTP 422)",
        "  invalid params: params.x",
        "  - params.x: Extra inputs are not permitted",
    ]


def test_client_rejects_non_http_urls_and_finds_the_api_root() -> None:
    with pytest.raises(CliError, match="http"):
        Client(url="file:///etc/passwd")
    # A bare host means its /api; a URL with a path (a gateway's API path) is used as given.
    assert Client(url="http://h:1").url == "http://h:1/api"
    assert Client(url="http://h:1/api/").url == "http://h:1/api"
    assert Client(url="https://contoso.azure-api.net/thematiq").url == "https://contoso.azure-api.net/thematiq"
    c = Client.from_env("https://gw.example/t", subscription_key="sub")
    assert c.api.subscription_key == "sub" and c.api.base_url == "https://gw.example/t"


def test_progress_line_on_a_tty_and_in_a_log() -> None:
    job = {"status": "running", "progress": {"stage": "embed", "processed": 100, "total": 400, "message": ""}}
    line = progress_text(job, 65)
    assert "embed" in line and "100/400" in line and "25%" in line and "1:05" in line and "[######" in line
    tty = io.StringIO()
    p = ProgressLine(tty, tty=True)
    p.update(job, 1)
    p.finish()
    assert tty.getvalue().startswith("\r\x1b[K") and tty.getvalue().endswith("\n")
    log = io.StringIO()
    p = ProgressLine(log, tty=False)
    p.update(job, 1)
    p.update(job, 2)  # unchanged: not repeated
    assert log.getvalue().count("\n") == 1 and "\r" not in log.getvalue()


def test_themes_table_shows_label_count_share_keywords_and_a_quote() -> None:
    result = {
        "themes": [
            {"label": "Late deliveries", "count": 40, "share": 0.4, "keywords": ["late", "hour"],
             "quotes": [{"response_id": "1", "text": "Food came an hour late"}]},
            {"label": "Cold food", "count": 10, "share": 0.1, "keywords": ["cold"], "quotes": []},
        ],
        "run": {"counts": {"responses": 60, "themed": 48, "other": 5,
                           "unusable": {"empty": 3, "no_answer": 2, "gibberish": 2, "near_duplicate": 0}},
                "theme_count": {"explanation": "silhouette peaked at k=2"}},
    }
    text = themes_table(result)
    assert "60 responses: 48 in 2 themes, 5 other, 7 unusable (empty 3, gibberish 2, no_answer 2)" in text
    assert "Late deliveries" in text and "40.0%" in text and "late, hour" in text
    assert "“Food came an hour late”" in text


def test_bundled_sample_parses_and_matches_its_labels() -> None:
    import csv

    root = Path(__file__).resolve().parents[3] / "samples"
    items = load_responses(root / "feedback.csv")
    assert 380 <= len(items) <= 450
    assert set(items[0]["metadata"]) == {"channel", "plan"}
    with (root / "feedback_labels.csv").open(encoding="utf-8", newline="") as f:
        labels = {row["id"]: row["theme"] for row in csv.DictReader(f)}
    assert [i["id"] for i in items] == list(labels)
    themes = {t for v in labels.values() for t in v.split("|")}
    assert 10 <= len(themes - {"general", "unusable"}) <= 14
    assert all(len(i["text"].split()) <= 70 for i in items)


def test_csv_quote_never_closed_is_an_error_naming_the_line_it_opens_on() -> None:
    # Without this, the csv module reads everything from the stray quote to the end of the file as one cell: one
    # long response holding every later row, sent without a word.
    text = 'id,text\n1,fine\n2,"the quote opens here\n3,and swallows\n4,every later row\n'
    with pytest.raises(InputError, match=r"line 3: a quoted cell opens here and is never closed"):
        parse_csv(text)
    # Also after text that follows a closing quote ("a"b, which the strict reader refuses and the lenient one keeps).
    with pytest.raises(InputError, match=r"line 4: a quoted cell opens here"):
        parse_csv('id;text\r\n1;"a"b\r\n2;"x""y"\r\n3;"open ""here\r\n4;more\r\n', delimiter=";")
    # A quote closed before the end still spans lines, text after a closing quote is kept as before, and a quote
    # inside an unquoted cell is a character.
    assert [i["text"] for i in parse_csv('id,text\n1,"two\nlines"\n2,"a"b\n3,5" long\n')] == [
        "two\nlines", "ab", '5" long']


def test_a_column_name_twice_in_the_header_is_an_error_naming_both_columns(tmp_path: Path) -> None:
    # Each response's metadata is keyed by column name, so the later "plan" replaced the earlier one without a word
    # (survey tools export two questions with one label): one column of answers lost.
    with pytest.raises(InputError, match=r"line 1: the header has 'plan' twice \(columns 3 and 4\); rename one"):
        parse_csv("id,text,plan,plan\n1,hello,pro,free\n")
    from tests.unit.cli.test_spreadsheets import make_xlsx

    f = make_xlsx(tmp_path / "twice.xlsx", [["text", "Plan", "id", "Plan "], ["a", "x", "1", "y"]], extra_sheet=False)
    with pytest.raises(InputError, match=r"row 1: the header has 'Plan' twice \(columns B and D\); rename one"):
        load_responses(f)
    # Names that differ only in case are two keys: nothing is lost, and they stay accepted.
    assert parse_csv("id,text,Plan,plan\n1,a,x,y\n")[0]["metadata"] == {"Plan": "x", "plan": "y"}


def test_a_key_twice_in_a_json_or_jsonl_object_is_an_error_naming_it() -> None:
    # json.loads keeps the last, so the CLI sent one of the two values and the service (which refuses a key twice)
    # never saw the other: refused here, where the line can be named.
    from thematiq_cli.inputs import parse_json

    with pytest.raises(InputError, match=r"line 2: the key 'plan' appears twice in one object"):
        parse_jsonl('{"id": 1, "text": "a"}\n{"id": 2, "text": "b", "metadata": {"plan": "pro", "plan": "free"}}\n')
    with pytest.raises(InputError, match=r"the key 'text' appears twice in one object"):
        parse_json('[{"id": 1, "text": "a", "text": "b"}]')
    with pytest.raises(InputError, match=r"the key 'k' appears twice"):
        parse_params([], '{"k": 1, "k": 2}')


def test_a_column_of_numbers_is_sent_as_numbers_so_sentiment_from_and_breakdowns_read_it(tmp_path: Path) -> None:
    # review44: every CSV cell went as a string, so `thematiq submit survey.csv --param sentiment_from=nps` was a
    # 422 "expected numbers" for any CSV, and a breakdown by the column grouped "0".."10" as eleven categories where
    # the dashboard (which sends the same file's numbers as numbers) had detractor / passive / promoter.
    from pipelines.thematic.insight import bucket
    from pipelines.thematic.params import ThematicParams
    from pipelines.thematic.validate import prepare

    rows = [(i, ["Too slow", "Love it", "Cold food"][i % 3], i % 11, "0" + str(i % 9 + 1), "x" if i == 3 else "")
            for i in range(30)]
    text = "id,text,nps,store,note\n" + "".join(f"r{i},{t},{n},{s},{x}\n" for i, t, n, s, x in rows)
    items = parse_csv(text)
    assert items[1]["metadata"] == {"nps": 1, "store": "02", "note": ""}
    # A code with a leading zero stays text (01234 is not 1234); an empty cell stays "" (missing).
    assert all(isinstance(i["metadata"]["store"], str) for i in items)
    data = [dict(i) for i in items]
    assert prepare(ThematicParams(sentiment_from="nps", breakdown_by=["nps"]), data, None) == data  # type: ignore[arg-type]
    assert bucket([i["metadata"]["nps"] for i in items], key="nps").kind == "nps"  # a breakdown passes its key
    # Decimals, negatives and spaces read as numbers; a column with one word in it stays text throughout.
    assert [i["metadata"]["v"] for i in parse_csv("text,v\na, 4.5 \nb,-2\nc,7.0\nd,\n")] == [4.5, -2, 7, ""]
    assert [i["metadata"]["v"] for i in parse_csv("text,v\na,4\nb,n/a\n")] == ["4", "n/a"]
    # A computed float as a workbook stores it (17 significant digits) is a number.
    assert parse_csv("text,v\na,3.6666666666666665\n")[0]["metadata"]["v"] == 3.6666666666666665
    # Not numbers: an exponent, a decimal comma, a thousands separator, more digits than a JSON number keeps.
    for cell in ("1e3", '"7,5"', '"1,000"', "12345678901234567"):
        assert parse_csv(f"text,v\na,{cell}\n")[0]["metadata"]["v"] == cell.strip('"')
