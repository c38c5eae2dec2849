"""A fault-injecting HTTP reverse proxy in front of Azurite (test tooling, not deployed).

The commonest cloud storage failure is a write that commits while its answer is lost. This proxy makes that
(and a clean refusal) happen on demand, at the transport, under the real SDKs::

    from devhost.faultproxy import FaultProxy, Faults

    with FaultProxy(azurite, faults={"table": Faults(drop=0.12, refuse=0.05)}, seed=7) as proxy:
        env = {"AzureWebJobsStorage": proxy.connection_string}
        ...                                  # run hosts / clients against the proxy
        proxy.set_faults(drop=0, refuse=0)   # let the system heal
        print(proxy.report())                # per service: reads, forwarded, dropped, refused

* One listener per Azurite service (blob, queue, table) on a free port, forwarding to the upstream ports.
  ``upstream`` is an :class:`devhost.azurite.Azurite` (anything with ``.ports``), a ``(blob, queue, table)``
  tuple of ports, or an Azurite connection string.
* Only **writes** are faulted: every method but GET and HEAD (so queue receive, a GET, never is; a
  ``delete_message`` is a DELETE and can be). For each write the seeded RNG of its service decides:

  - **drop** ("commit then drop"): the request is forwarded, the full upstream answer is read (so the write has
    committed), then the client connection is reset without an answer. azure-core raises
    ``ServiceResponseError``; it does not retry a POST, MERGE/PATCH or ``$batch`` after that.
  - **refuse**: the body is read and discarded, and the client gets ``503 ServerBusy`` (``x-ms-error-code``
    header and an Azure-shaped body) without anything being forwarded.

* Counters per service (:meth:`FaultProxy.counters`, :meth:`FaultProxy.report`): ``reads`` forwarded,
  ``forwarded`` writes answered normally, ``dropped`` writes committed upstream whose answer was dropped,
  ``refused`` writes answered 503, ``upstream_errors``. :meth:`FaultProxy.writes` lists recent writes with what
  was done to each.
* Rates change at run time (:meth:`FaultProxy.set_faults`); ``eligible(service, method, path)`` narrows which
  writes may be faulted at all.

Run it by hand in front of the default Azurite::

    .venv/bin/python -m devhost.faultproxy --table-drop 0.12 --table-refuse 0.05
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import http.client
import json
import random
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Literal, Protocol

from devhost.azurite import DEFAULT_PORTS, DEV_ACCOUNT, DEV_KEY, HOST

SERVICES: tuple[str, str, str] = ("blob", "queue", "table")
READ_METHODS = frozenset({"GET", "HEAD"})
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade"}
)
_CHUNK = 64 * 1024
# Bodies up to this size are buffered, so a request on a pooled upstream connection that Azurite closed while it
# sat idle can be sent again on a fresh one. Larger bodies stream straight through.
_BUFFER_LIMIT = 1024 * 1024
# Azurite (Node) closes idle keep-alive connections after 5 s: reconnect before that rather than race it.
_UPSTREAM_IDLE_S = 2.0
_UPSTREAM_TIMEOUT_S = 120.0
_CLIENT_IDLE_TIMEOUT_S = 300.0

Action = Literal["read", "forward", "drop", "refuse"]
Eligible = Callable[[str, str, str], bool]


class HasPorts(Protocol):
    @property
    def ports(self) -> tuple[int, int, int]: ...


Upstream = HasPorts | tuple[int, int, int] | str


@dataclass(frozen=True)
class Faults:
    """Shares of a service's writes to fault: ``drop`` commits then resets, ``refuse`` answers 503 unsent."""

    drop: float = 0.0
    refuse: float = 0.0

    def __post_init__(self) -> None:
        if not (0.0 <= self.drop <= 1.0 and 0.0 <= self.refuse <= 1.0 and self.drop + self.refuse <= 1.0):
            raise ValueError(f"fault rates must be in [0, 1] and sum to at most 1: {self}")


@dataclass
class Counts:
    """What the proxy did for one service. Writes = forwarded + dropped + refused; ``upstream_errors`` counts
    requests that broke mid-way (upstream unreachable, or either side closed during the request)."""

    reads: int = 0
    forwarded: int = 0
    dropped: int = 0
    refused: int = 0
    upstream_errors: int = 0

    @property
    def writes(self) -> int:
        return self.forwarded + self.dropped + self.refused

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "writes": self.writes}


@dataclass(frozen=True)
class WriteEvent:
    """One write the proxy saw. ``status`` is the upstream status (None when refused or upstream failed)."""

    at: float
    service: str
    method: str
    path: str
    action: Action
    status: int | None


def upstream_endpoints(upstream: Upstream) -> dict[str, tuple[str, int]]:
    """``{service: (host, port)}`` of an Azurite given as an object with ``.ports``, a port tuple or a
    connection string (``UseDevelopmentStorage=true`` or explicit ``BlobEndpoint=...`` etc.)."""
    if isinstance(upstream, str):
        parts = dict(p.split("=", 1) for p in upstream.split(";") if "=" in p)
        if parts.get("UseDevelopmentStorage", "").lower() == "true":
            return {s: (HOST, p) for s, p in zip(SERVICES, DEFAULT_PORTS, strict=True)}
        out = {}
        for service in SERVICES:
            url = parts.get(f"{service.capitalize()}Endpoint")
            if not url:
                raise ValueError(f"connection string has no {service.capitalize()}Endpoint")
            u = urllib.parse.urlsplit(url)
            out[service] = (u.hostname or HOST, u.port or 80)
        return out
    ports = upstream if isinstance(upstream, tuple) else upstream.ports
    return {s: (HOST, int(p)) for s, p in zip(SERVICES, ports, strict=True)}


def connection_string(blob: int, queue: int, table: int, host: str = HOST) -> str:
    """Azurite's devstoreaccount1 connection string for the given ports (always explicit endpoints)."""
    return (
        f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
        f"BlobEndpoint=http://{host}:{blob}/{DEV_ACCOUNT};"
        f"QueueEndpoint=http://{host}:{queue}/{DEV_ACCOUNT};"
        f"TableEndpoint=http://{host}:{table}/{DEV_ACCOUNT};"
    )


class FaultProxy:
    """Three reverse proxies (blob, queue, table) in front of one Azurite, injecting write faults."""

    def __init__(
        self,
        upstream: Upstream,
        faults: Faults | Mapping[str, Faults] | None = None,
        *,
        seed: int = 0,
        drop_mode: Literal["reset", "close"] = "reset",
        eligible: Eligible | None = None,
        host: str = HOST,
        history: int = 100_000,
    ) -> None:
        self.upstream = upstream_endpoints(upstream)
        self.host = host
        self.seed = seed
        self.drop_mode = drop_mode
        self.eligible = eligible
        self._lock = threading.Lock()
        self._faults: dict[str, Faults] = {s: Faults() for s in SERVICES}
        self._rng = {s: random.Random(f"{seed}/{s}") for s in SERVICES}  # seeded: deterministic on purpose
        self._counts = {s: Counts() for s in SERVICES}
        self._writes: collections.deque[WriteEvent] = collections.deque(maxlen=history)
        self._servers: dict[str, _Server] = {}
        self._threads: list[threading.Thread] = []
        if isinstance(faults, Faults):
            faults = dict.fromkeys(SERVICES, faults)
        for service, f in (faults or {}).items():
            self._check_service(service)
            self._faults[service] = f

    # -- life cycle -----------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        upstream: Upstream,
        faults: Faults | Mapping[str, Faults] | None = None,
        *,
        seed: int = 0,
        drop_mode: Literal["reset", "close"] = "reset",
        eligible: Eligible | None = None,
        host: str = HOST,
    ) -> FaultProxy:
        """Create a proxy for ``upstream`` and start listening on three free ports."""
        return cls(upstream, faults, seed=seed, drop_mode=drop_mode, eligible=eligible, host=host).open()

    def open(self) -> FaultProxy:
        if self._servers:
            return self
        for service in SERVICES:
            server = _Server((self.host, 0), self, service)
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=f"faultproxy-{service}", daemon=True
            )
            thread.start()
            self._servers[service] = server
            self._threads.append(thread)
        return self

    def close(self) -> None:
        """Stop listening and drop every open client connection."""
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.shutdown()
            server.server_close()
            server.close_all()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []

    def __enter__(self) -> FaultProxy:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- addresses ------------------------------------------------------------------------------------

    def port(self, service: str) -> int:
        self._check_service(service)
        if service not in self._servers:
            raise RuntimeError("the proxy is not started")
        return int(self._servers[service].server_address[1])

    @property
    def ports(self) -> tuple[int, int, int]:
        """Listening ports, (blob, queue, table) like :attr:`devhost.azurite.Azurite.ports`."""
        return self.port("blob"), self.port("queue"), self.port("table")

    @property
    def connection_string(self) -> str:
        """devstoreaccount1 connection string pointing at the proxy (for ``AzureWebJobsStorage``)."""
        return connection_string(*self.ports, host=self.host)

    # -- faults and counters --------------------------------------------------------------------------

    def set_faults(self, service: str | None = None, *, drop: float | None = None, refuse: float | None = None) -> None:
        """Change rates at run time for one service (or all when ``service`` is None); None keeps a rate."""
        for s in [service] if service else SERVICES:
            self._check_service(s)
            with self._lock:
                old = self._faults[s]
                self._faults[s] = Faults(
                    drop=old.drop if drop is None else drop, refuse=old.refuse if refuse is None else refuse
                )

    def heal(self) -> None:
        """No more faults on any service (counters are kept)."""
        self.set_faults(drop=0.0, refuse=0.0)

    @property
    def faults(self) -> dict[str, Faults]:
        with self._lock:
            return dict(self._faults)

    def counters(self) -> dict[str, Counts]:
        """A snapshot of the counters, per service."""
        with self._lock:
            return {s: Counts(**asdict(c)) for s, c in self._counts.items()}

    def totals(self) -> Counts:
        total = Counts()
        for c in self.counters().values():
            for k, v in asdict(c).items():
                setattr(total, k, getattr(total, k) + v)
        return total

    def reset_counters(self) -> None:
        with self._lock:
            self._counts = {s: Counts() for s in SERVICES}
            self._writes.clear()

    def writes(self, service: str | None = None) -> list[WriteEvent]:
        """Recent writes (oldest first), optionally of one service."""
        with self._lock:
            return [w for w in self._writes if service is None or w.service == service]

    def report(self) -> str:
        """The counters as a small aligned table."""
        cols = ["reads", "forwarded", "dropped", "refused", "upstream_errors"]
        counts = self.counters()
        faults = self.faults
        lines = [f"{'service':8} {'drop':>6} {'refuse':>6} " + " ".join(f"{c:>15}" for c in cols)]
        for s in SERVICES:
            d = asdict(counts[s])
            lines.append(
                f"{s:8} {faults[s].drop:>6.0%} {faults[s].refuse:>6.0%} " + " ".join(f"{d[c]:>15}" for c in cols)
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    # -- used by the handlers -------------------------------------------------------------------------

    def _check_service(self, service: str) -> None:
        if service not in SERVICES:
            raise ValueError(f"unknown service {service!r}: one of {', '.join(SERVICES)}")

    def _decide(self, service: str, method: str, path: str) -> Action:
        if method in READ_METHODS:
            return "read"
        if self.eligible is not None and not self.eligible(service, method, path):
            return "forward"
        with self._lock:
            f = self._faults[service]
            if f.drop == 0.0 and f.refuse == 0.0:
                return "forward"
            r = self._rng[service].random()
        if r < f.drop:
            return "drop"
        if r < f.drop + f.refuse:
            return "refuse"
        return "forward"

    def _record(self, service: str, method: str, path: str, action: Action, status: int | None, ok: bool) -> None:
        with self._lock:
            c = self._counts[service]
            if not ok:
                c.upstream_errors += 1
            elif action == "read":
                c.reads += 1
            elif action == "forward":
                c.forwarded += 1
            elif action == "drop":
                c.dropped += 1
            else:
                c.refused += 1
            if action != "read":
                self._writes.append(WriteEvent(time.time(), service, method, path, action, status))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], proxy: FaultProxy, service: str) -> None:
        self.proxy = proxy
        self.service = service
        self.upstream = proxy.upstream[service]
        self._conns: set[socket.socket] = set()
        self._reset: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def track(self, sock: socket.socket, add: bool) -> None:
        with self._conns_lock:
            if add:
                self._conns.add(sock)
            else:
                self._conns.discard(sock)

    def mark_reset(self, sock: socket.socket) -> None:
        with self._conns_lock:
            self._reset.add(sock)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        with self._conns_lock:
            reset = request in self._reset
            self._reset.discard(request)
        if reset:
            # SO_LINGER 0 is set: closing without a shutdown() sends RST, not FIN.
            self.close_request(request)
        else:
            super().shutdown_request(request)

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        # A client that resets or times out mid-request is routine here; anything else is printed.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)

    def close_all(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = _CLIENT_IDLE_TIMEOUT_S
    server: _Server

    def setup(self) -> None:
        super().setup()
        self._up: http.client.HTTPConnection | None = None
        self._up_used = 0.0
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._close_upstream()
            self.server.track(self.connection, False)

    def log_message(self, format: str, *args: object) -> None:
        pass

    # Every method goes the same way; MERGE is the Table service's partial update.
    def do_GET(self) -> None:
        self._proxy()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_MERGE = do_PATCH = do_OPTIONS = do_GET

    # -- one request ----------------------------------------------------------------------------------

    def _proxy(self) -> None:
        proxy, service, method = self.server.proxy, self.server.service, self.command
        action = proxy._decide(service, method, self.path)
        # Each outcome is counted before the client gets its answer: a client that has seen it (and a test that
        # reads the counters right after) must find it counted.
        if action == "refuse":
            try:
                for _ in self._body():
                    pass
            finally:
                proxy._record(service, method, self.path, action, None, True)
            self._send_busy()
            return
        try:
            resp = self._forward()
        except (OSError, http.client.HTTPException):
            # Upstream gone: the client sees a connection error, which is what it would see without the proxy.
            proxy._record(service, method, self.path, action, None, False)
            self._close_upstream()
            self.close_connection = True
            return
        if action == "drop":
            try:
                while resp.read(_CHUNK):
                    pass
                self._done(resp)
            except (OSError, http.client.HTTPException):
                self._close_upstream()
            proxy._record(service, method, self.path, action, resp.status, True)
            self._drop_client()
            return
        proxy._record(service, method, self.path, action, resp.status, True)  # forwarded, whatever the relay does
        self._relay(resp)

    def _body(self) -> Iterable[bytes]:
        """The request body, de-chunked, in pieces."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                left = size
                while left:
                    piece = self.rfile.read(min(left, _CHUNK))
                    if not piece:
                        raise ConnectionError("client closed mid-body")
                    left -= len(piece)
                    yield piece
                self.rfile.readline(3)
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                piece = self.rfile.read(min(left, _CHUNK))
                if not piece:
                    raise ConnectionError("client closed mid-body")
                left -= len(piece)
                yield piece

    def _upstream(self) -> tuple[http.client.HTTPConnection, bool]:
        """The upstream connection of this client connection and whether it is a reused one."""
        if self._up is not None and time.monotonic() - self._up_used > _UPSTREAM_IDLE_S:
            self._close_upstream()
        reused = self._up is not None
        if self._up is None:
            host, port = self.server.upstream
            self._up = http.client.HTTPConnection(host, port, timeout=_UPSTREAM_TIMEOUT_S)
        return self._up, reused

    def _close_upstream(self) -> None:
        if self._up is not None:
            self._up.close()
            self._up = None

    def _forward(self) -> http.client.HTTPResponse:
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        length = int(self.headers.get("Content-Length") or 0)
        body: bytes | None = None
        if not chunked and length <= _BUFFER_LIMIT:
            body = b"".join(self._body())
        for retry in (False, True):
            conn, reused = self._upstream()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in self.headers.items():
                    if k.lower() not in HOP_BY_HOP:
                        conn.putheader(k, v)
                if chunked:
                    conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
                if body is not None:
                    if body:
                        conn.send(body)
                elif chunked:
                    for piece in self._body():
                        conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
                    conn.send(b"0\r\n\r\n")
                else:
                    for piece in self._body():
                        conn.send(piece)
                resp = conn.getresponse()
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                # A pooled connection the server closed while idle: nothing was processed; send it again once.
                self._close_upstream()
                if retry or not reused or body is None:
                    raise
                continue
            self._up_used = time.monotonic()
            return resp
        raise AssertionError("unreachable")

    def _relay(self, resp: http.client.HTTPResponse) -> None:
        self.send_response_only(resp.status, resp.reason)
        headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
        has_length = any(k.lower() == "content-length" for k, _ in headers)
        no_body = self.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        mode = "none" if no_body else "length" if has_length else "chunked" if resp.chunked else "eof"
        for k, v in headers:
            self.send_header(k, v)
        if mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        if mode == "eof" or self.close_connection:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            while mode != "none":
                piece = resp.read(_CHUNK)
                if not piece:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if mode == "chunked" else piece)
            if mode == "chunked":
                self.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):
            # The client went away (or upstream broke mid-body): neither connection is reusable.
            self._close_upstream()
            self.close_connection = True
            return
        self._done(resp)

    def _done(self, resp: http.client.HTTPResponse) -> None:
        """Settle a fully read upstream response, so the upstream connection can carry the next request."""
        resp.read()
        resp.close()
        if resp.will_close:
            self._close_upstream()

    def _drop_client(self) -> None:
        """Close the client connection without an answer: RST (``reset``) or FIN (``close``)."""
        self.close_connection = True
        if self.server.proxy.drop_mode == "reset":
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.server.mark_reset(self.connection)
            except OSError:
                pass

    def _send_busy(self) -> None:
        request_id = str(uuid.uuid4())
        now = dt.datetime.now(dt.UTC)
        message = f"The server is busy.\nRequestId:{request_id}\nTime:{now.strftime('%Y-%m-%dT%H:%M:%S.%f')}0Z"
        if self.server.service == "table":
            body = (
                '{"odata.error":{"code":"ServerBusy","message":{"lang":"en-US","value":'
                + _json_string(message)
                + "}}}"
            ).encode()
            ctype = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
        else:
            body = (
                '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
                f"<Message>{message}</Message></Error>"
            ).encode()
            ctype = "application/xml"
        self.send_response_only(503, "Server Busy")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-ms-error-code", "ServerBusy")
        self.send_header("x-ms-request-id", request_id)
        if self.headers.get("x-ms-version"):
            self.send_header("x-ms-version", self.headers["x-ms-version"])
        if self.headers.get("x-ms-client-request-id"):
            self.send_header("x-ms-client-request-id", self.headers["x-ms-client-request-id"])
        self.send_header("Date", self.date_time_string())
        self.end_headers()
        self.wfile.write(body)


def _json_string(s: str) -> str:
    return json.dumps(s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devhost.faultproxy", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", default="UseDevelopmentStorage=true",
                   help="Azurite connection string or blob,queue,table ports (default: 10000-10002)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--drop-mode", choices=["reset", "close"], default="reset")
    for s in SERVICES:
        p.add_argument(f"--{s}-drop", type=float, default=0.0, help=f"share of {s} writes to commit then drop")
        p.add_argument(f"--{s}-refuse", type=float, default=0.0, help=f"share of {s} writes to refuse with 503")
    args = p.parse_args(argv)
    upstream: Upstream = args.upstream
    if "=" not in args.upstream:
        b, q, t = (int(x) for x in args.upstream.split(","))
        upstream = (b, q, t)
    faults = {s: Faults(getattr(args, f"{s}_drop"), getattr(args, f"{s}_refuse")) for s in SERVICES}
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    with FaultProxy(upstream, faults, seed=args.seed, drop_mode=args.drop_mode) as proxy:
        print(proxy.connection_string, flush=True)
        print(f"fault proxy on blob/queue/table ports {proxy.ports}; Ctrl-C stops it", file=sys.stderr)
        signal.sigwait(signals)
        print(proxy.report(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
