"""A local stand-in for API Management in front of the dev host: the trusted path without Azure.

It does what ``infra/apim/policy.xml`` and App Service Authentication do together, so the dashboard,
the CLI and the tests can call the app exactly as clients call it in Azure (docs/security.md):

* serves the API under a prefix (``/thematiq``, as APIM's API path) and forwards to the host's ``/api``;
* requires a subscription key (``Ocp-Apim-Subscription-Key`` header or ``subscription-key`` query);
  one subscription per tenant, and the tenant is the subscription's name;
* deletes whatever the client sent as ``x-thematiq-tenant``, ``x-functions-key``, ``?code=``,
  ``Authorization``, ``X-MS-CLIENT-PRINCIPAL-*`` and ``X-Forwarded-*``;
* sets the tenant, the gateway's identity (``X-MS-CLIENT-PRINCIPAL-ID`` = ``TRUSTED_GATEWAY_PRINCIPAL_ID``,
  what App Service Authentication sets from API Management's token), ``X-Forwarded-Host/-Proto/-Prefix``,
  and the dev host's function key (locally the routes keep auth level ``function``);
* replaces 5xx bodies with a generic problem, as the policy's outbound section does.

Run the dev host with ``TRUSTED_GATEWAY_PRINCIPAL_ID`` set and ``WEBSITE_AUTH_ENABLED=True`` (run as in
Azure), then::

    python -m devhost.gateway --port 8080 --backend http://127.0.0.1:7071 --subscription local=local-sub-key

What it cannot emulate: App Service Authentication stripping a forged ``X-MS-CLIENT-PRINCIPAL-ID`` sent to
the host directly. Locally the host is reachable with the function key, so that header is only as safe as the
key; in Azure the platform removes it before the app sees it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import threading
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from devhost import config

log = logging.getLogger("devhost.gateway")
SUBSCRIPTION_HEADER = "ocp-apim-subscription-key"
SUBSCRIPTION_QUERY = "subscription-key"
_STRIP_PREFIXES = ("x-ms-client-principal", "x-forwarded-")
_STRIP = {"x-thematiq-tenant", "x-functions-key", "authorization", "host", "connection", "keep-alive",
          "transfer-encoding", "te", "upgrade", "proxy-connection", "content-length", SUBSCRIPTION_HEADER}
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length", "server", "date"}


class Gateway:
    """The stand-in as an object: ``Gateway(...).start()``, ``.url``, ``.close()``."""

    def __init__(
        self,
        backend: str,
        function_key: str,
        principal_id: str,
        subscriptions: Mapping[str, str],
        prefix: str = "/thematiq",
        port: int = 0,
        host: str = "127.0.0.1",
        send_tenant: bool = True,
    ) -> None:
        """``send_tenant=False`` plays a gateway whose policy lost its tenant header (what the app must refuse)."""
        self.backend = urllib.parse.urlsplit(backend)
        self.function_key = function_key
        self.principal_id = principal_id
        self.tenant_by_key = {key: tenant for tenant, key in subscriptions.items()}
        self.prefix = "/" + prefix.strip("/")
        self.send_tenant = send_tenant
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.prefix}"

    def start(self) -> Gateway:
        self._thread = threading.Thread(target=self._server.serve_forever, name="devhost-gateway", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(gw: Gateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("gateway " + format, *args)

        def _reply(self, status: int, body: dict[str, Any], content_type: str = "application/json") -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            if url.path != gw.prefix and not url.path.startswith(gw.prefix + "/"):
                self._reply(404, {"statusCode": 404, "message": "Resource not found"})
                return
            query = [(k, v) for k, v in urllib.parse.parse_qsl(url.query, keep_blank_values=True)]
            key = self.headers.get(SUBSCRIPTION_HEADER) or next((v for k, v in query if k == SUBSCRIPTION_QUERY), "")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if not key:
                self._reply(401, {"statusCode": 401, "message": "Access denied due to missing subscription key. "
                                  "Make sure to include subscription key when making requests to an API."})
                return
            tenant = gw.tenant_by_key.get(key)
            if tenant is None:
                self._reply(401, {"statusCode": 401, "message": "Access denied due to invalid subscription key. "
                                  "Make sure to provide a valid key for an active subscription."})
                return
            query = [(k, v) for k, v in query if k not in (SUBSCRIPTION_QUERY, "code")]
            path = "/api" + url.path[len(gw.prefix):]
            target = path + ("?" + urllib.parse.urlencode(query) if query else "")
            headers = {
                k: v for k, v in self.headers.items()
                if k.lower() not in _STRIP and not k.lower().startswith(_STRIP_PREFIXES)
            }
            if gw.send_tenant:
                headers["x-thematiq-tenant"] = tenant
            headers.update({
                "x-ms-client-principal-id": gw.principal_id,
                "x-functions-key": gw.function_key,
                "X-Forwarded-Host": self.headers.get("Host", ""),
                "X-Forwarded-Proto": "http",
                "X-Forwarded-Prefix": gw.prefix,
                "Content-Length": str(len(body)),
            })
            conn = http.client.HTTPConnection(gw.backend.hostname or "127.0.0.1", gw.backend.port or 80, timeout=60)
            try:
                conn.request(self.command, target, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except OSError:
                self._reply(502, {"type": "about:blank", "title": "The gateway could not complete the request",
                                  "status": 502}, "application/problem+json")
                return
            finally:
                conn.close()
            if resp.status >= 500:
                self._reply(resp.status, {"type": "about:blank", "status": resp.status,
                                          "title": "The service could not complete the request"},
                            "application/problem+json")
                return
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devhost.gateway", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--backend", default="http://127.0.0.1:7071")
    parser.add_argument("--prefix", default="/thematiq")
    parser.add_argument("--subscription", action="append", default=[], metavar="TENANT=KEY",
                        help="a subscription: the tenant it stands for and its key (repeatable)")
    parser.add_argument("--app-dir", default=".")
    args = parser.parse_args(argv)
    config.load_local_settings(Path(args.app_dir))  # into os.environ; the environment wins
    principal = os.environ.get("TRUSTED_GATEWAY_PRINCIPAL_ID", "")
    key = os.environ.get("DEVHOST_FUNCTION_KEY", "")
    if not principal:
        parser.error("set TRUSTED_GATEWAY_PRINCIPAL_ID (and WEBSITE_AUTH_ENABLED=True) in local settings first")
    subs = dict(s.split("=", 1) for s in args.subscription) or {"local": "local-subscription-key"}
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    gw = Gateway(args.backend, key, principal, subs, prefix=args.prefix, port=args.port, host="127.0.0.1")
    log.info("gateway %s -> %s/api; subscriptions: %s", gw.url, args.backend, ", ".join(sorted(subs)))
    gw.start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        gw.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
