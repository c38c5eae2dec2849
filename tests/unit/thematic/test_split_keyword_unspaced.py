"""A split keyword in a script written without spaces matches inside the text (audit41): Chinese, Japanese and Thai
have no spaces between words and Korean attaches its particles, so the whole-token rule (``(?<!\\w)``/``(?!\\w)``,
like ``\\b`` before it) found "物流" in no "物流太慢了" and the split was a 422 "no response contains"; the next wave's
keyword rule (waves.py) never moved one either. Latin keywords stay whole tokens."""

from __future__ import annotations

import pytest

from pipelines.thematic import codebook
from pipelines.thematic.waves import target
from tests.unit.thematic.test_split_keyword_edges import _doc


@pytest.mark.parametrize(("keyword", "hit", "miss"), [
    ("物流", "物流太慢了", "客服态度很好"),
    ("配送", "配送が遅いです", "アプリが使いにくい"),
    ("ส่งของ", "ส่งของช้ามาก", "แอปใช้ยาก"),
    ("배송", "배송이 너무 늦어요", "앱이 느려요"),
    ("late", "late again", "chocolate cake"),
])
def test_a_keyword_of_an_unspaced_script_matches_inside_the_text(keyword: str, hit: str, miss: str) -> None:
    texts = {"1": hit, "2": miss}
    out = codebook.apply_edits(_doc(texts), codebook.EDITS.validate_python(
        [{"op": "split", "theme": "t1", "keyword": keyword, "label": "Split"}]), texts)
    moved = {a["response_id"] for a in out["assignments"] if a["themes"][0]["theme_id"] != "t1"}
    assert moved == {"1"}
    code = {"theme_id": "t1", "splits": [{"keyword": keyword, "theme_id": "t2"}]}
    assert target(code, hit) == "t2" and target(code, miss) == "t1"
