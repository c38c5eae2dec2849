"""A small HTTP client of the Thematiq API (stdlib ``urllib`` only, no dependencies).

Errors are turned into two exception types the CLI prints without a traceback:

* :class:`ApiError` - the service answered with an error status; carries the
  RFC 9457 problem document (or a synthetic one if the body was not problem+json).
* :class:`ConnectionFailed` - nothing answered (refused, DNS, timeout).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

DEFAULT_URL = "http://127.0.0.1:7071"
API_PREFIX = "/api"
KEY_HEADER = "x-functions-key"
TENANT_HEADER = "x-thematiq-tenant"
IDEMPOTENCY_HEADER = "Idempotency-Key"
USER_AGENT = "thematiq-cli/0.1"


class CliError(Exception):
    """Any error the CLI reports as a message plus an exit code (never a traceback)."""

    exit_code = 1

    def render(self) -> str:
        return str(self)


class ConnectionFailed(CliError):
    """The service could not be reached at all."""

    exit_code = 4


class ApiError(CliError):
    """The service answered with an error status (4xx/5xx)."""

    exit_code = 3

    def __init__(self, status: int, problem: dict[str, Any], retry_after: float | None = None) -> None:
        self.status = status
        self.problem = problem
        self.retry_after = retry_after
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}")

    @property
    def transient(self) -> bool:
        """Worth retrying while polling: storage blips (503), gateway errors and throttling."""
        return self.status in (429, 502, 503, 504)

    def render(self) -> str:
        p = self.problem
        title = str(p.get("title") or "Error")
        lines = [f"error: {title} (HTTP {self.status})"]
        detail = p.get("detail")
        if detail and detail != title:
            lines.append(f"  {detail}")
        errors = p.get("errors")
        if isinstance(errors, list):
            for e in errors:
                if isinstance(e, dict):
                    lines.append(f"  - {e.get('field', '?')}: {e.get('message', '')}")
        if self.status == 401:
            lines.append("  hint: pass the function key with --key or THEMATIQ_KEY")
        return "\n".join(lines)


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass
class Client:
    """The API at ``url`` (the base, without ``/api``), authenticated with a function key."""

    url: str = DEFAULT_URL
    key: str | None = None
    tenant: str | None = None
    timeout: float = 30.0
    extra_headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if self.url.endswith(API_PREFIX):
            # Accept both http://host:7071 and http://host:7071/api.
            self.url = self.url[: -len(API_PREFIX)]
        scheme = urllib.parse.urlsplit(self.url).scheme
        # Checked here so urlopen never sees file:// or similar (ruff S310).
        if scheme not in ("http", "https"):
            raise CliError(f"the URL must start with http:// or https:// (got {self.url!r})")

    @classmethod
    def from_env(cls, url: str | None = None, key: str | None = None, tenant: str | None = None) -> Client:
        """Flags win over ``THEMATIQ_URL`` / ``THEMATIQ_KEY`` / ``THEMATIQ_TENANT``."""
        return cls(
            url=url or os.environ.get("THEMATIQ_URL") or DEFAULT_URL,
            key=key or os.environ.get("THEMATIQ_KEY") or None,
            tenant=tenant or os.environ.get("THEMATIQ_TENANT") or None,
        )

    # -- transport -------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str | int | None] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """Send one request to ``/api{path}``; raise :class:`ApiError` for any status >= 400."""
        url = f"{self.url}{API_PREFIX}{path}"
        q = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if q:
            url += "?" + urllib.parse.urlencode(q)
        h = {"Accept": "application/json", "User-Agent": USER_AGENT, **self.extra_headers}
        if self.key:
            h[KEY_HEADER] = self.key
        if self.tenant:
            h[TENANT_HEADER] = self.tenant
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        req = urllib.request.Request(url, data=data, headers=h, method=method)  # noqa: S310 - scheme checked above
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:  # noqa: S310 - scheme checked above
                return Response(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
        except urllib.error.HTTPError as err:
            raw = err.read()
            raise _api_error(err.code, {k.lower(): v for k, v in err.headers.items()}, raw) from None
        except urllib.error.URLError as err:
            raise ConnectionFailed(self._unreachable(err.reason)) from None
        except (TimeoutError, ConnectionError) as err:
            raise ConnectionFailed(self._unreachable(err)) from None

    def _unreachable(self, reason: object) -> str:
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(reason, TimeoutError):
            why = f"no answer within {self.timeout:g}s"
        else:
            why = str(reason) or type(reason).__name__
        return (
            f"error: cannot reach Thematiq at {self.url} ({why}).\n"
            "  Is the host running? Locally start it with `python -m devhost` (or scripts/demo --keep-running);\n"
            "  otherwise point the CLI at it with --url or THEMATIQ_URL."
        )

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        resp = self.request(method, path, **kw)
        try:
            return resp.json()
        except (ValueError, UnicodeDecodeError):
            raise CliError(f"error: the service sent a response that is not JSON (HTTP {resp.status})") from None

    # -- API -------------------------------------------------------------------
    def submit(
        self, pipeline: str, params: dict[str, Any], input_: Any, idempotency_key: str | None = None
    ) -> tuple[bool, dict[str, Any]]:
        """Submit a job; returns ``(created, job)``. ``created`` is False for an idempotent replay."""
        headers = {IDEMPOTENCY_HEADER: idempotency_key} if idempotency_key else None
        resp = self.request("POST", "/jobs", body={"pipeline": pipeline, "params": params, "input": input_},
                            headers=headers)
        return resp.status == 202, resp.json()

    def get(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._json("GET", f"/jobs/{_seg(job_id)}")
        return job

    def list(
        self, status: str | None = None, pipeline: str | None = None, limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        page: dict[str, Any] = self._json(
            "GET", "/jobs", query={"status": status, "pipeline": pipeline, "limit": limit, "cursor": cursor}
        )
        return page

    def cancel(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._json("POST", f"/jobs/{_seg(job_id)}/cancel")
        return job

    def result(self, job_id: str, fmt: str = "json") -> bytes:
        return self.request("GET", f"/jobs/{_seg(job_id)}/result", query={"format": fmt}).body

    def health(self) -> dict[str, Any]:
        body: dict[str, Any] = self._json("GET", "/health")
        return body


def _seg(value: str) -> str:
    """A path segment, quoted so a user-typed id can never change the route."""
    return urllib.parse.quote(value, safe="")


def _api_error(status: int, headers: dict[str, str], raw: bytes) -> ApiError:
    problem: dict[str, Any] | None = None
    try:
        value = json.loads(raw.decode("utf-8")) if raw else None
        if isinstance(value, dict):
            problem = value
    except (ValueError, UnicodeDecodeError):
        pass
    if problem is None:
        # Not problem+json (a proxy, or the dev host's bare 401/404): synthesise one.
        text = raw.decode("utf-8", "replace").strip()[:300]
        problem = {"title": _REASONS.get(status, "HTTP error"), "status": status, "detail": text}
    retry_after = None
    ra = headers.get("retry-after")
    if ra and ra.strip().isdigit():
        retry_after = float(ra)
    return ApiError(status, problem, retry_after)


_REASONS = {
    400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
    409: "Conflict", 413: "Payload too large", 415: "Unsupported media type", 422: "Unprocessable content",
    429: "Too many requests", 500: "Internal error", 502: "Bad gateway", 503: "Service unavailable",
    504: "Gateway timeout",
}
