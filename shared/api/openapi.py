"""The API's OpenAPI 3.1 document, built from the same pydantic models and limits the code uses.

Served at ``GET /api/openapi.json`` (auth level ``function``, like every route
but health) by ``blueprints/docs.py``. Request bodies come from
:class:`shared.api.service.SubmitBody`; job responses from :class:`shared.api.views.JobView`, the
very model the handlers serialise jobs with; errors from :class:`Problem` (RFC 9457).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from shared.api.responses import RESPONSES_DEFAULT_LIMIT, RESPONSES_MAX_LIMIT, ResponseList
from shared.api.service import SubmitBody
from shared.api.views import JobView
from shared.config.constants import (
    IDEMPOTENCY_KEY_RE,
    JOB_ID_RE,
    LIST_DEFAULT_LIMIT,
    LIST_MAX_LIMIT,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
    PIPELINE_NAME_RE,
    PROBLEM_CONTENT_TYPE,
    TENANT_HEADER,
    TENANT_RE,
)
from shared.core.jobs import Status

_REF = "#/components/schemas/{model}"


class JobList(BaseModel):
    items: list[JobView]
    next_cursor: str | None = Field(description="Pass as `cursor` to get the next page; null on the last page.")


class Health(BaseModel):
    status: str
    storage: str
    queue_depth: int


class FieldError(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details; ``errors`` names the offending fields."""

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[FieldError] | None = None


_MODELS: tuple[type[BaseModel], ...] = (SubmitBody, JobView, JobList, ResponseList, Health, Problem)

_PROBLEMS = {
    "400": "Malformed JSON, invalid UTF-8, nesting deeper than 64, a key twice in one object, a bad cursor or header.",
    "401": "Missing or wrong function key (empty body, from the host), or no tenant (problem+json).",
    "404": "Unknown job, or another tenant's job (never 403).",
    "409": "Idempotency-Key reused with another body; cancel of a finished job; result (or responses) of an "
    "unfinished job.",
    "412": "If-Match does not match the result's current ETag: it was edited since it was read; nothing changed.",
    "413": "Body larger than MAX_INPUT_BYTES.",
    "415": "A body sent as another media type than application/json (UTF-8), or compressed (Content-Encoding); "
    "the header is named.",
    "422": "Unknown pipeline, invalid params or input, an unknown query parameter or one given twice (the field is named).",
    "428": "If-Match is required (a blind overwrite could lose another editor's changes).",
    "500": "Unexpected internal error; the detail carries an incident id, never internals.",
    "503": "Storage unavailable, or the deployment cannot serve the route (a secret setting is an unresolved Key Vault "
    "reference, webhook secrets are sealed with a key no longer configured, Storage refuses the app itself): retry "
    "after `Retry-After` seconds.",
}


def _schemas() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model in _MODELS:
        schema = model.model_json_schema(ref_template=_REF, by_alias=True)
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    return out


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _json(name: str, description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {"application/json": {"schema": _ref(name)}}}
    if headers:
        response["headers"] = headers
    return response


def _problems(*codes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for code in codes:
        response: dict[str, Any] = {
            "description": _PROBLEMS[str(code)],
            "content": {PROBLEM_CONTENT_TYPE: {"schema": _ref("Problem")}},
        }
        if code == 503:
            response["headers"] = {"Retry-After": {"schema": {"type": "integer", "minimum": 1}, "required": True}}
        out[str(code)] = response
    return out


_TENANT = {
    "name": TENANT_HEADER,
    "in": "header",
    "required": False,
    "description": "Set by API Management from the caller's subscription (a client's value is stripped); "
    "locally it defaults to DEFAULT_TENANT.",
    "schema": {"type": "string", "pattern": TENANT_RE.pattern},
}
_JOB_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": "The job id (28 hex digits). Anything else is 404.",
    "schema": {"type": "string", "pattern": JOB_ID_RE.pattern},
}
_COMMON = (401, 500, 503)
_WEBHOOK = {
    "summary": "The job ended: its JSON, signed (docs/webhooks.md)",
    "description": "Sent at least once per event; retried with backoff for 24 h until a 2xx. "
    "Verify Thematiq-Signature (one v1 per active secret of the tenant: HMAC-SHA256 of "
    "`<t>.<Thematiq-Event>.<Thematiq-Delivery>.<body>`; thematiq_client.webhooks.verify) and dedupe by Thematiq-Delivery.",
    "parameters": [
        {"name": "Thematiq-Event", "in": "header", "required": True,
         "schema": {"type": "string", "enum": ["job.succeeded", "job.failed", "job.cancelled"]}},
        {"name": "Thematiq-Delivery", "in": "header", "required": True,
         "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}},
        {"name": "Thematiq-Signature", "in": "header", "required": True,
         "schema": {"type": "string", "pattern": "^t=[0-9]+(,v1=[0-9a-f]{64}){1,2}$"}},
    ],
    "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobView"}}}},
    "responses": {"2XX": {"description": "Received; any other answer is retried."}},
}
_SECRET_PROPERTIES: dict[str, Any] = {"id": {"type": "string"}, "created_at": {"type": "string", "format": "date-time"}}
_SECRET_INFO = {"type": "object", "required": ["id", "created_at"], "properties": _SECRET_PROPERTIES}
_SECRET_CREATED = {"type": "object", "required": ["id", "secret", "created_at"], "properties": {
    **_SECRET_PROPERTIES, "secret": {"type": "string", "description": "The HMAC key; shown only here."}}}
_SECRET_LIST = {"type": "object", "required": ["items"], "properties": {"items": {"type": "array", "items": _SECRET_INFO}}}
_ETAG = {"schema": {"type": "string"}, "description": "Send it back as If-None-Match to poll cheaply."}
_RETRY_AFTER = {
    "schema": {"type": "integer", "minimum": 1},
    "description": "While the job is unfinished: seconds until polling it again is worth it (by pipeline and progress).",
}
_LOCATION = {"Location": {"schema": {"type": "string"}, "description": "The job's URL."}, "Retry-After": _RETRY_AFTER}


def _submit_job() -> dict[str, Any]:
    """``POST /jobs``."""
    return {
        "operationId": "submit_job",
        "summary": "Submit a job",
        "description": "`input` is the pipeline's. A pipeline that lists its responses (thematic: "
        "`[{id, text, metadata?}]`) serves every metadata key as a `metadata[KEY]` filter and an export column, "
        f"and every id as a cell: a key is 1 to {MAX_METADATA_KEY_CHARS} characters with a visible one and no "
        "control character, line break or direction override (the rule of theme labels), a string id follows "
        f"the same rule, and the responses have at most {MAX_METADATA_KEYS:,} distinct keys; anything else is a "
        "422 naming `input[i].metadata` (and the key) or `input[i].id`, and nothing is stored. "
        "Thematic `params` (docs/thematic.md) include a rating's scale, declared: `score: {key, scale}` with "
        "`scale` one of `nps`, `csat`, `numeric` or a rating range `0-5`, `1-5`, `1-7`, `1-10` (its mean), and "
        "`sentiment_from: {key, scale}` with `scale` one of `0-5`, `1-5`, `1-7`, `1-10` (read linearly) or "
        "`0-10` (NPS groups); a value outside the declared scale is a 422 naming `params.score.scale` or "
        "`params.sentiment_from.scale`. One key is read on one scale: `score` and `sentiment_from` naming the "
        "same key with two different ranges (`nps` is 0-10, `csat` 1-5, `numeric` none) is a 422 naming "
        "`params.sentiment_from.scale`, and a plain `sentiment_from` key reads the range its `score` declares.",
        "parameters": [
            _TENANT,
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "The same key and body return the same job (200); another body is 409.",
                "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY_RE.pattern},
            },
        ],
        "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("SubmitBody")}}},
        "callbacks": {"jobFinished": {"{$request.body#/callback/url}": {"post": _WEBHOOK}}},
        "responses": {
            "202": _json("JobView", "Accepted: the job is committed and queued.", _LOCATION),
            "200": _json("JobView", "Idempotent replay: the job created earlier with this key.", _LOCATION),
            **_problems(400, 409, 413, 415, 422, *_COMMON),
        },
    }


def _list_jobs() -> dict[str, Any]:
    """``GET /jobs``."""
    return {
        "operationId": "list_jobs",
        "summary": "List the tenant's jobs, newest first",
        "description": "Each parameter once: one given twice is a 422 naming it.",
        "parameters": [
            _TENANT,
            {"name": "status", "in": "query", "schema": {"type": "string", "enum": [s.value for s in Status]}},
            {
                "name": "pipeline",
                "in": "query",
                "schema": {"type": "string", "pattern": PIPELINE_NAME_RE.pattern},
            },
            {
                "name": "limit",
                "in": "query",
                "schema": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": LIST_MAX_LIMIT,
                    "default": LIST_DEFAULT_LIMIT,
                },
            },
            {"name": "cursor", "in": "query", "schema": {"type": "string", "maxLength": 2048}},
        ],
        "responses": {"200": _json("JobList", "One page of jobs."), **_problems(400, 422, *_COMMON)},
    }


def _get_job() -> dict[str, Any]:
    """``GET /jobs/{id}``."""
    return {
        "operationId": "get_job",
        "summary": "A job's status, progress, attempts and error",
        "parameters": [
            _JOB_ID,
            _TENANT,
            {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "description": "The ETag of the copy you hold: 304 with no body while the job is unchanged.",
                "schema": {"type": "string"},
            },
        ],
        "responses": {
            "200": _json("JobView", "The job.", {"ETag": _ETAG, "Retry-After": _RETRY_AFTER}),
            "304": {
                "description": "Not modified: the job is as the ETag you sent describes it.",
                "headers": {"ETag": _ETAG, "Retry-After": _RETRY_AFTER},
            },
            **_problems(400, 404, *_COMMON),
        },
    }


def _cancel_job() -> dict[str, Any]:
    """``POST /jobs/{id}/cancel``."""
    return {
        "operationId": "cancel_job",
        "summary": "Cancel a job",
        "parameters": [_JOB_ID, _TENANT],
        "responses": {
            "200": _json("JobView", "Cancelled (a queued job at once), or already cancelled."),
            "202": _json("JobView", "Cancel requested; the worker stops the running pipeline."),
            **_problems(400, 404, 409, *_COMMON),
        },
    }


def _get_job_result() -> dict[str, Any]:
    """``GET /jobs/{id}/result``."""
    return {
        "operationId": "get_job_result",
        "summary": "The result of a succeeded job",
        "parameters": [
            _JOB_ID,
            _TENANT,
            {
                "name": "format",
                "in": "query",
                "description": "`json` for every pipeline; others (`csv`, `xlsx`, `md`, `codebook`) "
                "where the pipeline renders them. Thematic `csv` and `xlsx` carry each response's text "
                "and metadata columns; every cell is inert (no formulas). Empty is `json`; given twice, a 422.",
                "schema": {"type": "string", "default": "json"},
            },
        ],
        "responses": {
            "200": {
                "description": "The result document.",
                "headers": {
                    "Content-Disposition": {"schema": {"type": "string"}},
                    "ETag": {
                        "description": "The stored result version; send it as If-Match to edit the themes.",
                        "schema": {"type": "string"},
                    },
                },
                "content": {
                    "application/json": {"schema": {"type": "object"}},
                    "text/csv": {"schema": {"type": "string"}},
                    "text/markdown": {"schema": {"type": "string"}},
                    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": {
                        "schema": {"type": "string", "format": "binary"}
                    },
                },
            },
            **_problems(400, 404, 409, 422, *_COMMON),
        },
    }


def _list_job_responses() -> dict[str, Any]:
    """``GET /jobs/{id}/responses``."""
    return {
        "operationId": "list_job_responses",
        "summary": "Every response of a succeeded job: its text and metadata as submitted, and its coding",
        "description": "In the order they were submitted, a page at a time (`next_cursor`, with the same "
        "filters). Filters combine with AND, one value each: a parameter given twice (`metadata[nps]=7&"
        "metadata[nps]=8`) is a 422 naming it, and a value is taken whole, commas included (`metadata[tags]=a,b`). "
        "Costs at most 3 storage reads per page (the job row, the result blob and the input blob when they are "
        "not inline), whatever the job's size.",
        "parameters": [
            _JOB_ID,
            _TENANT,
            {"name": "theme", "in": "query", "description": "A theme (`t3`) or broad theme (`p1`) id: "
             "responses coded with it, as primary or secondary theme.", "schema": {"type": "string"}},
            {"name": "subtheme", "in": "query", "description": "A fine-level id: a sub-theme (`t3.2`: "
             "responses whose primary theme's sub-theme it is, as its count has them), or a theme id when the "
             "broad level is parents (as `theme`: primary or secondary).", "schema": {"type": "string"}},
            {"name": "bucket", "in": "query",
             "schema": {"type": "string", "enum": ["theme", "other", "unusable"]}},
            {"name": "missing", "in": "query", "description": "A metadata key: responses without a value for it "
             "(absent, null or \"\"), a breakdown's synthetic `(missing)` group (its `n` is the page's `usable`); "
             "`metadata[KEY]=(missing)` is a response whose value is the text \"(missing)\". Thematic, schema 1.6.",
             "schema": {"type": "string"}},
            {"name": "other_values", "in": "query", "description": "A `breakdown_by` key: the usable responses its "
             "breakdown pooled as `other values` (groups under `min_group_size` or past the 12 largest); a key with no "
             "breakdown is a 422. Thematic, schema 1.6.", "schema": {"type": "string"}},
            {"name": "sentiment", "in": "query",
             "schema": {"type": "string", "enum": ["positive", "neutral", "negative"]}},
            {"name": "metadata", "in": "query", "style": "deepObject", "explode": True,
             "description": "`metadata[plan]=pro`: responses whose metadata `plan` is `pro` (numbers "
             "compare as written: `metadata[nps]=7`, so 7.0 is `7`; booleans as `true`/`false`; a list or "
             "an object as its JSON: `metadata[tags]=[\"a\", \"b\"]`; thematic: a value of 80 characters no "
             "response has whole is a breakdown group's label, the first 80 characters of longer values, and "
             "finds that group's responses). A key no response has is a 422 "
             f"(`metadata[]`, the key \"\", too: submissions refuse it); a key is at most {MAX_METADATA_KEY_CHARS} "
             "characters.",
             "schema": {"type": "object", "additionalProperties": {"type": "string"}}},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1,
             "maximum": RESPONSES_MAX_LIMIT, "default": RESPONSES_DEFAULT_LIMIT}},
            {"name": "cursor", "in": "query", "schema": {"type": "string", "maxLength": 200}},
            {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"},
             "description": "The ETag of the page you hold: 304 while the result is unchanged."},
        ],
        "responses": {
            "200": _json("ResponseList", "One page of responses.", {"ETag": _ETAG}),
            "304": {"description": "Not modified.", "headers": {"ETag": _ETAG}},
            **_problems(400, 404, 409, 422, *_COMMON),
        },
    }


def _edit_job_themes() -> dict[str, Any]:
    """``PATCH /jobs/{id}/themes``."""
    return {
        "operationId": "edit_job_themes",
        "summary": "Edit the themes of a succeeded job: rename, merge, split off by keyword, delete",
        "description": "Assignments, counts, sentiment per theme, breakdowns and the comparison follow; "
        "every edit is appended to the result's `edits` log. The body is the pipeline's (thematic: "
        '`{"edits": [{"op": "rename", "theme": "t1", "label": "…"}, {"op": "merge", "themes": '
        '["t1", "t2"]}, {"op": "split", "theme": "t1", "keyword": "refund", "label": "…"}, '
        '{"op": "delete", "theme": "t3"}]}`).',
        "parameters": [
            _JOB_ID,
            _TENANT,
            {
                "name": "If-Match",
                "in": "header",
                "required": True,
                "description": "The ETag of the result (GET …/result) the edits were made on.",
                "schema": {"type": "string"},
            },
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object", "required": ["edits"]}}},
        },
        "responses": {
            "200": {
                "description": "The edited codebook (as `?format=codebook`), with the new ETag.",
                "headers": {"ETag": {"schema": {"type": "string"}}},
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            **_problems(400, 404, 409, 412, 413, 415, 422, 428, *_COMMON),
        },
    }


def _retry_job() -> dict[str, Any]:
    """``POST /jobs/{id}/retry``."""
    return {
        "operationId": "retry_job",
        "summary": "Resubmit a failed or cancelled job as a new job (idempotent per original job)",
        "parameters": [_JOB_ID, _TENANT],
        "responses": {
            "202": _json("JobView", "The new job.", _LOCATION),
            "200": _json("JobView", "The job an earlier retry of this job created.", _LOCATION),
            **_problems(400, 404, 409, 413, 422, *_COMMON),
        },
    }


def _create_webhook_secret() -> dict[str, Any]:
    """``POST /webhooks/secrets``."""
    return {
        "operationId": "create_webhook_secret",
        "summary": "A new webhook signing secret for the caller's tenant (a rotation starts; its value is shown once)",
        "parameters": [
            _TENANT,
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "The same key and body, within 24 h of the creation and while that secret is active, "
                "return the same secret, value included (200); another body is 409. Without it each call creates one.",
                "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY_RE.pattern},
            },
        ],
        "responses": {
            "201": {"description": "The new secret; deliveries are signed with it and the old one until revoked.",
                    "content": {"application/json": {"schema": _SECRET_CREATED}}},
            "200": {"description": "Idempotent replay: the secret created earlier with this Idempotency-Key.",
                    "content": {"application/json": {"schema": _SECRET_CREATED}}},
            **_problems(400, 409, *_COMMON),
        },
    }


def _list_webhook_secrets() -> dict[str, Any]:
    """``GET /webhooks/secrets``."""
    return {
        "operationId": "list_webhook_secrets",
        "summary": "The tenant's active webhook signing secrets (ids and dates, never values)",
        "parameters": [_TENANT],
        "responses": {
            "200": {"description": "At most two: two during a rotation.",
                    "content": {"application/json": {"schema": _SECRET_LIST}}},
            **_problems(400, *_COMMON),
        },
    }


def _revoke_webhook_secret() -> dict[str, Any]:
    """``DELETE /webhooks/secrets/{id}``."""
    return {
        "operationId": "revoke_webhook_secret",
        "summary": "Stop signing with a secret (a rotation ends); never the last one",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}, _TENANT],
        "responses": {"204": {"description": "Revoked."}, **_problems(400, 404, 409, *_COMMON)},
    }


def _health() -> dict[str, Any]:
    """``GET /health``."""
    return {
        "operationId": "health",
        "summary": "Is Storage reachable? (anonymous: reveals nothing about any tenant)",
        "security": [],
        "responses": {"200": _json("Health", "Storage is reachable."), **_problems(500, 503)},
    }


def _openapi() -> dict[str, Any]:
    """``GET /openapi.json``."""
    return {
        "operationId": "openapi",
        "summary": "This document",
        "responses": {
            "200": {
                "description": "The OpenAPI 3.1 document.",
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            **_problems(401, 500),
        },
    }


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document: one builder per operation below, in the order the paths are listed."""
    paths: dict[str, Any] = {
        "/jobs": {"post": _submit_job(), "get": _list_jobs()},
        "/jobs/{id}": {"get": _get_job()},
        "/jobs/{id}/cancel": {"post": _cancel_job()},
        "/jobs/{id}/result": {"get": _get_job_result()},
        "/jobs/{id}/responses": {"get": _list_job_responses()},
        "/jobs/{id}/themes": {"patch": _edit_job_themes()},
        "/jobs/{id}/retry": {"post": _retry_job()},
        "/webhooks/secrets": {"post": _create_webhook_secret(), "get": _list_webhook_secrets()},
        "/webhooks/secrets/{id}": {"delete": _revoke_webhook_secret()},
        "/health": {"get": _health()},
        "/openapi.json": {"get": _openapi()},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Thematiq jobs API",
            "version": "1.0.0",
            "description": "Long-running analysis jobs on Azure Functions. Errors are RFC 9457 problem+json.",
        },
        "servers": [{"url": "/api"}],
        "security": [{"functionKey": []}, {"functionKeyQuery": []}],
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "functionKey": {"type": "apiKey", "in": "header", "name": "x-functions-key"},
                "functionKeyQuery": {"type": "apiKey", "in": "query", "name": "code"},
            },
        },
    }
