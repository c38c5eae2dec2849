"""The typed client's ``metadata_text`` is a copy of the service's ``pipelines.thematic.insight.meta_text``.

The client stands alone (standard library and pydantic: it must not import the service's pipelines), so the two
cannot be one function. What a filter matches is what the service's copy writes, so the copies are held equal here:
a client that sends ``metadata={"vip": True}`` as anything but the service's text matches nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic.insight import meta_text
from thematiq_client import metadata_text

VALUES: list[Any] = [None, True, False, 0, 7, -3, 7.0, 7.5, -0.0, 1e20, 10**30, "", "pro", "Ünïcode ✓", "7",
                     ["a", "b"], [], {"x": None, "y": [1, 2.0]}, {}, [True, None]]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_client_writes_a_metadata_value_as_the_service_compares_it(value: Any) -> None:
    assert metadata_text(value) == meta_text(value)
