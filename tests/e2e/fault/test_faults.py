"""Fault scenarios, scaled down for CI (``bench/reliability.py`` runs them full size)."""

from __future__ import annotations

import pytest

from tests.support import cluster as scenarios

pytestmark = pytest.mark.slow


def test_worker_host_sigkilled_mid_run_loses_nothing_and_writes_nothing_twice(azurite: str) -> None:
    report = scenarios.worker_killed(azurite, n_jobs=30, seconds=1.0)
    print(report)
    assert report["killed_mid_attempt"] >= 1
    # 10-16 s on a quiet machine with a 4 s threshold (docs/reliability.md; now QUICK_STALE, 8 s): the stale
    # threshold, the reaper's period (2 s), a new worker host's start and the backlog; the start alone takes several
    # times longer at load 10-18.
    assert report["recovery_s"] < 90


def test_storage_outage_gives_503_and_workers_resume() -> None:
    report = scenarios.storage_outage(n_jobs=10, outage_s=8)
    print(report)
    assert report["worst_latency_s"] < 10


def test_duplicate_delivery_to_three_consumer_processes_runs_once(azurite: str) -> None:
    print(scenarios.duplicate_delivery(azurite, consumers=3))


def test_poison_job_fails_with_reason_and_others_succeed(azurite: str) -> None:
    print(scenarios.poison(azurite, good=4))


def test_sustained_load_no_5xx_every_job_terminal(azurite: str) -> None:
    report = scenarios.sustained_load(azurite, n_jobs=60, clients=20)
    print(report)


def test_two_reaper_processes_at_once_enqueue_each_attempt_once(azurite: str) -> None:
    report = scenarios.reaper_race(azurite, n_jobs=30, reapers=2)
    print(report)
    assert report["duplicate_messages"] == 0
