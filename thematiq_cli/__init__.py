"""``thematiq``: a command-line client of the Thematiq jobs API.

It talks to the service over HTTP only (stdlib ``urllib``), so it works the
same against the local dev host and a deployed Function App. The modules:

* :mod:`thematiq_cli.client`   - the HTTP client and problem+json errors
* :mod:`thematiq_cli.inputs`   - CSV / JSONL / text files → the ``input`` list
* :mod:`thematiq_cli.waiting`  - polling a job with a live progress line
* :mod:`thematiq_cli.render`   - human-readable job, list and theme tables
* :mod:`thematiq_cli.main`     - the argument parser and commands
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
