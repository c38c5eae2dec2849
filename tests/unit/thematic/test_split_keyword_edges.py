"""A split's keyword may start or end with a character that is no word character (review41): ``c++``, ``#refund``,
``@support`` or ``wi-fi!`` never matched, because ``\\b`` before ``#`` or after ``+`` needs a word character on the
other side, so the split was a 422 "no response contains" for text that does contain it; the next wave's keyword
rule (waves.py) had the same pattern. A keyword is a whole token: not inside a longer word, whatever it starts or
ends with. In a script written without spaces (Chinese, Japanese, Thai; Korean attaches its particles) the keyword
matches inside the text (audit41): the whole-token rule found "物流" in no "物流太慢了"."""

from __future__ import annotations

import pytest

from pipelines.thematic import codebook
from pipelines.thematic.waves import target


def _doc(texts: dict[str, str]) -> dict:
    themes = [{"id": "t1", "label": "Apps", "description": "", "keywords": [], "count": len(texts), "share": 1.0,
               "quotes": []}]
    assignments = [{"response_id": r, "bucket": "theme", "themes": [{"theme_id": "t1", "confidence": 0.9}]}
                   for r in texts]
    return {"themes": themes, "assignments": assignments}


@pytest.mark.parametrize(("keyword", "hit", "miss"), [
    ("c++", "I code in C++ daily", "c++x is not it"),
    ("#refund", "where is my #refund", "no#refunds"),
    ("@support", "asked @support twice", "mail@support.example"),
    ("late", "late again", "chocolate cake"),
    ("物流", "物流太慢了", "客服态度很好"),
    ("配送", "配送が遅いです", "アプリが使いにくい"),
    ("ส่งของ", "ส่งของช้ามาก", "แอปใช้ยาก"),
    ("배송", "배송이 너무 늦어요", "앱이 느려요"),
])
def test_a_keyword_matches_as_a_whole_token_whatever_its_edges(keyword: str, hit: str, miss: str) -> None:
    texts = {"1": hit, "2": miss}
    out = codebook.apply_edits(_doc(texts), codebook.EDITS.validate_python(
        [{"op": "split", "theme": "t1", "keyword": keyword, "label": "Split"}]), texts)
    moved = {a["response_id"] for a in out["assignments"] if a["themes"][0]["theme_id"] != "t1"}
    assert moved == {"1"}
    # The next wave codes with the same rule.
    code = {"theme_id": "t1", "splits": [{"keyword": keyword, "theme_id": "t2"}]}
    assert target(code, hit) == "t2" and target(code, miss) == "t1"
