"""The ``thematiq`` command: submit jobs, follow them, and fetch their results.

Run ``thematiq --help`` or ``thematiq COMMAND --help``. Connection settings come
from ``--url`` / ``--key`` / ``--tenant`` or ``THEMATIQ_URL`` / ``THEMATIQ_KEY``
/ ``THEMATIQ_TENANT``.

Output convention: data (job ids, JSON, results, tables) goes to stdout so it
can be piped; progress and hints go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .client import DEFAULT_URL, ApiError, Client, CliError
from .inputs import load_responses, parse_params
from .render import (
    RESULT_FORMATS,
    breakdown_table,
    comparison_table,
    elapsed_between,
    impact_table,
    job_details,
    job_list,
    result_formats,
    themes_table,
    write_responses,
)
from .terminal import VisibleWriter, visible
from .waiting import Poller, wait_for_job

EXIT_OK = 0
EXIT_JOB_FAILED = 1  # the job ended failed or cancelled
EXIT_USAGE = 2  # bad arguments or input file (argparse uses 2 too)
EXIT_API = 3  # the service answered with an error
EXIT_UNREACHABLE = 4  # the service could not be reached
EXIT_TIMEOUT = 5  # --timeout elapsed while waiting
EXIT_INTERRUPTED = 130  # Ctrl-C, by shell convention 128 + SIGINT

LIST_PAGE_MAX = 200

EPILOG = f"""\
environment:
  THEMATIQ_URL               the API: a host (default {DEFAULT_URL}, meaning its /api),
                             or the API root with its path, e.g. a gateway's https://NAME.azure-api.net/thematiq
  THEMATIQ_KEY               function key, sent as x-functions-key
  THEMATIQ_SUBSCRIPTION_KEY  API Management subscription key, sent as Ocp-Apim-Subscription-Key
  THEMATIQ_TENANT            tenant header (locally the host defaults to "local")

exit codes:
  0 success   1 job failed or cancelled   2 usage or input error
  3 API error   4 service unreachable   5 wait timed out   130 interrupted
"""


def _connection_flags(default: Any) -> argparse.ArgumentParser:
    # Used twice: on the main parser (defaults None) and on each subcommand with
    # SUPPRESS, so flags work before or after the command without clobbering.
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection")
    g.add_argument("--url", default=default, help="API base URL (env THEMATIQ_URL)")
    g.add_argument("--key", default=default, help="function key (env THEMATIQ_KEY)")
    g.add_argument("--subscription-key", default=default,
                   help="API Management subscription key (env THEMATIQ_SUBSCRIPTION_KEY)")
    g.add_argument("--tenant", default=default, help="tenant header value (env THEMATIQ_TENANT)")
    return p


def _wait_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop waiting after this long (exit 5; the job keeps running)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output while waiting")
    return p


def build_parser() -> argparse.ArgumentParser:
    common = _connection_flags(argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="thematiq", description="Client of the Thematiq jobs API.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=[_connection_flags(None)],
    )
    parser.add_argument("--version", action="version", version=f"thematiq {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help_: str, *parents: argparse.ArgumentParser) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, parents=[common, *parents])

    s = add("submit", "submit a file of responses as a job", _wait_flags())
    s.add_argument("file", type=Path,
                   help="Excel .xlsx, CSV/TSV (UTF-8, UTF-16 with BOM or cp1252), JSONL, JSON array, "
                        "or text with one response per line")
    s.add_argument("--pipeline", "-p", default="thematic", help="pipeline name (default: thematic)")
    s.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a pipeline parameter; VALUE is parsed as JSON when possible (repeatable)")
    s.add_argument("--params-json", metavar="JSON", help="all parameters as a JSON object (--param wins)")
    s.add_argument("--column", "-c", help="text column/field (default: text, response, answer, comment, feedback)")
    s.add_argument("--id-column", help="id column/field (default: a column named id, else the row number)")
    s.add_argument("--format", choices=["csv", "jsonl", "json", "text", "xlsx"], dest="input_format",
                   help="input format (default: from the file extension)")
    s.add_argument("--idempotency-key", metavar="KEY",
                   help="resubmitting with the same key returns the same job (default: a fresh key per submit)")
    s.add_argument("--callback-url", metavar="URL", help="POST the job's JSON to this https URL when it ends")
    s.add_argument("--sheet", help="worksheet of an .xlsx file (default: the first)")
    s.add_argument("--encoding", help="text encoding of a CSV/text file (default: detected; UTF-8, UTF-16, cp1252)")
    s.add_argument("--wait", "-w", action="store_true", help="wait for the job to finish, showing progress")
    s.set_defaults(func=cmd_submit)

    s = add("status", "show one job")
    s.add_argument("job_id", metavar="ID")
    s.add_argument("--json", action="store_true", help="print the job JSON")
    s.set_defaults(func=cmd_status)

    s = add("wait", "wait for a job to finish, showing progress", _wait_flags())
    s.add_argument("job_id", metavar="ID")
    s.set_defaults(func=cmd_wait)

    s = add("list", "list jobs, newest first")
    s.add_argument("--status",
                   choices=["queued", "running", "retrying", "waiting", "succeeded", "failed", "cancelled"])
    s.add_argument("--pipeline", "-p")
    s.add_argument("--limit", "-n", type=int, default=20, help="jobs per page (default 20, max 200)")
    s.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    s.add_argument("--json", action="store_true", help="print the items as JSON")
    s.set_defaults(func=cmd_list)

    s = add("cancel", "cancel a job")
    s.add_argument("job_id", metavar="ID")
    s.set_defaults(func=cmd_cancel)

    s = add("retry", "resubmit a failed or cancelled job's input as a new job", _wait_flags())
    s.add_argument("job_id", metavar="ID")
    s.add_argument("--wait", "-w", action="store_true", help="wait for the new job to finish")
    s.set_defaults(func=cmd_retry)

    s = add("result", "download a job's result")
    s.add_argument("job_id", metavar="ID")
    s.add_argument("--format", "-f", choices=RESULT_FORMATS, default="json")
    s.add_argument("--output", "-o", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    s.set_defaults(func=cmd_result)

    s = add("themes", "print the themes of a thematic result as a table")
    s.add_argument("job_id", metavar="ID")
    s.set_defaults(func=cmd_themes)

    s = add("breakdown", "print how the themes of a thematic result differ by a metadata field")
    s.add_argument("job_id", metavar="ID")
    s.add_argument("--by", required=True, metavar="FIELD",
                   help="a metadata key the job was submitted with in params.breakdown_by")
    s.set_defaults(func=cmd_breakdown)

    s = add("responses", "every response of a thematic job with its text, themes and sentiment (filterable)")
    s.add_argument("job_id", metavar="ID")
    s.add_argument("--theme", help="a theme (t3) or broad theme (p1) id")
    s.add_argument("--subtheme", help="a sub-theme id (t3.2: coded on a response's primary theme), or a theme id "
                   "when the broad level is broad themes (as --theme: primary or secondary)")
    s.add_argument("--bucket", choices=["theme", "other", "unusable"])
    s.add_argument("--sentiment", choices=["positive", "neutral", "negative"])
    s.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep responses whose metadata KEY is VALUE (repeatable for other keys: all must match)")
    s.add_argument("--missing", metavar="KEY", help="keep responses without a value for metadata KEY (a breakdown's "
                   "(missing) group; --where KEY='(missing)' is a response that answered \"(missing)\")")
    s.add_argument("--other-values", dest="other_values", metavar="KEY",
                   help="keep the responses the breakdown by KEY pooled as \"other values\"")
    s.add_argument("--format", "-f", choices=["table", "csv", "json", "jsonl"], default="table",
                   help="table (default), csv (formula-safe, one column per metadata key), json or jsonl")
    s.add_argument("--limit", "-n", type=int, default=None, metavar="N", help="at most N responses (default: all)")
    s.add_argument("--output", "-o", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    s.set_defaults(func=cmd_responses)

    s = add("changes", "print how each theme's share changed since the compared job (params.compare_to)")
    s.add_argument("job_id", metavar="ID")
    s.set_defaults(func=cmd_changes)

    s = add("impact", "print each theme's impact on the score of a thematic result (params.score), ranked")
    s.add_argument("job_id", metavar="ID")
    s.set_defaults(func=cmd_impact)

    s = add("health", "check that the service and its storage answer")
    s.set_defaults(func=cmd_health)
    return parser


# -- commands -------------------------------------------------------------------
class Io:
    """Where commands write; replaced in tests and by the demo."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str = "") -> None:
        print(text, file=self.err, flush=True)

    def data(self, text: str) -> None:
        """A data view (JSON): as it is when piped; on a terminal without the characters that act on it."""
        self.say(visible(text) if self.out.isatty() else text)


def client_of(args: argparse.Namespace) -> Client:
    return Client.from_env(args.url, args.key, args.tenant, args.subscription_key)


def cmd_submit(args: argparse.Namespace, io: Io) -> int:
    params = parse_params(args.param, args.params_json)
    items = load_responses(args.file, args.column, args.id_column, args.input_format, sheet=args.sheet,
                           encoding=args.encoding)
    client = client_of(args)
    created, job = client.submit(args.pipeline, params, items, args.idempotency_key, args.callback_url)
    job_id = str(job["id"])
    how = "submitted" if created else "already submitted (same Idempotency-Key)"
    io.note(f"{how}: job {job_id} ({args.pipeline}, {len(items)} responses from {args.file.name}, "
            f"status {job.get('status')})")
    io.say(job_id)
    if not args.wait:
        io.note(f"follow it with: thematiq wait {job_id}")
        return EXIT_OK
    return follow(client, job_id, io, args.timeout, args.quiet)


def cmd_wait(args: argparse.Namespace, io: Io) -> int:
    return follow(client_of(args), args.job_id, io, args.timeout, args.quiet)


def follow(client: Client, job_id: str, io: Io, timeout: float | None = None, quiet: bool = False,
           poller: Poller | None = None) -> int:
    """Wait for ``job_id`` and report how it ended; the exit code reflects the job's outcome."""
    try:
        job = wait_for_job(client, job_id, out=io.err, poller=poller, timeout=timeout, show=not quiet)
    except KeyboardInterrupt:
        io.note(f"\nstopped waiting; job {job_id} keeps running on the service.")
        io.note(f"  resume with: thematiq wait {job_id}    (or stop it: thematiq cancel {job_id})")
        return EXIT_INTERRUPTED
    except TimeoutError as err:
        io.note(f"error: {err}; resume with: thematiq wait {job_id}")
        return EXIT_TIMEOUT
    return report_outcome(job, io)


def report_outcome(job: dict[str, Any], io: Io) -> int:
    job_id, status = job.get("id"), job.get("status")
    took = elapsed_between(job)
    took_text = f" in {took}" if took else ""
    if status == "succeeded":
        io.note(f"job {job_id} succeeded{took_text}.")
        io.note(f"  result: thematiq result {job_id} --format {result_formats(job.get('pipeline'))}"
                + (f"   themes: thematiq themes {job_id}" if job.get("pipeline") == "thematic" else ""))
        return EXIT_OK
    err = job.get("error") or {}
    if status == "cancelled":
        io.note(f"job {job_id} was cancelled{took_text}.")
    else:
        reason = f"{err.get('type', 'error')}: {err.get('message', 'no reason given')}" if err else "no reason given"
        io.note(f"error: job {job_id} failed after {job.get('attempts')} attempt(s){took_text}: {reason}")
    return EXIT_JOB_FAILED


def cmd_status(args: argparse.Namespace, io: Io) -> int:
    job = client_of(args).get(args.job_id)
    if args.json:
        io.data(json.dumps(job, indent=2, ensure_ascii=False))
    else:
        io.say(job_details(job))
    return EXIT_OK


def cmd_list(args: argparse.Namespace, io: Io) -> int:
    if not 1 <= args.limit <= LIST_PAGE_MAX:
        raise CliError(f"error: --limit must be between 1 and {LIST_PAGE_MAX}")
    client = client_of(args)
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = client.list(status=args.status, pipeline=args.pipeline, limit=args.limit, cursor=cursor)
        items.extend(page.get("items") or [])
        cursor = page.get("next_cursor")
        if not cursor or not args.all:
            break
    if args.json:
        io.data(json.dumps(items, indent=2, ensure_ascii=False))
    elif items:
        io.say(job_list(items))
    else:
        io.note("no jobs")
    if cursor and not args.all:
        io.note(f"(more jobs: --all, or --limit up to {LIST_PAGE_MAX})")
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace, io: Io) -> int:
    job = client_of(args).cancel(args.job_id)
    status = job.get("status")
    if status == "cancelled":
        io.note(f"job {job['id']} is cancelled.")
    elif status in ("succeeded", "failed"):
        io.note(f"job {job['id']} had already {status}; nothing to cancel.")
    else:
        io.note(f"cancel requested: job {job['id']} is {status} and will stop shortly "
                f"(thematiq wait {job['id']} to follow it).")
    return EXIT_OK


def cmd_retry(args: argparse.Namespace, io: Io) -> int:
    client = client_of(args)
    job = client.retry(args.job_id)
    io.note(f"job {args.job_id} resubmitted as job {job['id']} (status {job.get('status')})")
    io.say(str(job["id"]))
    return follow(client, str(job["id"]), io, args.timeout, args.quiet) if args.wait else EXIT_OK


def cmd_result(args: argparse.Namespace, io: Io) -> int:
    if args.format == "xlsx" and not args.output and io.out.isatty():
        # A workbook is a zip: on a terminal its bytes are garbage, and an ESC among them a control sequence.
        raise CliError(f"error: an .xlsx workbook is binary; write it to a file: thematiq result {args.job_id} "
                       f"--format xlsx -o {args.job_id}.xlsx")
    body = client_of(args).result(args.job_id, args.format)
    if args.output:
        try:
            args.output.write_bytes(body)
        except OSError as err:
            raise CliError(f"error: cannot write {args.output}: {err.strerror}") from None
        io.note(f"wrote {len(body)} bytes to {args.output}")
        return EXIT_OK
    if args.format == "json" and io.out.isatty():
        # Pretty for a human; piped output stays byte-for-byte what the API sent.
        io.say(visible(json.dumps(json.loads(body), indent=2, ensure_ascii=False)))
        return EXIT_OK
    if args.format in ("csv", "md", "codebook") and io.out.isatty():
        # Read on a terminal: the tenant's texts as they are would reach it as control sequences.
        io.out.write(visible(body.decode("utf-8", "replace").replace("\r\n", "\n")))
        io.out.flush()
        return EXIT_OK
    buffer = getattr(io.out, "buffer", None)
    if buffer is not None:
        io.out.flush()
        buffer.write(body)
        buffer.flush()
    else:
        io.out.write(body.decode("utf-8", "replace"))
    return EXIT_OK


def _thematic_result(args: argparse.Namespace) -> dict[str, Any]:
    """The job's result document, or a CliError saying why it is not a thematic one."""
    try:
        result = json.loads(client_of(args).result(args.job_id, "json"))
    except ValueError:
        raise CliError("error: the result is not JSON") from None
    if not isinstance(result, dict) or "themes" not in result:
        raise CliError(f"error: job {args.job_id} has no themes (is it a thematic job?); "
                       f"see the raw result with: thematiq result {args.job_id}")
    return result


def cmd_themes(args: argparse.Namespace, io: Io) -> int:
    io.say(themes_table(_thematic_result(args)))
    return EXIT_OK


def cmd_breakdown(args: argparse.Namespace, io: Io) -> int:
    result = _thematic_result(args)
    try:
        io.say(breakdown_table(result, args.by))
    except KeyError as err:
        raise CliError(f"error: {err.args[0]}; submit with --param breakdown_by='[\"{args.by}\"]'") from None
    return EXIT_OK


RESPONSES_PAGE = 500


def _where(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"error: --where takes KEY=VALUE (got {pair!r})")
        if key in out:
            # Every --where must match and a response has one value per key: the later one silently replaced the
            # first (input42), where the service refuses a filter given twice.
            raise CliError(f"error: --where {key}= is given twice ({out[key]!r} and {value!r}); every --where must "
                           "match, so give each key once")
        out[key] = value
    return out


def cmd_responses(args: argparse.Namespace, io: Io) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError("error: --limit must be at least 1")
    client = client_of(args)
    filters = {k: v for k in ("theme", "subtheme", "bucket", "sentiment", "missing", "other_values")
               if (v := getattr(args, k))}
    metadata = _where(args.where)
    counts: dict[str, Any] = {}

    def rows() -> Iterator[dict[str, Any]]:
        # Pages are fetched as the output gets to them; --limit stops early.
        cursor: str | None = None
        left = args.limit
        while True:
            size = RESPONSES_PAGE if left is None else min(RESPONSES_PAGE, left)
            page = client.response_page(args.job_id, filters, metadata, size, cursor)
            counts.update(total=page.get("total"), usable=page.get("usable"))
            yield from page["items"]
            if left is not None:
                left -= len(page["items"])
            cursor = page.get("next_cursor")
            if not cursor or (left is not None and left <= 0):
                return

    # On a terminal the json, jsonl and csv views lose what would act on it (the table view does so itself).
    out: Any = args.output.open("w", encoding="utf-8", newline="") if args.output else (
        VisibleWriter(io.out) if io.out.isatty() else io.out)
    try:
        n = write_responses(rows(), args.format, out)
    except OSError as err:
        raise CliError(f"error: cannot write {args.output}: {err.strerror}") from None
    finally:
        if args.output:
            out.close()
    if args.output or args.format == "table":
        # The listing keeps unusable rows; a breakdown's n counts the usable ones: say both, so a segment's
        # count is recognisably the breakdown's.
        usable = "" if counts.get("usable") is None else (
            f"; {counts['usable']} of the {counts['total']} matching are usable (the n a breakdown states)")
        io.note(f"{n} response{'s' if n != 1 else ''}" + (f" written to {args.output}" if args.output else "") + usable)
    return EXIT_OK


def _result_part(args: argparse.Namespace, io: Io, part: str, render: Callable[[Any], str], how: str) -> int:
    """Print one part of a thematic result (``comparison``, ``impact``), or say how to submit for it."""
    result = _thematic_result(args)
    if not result.get(part):
        raise CliError(f"error: job {args.job_id} has no {part}; {how}")
    io.say(render(result[part]))
    return EXIT_OK


def cmd_changes(args: argparse.Namespace, io: Io) -> int:
    return _result_part(args, io, "comparison", comparison_table,
                        "submit the later wave with --param compare_to=EARLIER_JOB_ID")


def cmd_impact(args: argparse.Namespace, io: Io) -> int:
    return _result_part(args, io, "impact", impact_table,
                        "submit with --param score='{\"key\": \"nps\", \"scale\": \"nps\"}'")


def cmd_health(args: argparse.Namespace, io: Io) -> int:
    client = client_of(args)
    body = client.health()
    io.say(f"{client.url}: " + ", ".join(f"{k} {v}" for k, v in body.items()))
    return EXIT_OK


Command = Callable[[argparse.Namespace, Io], int]


def run(argv: Sequence[str] | None = None, io: Io | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit code (never raises for expected errors)."""
    io = io or Io()
    args = build_parser().parse_args(argv)
    func: Command = args.func
    try:
        return func(args, io)
    except ApiError as err:
        io.note(visible(err.render()))  # a problem's detail may quote data (an id, a label, a URL)
        return EXIT_API
    except CliError as err:
        io.note(visible(err.render()))
        return err.exit_code
    except KeyboardInterrupt:
        io.note("\ninterrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `thematiq result ID | head`: the reader left; that is not an error.
        return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point (``thematiq = "thematiq_cli.main:main"``)."""
    code = run(argv)
    sys.exit(code)


if __name__ == "__main__":
    main()
