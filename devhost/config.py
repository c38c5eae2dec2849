"""Host configuration: ``host.json``, ``local.settings.json`` and ``%SETTING%`` placeholders.

The real Functions host reads ``host.json`` for extension options and Core Tools
loads ``local.settings.json`` ``Values`` as app settings. This module does the
same for the dev host and exposes typed option objects with the documented
defaults, so the listeners never look at raw JSON.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("devhost")

_PLACEHOLDER = re.compile(r"%([^%]+)%")
# host.json time spans are .NET TimeSpan strings: "hh:mm:ss", "d.hh:mm:ss" or "hh:mm:ss.fff".
DEFAULT_FUNCTION_TIMEOUT = 30 * 60.0
_TIMESPAN = re.compile(r"^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2}(?:\.\d+)?)$")


def parse_timespan(value: Any, default: float) -> float:
    """Seconds from a .NET TimeSpan string (or a number of seconds); ``default`` if absent."""
    if value is None:
        return default
    if isinstance(value, (int, float)):
        return float(value)
    m = _TIMESPAN.match(str(value).strip())
    if not m:
        raise ValueError(f"not a TimeSpan (hh:mm:ss): {value!r}")
    days, hours, minutes, seconds = m.groups()
    return int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def resolve(value: str) -> str:
    """Replace ``%NAME%`` with the app setting ``NAME`` (an env var), like the host's name resolver.

    A missing setting is an error at startup in the real host, so it is one here too.
    """

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in os.environ:
            raise KeyError(f"app setting {name!r} (used as %{name}%) is not defined")
        return os.environ[name]

    return _PLACEHOLDER.sub(sub, value)


def load_local_settings(app_dir: Path) -> tuple[Path | None, dict[str, Any]]:
    """Copy ``Values`` of local.settings.json (or the sample) into ``os.environ``.

    Variables that are already set win: tests and CI configure the host through
    the environment, exactly like ``func start`` lets real env vars override.
    Returns the file used and its ``Host`` section.
    """
    for name in ("local.settings.json", "local.settings.sample.json"):
        path = app_dir / name
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            for key, value in (data.get("Values") or {}).items():
                os.environ.setdefault(key, "" if value is None else str(value))
            return path, dict(data.get("Host") or {})
    return None, {}


@dataclass(frozen=True)
class QueueOptions:
    """``extensions.queues`` in host.json, with the storage extension's defaults (QueuesOptions.cs)."""

    batch_size: int = 16
    new_batch_threshold: int = 8 * (os.cpu_count() or 1)
    max_dequeue_count: int = 5
    visibility_timeout: float = 0.0
    max_polling_interval: float = 60.0
    message_encoding: str = "base64"

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> QueueOptions:
        batch = int(raw.get("batchSize", 16))
        # The real host caps batchSize at 32 (the Queue service's receive maximum).
        batch = max(1, min(batch, 32))
        threshold = raw.get("newBatchThreshold")
        return cls(
            batch_size=batch,
            # Default: batchSize/2 per processor (QueuesOptions.NewBatchThreshold getter).
            new_batch_threshold=int(threshold) if threshold is not None else (batch // 2) * (os.cpu_count() or 1),
            max_dequeue_count=int(raw.get("maxDequeueCount", 5)),
            visibility_timeout=parse_timespan(raw.get("visibilityTimeout"), 0.0),
            max_polling_interval=parse_timespan(raw.get("maxPollingInterval"), 60.0),
            message_encoding=str(raw.get("messageEncoding", "base64")).lower(),
        )


@dataclass(frozen=True)
class SingletonOptions:
    """``singleton`` in host.json: the blob-lease lock that keeps a timer on one instance only."""

    listener_lock_period: float = 60.0
    listener_lock_recovery_polling_interval: float = 60.0

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SingletonOptions:
        period = parse_timespan(raw.get("listenerLockPeriod"), 60.0)
        return cls(
            # Blob leases must be 15-60 s, so the lock period is clamped to that range.
            listener_lock_period=min(max(period, 15.0), 60.0),
            listener_lock_recovery_polling_interval=parse_timespan(
                raw.get("listenerLockRecoveryPollingInterval"), 60.0
            ),
        )


@dataclass(frozen=True)
class HostConfig:
    """Everything the dev host needs from host.json and local settings."""

    app_dir: Path
    route_prefix: str = "api"
    queues: QueueOptions = field(default_factory=QueueOptions)
    singleton: SingletonOptions = field(default_factory=SingletonOptions)
    local_http_port: int = 7071
    settings_file: Path | None = None
    #: host.json ``functionTimeout`` in seconds; None for ``-1`` (no limit, allowed off the Consumption plans).
    function_timeout: float | None = DEFAULT_FUNCTION_TIMEOUT

    @property
    def host_id(self) -> str:
        """Id that scopes timer locks and monitor blobs, like the host id of a function app.

        ``AzureFunctionsWebHost__hostid`` overrides it as on Azure; otherwise it is
        derived from the app folder name, so hosts of the same app share it.
        """
        explicit = os.environ.get("AzureFunctionsWebHost__hostid")
        if explicit:
            return explicit.lower()
        name = re.sub(r"[^a-z0-9-]", "-", self.app_dir.resolve().name.lower()).strip("-") or "app"
        return name[:32]


OVERRIDE_PREFIX = "AzureFunctionsJobHost__"


def function_timeout(value: Any) -> float | None:
    """host.json ``functionTimeout``: a TimeSpan, ``-1`` (no limit) or absent (the host's 30 minutes off the
    Consumption plan, which is what a local host is: ScriptHostOptionsSetup's DefaultFunctionTimeout)."""
    if value is None:
        return DEFAULT_FUNCTION_TIMEOUT
    if str(value).strip() in ("-1", "-00:00:01"):
        return None
    seconds = parse_timespan(value, DEFAULT_FUNCTION_TIMEOUT)
    if seconds <= 0:
        raise ValueError(f"functionTimeout must be positive or -1: {value!r}")
    return seconds


def apply_overrides(host_json: dict[str, Any], env: Mapping[str, str]) -> None:
    """Apply ``AzureFunctionsJobHost__path__to__key`` settings over host.json, as the real host does.

    For example ``AzureFunctionsJobHost__extensions__queues__batchSize=1``. Keys
    match case-insensitively; values stay strings (the readers convert them).
    """
    for name, value in env.items():
        if not name.startswith(OVERRIDE_PREFIX):
            continue
        *parents, leaf = name[len(OVERRIDE_PREFIX) :].split("__")
        node = host_json
        for part in parents:
            key = next((k for k in node if k.lower() == part.lower()), part)
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        key = next((k for k in node if k.lower() == leaf.lower()), leaf)
        node[key] = value


def load(app_dir: Path) -> HostConfig:
    """Read host.json and local settings of ``app_dir`` (env vars set by the caller win)."""
    settings_file, host_section = load_local_settings(app_dir)
    host_json_path = app_dir / "host.json"
    host_json: dict[str, Any] = {}
    if host_json_path.is_file():
        host_json = json.loads(host_json_path.read_text(encoding="utf-8"))
    else:
        log.warning("no host.json in %s: using defaults", app_dir)
    apply_overrides(host_json, os.environ)
    ext = host_json.get("extensions") or {}
    http = ext.get("http") or {}
    prefix = http.get("routePrefix", "api")
    return HostConfig(
        app_dir=app_dir,
        route_prefix=str(prefix if prefix is not None else "").strip("/"),
        queues=QueueOptions.from_json(ext.get("queues") or {}),
        singleton=SingletonOptions.from_json(host_json.get("singleton") or {}),
        local_http_port=int(host_section.get("LocalHttpPort", 7071)),
        settings_file=settings_file,
        function_timeout=function_timeout(host_json.get("functionTimeout")),
    )
