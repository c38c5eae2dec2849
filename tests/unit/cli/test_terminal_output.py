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
    }


@pytest.mark.parametrize("view", ["themes", "breakdown", "impact", "job", "jobs", "progress"])
def test_no_view_lets_data_reach_the_terminal_as_control_characters(view: str) -> None:
    out = {
        "themes": lambda: themes_table(_result()),
        "breakdown": lambda: breakdown_table(_result(), "plan"),
        "impact": lambda: impact_table(_result()["impact"]),
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
