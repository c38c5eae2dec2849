"""The CLI against a real dev host on Azurite, with the fast ``echo`` and ``sleep`` pipelines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devhost.azurite import free_port
from devhost.process import REPO_ROOT
from tests.e2e.cli.conftest import Cli
from thematiq_cli.client import Client
from thematiq_cli.main import EXIT_API, EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK, EXIT_UNREACHABLE, Io, follow
from thematiq_cli.waiting import Poller


def _csv(tmp_path: Path) -> Path:
    f = tmp_path / "survey.csv"
    f.write_text("id,text,channel\nr1,Delivery was late,ios\nr2,Food arrived cold,web\n", encoding="utf-8")
    return f


def test_submit_wait_succeeds_and_result_round_trips(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("submit", str(_csv(tmp_path)), "--pipeline", "echo", "--wait", "--timeout", "30")
    assert code == EXIT_OK, err
    job_id = out.strip()
    assert "succeeded" in err and f"thematiq result {job_id}" in err
    # Non-TTY output: plain lines, no carriage returns.
    assert "\r" not in err

    code, out, _ = cli("result", job_id)
    assert code == EXIT_OK
    assert json.loads(out)["echo"] == [
        {"id": "r1", "text": "Delivery was late", "metadata": {"channel": "ios"}},
        {"id": "r2", "text": "Food arrived cold", "metadata": {"channel": "web"}},
    ]
    target = tmp_path / "out.json"
    code, _, err = cli("result", job_id, "-o", str(target))
    assert code == EXIT_OK and json.loads(target.read_text())["echo"][0]["id"] == "r1"

    code, out, _ = cli("status", job_id)
    assert code == EXIT_OK and "status     succeeded" in out and "pipeline   echo" in out
    code, out, _ = cli("status", job_id, "--json")
    assert json.loads(out)["status"] == "succeeded"

    # `themes` explains itself on a non-thematic result instead of crashing.
    code, _, err = cli("themes", job_id)
    assert code != EXIT_OK and "no themes" in err


def test_jsonl_and_text_inputs_are_submitted(cli: Cli, tmp_path: Path) -> None:
    jl = tmp_path / "r.jsonl"
    jl.write_text('{"id": "a", "text": "one", "plan": "pro"}\n{"id": "b", "text": "two"}\n', encoding="utf-8")
    txt = tmp_path / "r.txt"
    txt.write_text("first\n\nsecond\n", encoding="utf-8")
    for f, expected in ((jl, ["a", "b"]), (txt, [1, 3])):
        code, out, err = cli("submit", str(f), "-p", "echo", "--wait", "--quiet", "--timeout", "30")
        assert code == EXIT_OK, err
        _, body, _ = cli("result", out.strip())
        assert [i["id"] for i in json.loads(body)["echo"]] == expected


def test_failed_job_exits_nonzero_and_prints_the_reason(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("submit", str(_csv(tmp_path)), "-p", "sleep",
                         "--params-json", '{"fail": "permanent", "seconds": 0.1}', "--wait", "--timeout", "30")
    assert code == EXIT_JOB_FAILED
    assert f"job {out.strip()} failed" in err and "sleep failed permanently on purpose" in err
    assert "Traceback" not in err


def test_bad_params_print_problem_json_readably(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("submit", str(_csv(tmp_path)), "-p", "sleep", "--param", "seconds=-1",
                         "--param", "colour=blue")
    assert code == EXIT_API and out == ""
    lines = err.splitlines()
    assert lines[0] == "error: Request validation failed (HTTP 422)"
    assert any(line.startswith("  - params.seconds: ") for line in lines)
    assert "  - params.colour: Extra inputs are not permitted" in lines

    code, _, err = cli("submit", str(_csv(tmp_path)), "-p", "no-such-pipeline")
    assert code == EXIT_API and "- pipeline: unknown pipeline; known:" in err and "echo" in err


def test_unknown_job_wrong_key_and_unreachable_host(cli: Cli) -> None:
    code, _, err = cli("status", "0" * 28)
    assert code == EXIT_API and "Not found (HTTP 404)" in err
    code, _, err = Cli(cli.url, "wrong-key")("list")
    assert code == EXIT_API and "HTTP 401" in err and "--key" in err
    code, _, err = Cli(f"http://127.0.0.1:{free_port()}", "k")("list")
    assert code == EXIT_UNREACHABLE and "connection refused" in err and "Traceback" not in err


def test_idempotency_key_returns_the_same_job(cli: Cli, tmp_path: Path) -> None:
    f = _csv(tmp_path)
    key = f"cli-{time.time_ns()}"
    code1, out1, _ = cli("submit", str(f), "-p", "echo", "--idempotency-key", key)
    code2, out2, err2 = cli("submit", str(f), "-p", "echo", "--idempotency-key", key)
    assert code1 == code2 == EXIT_OK and out1 == out2 and "already submitted" in err2
    other = tmp_path / "other.txt"
    other.write_text("a different body\n", encoding="utf-8")
    code, _, err = cli("submit", str(other), "-p", "echo", "--idempotency-key", key)
    assert code == EXIT_API and "HTTP 409" in err


def test_cancel_a_running_job_then_wait_reports_cancelled(cli: Cli, tmp_path: Path) -> None:
    code, out, _ = cli("submit", str(_csv(tmp_path)), "-p", "sleep", "--param", "seconds=30", "--param", "steps=300")
    job_id = out.strip()
    client = Client(cli.url, cli.key)
    deadline = time.monotonic() + 60  # ends once it runs; a loaded machine starts the attempt slowly
    while client.get(job_id)["status"] != "running":
        assert time.monotonic() < deadline, "job never started"
        time.sleep(0.1)
    code, _, err = cli("cancel", job_id)
    assert code == EXIT_OK and "cancel requested" in err
    code, _, err = cli("wait", job_id, "--timeout", "30")
    assert code == EXIT_JOB_FAILED and "was cancelled" in err
    code, _, err = cli("cancel", job_id)
    assert code == EXIT_OK and "is cancelled" in err


def test_list_filters_and_pages(cli: Cli, tmp_path: Path) -> None:
    f = _csv(tmp_path)
    ids = [cli("submit", str(f), "-p", "echo")[1].strip() for _ in range(3)]
    code, out, _ = cli("list", "--pipeline", "echo", "--json", "--all", "--limit", "2")
    assert code == EXIT_OK
    listed = [j["id"] for j in json.loads(out)]
    assert set(ids) <= set(listed) and len(listed) == len(set(listed))
    code, out, err = cli("list", "--limit", "1")
    assert code == EXIT_OK and out.count("\n") == 3 and "more jobs" in err  # header, rule, one row
    assert out.startswith("ID ")
    code, out, _ = cli("list", "--status", "failed", "--pipeline", "echo", "--json")
    assert code == EXIT_OK and json.loads(out) == []


def test_ctrl_c_while_waiting_prints_how_to_resume(cli: Cli, tmp_path: Path) -> None:
    _, out, _ = cli("submit", str(_csv(tmp_path)), "-p", "sleep", "--param", "seconds=2")
    job_id = out.strip()

    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    import io

    err = io.StringIO()
    code = follow(Client(cli.url, cli.key), job_id, Io(io.StringIO(), err), poller=Poller(sleep=interrupt))
    assert code == EXIT_INTERRUPTED
    assert f"thematiq wait {job_id}" in err.getvalue() and "keeps running" in err.getvalue()


def test_console_entry_point_runs_as_a_process(cli: Cli) -> None:
    # The real process path: exit code and message, no traceback, env configuration.
    env = {**os.environ, "THEMATIQ_URL": cli.url, "THEMATIQ_KEY": cli.key, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run([sys.executable, "-m", "thematiq_cli", "status", "0" * 28], env=env,
                          capture_output=True, text=True, timeout=30, cwd=REPO_ROOT)
    assert proc.returncode == EXIT_API and "Not found (HTTP 404)" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "thematiq_cli", "health"], env=env,
                          capture_output=True, text=True, timeout=30, cwd=REPO_ROOT)
    assert proc.returncode == EXIT_OK and "storage ok" in proc.stdout


@pytest.mark.parametrize("argv", [["submit"], ["result", "x", "--format", "pdf"]])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        from thematiq_cli.main import run

        run(argv)
    assert info.value.code == 2


def test_xlsx_and_cp1252_csv_are_submitted(cli: Cli, tmp_path: Path) -> None:
    from tests.unit.cli.test_spreadsheets import ACCENTED, make_xlsx

    xlsx = make_xlsx(tmp_path / "survey.xlsx", [["Survey"], ["Respondent", "Answer"],
                                                *[[f"r{i}", t] for i, t in enumerate(ACCENTED)]])
    cp1252 = tmp_path / "export.csv"
    cp1252.write_bytes(("id;text\r\n" + "".join(f"c{i};{t}\r\n" for i, t in enumerate(ACCENTED))).encode("cp1252"))
    for f, extra, ids in ((xlsx, ["--sheet", "Responses", "--id-column", "Respondent"], ["r0", "r1", "r2"]),
                          (cp1252, [], ["c0", "c1", "c2"])):
        code, out, err = cli("submit", str(f), "-p", "echo", *extra, "--wait", "--quiet", "--timeout", "30")
        assert code == EXIT_OK, err
        _, body, _ = cli("result", out.strip())
        echoed = json.loads(body)["echo"]
        assert [i["id"] for i in echoed] == ids and [i["text"] for i in echoed] == ACCENTED
    code, _, err = cli("submit", str(xlsx), "-p", "echo", "--sheet", "Nope")
    assert code == 2 and "no worksheet 'Nope'" in err


def test_retry_command_and_subscription_key_flag(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("submit", str(_csv(tmp_path)), "-p", "sleep",
                         "--params-json", '{"fail": "permanent", "seconds": 0.1}', "--wait", "--quiet")
    assert code == EXIT_JOB_FAILED
    code, new_id, err = cli("retry", out.strip())
    assert code == EXIT_OK and new_id.strip() != out.strip() and "resubmitted as job" in err
    # A subscription key is sent along (the dev host ignores it; API Management would check it).
    code, _, err = cli("status", new_id.strip(), "--subscription-key", "sub-key")
    assert code == EXIT_OK, err
