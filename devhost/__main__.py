"""``python -m devhost``: run function_app.py against Azurite like ``func start`` would.

Loads settings and host.json, starts the language worker (``python -m devhost.worker``, Microsoft's
azure-functions-runtime behind the Functions RPC protocol, devhost/rpc.py), which indexes and loads the app; an
app the runtime refuses does not start (exit code 3, with the runtime's reason). Then starts the HTTP server,
queue listeners and timers, prints the functions it found and a ready line,
and shuts down gracefully on SIGTERM/SIGINT: it stops taking new requests and
messages, lets running invocations finish within ``--grace`` seconds, then
exits. A second signal exits at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from devhost.stopsignal import StopSignal

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_LINE = "devhost ready"

log = logging.getLogger("devhost")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m devhost", description=__doc__)
    p.add_argument("--app-dir", type=Path, default=REPO_ROOT, help="folder with function_app.py (default: repo root)")
    p.add_argument("--port", type=int, default=None, help="HTTP port (default: Host.LocalHttpPort or 7071; 0: any free port, named in the ready line)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--no-http", action="store_true", help="don't serve HTTP triggers")
    p.add_argument("--no-queue", action="store_true", help="don't run queue triggers")
    p.add_argument("--no-timer", action="store_true", help="don't run timer triggers")
    p.add_argument("--grace", type=float, default=30.0, help="seconds to let running invocations finish on shutdown")
    return p.parse_args(argv)


def setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("DEVHOST_LOG_LEVEL", "INFO").upper())
    # The SDK logs every storage request at INFO: far too chatty for a dev console.
    logging.getLogger("azure").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging()
    # Imported after logging is set up so import-time warnings are formatted too.
    from concurrent.futures import ThreadPoolExecutor

    from devhost import config
    from devhost.rpc import IndexingFailed, LanguageWorker, WorkerDied

    app_dir = args.app_dir.resolve()
    cfg = config.load(app_dir)  # local settings into os.environ first: the worker inherits them
    worker = LanguageWorker(app_dir)
    # The worker starts and indexes the app while this process imports the rest (the storage SDKs): the two
    # start-ups overlap instead of adding up.
    indexing = ThreadPoolExecutor(1, thread_name_prefix="devhost-start").submit(worker.start)

    from devhost import invoker
    from devhost.functions import from_metadata
    from devhost.http_server import DevHttpServer, build_table
    from devhost.invoker import ACTIVITY
    from devhost.queue_listener import QueueListener
    from devhost.timers import TimerListener

    try:
        specs = from_metadata(indexing.result(), app_dir)
    except (IndexingFailed, WorkerDied) as exc:
        # As the host: an app the runtime cannot index loads no function at all.
        log.error("the language worker could not index %s: %s", app_dir, exc)
        worker.stop()
        sys.stderr.flush()
        return 3
    invoker.use_worker(worker, cfg.function_timeout)

    # Set by the main thread only, once the signal is seen: listeners and timers wait on it. The handler itself
    # never touches it (devhost/stopsignal.py says why).
    stopping = threading.Event()
    stop_signal = StopSignal()
    stop_signal.install()

    known = {"httpTrigger", "queueTrigger", "timerTrigger"}
    for spec in specs:
        if spec.trigger_type not in known:
            log.warning("function %s: trigger %s is not supported by the dev host", spec.name, spec.trigger_type)

    server: DevHttpServer | None = None
    port = cfg.local_http_port if args.port is None else args.port  # 0: a free port, named in the ready line
    table = build_table(specs)
    if table and not args.no_http:
        try:
            server = DevHttpServer(port, table, cfg.route_prefix, host=args.host)
        except OSError as exc:
            # As func start does ("Port 7071 is unavailable"): say so and exit, don't leave a host half up.
            log.error("cannot listen on %s:%d: %s (another process has the port? pass --port)", args.host, port, exc)
            worker.stop()
            sys.stderr.flush()
            return 4
        port = server.server_address[1]
        server.start()

    listeners: list[QueueListener] = []
    if not args.no_queue:
        for spec in specs:
            if spec.trigger_type == "queueTrigger":
                listener = QueueListener(spec, cfg.queues, stopping)
                listener.start()
                listeners.append(listener)

    timers: list[TimerListener] = []
    if not args.no_timer:
        for spec in specs:
            if spec.trigger_type == "timerTrigger":
                timer = TimerListener(spec, cfg, stopping)
                timer.start()
                timers.append(timer)

    print("\nFunctions:\n", file=sys.stderr)
    for spec in specs:
        t = spec.trigger
        if spec.trigger_type == "httpTrigger":
            route = config.resolve(str(t.get("route") or spec.name))
            methods = ",".join(t.get("methods") or ["*"])
            prefix = f"/{cfg.route_prefix}" if cfg.route_prefix else ""
            detail = f"[{methods}] http://{args.host}:{port}{prefix}/{route}" + ("" if server else " (disabled)")
        elif spec.trigger_type == "queueTrigger":
            detail = f"queueTrigger {config.resolve(str(t['queueName']))}" + (" (disabled)" if args.no_queue else "")
        elif spec.trigger_type == "timerTrigger":
            detail = f"timerTrigger {config.resolve(str(t['schedule']))}" + (" (disabled)" if args.no_timer else "")
        else:
            detail = f"{spec.trigger_type} (not supported)"
        print(f"        {spec.name}: {detail}", file=sys.stderr)
    print("", file=sys.stderr)
    http_note = f"http://{args.host}:{port}" if server else "no HTTP"
    log.info("%s: %d functions, %s, pid %d, worker pid %s", READY_LINE, len(specs), http_note, os.getpid(), worker.pid)
    sys.stderr.flush()

    signum = stop_signal.wait()
    assert signum is not None  # wait() without a timeout returns only with a signal
    log.info("%s received: stopping (grace %.0fs)", signal.Signals(signum).name, args.grace)
    stopping.set()
    # Stop taking new work first, then let running invocations finish.
    if server is not None:
        server.stop_accepting()
    for listener in listeners:
        listener.join(timeout=5)
    if ACTIVITY.wait_idle(args.grace):
        log.info("devhost stopped")
        code = 0
    else:
        log.warning("grace period of %.0fs over with %d invocations still running: exiting", args.grace, ACTIVITY.count)
        code = 1
    for timer in timers:
        timer.join(timeout=2)  # Releases its lock.
    worker.stop()  # The worker does not outlive its host.
    sys.stderr.flush()
    # os._exit: worker threads of abandoned invocations must not keep the process alive.
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
