"""A real dev host (``python -m devhost``) on Azurite for the CLI tests, shared by the whole module set.

Each session gets its own table/queue/container names, so other suites'
jobs never show up in ``thematiq list``.
"""

from __future__ import annotations

import io
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from devhost.process import HostProcess
from tests.conftest import unique_names
from thematiq_cli.main import Io, run


@dataclass
class Cli:
    """Runs ``thematiq`` in-process against the test host and captures its output."""

    url: str
    key: str

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = run([*argv, "--url", self.url, "--key", self.key], Io(out, err))
        return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="session")
def cli_host(azurite: str) -> Iterator[HostProcess]:
    # Never a leading "-": argparse reads "--key -x…" as a missing value and an unknown option, and with a plain
    # token_urlsafe (1 in 64 sessions) every CLI test of the session failed with "--key: expected one argument".
    key = "cli-" + secrets.token_urlsafe(16)
    env = {
        "AzureWebJobsStorage": azurite,
        "DEFAULT_TENANT": "local",
        "DEVHOST_FUNCTION_KEY": key,
        "DEVHOST_MASTER_KEY": secrets.token_urlsafe(16),
        # Fast progress/heartbeat/cancel so the suite stays short.
        "PROGRESS_MIN_INTERVAL_SECONDS": "0.2",
        "HEARTBEAT_SECONDS": "0.5",
        "CANCEL_GRACE_SECONDS": "1",
        "LLM_PROVIDER": "none",
        **unique_names(),
    }
    host = HostProcess(env=env).start()
    try:
        yield host
    finally:
        host.stop(timeout=15)


@pytest.fixture
def cli(cli_host: HostProcess) -> Cli:
    return Cli(cli_host.url, cli_host.env["DEVHOST_FUNCTION_KEY"])
