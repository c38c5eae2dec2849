"""The runtime's sync thread pool is sized for what one instance can run at once (docs/architecture.md#the-thread-budget).

Microsoft's Python runtime runs every sync invocation on one pool of PYTHON_THREADPOOL_THREAD_COUNT threads (default
min(32, vCPUs + 4): 5 on a 1-vCPU Flex instance). Each queue function takes up to batchSize + newBatchThreshold
messages at once, each timer one run, and a job attempt holds its thread until it ends; HTTP needs threads beside
them, or requests wait behind attempts of up to PIPELINE_TIMEOUT_SECONDS. tests/e2e/devhost/test_devhost_worker.py shows
that the setting caps concurrent sync calls in the real runtime.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from tests.support.app_index import app_functions

ROOT = Path(__file__).resolve().parents[3]
HTTP_HEADROOM = 8  # sync HTTP calls that must not wait behind queue work


def _bicep_value() -> int:
    m = re.search(r"^\s*PYTHON_THREADPOOL_THREAD_COUNT:\s*'(\d+)'", (ROOT / "infra/app/api.bicep").read_text(), re.M)
    assert m, "infra/app/api.bicep must set PYTHON_THREADPOOL_THREAD_COUNT"
    return int(m.group(1))


def _trigger(fn: object) -> dict[str, object]:
    bindings = [json.loads(b) for b in fn.get_raw_bindings()]  # type: ignore[attr-defined]
    return next(b for b in bindings if str(b["type"]).endswith("Trigger"))


def test_bicep_and_local_settings_agree() -> None:
    local = json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]["PYTHON_THREADPOOL_THREAD_COUNT"]
    assert int(local) == _bicep_value()


def test_pool_covers_every_sync_invocation_one_instance_can_run_plus_http() -> None:
    queues = json.loads((ROOT / "host.json").read_text())["extensions"]["queues"]
    per_queue_function = int(queues["batchSize"]) + int(queues["newBatchThreshold"])
    functions = app_functions()
    sync = [fn for fn in functions if not inspect.iscoroutinefunction(fn.get_user_function())]
    kinds = [str(_trigger(fn)["type"]) for fn in sync]
    need = per_queue_function * kinds.count("queueTrigger") + kinds.count("timerTrigger") + HTTP_HEADROOM
    assert kinds.count("queueTrigger") >= 3  # job_worker, chunk_worker, callback_sender: the count is not vacuous
    assert _bicep_value() >= need, f"PYTHON_THREADPOOL_THREAD_COUNT {_bicep_value()} < {need} sync invocations"
