"""The CLI's view of the API: :class:`thematiq_client.Client` underneath, plain dicts and CLI errors on top.

Transport, retries (429/503 with ``Retry-After``), idempotency keys, ETags and the models are the
client library's; this module only adds what a command line needs:

* a URL convenience: ``http://host:7071`` (no path) means the API at ``/api``; any URL with a path is
  used as given, so a gateway path (``https://contoso.azure-api.net/thematiq``) works unchanged;
* two exception types the CLI prints without a traceback: :class:`ApiError` (the service answered an
  error; carries the RFC 9457 problem as a dict) and :class:`ConnectionFailed` (nothing answered);
* dict results for the renderers and ``--json`` output, exactly the JSON the service sent.
"""

from __future__ import annotations

import functools
import os
import urllib.parse
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import thematiq_client
from thematiq_client import Poll

DEFAULT_URL = "http://127.0.0.1:7071"
API_PREFIX = "/api"
USER_AGENT = "thematiq-cli/0.2"

P = ParamSpec("P")
R = TypeVar("R")


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
        return self.status in (408, 429, 502, 503, 504)

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
            lines.append("  hint: pass the function key with --key or THEMATIQ_KEY "
                         "(through API Management: --subscription-key or THEMATIQ_SUBSCRIPTION_KEY)")
        return "\n".join(lines)


def api_root(url: str) -> str:
    """``http://host:7071`` → ``http://host:7071/api``; a URL with a path is the API root as given."""
    url = url.strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    # Checked here so nothing ever opens file:// or similar.
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CliError(f"error: the URL must start with http:// or https:// (got {url!r})")
    return url + API_PREFIX if parts.path in ("", "/") else url


def _translated(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn the library's errors into the CLI's."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except thematiq_client.ApiError as err:
            problem = err.problem.model_dump(mode="json", exclude_none=True)
            raise ApiError(err.status, problem, err.retry_after) from None
        except thematiq_client.TransportError as err:
            raise ConnectionFailed(
                f"error: {err}.\n"
                "  Is the host running? Locally start it with `python -m devhost` (or scripts/demo --keep-running);\n"
                "  otherwise point the CLI at it with --url or THEMATIQ_URL."
            ) from None
        except thematiq_client.ThematiqError as err:
            raise CliError(f"error: {err}") from None

    return wrapper


def _dump(job: thematiq_client.Job) -> dict[str, Any]:
    out: dict[str, Any] = job.model_dump(mode="json", by_alias=True, exclude_none=False)
    for key in ("created_at", "started_at", "heartbeat_at", "finished_at"):
        if isinstance(out.get(key), str):
            out[key] = out[key].replace("+00:00", "Z")
    if out.get("callback") is None:
        out.pop("callback", None)
    if out.get("links", {}).get("result") is None:
        out.get("links", {}).pop("result", None)
    return out


class Client:
    """The API at ``url`` (see :func:`api_root`), authenticated with a function key and/or a subscription key."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        key: str | None = None,
        tenant: str | None = None,
        subscription_key: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.url = api_root(url)
        self.api = thematiq_client.Client(
            self.url, key=key, subscription_key=subscription_key, tenant=tenant, timeout=timeout,
            user_agent=USER_AGENT,
        )

    @classmethod
    def from_env(
        cls, url: str | None = None, key: str | None = None, tenant: str | None = None,
        subscription_key: str | None = None,
    ) -> Client:
        """Flags win over ``THEMATIQ_URL`` / ``THEMATIQ_KEY`` / ``THEMATIQ_TENANT`` / ``THEMATIQ_SUBSCRIPTION_KEY``."""
        return cls(
            url=url or os.environ.get("THEMATIQ_URL") or DEFAULT_URL,
            key=key or os.environ.get("THEMATIQ_KEY") or None,
            tenant=tenant or os.environ.get("THEMATIQ_TENANT") or None,
            subscription_key=subscription_key or os.environ.get("THEMATIQ_SUBSCRIPTION_KEY") or None,
        )

    @_translated
    def submit(
        self, pipeline: str, params: dict[str, Any], input_: Any, idempotency_key: str | None = None,
        callback_url: str | None = None,
    ) -> tuple[bool, dict[str, Any]]:
        """Submit a job; returns ``(created, job)``. ``created`` is False for an idempotent replay."""
        done = self.api.submit_detailed(pipeline, input_, params, idempotency_key, callback_url=callback_url)
        return done.created, _dump(done.job)

    @_translated
    def get(self, job_id: str) -> dict[str, Any]:
        return _dump(self.api.get(job_id))

    @_translated
    def poll(self, job_id: str) -> Poll:
        return self.api.poll(job_id)

    @_translated
    def list(
        self, status: str | None = None, pipeline: str | None = None, limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        page = next(self.api.list(status=status, pipeline=pipeline, limit=limit, cursor=cursor))
        return {"items": [_dump(j) for j in page.items], "next_cursor": page.next_cursor}

    @_translated
    def cancel(self, job_id: str) -> dict[str, Any]:
        return _dump(self.api.cancel(job_id))

    @_translated
    def retry(self, job_id: str) -> dict[str, Any]:
        return _dump(self.api.retry(job_id))

    @_translated
    def result(self, job_id: str, fmt: str = "json") -> bytes:
        return self.api.result_bytes(job_id, fmt)

    @_translated
    def response_page(
        self, job_id: str, filters: dict[str, str], metadata: dict[str, str], limit: int | None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page of a job's responses, as the service sent it (``{items, next_cursor, total}``)."""
        query: thematiq_client.ResponseFilters = {"metadata": metadata}
        for name in ("theme", "subtheme", "bucket", "sentiment", "missing", "other_values"):
            if name in filters:
                query[name] = filters[name]
        if limit is not None:
            query["limit"] = limit
        page = next(self.api.response_pages(job_id, cursor, **query))
        return page.model_dump(mode="json")

    @_translated
    def health(self) -> dict[str, Any]:
        return self.api.health().model_dump()


dump_job = _dump
