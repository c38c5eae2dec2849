"""Where a job's blobs live, one folder per job so retention deletes them with one prefix listing::

    ~inputs/{YYYY-MM-DD}/{tenant}/{job_id}/input.json.gz   claim-checked input (large inputs only), by the day
                                             of its submission (platform45), so the daily sweep of orphaned inputs
                                             lists the days since it last looked, not every retained job's blobs
    {tenant}/{job_id}/input.json.gz          the same, as written before platform45 (still read: a job row names
                                             its input blob)
    {tenant}/{job_id}/checkpoints/{name}     a stage's output, for resuming
    {tenant}/{job_id}/result-{attempt}.json  the result of the attempt that produced it
    {tenant}/{job_id}/chunks/{stage}/...     a map stage's chunk inputs and outputs
"""

from __future__ import annotations

from datetime import date, datetime

#: The root of the claim-checked inputs by day, and of retention's journals (``Reaper._retention``). A tenant starts
#: with a letter or digit (TENANT_RE), so neither is ever a tenant's folder.
INPUTS_ROOT = "~inputs/"
RETENTION_JOURNALS = "~retention/"


def job_prefix(tenant: str, job_id: str) -> str:
    return f"{tenant}/{job_id}/"


#: The last part of a claim-checked input's blob name (how the sweep of orphaned inputs recognises one).
INPUT_BLOB_SUFFIX = "/input.json.gz"


def input_blob_name(tenant: str, job_id: str) -> str:
    return f"{tenant}/{job_id}{INPUT_BLOB_SUFFIX}"


def dated_input_blob_name(tenant: str, job_id: str, at: datetime) -> str:
    """A claim-checked input's name, under the UTC day of its submission (``inputs_of_day``)."""
    return f"{inputs_of_day(at.date())}{tenant}/{job_id}{INPUT_BLOB_SUFFIX}"


def inputs_of_day(day: date) -> str:
    return f"{INPUTS_ROOT}{day.isoformat()}/"


def dated_input_owner(name: str) -> tuple[str, str] | None:
    """``(tenant, job_id)`` of a dated input's name, or None if ``name`` is not one."""
    parts = name.split("/")
    if len(parts) != 5 or f"{parts[0]}/" != INPUTS_ROOT or f"/{parts[4]}" != INPUT_BLOB_SUFFIX:
        return None
    return parts[2], parts[3]


def result_blob_name(tenant: str, job_id: str, attempt: int) -> str:
    # Keyed on job and attempt: a zombie attempt can never overwrite the result
    # that the job entity points at.
    return f"{job_prefix(tenant, job_id)}result-{attempt}.json"


def checkpoint_blob_name(tenant: str, job_id: str, name: str) -> str:
    return f"{job_prefix(tenant, job_id)}checkpoints/{name}"


def chunk_blob_name(tenant: str, job_id: str, stage: str, index: int, suffix: str) -> str:
    return f"{job_prefix(tenant, job_id)}chunks/{stage}/{index:05d}.{suffix}"
