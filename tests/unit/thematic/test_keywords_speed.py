"""keywords' per-token shortcuts (issue 27: lang.is_cjk once per token and only off ASCII, the span's "holds a word
that is not 'not'" kept as it grows) give what the plain loops they replace give."""

from __future__ import annotations

import random

from pipelines.thematic import keywords as K
from pipelines.thematic import lang
from pipelines.thematic.keywords import (
    CLAUSE_RE,
    CONJUNCTION_RE,
    MAX_SPAN_TOKENS,
    NEGATIONS,
    PREDICATE_CUES,
    VERB_PARTICLES,
    Analysed,
    _particle,
    scrub,
    tokens,
)
from tests.support.thematic_data import feedback


def _plain_analyse(text: str, stopwords: frozenset[str], max_n: int, languages: tuple[str, ...]) -> Analysed:
    # ``languages`` is part of the key: the tokeniser (lang.tokenize) follows the job's languages.
    keys: set[str] = set()
    surfaces: dict[str, str] = {}
    cued: set[str] = set()
    after: dict[str, set[str]] = {}  # per content word, what follows each of its uses here ("" for no word)
    for clause in CLAUSE_RE.split(CONJUNCTION_RE.sub(",", scrub(text))):
        toks = tokens(clause)
        kind = []  # per token: "c" content, "n" negation, "s" stopword
        for n, t in enumerate(toks):
            if t in NEGATIONS:
                kind.append("n")
            elif len(t) < 2 or t in stopwords or t.isdigit():
                kind.append("s")
            else:
                kind.append("c")
                if n and toks[n - 1] in PREDICATE_CUES:
                    cued.add(t)
        for i, t in enumerate(toks):
            if kind[i] != "c" and not (kind[i] == "n" and i + 1 < len(toks)):
                continue
            if lang.is_cjk(t):
                # CJK tokens are overlapping character bigrams already: no phrases of them.
                keys.add(t)
                continue
            if kind[i] == "c":
                nxt = toks[i + 1] if i + 1 < len(toks) and (kind[i + 1] == "c" or toks[i + 1] in VERB_PARTICLES) else ""
                after.setdefault(t, set()).add(nxt)
            if kind[i] == "c" and _particle(toks, kind, i + 1):
                surfaces.setdefault(t, f"{t} {toks[i + 1]}")  # "top" is said "top up"
            words: list[str] = []
            span = max(max_n, MAX_SPAN_TOKENS)
            for j in range(i, min(len(toks), i + span)):
                if kind[j] == "c" and lang.is_cjk(toks[j]):
                    break
                if kind[j] != "s":
                    if len(words) >= max_n:
                        break
                    words.append("not" if kind[j] == "n" else toks[j])
                if kind[j] == "c" and any(w != "not" for w in words):
                    key = " ".join(words)
                    keys.add(key)
                    # A verb's particle belongs to it as written: "can't log in", "top up".
                    end = j + 1 if _particle(toks, kind, j + 1) and j + 1 - i < span else j
                    if end - i + 1 > len(words):
                        surfaces.setdefault(key, " ".join(toks[i : end + 1]))
    # A word follows another here only when it follows every use of it: a long post that says "space shuttle"
    # five times and "shuttle orbiter" once does not continue "space shuttle".
    follows = frozenset(f"{w} {x}" for w, xs in after.items() if len(xs) == 1 and (x := next(iter(xs))))
    return Analysed(frozenset(keys), tuple(surfaces.items()), frozenset(cued), follows)


def _plain_terms(text: str, stopwords: frozenset[str]) -> frozenset[str]:
    toks = tokens(scrub(text))
    out: set[str] = set()
    prev: str | None = None
    for t in toks:
        if len(t) < 2 or t in stopwords or t.isdigit():
            prev = None
            continue
        out.add(t)
        if prev is not None:
            out.add(f"{prev} {t}")
        prev = None if lang.is_cjk(t) else t
    return frozenset(out)


def _texts() -> list[str]:
    rng = random.Random(27)
    base = [it["text"] for it in feedback(per_theme=10)[0]]
    vocab = sorted({w for t in base for w in t.lower().split()})
    vocab += sorted(NEGATIONS)[:12] + sorted(PREDICATE_CUES)[:12] + ["up", "in", "on", "off", "out", "down", "the",
              "my", "a", "not", "42", "x", "top", "log", "客服", "态度很好", "服务", "すごい", "カード", "Rückerstattung",
              "café", "naïve", "www.example.com", "me@mail.com", "\\n", ",", ".", "!", "and", "but", "(", ")"]
    soup = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 25))) for _ in range(500)]
    return base + soup + ["客服态度很好", "Die Rückerstattung kam nicht", "top up failed, can't log in", "カードが届かない"]


def test_analyse_and_terms_equal_the_plain_loops_in_every_language_context() -> None:
    texts = _texts()
    multi = cjk = 0
    for langs in (("en",), ("en", "zh"), ("de",), ("en", "ja")):
        with lang.keyword_languages(langs):
            stop = lang.current_stopwords()
            for t in texts:
                for max_n in (K.MAX_SPAN, 2):
                    got = K._analyse.__wrapped__(t, stop, max_n, lang.current_languages())
                    assert got == _plain_analyse(t, stop, max_n, lang.current_languages()), (langs, t)
                    multi += sum(" " in k for k in got.keys)
                    cjk += sum(lang.is_cjk(k) for k in got.keys)
                assert K._terms.__wrapped__(t, stop, lang.current_languages()) == _plain_terms(t, stop), (langs, t)
    assert multi > 10_000  # spans of several words are exercised
    assert cjk > 100  # and CJK tokens


def test_scrub_without_an_address_marker_is_the_regex_answer() -> None:
    # scrub skips _ADDRESS_RE when the text holds no "@", "://" nor "www." (any case): the same text either way,
    # also for the spellings the case-insensitive regex matches ("WWW.", "HTTPS://") and for near misses.
    addresses = ["www.example.com", "WWW.Example.COM/path", "wWw.x.org", "HTTPS://a.b/c?d=e", "http://x", "ftp://y.z",
                 "me@mail.com", "First.Last+tag@sub.example.co.uk", "a@b", "@handle", "ww.example.com", "www example",
                 "mail at example dot com", "https:/broken", "\\nthe", "C:\\temp\\new", "ſtraße@ſ.de", "Ｗｗｗ.x.com"]
    rng = random.Random(45)
    words = ["refund", "the", "card", "not", "arrived", ",", ".", "café", "客服", "42"]
    texts = [*_texts(), *addresses]
    texts += [" ".join(rng.choice(words + addresses) for _ in range(rng.randint(1, 12))) for _ in range(400)]
    skipped = 0
    for t in texts:
        plain = K._ESCAPE_RE.sub(" ", t) if "\\" in t else t
        assert scrub(t) == K._ADDRESS_RE.sub(" , ", plain), t
        skipped += "@" not in plain and "://" not in plain and "www." not in plain.lower()
    assert 100 < skipped < len(texts) - 100  # both paths are exercised


def test_current_stopwords_are_stopwords_for_the_job_languages() -> None:
    # Remembered per languages tuple as set (issue 27): the very list stopwords_for gives, in any context and order.
    from pipelines.thematic.stopwords import stopwords_for

    assert lang.current_stopwords() is stopwords_for("en")
    for langs in (("en", "de"), ("de", "en"), ("ja",), ("en", "de")):
        with lang.keyword_languages(langs):
            assert lang.current_stopwords() is stopwords_for(*langs)
            assert lang.current_stopwords() is lang.current_stopwords()
    assert lang.current_stopwords() is stopwords_for("en")
