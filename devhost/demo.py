"""End-to-end demo: Azurite + the local Functions host + the CLI on the bundled sample survey.

``python -m devhost.demo`` (what ``scripts/demo`` runs):

1. starts a private Azurite on free ports (or reuses ``THEMATIQ_TEST_STORAGE``),
2. starts the dev host (``python -m devhost``) with a random function key,
3. submits ``samples/feedback.csv`` to the ``thematic`` pipeline through the
   CLI's code path (file parsing, HTTP client, live progress),
4. prints the themes as a table and saves the Markdown and CSV reports,
5. stops the host and Azurite - also on Ctrl-C, SIGTERM or any failure.

``--keep-running`` leaves both up afterwards and prints the URL and key for
curl / ``thematiq`` experiments until Ctrl-C. If the thematic pipeline cannot
be imported (or its embedding model is missing) the demo falls back to the
``sleep`` pipeline and says so.
"""

from __future__ import annotations

import argparse
import importlib
import json
import secrets
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from types import FrameType
from typing import Any

from devhost.azurite import Azurite
from devhost.process import REPO_ROOT, HostProcess
from thematiq_cli.client import ApiError, Client, CliError
from thematiq_cli.inputs import load_responses, parse_params
from thematiq_cli.render import elapsed_between, themes_table
from thematiq_cli.waiting import Poller, wait_for_job

DEFAULT_FILE = REPO_ROOT / "samples" / "feedback.csv"
DEFAULT_OUT = REPO_ROOT / ".artifacts" / "demo"
TENANT = "local"


def say(text: str = "") -> None:
    print(text, flush=True)


_T0 = time.monotonic()


def step(text: str) -> None:
    # The elapsed time on every step shows where a slow demo spends it.
    say(f"\n==> {text}  [{time.monotonic() - _T0:.1f}s]")


def thematic_unavailable() -> str | None:
    """Why the thematic pipeline cannot run here, or None if it can."""
    try:
        importlib.import_module("pipelines.thematic")
        embed = importlib.import_module("pipelines.thematic.embed")
        path = embed.model_path()
    except Exception as err:  # noqa: BLE001 - any import problem means "fall back", and we say why
        return f"{type(err).__name__}: {err}"
    if not Path(path).is_file():
        return f"the embedding model is missing ({path}); run scripts/bootstrap"
    return None


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Same clean-up path as Ctrl-C: the finally blocks stop the host and Azurite.
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m devhost.demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipeline", default="thematic", help="pipeline to run (default: thematic)")
    p.add_argument("--file", type=Path, default=DEFAULT_FILE, help="responses to analyse (CSV/JSONL/text)")
    p.add_argument("--column", help="text column of --file (default: auto-detect)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="pipeline parameter, e.g. --param llm=off (repeatable)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to save the reports (default: {DEFAULT_OUT})")
    p.add_argument("--keep-running", action="store_true",
                   help="leave the host and Azurite running afterwards (Ctrl-C stops them)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Restore Ctrl-C even if a parent shell started us with SIGINT ignored (e.g. `cmd &`).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    code = 1
    with ExitStack() as cleanup:
        try:
            code = _run(args, cleanup, started)
        except KeyboardInterrupt:
            say("\ninterrupted; shutting down")
            code = 130
        except CliError as err:
            say(err.render())
            code = 1
        except RuntimeError as err:
            # HostProcess / Azurite start-up failures carry the log tail in the message.
            say(f"error: {err}")
            code = 1
        step("stopping the host and Azurite")
        # Shutdown is bounded (SIGKILL after a timeout); a second Ctrl-C here would only orphan processes.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The ExitStack has now stopped the host and Azurite (in reverse start order).
    say("    stopped")
    return code


def _run(args: argparse.Namespace, cleanup: ExitStack, started: float) -> int:
    pipeline = args.pipeline
    params = parse_params(args.param)
    if pipeline == "thematic":
        why = thematic_unavailable()
        if why:
            say(f"note: the thematic pipeline is not available yet ({why});\n"
                "      running the `sleep` pipeline instead to show the job platform.")
            pipeline, params = "sleep", {"seconds": 4, "steps": 20}
    items = load_responses(args.file, args.column)

    step("starting Azurite")
    conn = _storage(cleanup)

    step("starting the Functions host (python -m devhost)")
    key = secrets.token_urlsafe(18)
    suffix = secrets.token_hex(3)
    env = {
        "AzureWebJobsStorage": conn,
        "DEVHOST_FUNCTION_KEY": key,
        "DEVHOST_MASTER_KEY": secrets.token_urlsafe(18),
        "DEFAULT_TENANT": TENANT,
        # Own names: a reused Azurite may hold other jobs; the demo shows only its own.
        "JOBS_TABLE": f"demojobs{suffix}",
        "JOBS_QUEUE": f"demo-jobs-{suffix}",
        "RESULTS_CONTAINER": f"demo-results-{suffix}",
        # Smoother live progress than the production default of one write per 3 s.
        "PROGRESS_MIN_INTERVAL_SECONDS": "0.5",
    }
    # Short grace: the demo's storage is thrown away, so in-flight jobs need not finish.
    host = HostProcess(REPO_ROOT, env=env, grace=2)
    cleanup.callback(_stop_host, host)
    host.start(timeout=60)
    say(f"    {host.url}  (log: {host.log_path})")
    client = Client(host.url, key, TENANT)

    step(f"submitting {_rel(args.file)} ({len(items)} responses) to the `{pipeline}` pipeline")
    input_: Any = items
    _, job = client.submit(pipeline, params, input_)
    job_id = str(job["id"])
    say(f"    job {job_id}")
    try:
        job = wait_for_job(client, job_id, out=sys.stdout, poller=Poller(min_interval=0.25, max_interval=1.0))
    except KeyboardInterrupt:
        say(f"\ninterrupted before job {job_id} finished; shutting down")
        return 130
    took = elapsed_between(job) or "?"
    if job["status"] != "succeeded":
        err = job.get("error") or {}
        say(f"\nerror: job {job_id} {job['status']} after {took}: {err.get('type', '')}: {err.get('message', '')}")
        say(f"host log: {host.log_path}")
        return 1
    say(f"    succeeded in {took}")

    reports = _show_result(client, job_id, pipeline, args.out)
    say(f"\nDemo finished in {time.monotonic() - started:.0f} s.")
    if reports:
        say("Reports saved: " + ", ".join(_rel(p) for p in reports))
    if args.keep_running:
        return _keep_running(host.url, key, job_id, pipeline)
    say("Re-run with --keep-running to explore the API with curl or the thematiq CLI.")
    return 0


def _storage(cleanup: ExitStack) -> str:
    import os

    existing = os.environ.get("THEMATIQ_TEST_STORAGE")
    if existing:
        say("    reusing THEMATIQ_TEST_STORAGE")
        return existing
    az = Azurite.private()
    cleanup.callback(az.close)
    az.start()
    say(f"    private instance on ports {az.ports[0]}-{az.ports[2]} (data in {az.location})")
    return az.connection_string


def _stop_host(host: HostProcess) -> None:
    if host.running():
        host.stop(timeout=20)


def _show_result(client: Client, job_id: str, pipeline: str, out_dir: Path) -> list[Path]:
    result = json.loads(client.result(job_id, "json"))
    if pipeline != "thematic" or not isinstance(result, dict) or "themes" not in result:
        step("result")
        say(json.dumps(result, indent=2)[:2000])
        return []
    step("themes")
    say(themes_table(result))
    llm = (result.get("run") or {}).get("llm") or {}
    if not llm.get("used"):
        say("\n(labels come from keywords: no LLM is configured; see docs/llm.md)")
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for fmt in ("md", "csv", "json"):
        try:
            body = client.result(job_id, fmt)
        except ApiError as err:
            say(f"note: could not fetch the {fmt} report: {err.render()}")
            continue
        path = out_dir / f"{job_id}.{fmt}"
        path.write_bytes(body)
        saved.append(path)
    return saved


def _keep_running(url: str, key: str, job_id: str, pipeline: str) -> int:
    step("still running (Ctrl-C stops the host and Azurite)")
    say(f"""
    export THEMATIQ_URL={url}
    export THEMATIQ_KEY={key}

    thematiq list
    thematiq status {job_id}
    thematiq result {job_id} --format md{f'''
    thematiq themes {job_id}''' if pipeline == "thematic" else ""}
    thematiq submit samples/feedback.csv --wait

    curl -s -H "x-functions-key: $THEMATIQ_KEY" $THEMATIQ_URL/api/jobs/{job_id}
    curl -s "$THEMATIQ_URL/api/jobs/{job_id}/result?format=md&code=$THEMATIQ_KEY"
    curl -s $THEMATIQ_URL/api/health
""")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        say("")
    return 0


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    raise SystemExit(main())
