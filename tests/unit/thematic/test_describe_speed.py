"""Exact shortcuts in describe (issue 27) give what the plain code they replace gives."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pipelines.thematic import describe as D
from pipelines.thematic import keywords
from pipelines.thematic.keywords import analyse
from tests.support.thematic_data import feedback


def test_expand_word_with_the_themes_bare_word_counts_given_equals_counting_them_per_word() -> None:
    items, _ = feedback(per_theme=12)
    texts = [analyse(it["text"]) for it in items]
    stems = [frozenset(D._stem(p) for p in a.keys if " " not in p) for a in texts]
    plain: Counter[str] = Counter()
    for t in texts:  # the loop _expand_word ran for every word before
        plain.update(p for p in t.keys if " " not in p)
    said = D._bare_words(texts)
    assert said == plain
    words = sorted({p for a in texts for p in a.keys if " " not in p})
    assert len(words) > 50
    expanded = 0
    for w in words:
        got = D._expand_word(w, texts, stems, said)
        assert got == D._expand_word(w, texts, stems) == D._expand_word(w, texts), w
        expanded += got != w
    assert expanded > 0  # some words do become phrases, so the counts were read
    assert said == plain  # reading it left it as it was


def test_memoised_terms_equal_the_plain_computation_in_every_language_context() -> None:
    from pipelines.thematic import keywords as K
    from pipelines.thematic import lang as L

    texts = [it["text"] for it in feedback(per_theme=3)[0]] + ["客服态度很好", "Die Rückerstattung kam nicht"]
    for langs in (("en",), ("en", "zh"), ("de",), ("en",)):
        with L.keyword_languages(langs):
            for t in texts:
                plain = K._terms.__wrapped__(t, L.current_stopwords(), L.current_languages())
                assert K.terms(t) == plain == K.terms(t)
                assert K.terms(t, frozenset()) == K._terms.__wrapped__(t, frozenset(), L.current_languages())
    with L.keyword_languages(("en", "zh")):
        zh = K.terms("客服态度很好")
    assert "客服" in zh and K.terms("客服态度很好") != zh  # English outside: the memo does not leak a context


def _plain_longer(word: str, texts: list[keywords.Analysed]) -> Counter[str]:
    # _expand_word's count of longer phrases as it was before issue 27's substring test.
    stem = D._stem(word)
    longer: Counter[str] = Counter()
    for t in texts:
        if any(" " not in p and D._stem(p) == stem for p in t.keys):
            longer.update(p for p in t.keys if " " in p and p.count(" ") <= 2 and any(D._stem(v) == stem
                                                                                       for v in p.split()))
    return longer


def test_expand_word_counts_the_phrases_the_plain_filter_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    # The substring test before the stems (a stem is a prefix of its lower-case word) keeps every phrase, in order.
    items, _ = feedback(per_theme=12)
    extra = ["Die Rückerstattungen kamen nicht an", "ÄRGER mit der Rückerstattung", "İstanbul flights delayed",
             "delayed flights again", "the fees and the delivery fee", "charged fees twice", "Straße gesperrt"]
    texts = [analyse(t) for t in [it["text"] for it in items] + extra]
    seen: list[Counter[str]] = []
    real = D._fitting

    def fitting(best: Any, ts: Any, fallback: str) -> str:
        seen.append(Counter({p: f for f, _, p in best}))
        return real(best, ts, fallback)

    monkeypatch.setattr(D, "_fitting", fitting)
    words = sorted({p for a in texts for p in a.keys if " " not in p})
    kept = 0
    for w in words:
        seen.clear()
        D._expand_word(w, texts)
        plain = _plain_longer(w, texts)
        uses = sum(D._stem(w) in {D._stem(p) for p in a.keys if " " not in p} for a in texts)
        want = {p: f for p, f in plain.items()
                if f >= max(2, D.LABEL_EXPAND_SHARE * uses) and any(D._stem(v) != D._stem(w) and v != "not"
                                                                    for v in p.split())}
        assert set(seen[0]) == set(want), w
        kept += len(want)
    assert kept > 20
