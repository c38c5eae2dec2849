"""A claim-checked input blob never outlives a job row that was never stored: the submission deletes it when a
re-read shows its insert did not commit, and the daily sweep deletes what that could not. Fake and Azurite."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from shared.config.constants import ORPHAN_INPUT_AGE_SECONDS, REAPER_SWEEP_SECONDS
from shared.core.errors import Conflict, StorageUnavailable
from shared.core.jobs import Status
from shared.core.names import input_blob_name
from shared.runtime.reaper import Reaper
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, service, submit

# Incompressible, so its gzip is over the inline limit and the input goes to Blob Storage first.
BIG = [secrets.token_hex(64) for _ in range(1500)]


def _blobs(b: Backend) -> list[str]:
    return sorted(p.name for p in b.stores.blobs.container.list_blobs(name_starts_with=f"{TENANT}/"))  # type: ignore[attr-defined]


def _submit_big(b: Backend, key: str | None = None) -> None:
    service(b).submit(TENANT, json.dumps({"pipeline": "echo", "params": {}, "input": BIG}).encode(), key)


def test_an_insert_that_did_not_commit_takes_its_input_blob_with_it(backend: Backend) -> None:
    rule = backend.faults.arm("table", "refuse", method="POST", count=100)  # every insert try is refused
    with pytest.raises(StorageUnavailable):
        _submit_big(backend)
    backend.faults.disarm()
    assert rule.hits >= 1
    assert _blobs(backend) == []


def test_an_insert_whose_answer_was_lost_keeps_its_input(backend: Backend) -> None:
    backend.faults.arm("table", "drop", method="POST", count=1)  # committed, answer lost: the re-read decides
    _submit_big(backend)
    (name,) = _blobs(backend)
    stored = job(backend, name.split("/")[1])
    assert stored.input_blob == input_blob_name(TENANT, stored.id) and stored.status == Status.QUEUED


def test_a_reused_key_with_another_body_leaves_no_input_behind(backend: Backend) -> None:
    first = submit(backend, key="k-reused")
    with pytest.raises(Conflict):
        _submit_big(backend, key="k-reused")
    assert _blobs(backend) == [] and first.created


def test_the_sweep_deletes_an_input_without_a_row_and_keeps_the_others(backend: Backend) -> None:
    _submit_big(backend)
    (kept,) = _blobs(backend)
    orphan = input_blob_name(TENANT, "0" * 28)
    backend.stores.blobs.put(orphan, b"x")  # as an API killed between the blob and the row leaves it
    assert Reaper(backend.stores, sweep=True).run().orphans_deleted == []  # too young: an insert may be deciding
    backend.clock.advance(ORPHAN_INPUT_AGE_SECONDS + 1)
    assert Reaper(backend.stores, sweep=False).run().orphans_deleted == []  # only the daily sweep lists blobs
    assert Reaper(backend.stores, sweep=True).run().orphans_deleted == ["0" * 28]
    assert _blobs(backend) == [kept]


def test_the_sweep_checks_only_the_inputs_written_since_it_last_looked(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend.fake is None:
        pytest.skip("moves the platform's clock a day past Azurite's blob timestamps, which stay real time")
    _submit_big(backend)
    (kept,) = _blobs(backend)
    backend.clock.advance(3 * ORPHAN_INPUT_AGE_SECONDS)  # past the overlap the next window keeps (2 h)
    assert Reaper(backend.stores, sweep=True).run().orphans_deleted == []  # kept has its row
    backend.clock.advance(REAPER_SWEEP_SECONDS)  # the next day
    later = input_blob_name(TENANT, "1" * 28)
    backend.stores.blobs.put(later, b"x")
    backend.clock.advance(ORPHAN_INPUT_AGE_SECONDS + 1)
    checked: list[str] = []
    existing = backend.stores.jobs.existing

    def spy(tenant: str, job_ids: Any) -> set[str]:
        checked.extend(job_ids)
        return existing(tenant, job_ids)

    monkeypatch.setattr(backend.stores.jobs, "existing", spy)
    assert Reaper(backend.stores, sweep=True).run().orphans_deleted == ["1" * 28]
    assert checked == ["1" * 28]  # not the retained job's input, already looked at: the cost follows new inputs
    assert _blobs(backend) == [kept]
