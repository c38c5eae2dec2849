"""What the HTTP API does, independent of ``azure.functions`` request objects.

Each method takes plain values (tenant, ids, the raw body) and returns plain
values or raises a :class:`shared.sdk.errors.ThematiqError`, which the HTTP layer
turns into problem+json.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import sys
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.api.inputs import check_responses
from shared.api.polling import parked_progress
from shared.api.problems import PreconditionFailed, PreconditionRequired
from shared.api.responses import ParsedQuery, ResponseList, encode_cursor, page_etag, parse_query
from shared.api.validation import raise_for
from shared.config.constants import (
    INLINE_INPUT_MAX_BYTES,
    JOB_ID_RE,
    LIST_MAX_LIMIT,
    MAX_STRING_PROPERTY_CHARS,
    PIPELINE_NAME_RE,
)
from shared.config.hostconfig import host_config
from shared.config.settings import get_settings
from shared.core import conditional, fairness
from shared.core.errors import BadRequest, Conflict, NotFound, PayloadTooLarge, ThematiqError, ValidationFailed
from shared.core.jobs import Job, Progress, Status, WebhookStatus, new_job_id, utcnow
from shared.core.lifecycle import Lifecycle, stage_progress
from shared.core.names import dated_input_blob_name, job_prefix
from shared.core.ports import Stores
from shared.core.registry import Registry, default_registry
from shared.core.webhooks import MAX_URL_CHARS, SWEEP_AFTER, UnsafeUrl, check_url, normalise_url
from shared.sdk.responses import ResponseLister
from shared.storage.blobs import decode_stored_input, encode_input
from shared.storage.webhook_store import IndexRow, WebhookStore, active_secrets

log = logging.getLogger(__name__)
_MAX_JSON_DEPTH = 64
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class CallbackSpec(BaseModel):
    """Where to POST the job's JSON when it ends (docs/webhooks.md)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1, max_length=MAX_URL_CHARS,
        description="An https URL that resolves to a public address; called once the job is terminal.",
    )


class SubmitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pipeline: str = Field(pattern=PIPELINE_NAME_RE.pattern)
    params: dict[str, Any] = Field(default_factory=dict)
    input: Any = Field(...)
    callback: CallbackSpec | None = Field(default=None, description="A completion webhook.")


@dataclass(frozen=True)
class Submitted:
    job: Job
    created: bool


@dataclass(frozen=True)
class _Accepted:
    """A submission that passed every check (``JobService._accept``): what its job row will hold."""

    body: SubmitBody
    #: The params as the pipeline's model dumps them, and the input as its checks and ``prepare`` left it.
    params: dict[str, Any]
    data: Any
    callback_url: str | None
    #: sha256 of what the client sent, canonicalised: an Idempotency-Key replay must send the same.
    request_hash: str
    max_attempts: int


@dataclass(frozen=True)
class ResultBody:
    content_type: str
    body: bytes
    filename: str
    #: Strong ETag of the stored result version: what ``PATCH /api/jobs/{id}/themes`` takes as ``If-Match``.
    etag: str = ""


@dataclass(frozen=True)
class ResponsesRequest:
    """A checked ``GET …/responses``: the job row (read once) and the page's ETag, before any blob is read."""

    job: Job
    lister: ResponseLister
    parsed: ParsedQuery
    etag: str


class _ParsedCache:
    """The parsed (result, input) of the last few jobs whose responses were paged, by result version.

    A result version's blob name never changes meaning and a job's input never changes, so an entry is never
    stale; another tenant cannot reach one (the tenant is in the key, and the row read that precedes every use
    checks it). Paging a 20,000-response job is then one row read and no parse per page after the first.
    Bounded by the raw bytes it was parsed from (objects take a few times more), oldest dropped first.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._items: OrderedDict[tuple[str, str, str], tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> Any | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: tuple[str, str, str], value: Any, size: int) -> None:
        if size > self._max:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (value, size)
            self._bytes += size
            while self._bytes > self._max:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped


#: 24 MB of raw result + input: two 20,000-response jobs (about 8 MB each), some 150 MB once parsed.
_PARSED = _ParsedCache(24 * 1024 * 1024)


#: Edited results up to this size are kept in the row like a small first result (the worker's own limit,
#: shared.runtime.worker.RESULT_INLINE_MAX_BYTES, which this layer may not import); larger ones only in the blob.
EDITED_INLINE_MAX_BYTES = 32 * 1024


def result_etag(job: Job) -> str:
    """Each stored version of a result has its own blob name, so the name identifies the version."""
    return '"' + hashlib.sha256((job.result_blob or "").encode()).hexdigest()[:24] + '"'


def _matches(if_match: str, etag: str) -> bool:
    # If-Match uses the strong comparison (RFC 9110 13.1.1): a weak tag never matches.
    tags = [t.strip() for t in if_match.split(",")]
    return "*" in tags or etag in tags


class _EarlierResults:
    """``shared.sdk.EarlierResults`` for one submission: the submitting tenant's jobs only, read through the stores."""

    def __init__(self, service: JobService, tenant: str, pipeline: str) -> None:
        self._service, self._tenant, self._pipeline = service, tenant, pipeline

    def result(self, job_id: str, *, field: str) -> dict[str, Any]:
        try:
            job = self._service.stores.jobs.get(self._tenant, check_job_id(job_id), with_input=True)
        except NotFound:
            # The same answer for an unknown id and another tenant's job: existence never leaks across tenants.
            raise NotFound("no such job", field=field) from None
        if job.pipeline != self._pipeline:
            raise ValidationFailed(
                f"{field} is a {job.pipeline} job", [{"field": field, "message": f"a {job.pipeline} job, not {self._pipeline}"}]
            )
        if job.status != Status.SUCCEEDED or not job.result_blob:
            raise ValidationFailed(
                f"{field} has not succeeded", [{"field": field, "message": f"the job is {job.status}, not succeeded"}]
            )
        doc = json.loads(self._service.stored_result(job))
        if not isinstance(doc, dict):
            raise ValidationFailed(f"{field} has no result document", [{"field": field, "message": "not a document"}])
        return doc


def check_job_id(job_id: str) -> str:
    # Checked before any storage call: ids never reach a filter or a URL unvalidated.
    if not JOB_ID_RE.fullmatch(job_id):
        raise NotFound("job not found")
    return job_id


#: A JSON string (its escapes included), and any run of characters that is not a bracket.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_SQUARE = str.maketrans("{}", "[]")


def _nesting(text: str) -> int:
    """How many containers deep the (parsed, so well-formed) JSON ``text`` goes, counted up to one past the limit.

    On the text, not the parsed value: with the strings and everything but brackets gone, each pass removes the
    innermost pairs, one level. A walk of the parsed value cost a stack entry per node, about 12 times the parse
    itself: ``parse_json_body`` of a 5.7 MB body of 2 million ``{}`` took 2.2 s of CPU, now 0.54 s (25 MiB of
    them: some 9 s with the GIL held in the host's worker); 22 MB of survey answers, 0.58 s either way
    (2026-12-03, Intel Xeon, 2 cores, load average 6.4).
    """
    s = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).translate(_SQUARE)
    depth = 0
    while s:
        depth += 1
        if depth > _MAX_JSON_DEPTH:
            break
        s = s.replace("[]", "")
    return depth


def parse_json_body(body: bytes, max_bytes: int) -> Any:
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"the request body is {len(body)} bytes; the limit is {max_bytes}", field="body")
    if not body.strip():
        raise BadRequest("the request body is empty; send a JSON object", field="body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadRequest(f"the request body is not valid UTF-8 (byte {err.start})", field="body") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                           object_pairs_hook=_unique_keys)
    except _DuplicateKey as err:
        raise BadRequest(f'a JSON object has the key "{err.key[:100]}" twice; a key may appear once per object',
                         field="body") from None
    except RecursionError:
        raise BadRequest(f"the JSON is nested deeper than {_MAX_JSON_DEPTH} levels", field="body") from None
    except json.JSONDecodeError as err:
        raise BadRequest(f"malformed JSON at line {err.lineno} column {err.colno}: {err.msg}", field="body") from None
    except ValueError as err:
        # NaN/Infinity (not JSON), or an integer longer than Python converts (4,300 digits), whose own message
        # advises calling sys.set_int_max_str_digits(): said in the API's words instead.
        message = str(err)
        if "integer string conversion" in message:
            message = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise BadRequest(f"invalid JSON value: {message[:100]}", field="body") from None
    if _nesting(text) > _MAX_JSON_DEPTH:
        raise BadRequest(f"the JSON is nested deeper than {_MAX_JSON_DEPTH} levels", field="body")
    if _SURROGATE_ESCAPE.search(text):
        # "\ud800" parses, but a lone surrogate cannot be encoded as UTF-8 when the input is stored (was a 500).
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest("the JSON contains a lone UTF-16 surrogate escape", field="body") from None
    return value


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object with a key twice is refused: parsers disagree on which one wins (Python's json the last, others the
    first), so a gateway policy and the app could read different values, and a dropped value went unnoticed (RFC
    7493, I-JSON). Costs a call per object: 23 MB of 100,000 responses 0.12 -> 0.17 s of CPU, 16 MB of 2 million
    ``{"a":1}`` 0.50 -> 0.90 s (2026-12-03, Intel Xeon, 2 cores, load average 3)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e999 parses as inf, which no JSON document can hold: the result would carry "Infinity" (not JSON).
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


class JobService:
    def __init__(self, stores: Stores, registry: Registry | None = None) -> None:
        self.stores = stores
        self.lifecycle = Lifecycle(self.stores)
        self.registry = registry or default_registry()

    # -- submit --------------------------------------------------------------
    def submit(
        self, tenant: str, raw_body: bytes, idempotency_key: str | None, traceparent: str | None = None
    ) -> Submitted:
        accepted = self._accept(tenant, raw_body)
        callback_url = accepted.callback_url
        now = utcnow()
        job_id = new_job_id()
        encoded = encode_input(accepted.data)
        inline = len(encoded) <= INLINE_INPUT_MAX_BYTES
        # By the day of the submission, so the daily sweep of orphaned inputs lists only the days since it looked.
        blob_name = None if inline else dated_input_blob_name(tenant, job_id, now)
        if callback_url:
            # Indexed before the job row exists, so no job with a webhook is ever outside the sweep's reach; an
            # insert that then fails leaves a row the sweep removes (its job is not found).
            WebhookStore.of(self.stores).put_index_row(IndexRow(tenant, job_id, due_at=now + SWEEP_AFTER))
        if blob_name:
            # Claim check: the payload is in Blob Storage before the row that points at it exists.
            self.stores.blobs.put(blob_name, encoded, "application/gzip")
        job = Job(
            tenant=tenant,
            id=job_id,
            pipeline=accepted.body.pipeline,
            status=Status.QUEUED,
            params=accepted.params,
            created_at=now,
            available_at=now,
            max_attempts=min(accepted.max_attempts, host_config().max_dequeue_count),
            input_inline=encoded if inline else None,
            input_blob=blob_name,
            input_bytes=len(raw_body),
            request_hash=accepted.request_hash,
            traceparent=traceparent,
            callback_url=callback_url,
            callback_status=WebhookStatus.PENDING if callback_url else None,
        )
        try:
            # Through the tenant's fairness window: past it the job is stored queued but parked (shared.core.fairness).
            submitted = Lifecycle(fairness.gated(self.stores)).submit(job, idempotency_key)
            stored, created = submitted.row, submitted.applied
        except ThematiqError:
            if blob_name:
                self._drop_input_unless_stored(job, blob_name)
            raise
        if not created and blob_name:
            self._forget_blob(blob_name)
        return Submitted(stored, created)

    def _accept(self, tenant: str, raw_body: bytes) -> _Accepted:
        """Every check of a submission, before anything is stored: a bad one is a 4xx and nothing changes."""
        settings = get_settings()
        value = parse_json_body(raw_body, settings.max_input_bytes)
        if not isinstance(value, dict):
            raise ValidationFailed(
                "the body must be a JSON object", [{"field": "body", "message": "expected an object"}]
            )
        try:
            body = SubmitBody.model_validate(value)
        except ValidationError as err:
            raise_for(err, "", "invalid request body")
        pipeline = self.registry.get(body.pipeline)
        if pipeline is None:
            known = ", ".join(self.registry.names())
            raise ValidationFailed(
                f"unknown pipeline {body.pipeline!r}",
                [{"field": "pipeline", "message": f"unknown pipeline; known: {known}"}],
            )
        try:
            # Strict, as JSON: a parameter is the JSON type it is declared as (an integer is a JSON integer, never
            # "5", 5.0 or true; a number never a string), so what is stored is what was sent; enums and literals
            # still take their JSON strings.
            params_model = pipeline.params_model.model_validate_json(json.dumps(body.params), strict=True)
        except ValidationError as err:
            raise_for(err, "params", "invalid params")
        if pipeline.validate_params is not None:
            pipeline.validate_params(params_model)
        params = params_model.model_dump(mode="json")
        data = pipeline.validate_input(body.input) if pipeline.validate_input else body.input
        if pipeline.responses is not None:
            # Its rows are served as submitted: every key a metadata[KEY] filter and an export column, every id a
            # cell (shared.api.inputs), so a key or id they cannot show is a 422 here, never a stored job.
            check_responses(data)
        if pipeline.prepare is not None:
            # Checks of params against the input, and reads of the tenant's earlier results: before anything is
            # stored, so a bad metadata key or another tenant's job id is a 4xx and nothing changes.
            data = pipeline.prepare(params_model, data, _EarlierResults(self, tenant, body.pipeline))
        callback_url = self._callback_url(tenant, body.callback)
        params_json = json.dumps(params, separators=(",", ":"))
        if len(params_json) > MAX_STRING_PROPERTY_CHARS:
            raise PayloadTooLarge("params are too large to store", field="params")
        # The idempotency fingerprint covers what the client sent, canonicalised.
        fingerprint: dict[str, Any] = {"p": body.pipeline, "params": body.params, "input": body.input}
        if callback_url:
            fingerprint["callback"] = callback_url
        request_hash = hashlib.sha256(
            json.dumps(fingerprint, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
        return _Accepted(body, params, data, callback_url, request_hash, pipeline.retry.max_attempts)

    def _drop_input_unless_stored(self, job: Job, blob_name: str) -> None:
        """A submission that failed (503, or 409 for a reused key) after its input blob was written.

        The blob is deleted only once a re-read shows the job row is not there: an insert whose answer was lost
        may have committed, and then the row needs its input. If the re-read fails too, or the delete does, or
        its answer is lost (it may have deleted; a delete is idempotent), the blob stays and the reaper's daily
        sweep deletes it once it is ``ORPHAN_INPUT_AGE_SECONDS`` old and still has no row.
        """
        try:
            conditional.reread(lambda: self.stores.jobs.get(job.tenant, job.id))
            return  # the insert committed: the job exists and keeps its input
        except NotFound:
            pass
        except ThematiqError:
            log.warning("job %s: could not tell whether its insert committed; the sweep deletes an orphaned input",
                        job.id)
            return
        self._forget_blob(blob_name)

    def _callback_url(self, tenant: str, spec: CallbackSpec | None) -> str | None:
        """The URL in the one form it is stored and called in, or a 422 naming ``callback.url``."""
        if spec is None:
            return None
        try:
            url = normalise_url(spec.url)
            check_url(url, allow_private=get_settings().webhook_allow_private)
        except UnsafeUrl as err:
            raise ValidationFailed("invalid callback URL", [{"field": "callback.url", "message": str(err)}]) from None
        if not active_secrets(WebhookStore.of(self.stores), tenant).secrets:
            raise ValidationFailed(
                "webhooks are not configured for this tenant",
                [{"field": "callback", "message": "no webhook signing secret: create one with POST /api/webhooks/secrets"}],
            )
        return url

    def _forget_blob(self, name: str) -> None:
        try:
            self.stores.blobs.delete_prefix(name)
        except ThematiqError:
            log.warning("could not delete orphaned input blob")

    # -- read ----------------------------------------------------------------
    def pipeline_timeout(self, name: str) -> float | None:
        """The pipeline's own attempt timeout, if it declares one (polling hints scale with it)."""
        pipeline = self.registry.get(name)
        return pipeline.timeout_seconds if pipeline else None

    def get(self, tenant: str, job_id: str) -> Job:
        job = self.stores.jobs.get(tenant, check_job_id(job_id))
        summed = stage_progress(self.stores, job)
        if summed is not None:
            # A waiting job's progress is the sum of its chunks (read here, so chunks never write the job row).
            done, total = summed
            job = job.with_changes(
                progress=Progress(stage=job.wait_stage or "", processed=done, total=total, message="map stage")
            )
        place = fairness.place(self.stores, job)
        if place is not None:
            # Parked past its tenant's fairness window: shown as its progress (stage "parked"), which the poll's
            # ETag and Retry-After follow (shared.api.polling).
            job = job.with_changes(progress=parked_progress(place, fairness.window(), fairness.POSITION_PAGE))
        return job

    def list(self, tenant: str, query: dict[str, str]) -> tuple[list[Job], str | None]:
        unknown = set(query) - {"status", "pipeline", "limit", "cursor", "code"}
        if unknown:
            name = sorted(unknown)[0]
            raise ValidationFailed(
                f"unknown query parameter {name!r}", [{"field": name, "message": "unknown query parameter"}]
            )
        status = query.get("status") or None
        if status is not None and status not in {s.value for s in Status}:
            raise ValidationFailed(
                "invalid status", [{"field": "status", "message": f"one of {', '.join(s.value for s in Status)}"}]
            )
        pipeline = query.get("pipeline") or None
        if pipeline is not None and not PIPELINE_NAME_RE.fullmatch(pipeline):
            raise ValidationFailed("invalid pipeline", [{"field": "pipeline", "message": "not a pipeline name"}])
        limit_text = query.get("limit") or "50"
        # isascii(): str.isdigit() also accepts '²' or '٣', which int() then rejects or reads as a number.
        if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= LIST_MAX_LIMIT:
            raise ValidationFailed(
                "invalid limit", [{"field": "limit", "message": f"an integer from 1 to {LIST_MAX_LIMIT}"}]
            )
        return self.stores.jobs.list(
            tenant, status=status, pipeline=pipeline, limit=int(limit_text), cursor=query.get("cursor") or None
        )

    # -- cancel --------------------------------------------------------------
    def cancel(self, tenant: str, job_id: str) -> Job:
        """Queued, retrying or waiting for chunks: cancelled at once (chunks not yet run are skipped, running
        ones stop at their next heartbeat). Running: flagged; the worker stops it, or kills it after the grace
        period."""
        # Read whole, so the terminal write's row carries the callback URL its webhook needs.
        return self.lifecycle.cancel(self.stores.jobs.get(tenant, check_job_id(job_id), with_input=True)).row

    # -- result --------------------------------------------------------------
    def result(self, tenant: str, job_id: str, fmt: str) -> ResultBody:
        # The full row: a small result is stored in it (result_inline), a large one in its blob.
        job = self.stores.jobs.get(tenant, check_job_id(job_id), with_input=True)
        if job.status != Status.SUCCEEDED or not job.result_blob:
            raise Conflict(f"the job has no result (status {job.status})", field="status")
        data = self.stored_result(job)
        etag = result_etag(job)
        if fmt == "json":
            return ResultBody("application/json", data, f"{job.id}.json", etag)
        pipeline = self.registry.get(job.pipeline)
        exporter = pipeline.exports.get(fmt) if pipeline else None
        renderer = pipeline.renderers.get(fmt) if pipeline else None
        if exporter is not None:
            # Texts and metadata come from the stored input (one more read when it was claim-checked).
            content_type, body = exporter(json.loads(data), self.stored_input(job))
        elif renderer is not None:
            content_type, body = renderer(json.loads(data))
        else:
            formats = ["json", *sorted({*pipeline.renderers, *pipeline.exports})] if pipeline else ["json"]
            raise ValidationFailed(
                "unsupported format", [{"field": "format", "message": f"one of {', '.join(formats)}"}]
            )
        ext = {"csv": "csv", "md": "md", "xlsx": "xlsx"}.get(
            fmt, f"{fmt}.json" if content_type == "application/json" else fmt
        )
        return ResultBody(content_type, body, f"{job.id}.{ext}", etag)

    # -- responses -----------------------------------------------------------
    def responses_request(self, tenant: str, job_id: str, params: dict[str, str]) -> ResponsesRequest:
        """Read the job row (the only read a 304 or a bad query costs) and check the query's shape."""
        job = self.stores.jobs.get(tenant, check_job_id(job_id), with_input=True)
        pipeline = self.registry.get(job.pipeline)
        if pipeline is None or pipeline.responses is None:
            raise Conflict(f"{job.pipeline} jobs have no responses to list", field="pipeline")
        parsed = parse_query(params, pipeline.response_filters)
        if job.status != Status.SUCCEEDED or not job.result_blob:
            raise Conflict(f"the job has no result (status {job.status})", field="status")
        return ResponsesRequest(job, pipeline.responses, parsed, page_etag(result_etag(job), parsed))

    def responses_page(self, request: ResponsesRequest) -> dict[str, Any]:
        """One page: the result and the input, each at most one read (both are inline in the row when small),
        or none when this process parsed the same result version for an earlier page (``_PARSED``)."""
        job = request.job
        key = (job.tenant, job.id, job.result_blob or "")
        parsed = _PARSED.get(key)
        if parsed is None:
            raw = self.stored_result(job)
            parsed = (json.loads(raw), self.stored_input(job))
            _PARSED.put(key, parsed, len(raw) + (job.input_bytes or 0))
        page = request.lister(parsed[0], parsed[1], request.parsed.query)
        cursor = None if page.next_start is None else encode_cursor(page.next_start, request.parsed.fingerprint)
        return ResponseList(items=page.items, next_cursor=cursor, total=page.total,
                            usable=page.usable).model_dump(mode="json")

    def stored_result(self, job: Job) -> bytes:
        """The current result version of a succeeded job read whole: in the row when small, else its blob."""
        assert job.result_blob
        return job.result_inline if job.result_inline is not None else self.stores.blobs.get(job.result_blob)

    # -- edit ----------------------------------------------------------------
    def edit_themes(self, tenant: str, job_id: str, raw_body: bytes, if_match: str | None) -> ResultBody:
        """Apply codebook edits to a succeeded job's result, if ``if_match`` is its current version's ETag.

        The new version is written to a new blob first, then the row is pointed at it by a conditional
        lifecycle transition; a stale ``If-Match`` (checked here, and again by the transition against a
        concurrent edit) is a 412 with nothing changed. Returns the new codebook and its ETag.
        """
        if not if_match:
            raise PreconditionRequired("send If-Match with the ETag of the result you edited", field="If-Match")
        value = parse_json_body(raw_body, get_settings().max_input_bytes)
        job = self.stores.jobs.get(tenant, check_job_id(job_id), with_input=True)
        pipeline = self.registry.get(job.pipeline)
        if pipeline is None or pipeline.edit_result is None:
            raise Conflict(f"{job.pipeline} results cannot be edited", field="pipeline")
        if job.status != Status.SUCCEEDED or not job.result_blob:
            raise Conflict(f"the job has no result (status {job.status})", field="status")
        current = result_etag(job)
        if not _matches(if_match, current):
            raise PreconditionFailed("the result changed since it was read; read it again", field="If-Match")
        doc = json.loads(self.stored_result(job))
        edited = pipeline.edit_result(doc, value, self.stored_input(job))
        body = json.dumps(edited, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        # A fresh name per version: two concurrent edits never overwrite each other's blob, and the loser's
        # is only an orphan under the job's prefix, deleted with the job at retention.
        new_blob = f"{job_prefix(job.tenant, job.id)}result-edit-{uuid.uuid4().hex[:16]}.json"
        self.stores.blobs.put(new_blob, body, "application/json")
        try:
            applied = self.lifecycle.record_themes_edit(
                job, expected_blob=job.result_blob, new_blob=new_blob, size=len(body),
                inline=body if len(body) <= EDITED_INLINE_MAX_BYTES else None,
            )
        except NotFound:
            self._forget_blob(new_blob)  # retention deleted the job meanwhile (its row first, then its blobs)
            raise
        if not applied.applied:
            self._forget_blob(new_blob)
            raise PreconditionFailed("the result changed since it was read; read it again", field="If-Match")
        renderer = pipeline.renderers.get("codebook")
        content_type, out = renderer(edited) if renderer else ("application/json", body)
        return ResultBody(content_type, out, f"{job.id}.codebook.json", result_etag(applied.row))

    def stored_input(self, job: Job) -> Any:
        """The job's input as submitted (inline in its row, or its claim-checked blob); Conflict naming ``input``
        when it is gone or does not decode (``CorruptInput``)."""
        if job.input_inline is not None:
            return decode_stored_input(job.input_inline, "in its row")
        if job.input_blob:
            try:
                return decode_stored_input(self.stores.blobs.get(job.input_blob), "in its blob")
            except NotFound as err:
                raise Conflict("the job's input is no longer stored", field="input") from err
        raise Conflict("the job's input is no longer stored", field="input")
