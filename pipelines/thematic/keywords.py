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
from dataclasses import dataclass
from typing import Final

from . import lang

#: Responses whose label candidates are remembered (per process: an attempt is its own process).
PHRASE_CACHE: Final = 50_000
TOKEN_RE: Final = re.compile(r"[a-z][a-z0-9'&-]*[a-z0-9]|[a-z]")


#: Text that is no phrase of the response: a URL, an e-mail address (with the "edu" / "com" of its domain) and
#: written-out line breaks ("\\n", as exported answers hold them: "\\nthe" read as a word "nthe"). URLs and
#: addresses end a phrase; an escape is a space.
_ADDRESS_RE: Final = re.compile(r"(?:https?://|www\.)\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.I)
_ESCAPE_RE: Final = re.compile(r"\\[nrt]")


def scrub(text: str) -> str:
    """``text`` without URLs, e-mail addresses and written-out line breaks (:data:`_ADDRESS_RE`)."""
    if "\\" in text:
        text = _ESCAPE_RE.sub(" ", text)
    # Every match of _ADDRESS_RE holds "@", "://" or "www." (any case): without them the text is returned as it is,
    # without the regex's scan, which tries its address branch at every word character (issue 27: ~10 µs a
    # response, twice per response of a job, for the c-TF-IDF terms and for the label phrases).
    if "@" not in text and "://" not in text and "www." not in text.lower():
        return text
    return _ADDRESS_RE.sub(" , ", text)


def tokens(text: str) -> list[str]:
    # Language-aware (lang.py): exactly TOKEN_RE for English jobs; Unicode words and CJK bigrams otherwise.
    return lang.tokenize(text)


def terms(text: str, stopwords: frozenset[str] | None = None) -> frozenset[str]:
    """Distinct unigrams and bigrams of content words (presence per response, so one rant cannot dominate).

    Memoised like :func:`analyse` (issue 27: a job's c-TF-IDF reads every response twice, for the themes and for
    their parents)."""
    if stopwords is None:
        stopwords = lang.current_stopwords()  # the job's languages (lang.keyword_languages); English by default
    return _terms(text, stopwords, lang.current_languages())


@functools.lru_cache(maxsize=PHRASE_CACHE)
def _terms(text: str, stopwords: frozenset[str], languages: tuple[str, ...]) -> frozenset[str]:
    # ``languages`` is part of the key: the tokeniser (lang.tokenize) follows the job's languages.
    del languages
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
        # CJK tokens are overlapping character bigrams already: no phrases of them.
        prev = None if not t.isascii() and lang.is_cjk(t) else t  # an ASCII token is never CJK
    return frozenset(out)


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


@functools.lru_cache(maxsize=PHRASE_CACHE)
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
        # Told apart by a keyword, never by a number: "(2)" says nothing about the theme.
        extra = keywords[n] if n < len(keywords) else " ".join(["other"] * (n - len(keywords) + 1))
        label = f"{base} ({extra})"
        n += 1
    used.add(label.lower())
    return label


#: A label candidate holds at most this many content words (negations included) ...
MAX_SPAN: Final = 4
#: ... within at most this many tokens (stopwords inside included): "long does a transfer take" is a candidate
#: ("long transfer take"), which four tokens cut to "long does it take" (until 2026-12-03). A label still shows at
#: most four words (describe.MAX_LABEL_WORDS): a fifth token is a determiner or possessive it drops, or the span
#: is a key phrase only.
MAX_SPAN_TOKENS: Final = 5
#: Clause breaks: a phrase never runs across a sentence or a comma ("late. customer service" is no phrase).
CLAUSE_RE: Final = re.compile(r"[.,;:!?()\[\]\"\u3001\u3002\uff01\uff1f\uff0c]+")
#: Conjunctions end a phrase too: "late and the courier" is two things.
CONJUNCTION_RE: Final = re.compile(r"\b(?:and|or|but|because|although|though|while|when|if|then|so|as)\b", re.I)
#: Negations stay in a phrase (as "not" in its key): "card not arrived" must not read "card arrived".
NEGATIONS: Final = frozenset(
    "not no never cannot can't don't doesn't didn't won't isn't wasn't aren't weren't haven't hasn't hadn't "
    "couldn't wouldn't shouldn't cant dont doesnt didnt wont isnt wasnt havent hasnt couldnt".split()
)
#: Words after which an English word is used as a verb or an adjective ("to cancel", "was declined", "too slow").
PREDICATE_CUES: Final = frozenset(
    "to can't cannot not didn't don't doesn't won't wont cant dont didnt doesnt please can could will would should "
    "i we it is was are were be been being too very so got get gets getting keeps kept still".split()
)
#: Particles shown after the word they follow, though stopwords ("log in", "sign up"); never part of a key.
PARTICLES: Final = frozenset("in up out off on down".split())
#: The particles that belong to the word before them wherever it says them ("top up my account", "show up"): "in"
#: and "on" start a prepositional phrase far more often ("based on", "charge on", "live in": tune sets, 2026-12-03).
VERB_PARTICLES: Final = frozenset("up out off down".split())
#: After these a particle is a preposition ("freezing on the login screen"), not part of a verb.
_DETERMINERS: Final = frozenset("the a an this that these those my your his her our their its".split())
_PREDICATE_SUFFIXES: Final = ("ed", "ing", "ful", "less", "able", "ible", "ive", "ous")


@dataclass(frozen=True)
class Analysed:
    """What a response contributes to labels: its candidate keys, their surface forms, its cued words."""

    keys: frozenset[str]
    surfaces: tuple[tuple[str, str], ...]
    """(key, the words as written) per key whose span holds stopwords ("top failed" / "top up failed", "top" / "top up")."""
    cued: frozenset[str]
    """Content words that follow a :data:`PREDICATE_CUES` word here (verb/adjective evidence)."""
    follows: frozenset[str] = frozenset()
    """"word next" per content word whose every use here is directly followed, in its clause, by one same content
    word or verb particle ("apple watch", "top up"; :data:`VERB_PARTICLES`): what tells a label cut before its last
    word ("Top up using apple", "Cheque to top") from a whole one (describe.cut_after)."""


def phrases(text: str, stopwords: frozenset[str] | None = None, *, max_n: int = MAX_SPAN) -> frozenset[str]:
    """Label candidate keys of a response: spans of 1..``max_n`` content words (and <= :data:`MAX_SPAN_TOKENS`
    tokens) inside a clause, as their content words.

    A span starts and ends with a content word and may hold stopwords ("top up failed", "card has not
    arrived"); its key drops them but keeps negations as "not" ("top failed", "card not arrived"), so the
    spellings of one phrase count together. Memoised: describing a theme asks for the same responses'
    phrases once per level, per candidate expansion and per merge pass (at 20,000 responses that was ~12 s
    of a 14 s describe stage).
    """
    return analyse(text, stopwords, max_n=max_n).keys


def analyse(text: str, stopwords: frozenset[str] | None = None, *, max_n: int = MAX_SPAN) -> Analysed:
    if stopwords is None:
        stopwords = lang.current_stopwords()  # the job's languages (lang.keyword_languages); English by default
    return _analyse(text, stopwords, max_n, lang.current_languages())


@functools.lru_cache(maxsize=PHRASE_CACHE)
def _analyse(text: str, stopwords: frozenset[str], max_n: int, languages: tuple[str, ...]) -> Analysed:
    # ``languages`` is part of the key: the tokeniser (lang.tokenize) follows the job's languages.
    keys: set[str] = set()
    surfaces: dict[str, str] = {}
    cued: set[str] = set()
    after: dict[str, set[str]] = {}  # per content word, what follows each of its uses here ("" for no word)
    span = max(max_n, MAX_SPAN_TOKENS)
    for clause in CLAUSE_RE.split(CONJUNCTION_RE.sub(",", scrub(text))):
        toks = tokens(clause)
        n_toks = len(toks)
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
        # lang.is_cjk per token once (the spans below ask it up to MAX_SPAN_TOKENS times a token); an ASCII token
        # is never CJK, so the regex runs only on the others (issue 27: the same answers, cheaper).
        cjk = [not t.isascii() and lang.is_cjk(t) for t in toks]
        for i, t in enumerate(toks):
            if kind[i] != "c" and not (kind[i] == "n" and i + 1 < n_toks):
                continue
            if cjk[i]:
                # CJK tokens are overlapping character bigrams already: no phrases of them.
                keys.add(t)
                continue
            if kind[i] == "c":
                nxt = toks[i + 1] if i + 1 < n_toks and (kind[i + 1] == "c" or toks[i + 1] in VERB_PARTICLES) else ""
                after.setdefault(t, set()).add(nxt)
            if kind[i] == "c" and _particle(toks, kind, i + 1):
                surfaces.setdefault(t, f"{t} {toks[i + 1]}")  # "top" is said "top up"
            words: list[str] = []
            said = False  # any(w != "not" for w in words), kept as the words are appended
            for j in range(i, min(n_toks, i + span)):
                if kind[j] == "c" and cjk[j]:
                    break
                if kind[j] != "s":
                    if len(words) >= max_n:
                        break
                    w = "not" if kind[j] == "n" else toks[j]
                    words.append(w)
                    said = said or w != "not"
                if kind[j] == "c" and said:
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


def _particle(toks: list[str], kind: list[str], n: int) -> bool:
    """Token ``n`` is a verb particle closing a phrase: "log in", not the "on" of "freezing on login"."""
    return n < len(toks) and toks[n] in PARTICLES and (
        n + 1 == len(toks) or (kind[n + 1] == "s" and toks[n + 1] not in _DETERMINERS))


def phrase_key(phrase: str) -> str:
    """The key of a phrase as written (``"Card has not arrived"`` -> ``"card not arrived"``)."""
    return next((k for k in sorted(phrases(phrase.lower()), key=lambda k: -len(k))), phrase.lower())


def looks_predicate(word: str, cued: int, used: int) -> bool:
    """True when ``word`` reads as a verb or an adjective: its ending, or its use after a cue in this job."""
    if len(word) >= 5 and word.endswith(_PREDICATE_SUFFIXES):
        return True
    return used >= 2 and cued >= max(2, 0.25 * used)


@dataclass(frozen=True)
class Candidate:
    """A label candidate of one group: its key, c-TF-IDF score, uses, share of the group, best share elsewhere."""

    key: str
    score: float
    uses: int
    share: float
    other: float
    """The highest share of another group's responses using the key (0 with one group)."""


def candidates(
    groups: Sequence[Sequence[str]], *, top: int = 12, stopwords: frozenset[str] | None = None, min_share: float = 0.03
) -> list[list[Candidate]]:
    """Label candidates per group, best c-TF-IDF first (see :func:`candidate_phrases`)."""
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
    out: list[list[Candidate]] = []
    for g, (texts, c, size) in enumerate(zip(groups, per_group, sizes, strict=True)):
        min_df = max(2 if len(texts) >= 6 else 1, math.ceil(min_share * len(texts)))
        scored = []
        for term, f in c.items():
            if f < min_df:
                continue
            words = term.count(" ") + 1
            score = (f / size) * math.log(1 + avg / total[term]) * (1.0 + 0.2 * (min(words, 3) - 1))
            scored.append((term, score, f))
        scored.sort(key=lambda p: (-p[1], p[0]))
        chosen: list[Candidate] = []
        for term, score, f in scored:
            if any(f" {term} " in f" {b.key} " for b in chosen):
                continue
            other = max(
                (per_group[h][term] / max(1, len(groups[h])) for h in range(len(groups)) if h != g and per_group[h][term]),
                default=0.0,
            )
            chosen.append(Candidate(term, round(score, 6), f, f / max(1, len(texts)), other))
            if len(chosen) >= top:
                break
        out.append(chosen)
    return out


def candidate_phrases(
    groups: Sequence[Sequence[str]], *, top: int = 12, stopwords: frozenset[str] | None = None, min_share: float = 0.03
) -> list[list[tuple[str, float, int]]]:
    """Label candidates per group: (phrase key, c-TF-IDF score, members using it), best first.

    The same class-based TF-IDF as :func:`ctfidf`, over the keys of
    :func:`phrases`, keeping phrases used by at least ``min_share`` of a
    group's responses (and by two, in groups of six or more): the short list
    a KeyBERT-style ranking then embeds. A phrase is dropped when a
    better-ranked one contains it ("customer service" hides "service"), so
    the list is not one phrase in three spellings.
    """
    return [[(c.key, c.score, c.uses) for c in g] for g in candidates(groups, top=top, stopwords=stopwords,
                                                                      min_share=min_share)]


def same_stem(a: str, b: str) -> bool:
    """True when two phrases share a word stem (``"fees"`` / ``"delivery fee"``)."""
    return bool({_stem(w) for w in a.split()} & {_stem(w) for w in b.split()})


def keyword_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """Jaccard overlap of the word stems of two keyword lists (0..1)."""
    sa = {_stem(w) for k in a for w in k.split()}
    sb = {_stem(w) for k in b for w in k.split()}
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0
