"""Retention deletes a job's row before its blobs, so no reader ever finds a job whose blobs are gone.

Review44p: ``Lifecycle.expire`` deleted the blobs, then the row on the scan's ETag; a write landing in between (a
themes edit, a late webhook record) made the row's delete a 412, and the row stayed without its input and result
until the next sweep. Now the row goes first (re-read and deleted again while it is still expired), then the
blobs; a crash between leaves blobs without a row, which the daily sweep deletes. Fake and Azurite.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from shared.api.problems import problem_type
from shared.config.constants import REAPER_SWEEP_SECONDS
from shared.config.settings import get_settings
from shared.core.errors import NotFound, StorageUnavailable, ThematiqError
from shared.core.jobs import Job, WebhookStatus
from shared.core.lifecycle import Lifecycle
from shared.core.names import INPUTS_ROOT, job_prefix
from shared.runtime.reaper import Reaper
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, jobs, service, submit, worker


def _blobs(b: Backend, job_id: str) -> list[str]:
    """The job's folder and its claim-checked input, which is under the day of its submission (platform45)."""
    container = b.stores.blobs.container  # type: ignore[attr-defined]
    return sorted(p.name for p in container.list_blobs()
                  if p.name.startswith(job_prefix(TENANT, job_id)) or (p.name.startswith(INPUTS_ROOT)
                  and f"/{job_id}/" in p.name))


def _expired_job(b: Backend) -> Job:
    """A succeeded job with a claim-checked input and a result blob, past its retention."""
    rows = [secrets.token_hex(64) for _ in range(1000)]  # incompressible, over the inline limit
    j = submit(b, input_=rows).job
    assert j.input_blob
    assert b.deliver(worker(b).handle) == "succeeded"
    assert len(_blobs(b, j.id)) >= 2  # the input and the result
    b.clock.advance(get_settings().retention_days * 86400 + 60)
    return j


def _write_after_the_scan(b: Backend, monkeypatch: pytest.MonkeyPatch, write: Any) -> None:
    """Each row the retention scan yields is written to (``write(row)``) before the reaper acts on it, as a
    writer landing between the scan and the delete does."""
    scan = b.stores.jobs.scan

    def scanned(query: str, parameters: dict[str, Any], **kw: Any) -> Iterator[Job]:
        for row in scan(query, parameters, **kw):
            if "finished_at lt" in query:
                write(row)
            yield row

    monkeypatch.setattr(b.stores.jobs, "scan", scanned)


def test_a_late_webhook_record_between_the_scan_and_the_delete_still_expires_the_job(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = _expired_job(backend)
    _write_after_the_scan(backend, monkeypatch, lambda row: Lifecycle(backend.stores).record_callback(
        backend.stores.jobs.get(TENANT, row.id), WebhookStatus.DELIVERED, 1, None))
    report = Reaper(backend.stores, sweep=True).run()
    assert report.deleted == [j.id] and report.errors == 0, report.summary()
    assert jobs(backend) == [] and _blobs(backend, j.id) == []


def test_a_themes_edit_between_the_scan_and_the_delete_never_leaves_a_row_without_its_blobs(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = _expired_job(backend)
    _write_after_the_scan(backend, monkeypatch, lambda row: backend.stores.jobs.update(
        backend.stores.jobs.get(TENANT, row.id), op="an-edit"))
    report = Reaper(backend.stores, sweep=True).run()
    # Before: the blobs went, the row's delete was a 412 (an error of the sweep) and the row stayed.
    assert report.errors == 0, report.summary()
    assert jobs(backend) == [] and _blobs(backend, j.id) == []


def test_a_reader_between_the_row_and_the_blobs_finds_no_job(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    j = _expired_job(backend)
    seen: list[str] = []
    delete_prefix = backend.stores.blobs.delete_prefix

    def deleting(prefix: str, also: Any = ()) -> int:
        if prefix.startswith("~"):
            return delete_prefix(prefix, also)  # retention's journal, once the job is expired
        with pytest.raises(NotFound):
            service(backend).get(TENANT, j.id)
        with pytest.raises(NotFound):
            service(backend).result(TENANT, j.id, "json")
        seen.append(prefix)
        return delete_prefix(prefix, also)

    monkeypatch.setattr(backend.stores.blobs, "delete_prefix", deleting)
    assert Reaper(backend.stores, sweep=True).run().deleted == [j.id]
    assert seen == [job_prefix(TENANT, j.id)]


def test_blobs_a_crash_left_behind_the_deleted_row_go_with_the_next_sweep(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend.fake is None:
        pytest.skip("moves the platform's clock a day past Azurite's blob timestamps, which stay real time")
    j = _expired_job(backend)

    def crash(prefix: str, also: Any = ()) -> int:
        raise StorageUnavailable("the process died here", maybe_applied=False)

    with monkeypatch.context() as m:
        m.setattr(backend.stores.blobs, "delete_prefix", crash)
        report = Reaper(backend.stores, sweep=True).run()
    assert report.errors == 1 and jobs(backend) == [] and _blobs(backend, j.id)
    with pytest.raises(NotFound):
        job(backend, j.id)
    backend.clock.advance(REAPER_SWEEP_SECONDS)
    report = Reaper(backend.stores, sweep=True).run()
    assert report.errors == 0 and j.id in report.orphans_deleted, report.summary()
    assert _blobs(backend, j.id) == []


def test_a_row_whose_blobs_are_gone_is_answered_without_a_500(backend: Backend) -> None:
    """What a reader got from the window this closes (and still gets, should blobs go any other way): the API's
    domain errors, which the edge answers 4xx, never an exception it answers 500."""
    j = _expired_job(backend)
    for name in _blobs(backend, j.id):
        backend.stores.blobs.container.delete_blob(name)  # type: ignore[attr-defined]
    assert service(backend).get(TENANT, j.id).id == j.id
    for call in (lambda: service(backend).result(TENANT, j.id, "json"),
                 lambda: service(backend).result(TENANT, j.id, "csv")):
        try:
            call()
        except ThematiqError as err:
            assert 400 <= problem_type(err).status < 500, err
