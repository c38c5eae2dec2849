"""One job fanned out over three worker host processes on one Azurite, including a SIGKILLed worker."""

from __future__ import annotations

from azure.data.tables import TableClient

from devhost.process import HostProcess
from shared.core.chunks import chunk_partition
from tests.e2e.conftest import QUICK_STALE, Api, host_env

N_CHUNKS = 60
CHUNK = 5


def _hosts(env: dict[str, str], workers: int) -> tuple[HostProcess, list[HostProcess]]:
    api_host = HostProcess(env=env, args=["--no-queue"]).start()
    return api_host, [HostProcess(env=env, args=["--no-http", "--no-timer"]).start() for _ in range(workers)]


def _table(env: dict[str, str]) -> TableClient:
    return TableClient.from_connection_string(env["AzureWebJobsStorage"], env["JOBS_TABLE"])


def _fan_ins(env: dict[str, str], job_id: str) -> int:
    """How often a fan-in woke the job, as its row counts it (the fan-in's own conditional write).

    Not the hosts' logs: the fan-in is fired by the last chunk's finisher or, if the reaper's sweep looks at the
    waiting job between that chunk's write and the finisher's look at the stage, by the reaper in the API host
    (either logs after sending the resume, so the job can succeed before the line is written).
    """
    return int(_table(env).get_entity("local", job_id, select=["fan_ins"])["fan_ins"])


def _chunk_rows(env: dict[str, str], job_id: str) -> list[dict[str, object]]:
    table = _table(env)
    prefix = "square~"
    return list(
        table.query_entities(
            "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
            parameters={"pk": chunk_partition("local", job_id), "lo": prefix, "hi": prefix[:-1] + "\x7f"},
            select=["status", "attempts", "index"],
        )
    )


def test_sixty_chunks_over_three_workers_run_once_each(azurite: str) -> None:
    # A host holds at most batchSize + newBatchThreshold = 5 chunk messages at once (host.json). With a window of 6
    # two hosts could hold every chunk in flight, and a third host that polled a moment late found the queue empty
    # each time (a fresh clone on 2026-12-07 saw 31, 0, 29). A window of 12 is more than two hosts can hold, so while
    # 12 or more chunks are left at least 2 messages are visible, and the third host's next poll (at most
    # maxPollingInterval, 2 s, apart) takes one: every worker's part follows from capacity, not timing.
    env = host_env(azurite, MAX_CHUNKS_IN_FLIGHT_PER_JOB="12")
    api_host, workers = _hosts(env, 3)
    try:
        api = Api(api_host.url, env["DEVHOST_FUNCTION_KEY"])
        numbers = list(range(N_CHUNKS * CHUNK))
        # Each chunk takes 0.5 s, so the job outlasts many of an idle host's polls. With instant chunks one host that
        # happened to poll first drained the queue alone, and CI (stop 31) failed on it.
        job = api.submit("fanout", {"chunk_size": CHUNK, "seconds_per_item": 0.1}, numbers)
        done = api.wait(job["id"], timeout=240)
        assert done["status"] == "succeeded", done
        status, _, result = api.call("GET", done["links"]["result"])
        assert status == 200
        assert result["chunks"] == N_CHUNKS and result["count"] == len(numbers)
        assert result["sum_of_squares"] == float(sum(x * x for x in numbers))
        rows = _chunk_rows(env, job["id"])
        assert len(rows) == N_CHUNKS
        again = [r for r in rows if r["status"] != "succeeded" or r["attempts"] != 1]
        assert not again, (again, [line for h in (api_host, *workers) for line in h.logs.splitlines()
                                   if line.startswith("[") and any(w in line for w in ("stale", "lease", "WARNING", "ERROR"))][:40])
        # Every worker took part, and the fan-in fired once.
        assert all("chunk message" in w.logs for w in workers), [w.logs.count("chunk message") for w in workers]
        assert _fan_ins(env, job["id"]) == 1
    finally:
        for h in (api_host, *workers):
            h.stop()


def test_sigkilled_worker_mid_fan_out_still_fans_in_exactly_once(azurite: str) -> None:
    # The killed host's chunks are handed on by the reaper once stale: the short threshold keeps that wait short.
    env = host_env(azurite, MAX_CHUNKS_IN_FLIGHT_PER_JOB="6", HEARTBEAT_STALE_SECONDS=QUICK_STALE)
    api_host, workers = _hosts(env, 3)
    replacement = None
    try:
        api = Api(api_host.url, env["DEVHOST_FUNCTION_KEY"])
        numbers = list(range(40 * CHUNK))
        job = api.submit("fanout", {"chunk_size": CHUNK, "seconds_per_item": 0.1}, numbers)
        api.wait(job["id"], timeout=60, until=lambda j: j["status"] == "waiting" and j["progress"]["processed"] >= 20)
        # Kill the busiest worker: the one most likely to have chunks in flight.
        victim = max(workers, key=lambda w: w.logs.count("chunk message"))
        victim.kill()
        replacement = HostProcess(env=env, args=["--no-http", "--no-timer"]).start()
        done = api.wait(job["id"], timeout=240)
        assert done["status"] == "succeeded", done
        status, _, result = api.call("GET", done["links"]["result"])
        assert status == 200 and result["count"] == len(numbers) and result["skipped"] == []
        rows = _chunk_rows(env, job["id"])
        assert all(r["status"] == "succeeded" for r in rows)
        assert _fan_ins(env, job["id"]) == 1
        retried = [r for r in rows if int(str(r["attempts"])) > 1]
        # Only chunks in flight in the killed host ran again: never more than the job's window.
        assert len(retried) <= 6, retried
    finally:
        for h in (api_host, *workers, replacement):
            if h is not None:
                h.stop()
