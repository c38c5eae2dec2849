"""What the CLI sends as metadata keys and filters is what the service takes (input42).

The service now refuses a metadata key with a line break or a tab (a key is a column heading), and a query parameter
given twice. A survey export's header cell often wraps its question over lines ("How likely\\nare you…"): the CLI
folds such breaks into one space, so a file that was accepted before still is. ``--where plan=pro --where plan=free``
sent only ``plan=free`` (the later replaced the first, without a word): every --where must match, so it is an error.
"""

from __future__ import annotations

import json

import pytest

from shared.platform import Platform
from tests.support.direct import http
from thematiq_cli.client import CliError
from thematiq_cli.inputs import header_name, parse_csv
from thematiq_cli.main import _where


def test_a_wrapped_header_cell_is_a_key_the_service_takes(platform: Platform) -> None:
    items = parse_csv('id,"What could\r\nwe do better?","How likely\nare you\tto\u2028recommend us?"\n'
                      '1,Late delivery,9\n2,Rude staff,3\n', column="What could we do better?")
    assert items[0] == {"id": "1", "text": "Late delivery", "metadata": {"How likely are you to recommend us?": 9}}
    body = {"pipeline": "thematic", "params": {"llm": "off"}, "input": items}
    resp = http("submit_job", "POST", "jobs", raw=json.dumps(body).encode())
    assert resp.status_code == 202, resp.get_body()


def test_header_names_keep_their_inner_spaces_and_lose_only_breaks() -> None:
    assert header_name("  Plan  type ") == "Plan  type"
    assert header_name("a \n\n b\t\tc") == "a b c"
    assert header_name(None) == ""


def test_where_with_a_key_twice_is_an_error_naming_it() -> None:
    assert _where(["plan=pro", "nps=7", "tags=a,b"]) == {"plan": "pro", "nps": "7", "tags": "a,b"}
    with pytest.raises(CliError, match=r"--where plan= is given twice \('pro' and 'free'\)"):
        _where(["plan=pro", "nps=7", "plan=free"])
