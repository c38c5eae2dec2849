"""Exact shortcuts in describe (issue 27) give what the plain code they replace gives."""

from __future__ import annotations

from collections import Counter

from pipelines.thematic import describe as D
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
