"""The app's functions, indexed once per test process.

``app.get_functions()`` keeps state for its duplicate-name check, so a second
call in the same process raises. Every test that needs the function list or a
function's callable goes through :func:`app_functions`.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_functions: list[Any] = []


def app_functions() -> list[Any]:
    with _lock:
        if not _functions:
            from function_app import app

            _functions.extend(app.get_functions())
        return _functions
