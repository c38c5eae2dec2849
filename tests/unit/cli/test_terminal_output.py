"""The CLI's human views print survey text (answers, ids, labels, metadata, errors) to a terminal: no character of
that data may act on the terminal. ESC opens control sequences (clear the screen, retitle the window, write the
clipboard with OSC 52, forge hyperlinks with OSC 8), BEL and the C1 controls (8-bit CSI) too, and bidi overrides
reorder what is shown. They print as U+FFFD; the JSON and CSV views keep the data as it is."""

from __future__ import annotations

import io
from typing import Any

import pytest

from thematiq_cli.render import (
    breakdown_table,
    comparison_table,
    impact_table,
    job_details,
    job_list,
    themes_table,
    write_responses,
)
from thematiq_cli.waiting import progress_text

HOSTILE = "late \x1b]52;c;ZWNobyBwd25lZA==\x07 again \x1b[2J\x9b31m \u202egnp.exe\u202c \x08\x7f end"
CONTROLS = ["\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\x08", "\x7f"]


def _clean(text: str) -> None:
    found = [repr(c) for c in CONTROLS if c in text]
    assert not found, f"{found} reach the terminal"
    assert "late" in text  # the rest of the text is still shown (up to where a table clips it)


def _job(**extra: Any) -> dict[str, Any]:
    return {"id": "fe5dc4f" + "0" * 21, "pipeline": "thematic", "status": "failed", "attempts": 1,
            "max_attempts": 3, "created_at": "2026-12-03T08:00:00Z",
            "progress": {"stage": "embed", "processed": 1, "total": 2, "message": HOSTILE},
            "error": {"type": "PipelineError", "message": HOSTILE}, **extra}


def _result() -> dict[str, Any]:
    theme = {"id": "t1", "label": HOSTILE, "count": 3, "share": 0.5, "keywords": [HOSTILE],
             "quotes": [{"response_id": "r1", "text": HOSTILE}]}
    return {
        "themes": [theme],
        "run": {"counts": {"responses": 6, "themed": 3, "other": 3}, "theme_count": {"explanation": HOSTILE}},
        "breakdowns": [{"field": "plan", "kind": "categorical", "groups": [
            {"value": HOSTILE, "n": 3, "themes": [{"theme_id": "t1", "share": 0.5, "lift": 1.2}]}]}],
        "impact": {"key": HOSTILE, "scale": "numeric", "overall": 1.0, "n": 6,
                   "themes": [{"theme_id": "t1", "label": HOSTILE, "n": 3, "score": 1.0, "impact": 0.1}]},
        "comparison": {"job_id": HOSTILE, "n_then": 10, "n_now": 6, "themes": [
            {"theme_id": "t1", "label": HOSTILE, "share_then": 0.1, "share_now": 0.5, "change": 0.4, "significant": True,
             "status": "kept"}]},
    }


@pytest.mark.parametrize("view", ["themes", "breakdown", "impact", "changes", "job", "jobs", "progress"])
def test_no_view_lets_data_reach_the_terminal_as_control_characters(view: str) -> None:
    out = {
        "themes": lambda: themes_table(_result()),
        "breakdown": lambda: breakdown_table(_result(), "plan"),
        "impact": lambda: impact_table(_result()["impact"]),
        "changes": lambda: comparison_table(_result()["comparison"]),
        "job": lambda: job_details(_job(params={"label_language": HOSTILE})),
        "jobs": lambda: job_list([_job()]),
        "progress": lambda: progress_text(_job(status="running"), 3.0, width=200),
    }[view]()
    _clean(out)


def test_the_responses_table_shows_ids_and_texts_without_their_control_characters() -> None:
    rows = [{"id": "r\x1b[8m1", "text": HOSTILE, "bucket": "theme", "metadata": {},
             "themes": [{"theme_id": "t1", "label": HOSTILE, "confidence": 0.5}],
             "sentiment": {"label": "negative", "score": -0.5}}]
    out = io.StringIO()
    assert write_responses(iter(rows), "table", out) == 1
    _clean(out.getvalue())
    assert "\x1b" not in out.getvalue()


def test_json_output_keeps_the_data_as_it_is() -> None:
    rows = [{"id": "r1", "text": HOSTILE, "bucket": "theme", "metadata": {}, "themes": []}]
    out = io.StringIO()
    write_responses(iter(rows), "jsonl", out)
    import json

    assert json.loads(out.getvalue())["text"] == HOSTILE


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("fmt", ["csv", "md", "json"])
def test_thematiq_result_on_a_terminal_prints_no_control_characters_and_piped_keeps_the_bytes(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse
    import json

    from thematiq_cli import main

    body = {"csv": f"response_id,text\r\nr1,{HOSTILE}\r\n".encode(), "md": f"# Report\n\n> {HOSTILE}\n".encode(),
            "json": json.dumps({"text": HOSTILE}, ensure_ascii=False).encode()}[fmt]

    class _Client:
        def result(self, job_id: str, format: str) -> bytes:
            return body

    monkeypatch.setattr(main, "client_of", lambda args: _Client())
    args = argparse.Namespace(job_id="j", format=fmt, output=None)
    tty = _Tty()
    assert main.cmd_result(args, main.Io(out=tty, err=io.StringIO())) == 0
    _clean(tty.getvalue())
    piped = io.StringIO()
    main.cmd_result(args, main.Io(out=piped, err=io.StringIO()))
    assert piped.getvalue() == body.decode()  # not a terminal: what the API sent


@pytest.mark.parametrize("view", ["status", "list", "responses-jsonl", "responses-csv", "error"])
def test_json_csv_and_error_views_on_a_terminal_print_no_control_characters_and_piped_keep_the_data(
    view: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only `thematiq result` checked for a terminal: status --json, list --json, responses -f json/jsonl/csv and
    # the service's error details printed a job's error, a response's text or a problem's detail as they came.
    import json

    from thematiq_cli import main
    from thematiq_cli.client import ApiError

    row = {"id": "r1", "text": HOSTILE, "bucket": "theme", "metadata": {"plan": HOSTILE}, "themes": []}

    class _Client:
        def get(self, job_id: str) -> dict[str, Any]:
            return _job()

        def list(self, **kw: Any) -> dict[str, Any]:
            return {"items": [_job()]}

        def response_page(self, *a: Any) -> dict[str, Any]:
            return {"items": [row]}

    def failing(args: Any, io: Any) -> int:
        raise ApiError(422, {"title": "Request validation failed", "detail": HOSTILE,
                             "errors": [{"field": "input[0].id", "message": HOSTILE}]})

    monkeypatch.setattr(main, "client_of", lambda args: _Client())
    argv = {"status": ["status", "j", "--json"], "list": ["list", "--json"],
            "responses-jsonl": ["responses", "j", "-f", "jsonl"], "responses-csv": ["responses", "j", "-f", "csv"],
            "error": ["status", "j"]}[view]
    if view == "error":
        monkeypatch.setattr(main, "cmd_status", failing)
    for out_is_tty in (True, False):
        out, err = (_Tty() if out_is_tty else io.StringIO()), _Tty()
        code = main.run(argv, main.Io(out=out, err=err))
        assert code == (3 if view == "error" else 0), err.getvalue()
        if view == "error":
            _clean(err.getvalue())
        elif out_is_tty:
            _clean(out.getvalue())
        else:  # piped: the data as it is
            got = {"status": lambda t: json.loads(t)["error"]["message"],
                   "list": lambda t: json.loads(t)[0]["error"]["message"],
                   "responses-jsonl": lambda t: json.loads(t)["text"], "responses-csv": lambda t: t}[view]
            assert HOSTILE in got(out.getvalue())


def test_the_changes_view_gives_both_shares_and_the_change_in_points() -> None:
    # thematiq changes ID: the CLI had no view of a compared job's change (the report and the dashboard had).
    out = comparison_table({"job_id": "j1", "n_then": 900, "n_now": 911, "themes": [
        {"theme_id": "t9", "label": "Cash withdrawal", "share_then": 0.0456, "share_now": 0.0944, "change": 0.0488,
         "significant": True, "status": "kept"},
        {"theme_id": "t3", "label": "Fees", "share_then": 0.05, "share_now": 0.049, "change": -0.001,
         "significant": False, "status": "kept"},
        {"theme_id": "t30", "label": "Crypto", "share_then": None, "share_now": 0.02, "change": None,
         "significant": False, "status": "new"}]})
    lines = out.splitlines()
    assert "900 usable responses then, 911 now" in lines[0]
    assert lines[4].split() == ["4.6%", "9.4%", "+4.9", "pts*", "kept", "Cash", "withdrawal"]
    assert lines[5].split() == ["5.0%", "4.9%", "-0.1", "pts", "kept", "Fees"]
    assert lines[6].split() == ["-", "2.0%", "-", "new", "Crypto"]


def test_the_impact_note_says_its_intervals_are_not_corrected_for_the_number_of_themes() -> None:
    assert "not corrected for the 1 theme:" in impact_table(_result()["impact"])


def test_an_xlsx_result_is_not_written_to_a_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # review44: `thematiq result ID --format xlsx` without -o wrote the workbook's zip bytes to the terminal
    # (garbage, and any ESC byte among them a control sequence). Piped or with -o it is the file, as before.
    import argparse

    from thematiq_cli import main
    from thematiq_cli.client import CliError

    body = b"PK\x03\x04\x1b]0;owned\x07 a zip"
    calls: list[str] = []

    class _Client:
        def result(self, job_id: str, format: str) -> bytes:
            calls.append(format)
            return body

    monkeypatch.setattr(main, "client_of", lambda args: _Client())
    tty = _Tty()
    with pytest.raises(CliError, match=r"binary; write it to a file: thematiq result j --format xlsx -o j.xlsx"):
        main.cmd_result(argparse.Namespace(job_id="j", format="xlsx", output=None), main.Io(out=tty, err=io.StringIO()))
    assert tty.getvalue() == "" and calls == []  # nothing downloaded, nothing printed
    out = tmp_path / "r.xlsx"
    assert main.cmd_result(argparse.Namespace(job_id="j", format="xlsx", output=out),
                           main.Io(out=_Tty(), err=io.StringIO())) == 0
    assert out.read_bytes() == body
