"""Retry a finished job that did not succeed: submit its stored pipeline, params and input again as a new job.

The API returns neither the input nor a way to resubmit it, so without this a client that lost its input
(the dashboard after a reload, another tool's job) could not try again. The new job is an ordinary
submission (validated, tracked, idempotent): its Idempotency-Key is derived from the source job, so a
double click, or two tabs, retrying the same job get the same new job.

That key lives in a namespace of its own: it contains a space, which a client's Idempotency-Key cannot
(``IDEMPOTENCY_KEY_RE``: visible ASCII only), so no client key, ``retry-<id>`` included, can take or steer a
retry's job. (Retries made before this change used ``retry-<id>``; retrying such a job again makes one
more new job, once.)
"""

from __future__ import annotations

import json

from shared.api.service import JobService, Submitted, check_job_id
from shared.core.errors import Conflict
from shared.core.jobs import Status

RETRYABLE = frozenset({Status.FAILED, Status.CANCELLED})


def retry_idempotency_key(job_id: str) -> str:
    return f"retry of {job_id}"  # the spaces put it outside IDEMPOTENCY_KEY_RE, what a client may send


def retry_job(service: JobService, tenant: str, job_id: str, traceparent: str | None = None) -> Submitted:
    """Resubmit ``job_id`` (failed or cancelled, in ``tenant``) as a new job; 404 for another tenant's job."""
    job = service.stores.jobs.get(tenant, check_job_id(job_id), with_input=True)
    if job.status not in RETRYABLE:
        raise Conflict(f"only failed or cancelled jobs can be retried (status {job.status})", field="status")
    data = service.stored_input(job)
    request: dict[str, object] = {"pipeline": job.pipeline, "params": job.params, "input": data}
    if job.callback_url:
        request["callback"] = {"url": job.callback_url}  # the new job notifies the same receiver
    # UTF-8, not \\u escapes: escaped, a non-ASCII input grows 2-3 times and a job the size limit admitted
    # could not be retried (413).
    body = json.dumps(request, separators=(",", ":"), ensure_ascii=False)
    return service.submit(tenant, body.encode("utf-8"), retry_idempotency_key(job.id), traceparent)
