"""The client: one class, stdlib HTTP (``urllib``), pydantic models.

* ``base_url`` is the API's root as the caller reaches it: ``http://127.0.0.1:7071/api`` locally, or a
  gateway URL such as ``https://contoso.azure-api.net/thematiq``. Paths (``/jobs``…) are appended to it.
* ``key`` is sent as ``x-functions-key`` (direct to the function app), ``subscription_key`` as
  ``Ocp-Apim-Subscription-Key`` (through API Management), ``tenant`` as ``x-thematiq-tenant`` (local only:
  the gateway sets it from the subscription and strips a client's value).
* 429 and 503 (and, for requests that are safe to repeat, 502/504 and connection errors) are retried,
  waiting what ``Retry-After`` says (seconds or an HTTP date), otherwise exponential backoff with jitter.
  ``submit`` and ``create_webhook_secret`` always send an ``Idempotency-Key`` (a fresh one per call unless given,
  re-sent unchanged on each retry), so a retry after a lost answer never creates a second job or secret.
* ``get`` remembers each job's ``ETag`` and sends ``If-None-Match``: an unchanged job costs a 304 with no body.
  ``wait`` polls at the pace the service's ``Retry-After`` suggests.
* Redirects are not followed, so a key is never sent to another host.
"""

from __future__ import annotations

import builtins
import email.utils
import json
import numbers
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar, Unpack

from pydantic import BaseModel, ValidationError

from . import __version__
from .errors import ApiError, ThematiqError, TransportError, WaitTimeout
from .models import (
    Health,
    Job,
    JobList,
    Problem,
    ResponseList,
    ResponseRow,
    Status,
    WebhookSecret,
    WebhookSecretInfo,
    WebhookSecretList,
)

KEY_HEADER = "x-functions-key"
SUBSCRIPTION_HEADER = "Ocp-Apim-Subscription-Key"
TENANT_HEADER = "x-thematiq-tenant"
IDEMPOTENCY_HEADER = "Idempotency-Key"

#: Statuses retried for every request: the service did not process it.
_RETRY_ALWAYS = frozenset({429, 503})
#: Retried too when repeating the request is safe (GET, or a POST the service dedupes).
_RETRY_SAFE = frozenset({408, 502, 504})
#: Answers after which the request may have been applied all the same (a write that committed, answered 5xx).
_MAYBE_APPLIED = frozenset({502, 503, 504})
_ETAGS_KEPT = 512

JobRef = Job | str
_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass(frozen=True)
class Submitted:
    job: Job
    #: False when the service answered an idempotent replay (200): the job existed already.
    created: bool


@dataclass(frozen=True)
class Codebook:
    """A thematic result's themes as a codebook, and the version they were read from."""

    themes: list[dict[str, Any]]
    edits: list[dict[str, Any]]
    #: The result version's ETag: pass it to :meth:`Client.edit_themes` as ``if_match``.
    etag: str


@dataclass(frozen=True)
class Poll:
    job: Job
    #: False when the service answered 304 (nothing changed since the last look).
    changed: bool
    #: Seconds the service suggests before the next poll (None once the job is finished).
    retry_after: float | None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ResponseFilters(TypedDict, total=False):
    """The filters of ``GET /jobs/{id}/responses``, and the page size."""

    theme: str
    subtheme: str
    bucket: str
    sentiment: str
    #: A metadata key: the responses without a value for it (a breakdown's synthetic "(missing)" group).
    missing: str
    #: A ``breakdown_by`` key: the responses its breakdown pooled as "other values".
    other_values: str
    #: key -> value as submitted (``{"vip": True}``, ``{"nps": 7}``, ``{"tags": ["a"]}``); see :func:`metadata_text`.
    metadata: Mapping[str, MetadataValue]
    limit: int


#: ``params.score.scale`` of a thematic job: NPS groups of 0-10 integers, CSAT 1-5, a rating on a declared range (its
#: mean, every value in the range; a 0-5 or 1-5 star rating says so), or any number (the mean).
ScoreScale = Literal["nps", "csat", "numeric", "0-5", "1-5", "1-7", "1-10"]
#: ``params.sentiment_from.scale``: a rating read linearly ("0-5": 0-1 negative, 2-3 neutral, 4-5 positive; "1-5":
#: 1-2 / 3 / 4-5; "1-7", "1-10") or "0-10" read as NPS groups.
RatingRange = Literal["0-5", "1-5", "1-7", "1-10", "0-10"]


class ScoreParam(TypedDict):
    """``params.score``: ``client.submit("thematic", items, {"score": ScoreParam(key="sat", scale="0-5")})``."""

    key: str
    scale: ScoreScale


class SentimentFromParam(TypedDict):
    """``params.sentiment_from`` with a declared scale (a plain key is the other form: the scale is inferred)."""

    key: str
    scale: RatingRange


#: A metadata value, as a response's metadata holds it (JSON).
MetadataValue = str | int | float | bool | None | list[Any] | dict[str, Any]


def metadata_text(value: MetadataValue) -> str:
    """A metadata value as the service writes it to compare a filter with it (pipelines/thematic/insight.py,
    ``meta_text``), and as the CLI's exports show it: true/false, 7.0 as 7, a list or an object as its JSON, null as
    empty. ``str()`` sent a filter's True as "True" and a list as Python's repr, which matched nothing."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _json_integer(value: Any) -> int:
    """An integer of another library (``numpy.int64`` from a DataFrame: any ``numbers.Integral``) as the JSON integer
    it is, in params (``num_themes``, ``max_themes`` alike) and input; ``json`` knows only ``int`` and refused it. A
    ``bool`` never gets here (``json`` writes it as true/false), and numpy's ``bool_``, which is no ``Integral``, is
    refused as before rather than sent as 0 or 1."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _id(job: JobRef) -> str:
    return job.id if isinstance(job, Job) else str(job)


def _seg(value: str) -> str:
    """A path segment, quoted so an id can never change the route."""
    return urllib.parse.quote(value, safe="")


class Client:
    """A client of the Thematiq jobs API.

    >>> client = Client("http://127.0.0.1:7071/api", key="local-function-key-change-me")
    >>> job = client.submit("thematic", [{"id": "r1", "text": "Delivery was late"}], {"max_themes": 8})
    >>> job = client.wait(job, on_progress=lambda j: print(j.status, j.progress.stage))
    >>> themes = client.result(job)["themes"]
    """

    def __init__(
        self,
        base_url: str,
        key: str | None = None,
        subscription_key: str | None = None,
        tenant: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 5,
        max_retry_wait: float = 60.0,
        user_agent: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        parts = urllib.parse.urlsplit(self.base_url)
        # Checked here so urlopen never sees file:// or similar.
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url must be an http:// or https:// URL (got {base_url!r})")
        self.key = key
        self.subscription_key = subscription_key
        self.tenant = tenant
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.user_agent = user_agent or f"thematiq-client/{__version__}"
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect)
        self._etags: OrderedDict[str, tuple[str, Job]] = OrderedDict()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    # -- transport ------------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        *,
        safe: bool | None = None,
        landed: frozenset[int] = frozenset(),
    ) -> Response:
        """One API call to ``base_url + path``, with retries; raises :class:`ApiError` for a status >= 400.

        ``safe`` (default: GET/HEAD) says the request may be repeated after a connection error or a
        502/504 without doing anything twice. ``landed`` are the statuses that, answered to a repeat of an attempt
        whose outcome is unknown (a connection error, a 502/503/504), mean that attempt took effect: that answer
        is returned, not raised (a repeated ``DELETE`` finding nothing left to delete).
        """
        url = self.base_url + path
        q = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if q:
            url += "?" + urllib.parse.urlencode(q)
        h = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self.key:
            h[KEY_HEADER] = self.key
        if self.subscription_key:
            h[SUBSCRIPTION_HEADER] = self.subscription_key
        if self.tenant:
            h[TENANT_HEADER] = self.tenant
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=_json_integer).encode("utf-8")
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        repeatable = method in ("GET", "HEAD") if safe is None else safe
        attempt = 0
        unknown = False  # an earlier attempt may have taken effect (its answer was lost or a 5xx)
        while True:
            attempt += 1
            try:
                response = self._send(urllib.request.Request(url, data=data, headers=h, method=method))  # noqa: S310
            except TransportError:
                if not repeatable or attempt > self.max_retries:
                    raise
                unknown = True
                self._sleep(self._backoff(attempt))
                continue
            if response.status < 400 or response.status == 304 or (unknown and response.status in landed):
                return response
            unknown = unknown or response.status in _MAYBE_APPLIED
            err = _api_error(response)
            retryable = response.status in _RETRY_ALWAYS or (repeatable and response.status in _RETRY_SAFE)
            if not retryable or attempt > self.max_retries:
                raise err
            wait = err.retry_after if err.retry_after is not None else self._backoff(attempt)
            if wait > self.max_retry_wait:
                raise err  # the service asks for longer than we are willing to block: let the caller decide
            self._sleep(wait + random.uniform(0, min(1.0, wait * 0.1)))

    def _send(self, req: urllib.request.Request) -> Response:
        try:
            with self._opener.open(req, timeout=self.timeout) as r:
                return Response(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
        except urllib.error.HTTPError as err:
            with err:
                return Response(err.code, {k.lower(): v for k, v in err.headers.items()}, err.read())
        except urllib.error.URLError as err:
            raise TransportError(self._unreachable(err.reason)) from None
        except (TimeoutError, ConnectionError, OSError) as err:
            raise TransportError(self._unreachable(err)) from None

    def _unreachable(self, reason: object) -> str:
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(reason, TimeoutError):
            why = f"no answer within {self.timeout:g}s"
        else:
            why = str(reason) or type(reason).__name__
        return f"cannot reach {self.base_url} ({why})"

    @staticmethod
    def _backoff(attempt: int) -> float:
        base: float = min(20.0, 0.5 * 2 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        resp = self.request(method, path, **kw)
        try:
            return resp.json()
        except (ValueError, UnicodeDecodeError):
            raise ThematiqError(f"the service sent a response that is not JSON (HTTP {resp.status})") from None

    def _job(self, value: Any) -> Job:
        try:
            return Job.model_validate(value)
        except ValidationError as err:
            raise ThematiqError(f"the service sent a job this client cannot read: {err}") from None

    # -- the API --------------------------------------------------------------------------------------
    def submit(
        self,
        pipeline: str,
        input: Any,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        callback_url: str | None = None,
    ) -> Job:
        """Submit a job. Without ``idempotency_key`` a fresh one is made, so retries never duplicate it."""
        return self.submit_detailed(pipeline, input, params, idempotency_key, callback_url=callback_url).job

    def submit_detailed(
        self,
        pipeline: str,
        input: Any,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        callback_url: str | None = None,
    ) -> Submitted:
        """Like :meth:`submit`, and says whether the job is new (202) or an idempotent replay (200)."""
        body: dict[str, Any] = {"pipeline": pipeline, "params": params or {}, "input": input}
        if callback_url:
            body["callback"] = {"url": callback_url}
        key = idempotency_key or f"tq-{uuid.uuid4().hex}"
        resp = self.request("POST", "/jobs", body=body, headers={IDEMPOTENCY_HEADER: key}, safe=True)
        return Submitted(self._job(resp.json()), resp.status == 202)

    def poll(self, job: JobRef) -> Poll:
        """Read a job once, cheaply: ``If-None-Match`` with the ETag last seen, so an unchanged job is a 304."""
        job_id = _id(job)
        cached = self._etags.get(job_id)
        headers = {"If-None-Match": cached[0]} if cached else None
        resp = self.request("GET", f"/jobs/{_seg(job_id)}", headers=headers)
        retry_after = parse_retry_after(resp.headers.get("retry-after"))
        if resp.status == 304 and cached:
            self._etags.move_to_end(job_id)
            return Poll(cached[1], False, retry_after)
        try:
            value = self._job(resp.json())
        except (ValueError, UnicodeDecodeError):
            raise ThematiqError(f"the service sent a response that is not JSON (HTTP {resp.status})") from None
        etag = resp.headers.get("etag")
        if etag:
            self._etags[job_id] = (etag, value)
            self._etags.move_to_end(job_id)
            while len(self._etags) > _ETAGS_KEPT:
                self._etags.popitem(last=False)
        return Poll(value, True, retry_after)

    def get(self, job: JobRef) -> Job:
        """The job as it is now (after a 304, the copy last read: only its heartbeat_at may be older)."""
        return self.poll(job).job

    def list(
        self,
        status: Status | str | None = None,
        pipeline: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[JobList]:
        """The tenant's jobs, newest first, one page at a time (follows ``next_cursor`` lazily)."""
        while True:
            query = {"status": str(status) if status else None, "pipeline": pipeline, "limit": limit, "cursor": cursor}
            page = JobList.model_validate(self._json("GET", "/jobs", query=query))
            yield page
            cursor = page.next_cursor
            if not cursor:
                return

    def jobs(self, status: Status | str | None = None, pipeline: str | None = None,
             limit: int | None = None) -> Iterator[Job]:
        """Every job of :meth:`list`, across pages."""
        for page in self.list(status, pipeline, limit):
            yield from page.items

    def response_pages(
        self, job: JobRef, cursor: str | None = None, **filters: Unpack[ResponseFilters]
    ) -> Iterator[ResponseList]:
        """A succeeded job's responses (text, metadata, themes, levels, sentiment), one page at a time.

        Filters (:class:`ResponseFilters`) combine with AND; ``metadata={"plan": "pro"}`` keeps responses whose
        metadata ``plan`` is ``pro``. Each next page is requested only when the iterator gets there.
        """
        meta = filters.get("metadata") or {}
        base: dict[str, Any] = {k: v for k, v in filters.items() if k != "metadata"}
        base.update({f"metadata[{k}]": metadata_text(v) for k, v in meta.items()})
        path = f"/jobs/{_seg(_id(job))}/responses"
        while True:
            page = ResponseList.model_validate(self._json("GET", path, query={**base, "cursor": cursor}))
            yield page
            cursor = page.next_cursor
            if not cursor:
                return

    def responses(self, job: JobRef, **filters: Unpack[ResponseFilters]) -> Iterator[ResponseRow]:
        """Every row of :meth:`response_pages`, across pages (``client.responses(job, theme="t3")``)."""
        for page in self.response_pages(job, **filters):
            yield from page.items

    def cancel(self, job: JobRef) -> Job:
        """Cancel: a queued job at once; a running one is asked to stop (its status says when it has)."""
        return self._job(self._json("POST", f"/jobs/{_seg(_id(job))}/cancel", safe=True))

    def retry(self, job: JobRef) -> Job:
        """Resubmit a failed or cancelled job's input as a new job (the same new job however often it is asked)."""
        return self._job(self._json("POST", f"/jobs/{_seg(_id(job))}/retry", safe=True))

    def result_bytes(self, job: JobRef, format: str = "json") -> bytes:
        """The result exactly as the service sends it."""
        return self.request("GET", f"/jobs/{_seg(_id(job))}/result", query={"format": format}).body

    def result(self, job: JobRef, format: str = "json") -> Any:
        """The result of a succeeded job: parsed JSON for ``json``, text for ``csv``/``md``."""
        body = self.result_bytes(job, format)
        return json.loads(body) if format == "json" else body.decode("utf-8")

    def codebook(self, job: JobRef) -> Codebook:
        """The themes of a succeeded thematic job as a codebook (``?format=codebook``), with its ETag."""
        resp = self.request("GET", f"/jobs/{_seg(_id(job))}/result", query={"format": "codebook"})
        body = resp.json()
        return Codebook(list(body["themes"]), list(body.get("edits", [])), resp.headers.get("etag", ""))

    def edit_themes(self, job: JobRef, edits: Sequence[dict[str, Any]], if_match: str) -> Codebook:
        """Rename, merge, split or delete themes (``PATCH /jobs/{id}/themes``) of the version ``if_match`` names.

        A stale ``if_match`` is an :class:`ApiError` with status 412 and nothing changed: read the codebook again.
        Not repeated after a lost answer (the repeat would be a 412 even though the first landed).
        """
        resp = self.request(
            "PATCH", f"/jobs/{_seg(_id(job))}/themes", body={"edits": [dict(e) for e in edits]}, headers={"If-Match": if_match}, safe=False
        )
        body = resp.json()
        return Codebook(list(body["themes"]), list(body.get("edits", [])), resp.headers.get("etag", ""))

    # -- webhook signing secrets (docs/webhooks.md) ------------------------------------------------------
    def create_webhook_secret(self, idempotency_key: str | None = None) -> WebhookSecret:
        """A new signing secret for the tenant (``POST /webhooks/secrets``): a rotation starts. Its value is shown
        only in this answer: store it in the receiver's secret store.

        Sends an ``Idempotency-Key`` (a fresh one per call unless given, the same on every retry of the call), so a
        call whose answer was lost (a dropped connection, a 503 for a write that happened) is retried into the same
        secret (the service answers the replay 200 with the same id and value), never a second one. Give your own
        key to carry that across processes (the service remembers it 24 h, while the secret is active). A third
        active secret is an :class:`ApiError` 409: revoke one first.
        """
        key = idempotency_key or f"tq-{uuid.uuid4().hex}"
        resp = self.request("POST", "/webhooks/secrets", headers={IDEMPOTENCY_HEADER: key}, safe=True)
        return self._model(WebhookSecret, resp)

    def webhook_secrets(self) -> builtins.list[WebhookSecretInfo]:
        """The tenant's active signing secrets (``GET /webhooks/secrets``): ids and dates, never values."""
        return self._model(WebhookSecretList, self.request("GET", "/webhooks/secrets")).items

    def revoke_webhook_secret(self, secret_id: str) -> None:
        """Stop signing with ``secret_id`` (``DELETE /webhooks/secrets/{id}``): a rotation ends.

        An unknown id is an :class:`ApiError` 404, the tenant's last secret a 409. Retried after a lost answer: a
        404 to the retry means the first attempt revoked it (or the id was never active); either way it is not.
        """
        self.request("DELETE", f"/webhooks/secrets/{_seg(secret_id)}", safe=True, landed=frozenset({404}))

    def _model(self, model: type[_M], resp: Response) -> _M:
        try:
            return model.model_validate(resp.json())
        except (ValueError, UnicodeDecodeError):
            raise ThematiqError(f"the service sent a response that is not JSON (HTTP {resp.status})") from None
        except ValidationError as err:
            raise ThematiqError(f"the service sent a {model.__name__} this client cannot read: {err}") from None

    def health(self) -> Health:
        return Health.model_validate(self._json("GET", "/health"))

    def openapi(self) -> dict[str, Any]:
        """The service's OpenAPI document."""
        doc: dict[str, Any] = self._json("GET", "/openapi.json")
        return doc

    def wait(
        self,
        job: JobRef,
        on_progress: Callable[[Job], None] | None = None,
        timeout: float | None = None,
        *,
        min_interval: float = 0.25,
        max_interval: float = 30.0,
    ) -> Job:
        """Poll until the job is finished and return it; ``on_progress(job)`` is called whenever it changed.

        Paced by the service's ``Retry-After`` (within ``min_interval``..``max_interval``), so a long job is
        polled rarely and each unchanged look is a 304. Raises :class:`WaitTimeout` after ``timeout`` seconds
        (the job keeps running). Transient errors (a restarting host, a storage blip) do not end the wait.
        """
        started = time.monotonic()
        last: Job | None = job if isinstance(job, Job) else None
        errors = 0
        delay = min_interval
        while True:
            try:
                seen = self.poll(job)
                errors = 0
            except (ApiError, TransportError) as err:
                if isinstance(err, ApiError) and not err.transient:
                    raise
                errors += 1
                if errors > 10:
                    raise
                delay = min(max_interval, max(delay * 2, min_interval))
                self._sleep_within(delay, started, timeout, last, _id(job))
                continue
            last = seen.job
            if seen.changed and on_progress is not None:
                on_progress(seen.job)
            if seen.job.terminal:
                return seen.job
            suggested = seen.retry_after if seen.retry_after is not None else delay * 1.5
            delay = min(max_interval, max(min_interval, suggested))
            self._sleep_within(delay, started, timeout, last, _id(job))

    def _sleep_within(self, delay: float, started: float, timeout: float | None, last: Job | None,
                      job_id: str) -> None:
        if timeout is not None:
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                status = last.status.value if last else "unknown"
                raise WaitTimeout(f"job {job_id} is still {status} after {timeout:g}s", last)
            delay = min(delay, left)
        self._sleep(delay)


def _api_error(resp: Response) -> ApiError:
    problem: Problem | None = None
    try:
        value = json.loads(resp.body.decode("utf-8")) if resp.body else None
        if isinstance(value, dict):
            problem = Problem.model_validate(
                {"type": "about:blank", "title": _REASONS.get(resp.status, "HTTP error"), "status": resp.status,
                 "detail": "", "instance": "", **value}
            )
    except (ValueError, UnicodeDecodeError, ValidationError):
        problem = None
    if problem is None:
        # Not problem+json (a gateway, or the host's bare 401): make one up from the status.
        text = resp.body.decode("utf-8", "replace").strip()[:300]
        problem = Problem(type="about:blank", title=_REASONS.get(resp.status, "HTTP error"), status=resp.status,
                          detail=text, instance="")
    return ApiError(resp.status, problem, parse_retry_after(resp.headers.get("retry-after")), resp.headers)


_REASONS = {
    400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
    408: "Request timeout", 409: "Conflict", 413: "Payload too large", 415: "Unsupported media type",
    422: "Unprocessable content", 429: "Too many requests", 500: "Internal error", 502: "Bad gateway",
    503: "Service unavailable", 504: "Gateway timeout",
}
