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
