"""Memory-aware admission through a real worker host: a budget that fits two large attempts, six queued.

All six succeed, never more than two run at once, none is killed, and waiting for memory
burns no dequeue (each job succeeds on its first attempt).
"""

from __future__ import annotations

from datetime import datetime

from devhost.process import HostProcess
from tests.e2e.conftest import Api, host_env

HOLD_MB = 96  # each attempt touches this much; the sleep pipeline declares 48 + hold_mb


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_six_large_jobs_in_a_budget_of_two_all_succeed_two_at_a_time(azurite: str) -> None:
    estimate = 48 + HOLD_MB
    env = host_env(
        azurite,
        INSTANCE_MEMORY_MB=str(2 * estimate + 300),
        MEMORY_MARGIN_MB="300",  # room for exactly two estimates
        ADMISSION_DELAY_SECONDS="1",
    )
    with HostProcess(env=env) as host:
        api = Api(host.url, env["DEVHOST_FUNCTION_KEY"])
        jobs = [api.submit("sleep", {"seconds": 1.5, "steps": 3, "hold_mb": HOLD_MB}) for _ in range(6)]
        done = [api.wait(j["id"], timeout=120) for j in jobs]
        logs = host.logs
    assert [d["status"] for d in done] == ["succeeded"] * 6, done
    assert all(d["attempts"] == 1 and d["error"] is None for d in done), [(d["attempts"], d["error"]) for d in done]
    intervals = [(_ts(d["started_at"]), _ts(d["finished_at"])) for d in done]
    assert _max_overlap(intervals) <= 2, intervals
    assert "does not fit beside" in logs, "the host had to hold messages back"
    assert "SIGKILL" not in logs
