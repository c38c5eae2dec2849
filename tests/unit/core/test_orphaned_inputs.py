"""A claim-checked input blob never outlives a job row that was never stored: the submission deletes it when a
re-read shows its insert did not commit, and the daily sweep deletes what that could not. Fake and Azurite."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from shared.config.constants import ORPHAN_INPUT_AGE_SECONDS, REAPER_SWEEP_SECONDS
from shared.core.errors import Conflict, StorageUnavailable
from shared.core.jobs import Status, utcnow
from shared.core.names import dated_input_blob_name, dated_input_owner, input_blob_name
from shared.runtime.reaper import Reaper
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, service, submit, worker

# Incompressible, so its gzip is over the inline limit and the input goes to Blob Storage first.
BIG = [secrets.token_hex(64) for _ in range(1500)]


def _blobs(b: Backend) -> list[str]:
    """The tenant's blobs: its job folders, and its claim-checked inputs under their days (platform45)."""
    names = [p.name for p in b.stores.blobs.container.list_blobs()]  # type: ignore[attr-defined]
    return sorted(n for n in names if n.startswith(f"{TENANT}/") or (dated_input_owner(n) or ("",))[0] == TENANT)


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
    owner = dated_input_owner(name)
    assert owner is not None
    stored = job(backend, owner[1])
    assert stored.input_blob == name and stored.status == Status.QUEUED


def test_a_reused_key_with_another_body_leaves_no_input_behind(backend: Backend) -> None:
    first = submit(backend, key="k-reused")
    with pytest.raises(Conflict):
        _submit_big(backend, key="k-reused")
    assert _blobs(backend) == [] and first.created


def test_the_sweep_deletes_an_input_without_a_row_and_keeps_the_others(backend: Backend) -> None:
    _submit_big(backend)
    (kept,) = _blobs(backend)
    orphan = dated_input_blob_name(TENANT, "0" * 28, utcnow())
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
    later = dated_input_blob_name(TENANT, "1" * 28, utcnow())
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


def _listed(b: Backend, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, int]]:
    """Each listing the sweep makes: ``(prefix, names it returned)``."""
    calls: list[tuple[str | None, int]] = []
    written = b.stores.blobs.written

    def spy(prefix: str | None = None) -> list[Any]:
        out = written(prefix)
        calls.append((prefix, len(out)))
        return out

    monkeypatch.setattr(b.stores.blobs, "written", spy)
    return calls


def test_the_sweep_lists_the_same_for_1_and_100_retained_jobs(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Platform45: until then the sweep listed the whole container, every blob of every retained job (201 names for
    100 retained jobs here, and one request per 5,000 of them); now the days since it last looked and the journals."""
    if backend.fake is None:
        pytest.skip("moves the platform's clock days past Azurite's blob timestamps, which stay real time")

    def sweep_after_a_day() -> tuple[list[tuple[str | None, int]], int]:
        backend.clock.advance(REAPER_SWEEP_SECONDS)
        with monkeypatch.context() as m:
            calls = _listed(backend, m)
            assert backend.fake is not None
            backend.fake.reset_ops()
            report = Reaper(backend.stores, sweep=True).run()
            ops = backend.fake.ops()
        assert report.errors == 0 and report.orphans_deleted == [], report.summary()
        return [(prefix and prefix.split("/")[0], n) for prefix, n in calls], ops["blob:get"]  # the days aside

    # Noon UTC first: the window reaches 2 hours behind the last sweep, so between 00:00 and 02:00 it also lists the
    # day before, which holds the first submission's input and not the 99's; the claim is about retained jobs, not
    # the time of day the suite runs (it failed after midnight).
    now = backend.clock.now()
    backend.clock.advance(((12 - now.hour) % 24) * 3600 - now.minute * 60 - now.second - now.microsecond / 1e6)
    _submit_big(backend)
    assert Reaper(backend.stores, sweep=True).run().errors == 0  # the one full listing, then recorded
    sweep_after_a_day()  # lists the day of the submission too: the window overlaps the last sweep's by 2 hours
    one = sweep_after_a_day()
    for _ in range(99):
        submit(backend)
    while backend.deliver(worker(backend).handle) is not None:
        pass
    backend.clock.advance(REAPER_SWEEP_SECONDS)
    Reaper(backend.stores, sweep=True).run()  # the day of their submission
    sweep_after_a_day()
    hundred = sweep_after_a_day()
    assert one == hundred
    calls, _ = one
    # Two days' inputs and the journals: no listing of the whole container, nothing written in the days it lists.
    assert calls == [("~inputs", 0), ("~inputs", 0), ("~retention", 0)], calls


def test_an_input_of_the_layout_before_is_found_by_the_full_listing_until_none_is_too_young(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inputs in their job's folder (the layout before platform45) are still found: the full listing runs until one
    sees none of them too young to judge, and is then recorded; later sweeps list by day."""
    legacy = input_blob_name(TENANT, "2" * 28)
    backend.stores.blobs.put(legacy, b"x")  # an API of the code before killed between the blob and the row
    first = Reaper(backend.stores, sweep=True).run()
    assert first.orphans_deleted == [] and not backend.stores.jobs.index_state().orphans_dated  # too young yet
    backend.clock.advance(ORPHAN_INPUT_AGE_SECONDS + 1)
    assert Reaper(backend.stores, sweep=True).run().orphans_deleted == ["2" * 28]
    assert backend.stores.jobs.index_state().orphans_dated and _blobs(backend) == []
    calls = _listed(backend, monkeypatch)
    Reaper(backend.stores, sweep=True).run()
    assert calls and all(prefix is not None for prefix, _ in calls), calls


def test_a_retention_journal_that_does_not_read_does_not_keep_the_sweep_from_being_recorded(backend: Backend) -> None:
    backend.stores.blobs.put("~retention/hand-edited.json", b"not json")
    backend.clock.advance(ORPHAN_INPUT_AGE_SECONDS + 1)
    report = Reaper(backend.stores, sweep=True).run()
    assert report.errors == 0, report.summary()
    assert backend.stores.blobs.get_optional("~retention/hand-edited.json") is None
    assert backend.stores.jobs.index_state().swept_at is not None
