"""The responses of a job are served as submitted, so a submission whose metadata key or id they cannot serve is a
422 naming it, and nothing is stored (input42). Each of these was accepted before:

* a metadata key ``""`` could never be filtered on (``metadata[]`` was an unknown parameter), nor one longer than the
  200 characters ``metadata[KEY]`` takes; a key with a line break or a direction override was a broken heading in
  the CSV and xlsx exports, as a label with one would be (labels refuse them);
* 50,000 distinct keys made a CSV and a workbook of 50,000 columns: a job has at most ``MAX_METADATA_KEYS``;
* an id with a control character or a line break, which labels refuse, went into every export.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest

from pipelines.thematic import params as thematic_params
from shared.api import inputs
from shared.config.constants import INVISIBLE_IN_NAME, MAX_METADATA_KEY_CHARS, MAX_METADATA_KEYS
from shared.platform import Platform
from tests.support.direct import body_of, http


def _submit(items: list[dict[str, Any]]) -> Any:
    body = {"pipeline": "thematic", "input": items}
    return http("submit_job", "POST", "jobs", raw=json.dumps(body, ensure_ascii=False).encode("utf-8"))


def _refused(platform: Platform, items: list[dict[str, Any]]) -> list[dict[str, str]]:
    resp = _submit(items)
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert platform.service.list("local", {})[0] == []  # nothing stored
    return body_of(resp)["errors"]  # type: ignore[no-any-return]


def _items(n: int = 4) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "text": f"answer {i}", "metadata": {"plan": "pro"}} for i in range(n)]


@pytest.mark.parametrize(("key", "says"), [
    ("", "is empty"), ("a" * (MAX_METADATA_KEY_CHARS + 1), "at most 200"), ("How likely\nare you", "line break"),
    ("plan\t", "control character"), ("na\u202eme", "direction override"), ("a\u2028b", "line break"),
    ("\x85", "control character"), ("   ", "shows nothing"), ("\u200b", "shows nothing"),
])
def test_a_metadata_key_no_filter_or_heading_can_take_is_a_422_naming_the_response(
        platform: Platform, key: str, says: str) -> None:
    items = _items()
    items[3]["metadata"][key] = "x"
    errors = _refused(platform, items)
    assert [e["field"] for e in errors] == ["input[3].metadata"]
    assert says in errors[0]["message"]
    assert inputs._shown(key) in errors[0]["message"]  # the key, quoted as JSON, its invisible characters escaped


def test_the_key_is_shown_with_its_invisible_characters_escaped() -> None:
    assert inputs._shown("How likely\nare you") == '"How likely\\nare you"'
    assert inputs._shown("na\u202eme\x85") == '"na\\u202eme\\u0085"'


def test_a_bad_key_is_named_where_it_first_occurs_only(platform: Platform) -> None:
    items = _items(6)
    for i in (2, 4, 5):
        items[i]["metadata"][""] = "x"
    assert [e["field"] for e in _refused(platform, items)] == ["input[2].metadata"]


def test_keys_up_to_the_limit_are_taken_and_visible_keys_of_any_script_too(platform: Platform) -> None:
    items = _items(2)
    items[0]["metadata"].update({"a" * MAX_METADATA_KEY_CHARS: 1, "Zufriedenheit (1–5)": 4, "満足度": 3,
                                 "👍🏽": True, "a b": None, "فارسی\u200cها": "x"})
    items[1]["metadata"].update({f"k{j}": j for j in range(MAX_METADATA_KEYS - 7)})
    resp = _submit(items)
    assert resp.status_code == 202, resp.get_body()


def test_a_job_with_more_distinct_keys_than_the_limit_is_a_422_naming_the_response_past_it(
        platform: Platform) -> None:
    # 50,000 distinct keys, one per response: the check stops at the first past the limit.
    items = [{"id": i, "text": f"answer {i}", "metadata": {f"q{i}": 1}} for i in range(50_000)]
    errors = _refused(platform, items)
    assert [e["field"] for e in errors] == [f"input[{MAX_METADATA_KEYS}].metadata"]
    assert f"at most {MAX_METADATA_KEYS:,}" in errors[0]["message"]
    # The same key in every response counts once.
    assert _submit([{"id": i, "text": "x", "metadata": {"plan": i}} for i in range(5_000)]).status_code == 202


def test_the_limit_counts_distinct_keys_across_responses(platform: Platform) -> None:
    items = _items(3)
    items[1]["metadata"].update({f"k{j}": j for j in range(MAX_METADATA_KEYS // 2)})
    items[2]["metadata"].update({f"k{j}": j for j in range(MAX_METADATA_KEYS // 2, MAX_METADATA_KEYS)})
    assert [e["field"] for e in _refused(platform, items)] == ["input[2].metadata"]


@pytest.mark.parametrize("rid", ["r1\n", "r\r2", "a\tb", "\x1b[31mred", "r\u2028", "id\u202e", "\u200b", "\x9b"])
def test_a_string_id_with_a_control_character_or_nothing_visible_is_a_422_naming_it(
        platform: Platform, rid: str) -> None:
    items = _items()
    items[1]["id"] = rid
    errors = _refused(platform, items)
    assert [e["field"] for e in errors] == ["input[1].id"]
    assert errors[0]["message"].startswith("the id ")


def test_ids_as_they_were_still_go_through(platform: Platform) -> None:
    items = _items(4)
    items[0]["id"], items[1]["id"], items[2]["id"] = 7, "r 2", "Ünïcødé-🙂"
    assert _submit(items).status_code == 202


def test_every_bad_id_and_key_is_named_in_one_answer(platform: Platform) -> None:
    items = _items(3)
    items[0]["id"] = "a\nb"
    items[2]["metadata"][""] = 1
    assert [e["field"] for e in _refused(platform, items)] == ["input[0].id", "input[2].metadata"]


def test_the_rule_is_the_label_rule_of_the_thematic_pipeline() -> None:
    # shared/ may not import pipelines/: the two copies must say the same of every character.
    assert INVISIBLE_IN_NAME.pattern == thematic_params._INVISIBLE.pattern
    for cp in [*range(0x3000), *range(0xFE00, 0x10000), 0x1F44D, 0xE0001]:
        c = chr(cp)
        if unicodedata.category(c) == "Cs":
            continue
        for value in (c, f"a{c}"):
            try:
                thematic_params.visible_name(value)
                label_ok = True
            except ValueError:
                label_ok = False
            assert (inputs.name_problem(value) is None) == label_ok, (hex(cp), value)


def test_every_key_the_platform_takes_can_be_named_in_breakdown_by_score_and_sentiment_from(platform: Platform) -> None:
    # A survey question as a CSV header is easily 150 characters: submission took it as a metadata key (at most
    # MAX_METADATA_KEY_CHARS) while params.breakdown_by, score.key and sentiment_from refused any key past 100
    # characters, so the one job that asked to break down by that question was a 422 for a key it had sent.
    key = "How likely are you to recommend us to a friend or colleague, given your experience with delivery, " \
          "support and the app over the last three months?"
    assert 100 < len(key) <= MAX_METADATA_KEY_CHARS
    items = [{"id": f"r{i}", "text": f"answer {i}", "metadata": {key: i % 11}} for i in range(20)]
    body = {"pipeline": "thematic", "input": items, "params": {
        "breakdown_by": [key], "score": {"key": key, "scale": "nps"}, "sentiment_from": {"key": key, "scale": "0-10"}}}
    resp = http("submit_job", "POST", "jobs", raw=json.dumps(body).encode("utf-8"))
    assert resp.status_code == 202, resp.get_body()
    body["params"] = {"breakdown_by": ["k" * (MAX_METADATA_KEY_CHARS + 1)]}
    resp = http("submit_job", "POST", "jobs", raw=json.dumps(body).encode("utf-8"))
    assert resp.status_code == 422 and body_of(resp)["errors"][0]["field"] == "params.breakdown_by[0]"
    # shared/ may not import pipelines/: the two limits are held equal here.
    assert thematic_params.METADATA_KEY_MAX == MAX_METADATA_KEY_CHARS
