"""Keywords per theme by class-based TF-IDF (c-TF-IDF), and readable labels built from them.

c-TF-IDF treats each theme as one document: a term scores high when it is
frequent in the theme and rare across themes, which names what *distinguishes*
a theme rather than what every response says. Bigrams are scored with the
unigrams so labels can use phrases ("customer service") not single words.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Final

from . import lang

TOKEN_RE: Final = re.compile(r"[a-z][a-z0-9'&-]*[a-z0-9]|[a-z]")


def tokens(text: str) -> list[str]:
    # Language-aware (lang.py): exactly TOKEN_RE for English jobs; Unicode words and CJK bigrams otherwise.
    return lang.tokenize(text)


def terms(text: str, stopwords: frozenset[str] | None = None) -> set[str]:
    """Distinct unigrams and bigrams of content words (presence per response, so one rant cannot dominate)."""
    if stopwords is None:
        stopwords = lang.current_stopwords()  # the job's languages (lang.keyword_languages); English by default
    toks = tokens(text)
    out: set[str] = set()
    prev: str | None = None
    for t in toks:
        if len(t) < 2 or t in stopwords or t.isdigit():
            prev = None
            continue
        out.add(t)
        if prev is not None:
            out.add(f"{prev} {t}")
        # CJK tokens are overlapping character bigrams already: no phrases of them.
        prev = None if lang.is_cjk(t) else t
    return out


def ctfidf(
    groups: Sequence[Sequence[str]], *, top: int = 10, stopwords: frozenset[str] | None = None
) -> list[list[tuple[str, float]]]:
    """Top ``top`` (term, score) per group of texts."""
    per_group: list[Counter[str]] = []
    for texts in groups:
        c: Counter[str] = Counter()
        for t in texts:
            c.update(terms(t, stopwords))
        per_group.append(c)
    total: Counter[str] = Counter()
    for c in per_group:
        total.update(c)
    sizes = [max(1, sum(c.values())) for c in per_group]
    avg = sum(sizes) / max(1, len(sizes))
    out: list[list[tuple[str, float]]] = []
    for texts, c, size in zip(groups, per_group, sizes, strict=True):
        # A term used by a single response says nothing about a theme of many.
        min_df = 2 if len(texts) >= 6 else 1
        scored = []
        for term, f in c.items():
            if f < min_df:
                continue
            score = (f / size) * math.log(1 + avg / total[term])
            # Phrases carry more meaning per slot; a mild boost breaks ties their way.
            if " " in term:
                score *= 1.2
            scored.append((term, score))
        scored.sort(key=lambda p: (-p[1], p[0]))
        # Drop a unigram when a higher-ranked bigram already contains it.
        chosen: list[tuple[str, float]] = []
        for term, score in scored:
            if " " not in term and any(term in b.split() for b, _ in chosen if " " in b):
                continue
            chosen.append((term, round(score, 5)))
            if len(chosen) >= top:
                break
        out.append(chosen)
    return out


def _stem(word: str) -> str:
    """A crude English stem (plural and verb endings), enough to see that two keywords say the same thing."""
    w = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    return w


def label_from_keywords(keywords: Sequence[str], used: set[str] | None = None) -> str:
    """A short readable label: top phrase + next distinct keyword, e.g. "Customer service & refund".

    ``used`` holds labels already given, so two themes do not share one.
    """
    used = used if used is not None else set()
    if not keywords:
        base = "Miscellaneous"
    else:
        first = keywords[0]
        taken = {_stem(w) for w in first.split()}
        # "Fees & fee" or "Crashes & crash" says nothing twice: skip keywords sharing a stem with the first.
        second = next((k for k in keywords[1:] if not {_stem(w) for w in k.split()} & taken), None)
        base = first if second is None else f"{first} & {second}"
        base = base[:1].upper() + base[1:]
    label, n = base, 2
    while label.lower() in used:
        extra = keywords[n] if n < len(keywords) else str(n)
        label = f"{base} ({extra})"
        n += 1
    used.add(label.lower())
    return label


#: Responses whose label candidates are remembered (per process: an attempt is its own process).
PHRASE_CACHE: Final = 50_000


def phrases(text: str, stopwords: frozenset[str] | None = None, *, max_n: int = 3) -> frozenset[str]:
    """Distinct 1..``max_n``-grams of adjacent content words: the label candidates of a response.

    Memoised: describing a theme asks for the same responses' phrases once per level, per candidate
    expansion and per merge pass (at 20,000 responses that was ~12 s of a 14 s describe stage).
    """
    if stopwords is None:
        stopwords = lang.current_stopwords()  # the job's languages (lang.keyword_languages); English by default
    return _phrases(text, stopwords, max_n, lang.current_languages())


@functools.lru_cache(maxsize=PHRASE_CACHE)
def _phrases(text: str, stopwords: frozenset[str], max_n: int, languages: tuple[str, ...]) -> frozenset[str]:
    # ``languages`` is part of the key: the tokeniser (lang.tokenize) follows the job's languages.
    out: set[str] = set()
    run: list[str] = []
    for t in [*tokens(text), ""]:
        if len(t) < 2 or t in stopwords or t.isdigit():
            for n in range(1, max_n + 1):
                out.update(" ".join(run[i : i + n]) for i in range(len(run) - n + 1))
            run = []
        else:
            run.append(t)
    return frozenset(out)


def candidate_phrases(
    groups: Sequence[Sequence[str]], *, top: int = 12, stopwords: frozenset[str] | None = None, min_share: float = 0.03
) -> list[list[tuple[str, float, int]]]:
    """Label candidates per group: (phrase, c-TF-IDF score, members using it), best first.

    The same class-based TF-IDF as :func:`ctfidf`, over 1-3-grams, keeping
    phrases used by at least ``min_share`` of a group's responses (and by two,
    in groups of six or more): the short list a KeyBERT-style ranking then
    embeds. A phrase is dropped when a better-ranked one contains it
    ("customer service" hides "service"), so the list is not one phrase in
    three spellings.
    """
    per_group: list[Counter[str]] = []
    for texts in groups:
        c: Counter[str] = Counter()
        for t in texts:
            c.update(phrases(t, stopwords))
        per_group.append(c)
    total: Counter[str] = Counter()
    for c in per_group:
        total.update(c)
    sizes = [max(1, sum(c.values())) for c in per_group]
    avg = sum(sizes) / max(1, len(sizes))
    out: list[list[tuple[str, float, int]]] = []
    for texts, c, size in zip(groups, per_group, sizes, strict=True):
        min_df = max(2 if len(texts) >= 6 else 1, math.ceil(min_share * len(texts)))
        scored = []
        for term, f in c.items():
            if f < min_df:
                continue
            words = term.count(" ") + 1
            score = (f / size) * math.log(1 + avg / total[term]) * (1.0 + 0.2 * (words - 1))
            scored.append((term, score, f))
        scored.sort(key=lambda p: (-p[1], p[0]))
        chosen: list[tuple[str, float, int]] = []
        for term, score, f in scored:
            if any(f" {term} " in f" {b} " for b, _, _ in chosen):
                continue
            chosen.append((term, round(score, 6), f))
            if len(chosen) >= top:
                break
        out.append(chosen)
    return out


def same_stem(a: str, b: str) -> bool:
    """True when two phrases share a word stem (``"fees"`` / ``"delivery fee"``)."""
    return bool({_stem(w) for w in a.split()} & {_stem(w) for w in b.split()})


def keyword_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """Jaccard overlap of the word stems of two keyword lists (0..1)."""
    sa = {_stem(w) for k in a for w in k.split()}
    sb = {_stem(w) for k in b for w in k.split()}
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0
