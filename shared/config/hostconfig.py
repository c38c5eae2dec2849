"""Values from ``host.json`` that the app itself must agree with (read once per process)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

APP_ROOT = Path(__file__).resolve().parents[2]


def parse_timespan(value: str) -> timedelta:
    """``[d.]hh:mm:ss[.fff]`` as used by host.json."""
    days = 0
    if "." in value.split(":")[0]:
        d, value = value.split(".", 1)
        days = int(d)
    h, m, s = value.split(":")
    return timedelta(days=days, hours=int(h), minutes=int(m), seconds=float(s))


@dataclass(frozen=True)
class HostConfig:
    max_dequeue_count: int
    function_timeout: timedelta | None


#: Time the worker keeps for itself after an attempt's timeout, to record the outcome before the host's own
#: functionTimeout would cancel the invocation (and leave the job to the reaper).
_OUTCOME_MARGIN_SECONDS = 60


def attempt_timeout(pipeline_timeout: float | None, setting: float) -> float:
    """The timeout of one attempt: the pipeline's own, capped by the setting and by host.json functionTimeout."""
    timeout = min(pipeline_timeout or setting, setting)
    limit = host_config().function_timeout
    if limit is not None:
        timeout = min(timeout, max(1.0, limit.total_seconds() - _OUTCOME_MARGIN_SECONDS))
    return timeout


#: App settings named ``AzureFunctionsJobHost__path__to__key`` override host.json, in Azure and in devhost alike.
OVERRIDE_PREFIX = "AzureFunctionsJobHost__"


def with_overrides(host_json: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``host_json`` with the ``AzureFunctionsJobHost__…`` settings of ``env`` applied, as the Functions host does.

    Keys match case-insensitively (the host's configuration is case-insensitive); values stay strings, which the
    readers below convert. The host polls, delivers and times out by these values, so the app must count
    deliveries and size its attempts by the same ones: docs/architecture.md tells operators to change
    ``batchSize`` and ``functionTimeout`` this way.
    """
    data: dict[str, Any] = json.loads(json.dumps(host_json))
    for name, value in env.items():
        if not name.startswith(OVERRIDE_PREFIX):
            continue
        *parents, leaf = name[len(OVERRIDE_PREFIX):].split("__")
        node = data
        for part in parents:
            key = next((k for k in node if k.lower() == part.lower()), part)
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[next((k for k in node if k.lower() == leaf.lower()), leaf)] = value
    return data


def _get(node: Mapping[str, Any], key: str, default: Any = None) -> Any:
    return next((v for k, v in node.items() if k.lower() == key.lower()), default)


@lru_cache(maxsize=1)
def host_config() -> HostConfig:
    """host.json as the host runs it: with the ``AzureFunctionsJobHost__…`` app settings applied over it.

    Cached per process (app settings change only with a restart); ``shared.platform.reset_process`` clears it.
    """
    data = with_overrides(json.loads((APP_ROOT / "host.json").read_text()), os.environ)
    queues = _get(_get(data, "extensions", {}) or {}, "queues", {}) or {}
    timeout = _get(data, "functionTimeout")
    return HostConfig(
        max_dequeue_count=int(_get(queues, "maxDequeueCount", 5)),
        function_timeout=parse_timespan(timeout) if timeout and str(timeout).strip() not in ("-1", "-00:00:01") else None,
    )
