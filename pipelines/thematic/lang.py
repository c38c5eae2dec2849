"""Languages: per-response detection, the encoder a survey needs, and language-aware keyword tokens.

Detection is ``py3langid`` (the maintained fork of langid.py: BSD-3-Clause,
a 4.5 MB naive-Bayes byte-n-gram model shipped in the wheel, numpy only;
~0.7 s to load, ~20,000 short texts/s on one core here), restricted to
:data:`DETECTABLE` so that a 3-word answer is not called Serbian. A text
counts as non-English only when the detector is confident (probability ≥
:data:`MIN_CONFIDENCE`); very short texts ("ok", "Great!") are "und".

Keyword tokens: ``tokenize(text, language)``. English (and the default
``language="en"`` path) keeps the original ASCII tokeniser exactly, so
English keywords do not change; other Latin/Cyrillic/Greek/Arabic-script
languages use Unicode word characters; Chinese and Japanese (no spaces) use
character bigrams of each run of Han/Kana characters (a single character
when the run has one). Which stopwords apply is set per job by
``keyword_languages(langs)`` (a context variable read by ``keywords.terms``),
so ``describe`` and ``assign`` need not pass languages around.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .stopwords import stopwords_for

#: Languages the detector may answer: ours (stopwords) plus the other
#: languages the multilingual encoder reads.
DETECTABLE: Final = ("en", "de", "fr", "es", "it", "pt", "nl", "pl", "zh", "ja", "ko", "ru", "ar", "tr", "th")
#: Names of those languages as an LLM is asked to write in them (``params.label_language``).
LANGUAGE_NAMES: Final = {
    "en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "pl": "Polish", "zh": "Chinese (Simplified)", "ja": "Japanese", "ko": "Korean",
    "ru": "Russian", "ar": "Arabic", "tr": "Turkish", "th": "Thai",
}
#: Below this the detector's answer is "und" (undetermined).
MIN_CONFIDENCE: Final = 0.8
#: The multilingual encoder is used under ``language="auto"`` when at least
#: this share of usable texts (and at least 2) are confidently not English.
MULTILINGUAL_SHARE: Final = 0.02
#: Languages of the multilingual encoder (USE multilingual v3).
ENCODER_LANGUAGES: Final = frozenset(
    {"ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh"}
)
UNDETERMINED: Final = "und"

_ASCII_TOKEN: Final = re.compile(r"[a-z][a-z0-9'&-]*[a-z0-9]|[a-z]")
# A word: letters (any script, incl. combining marks), digits inside, ' & - joiners.
_WORD: Final = re.compile(r"[^\W\d_](?:[\w'&-]*[^\W_])?")
# The tokeniser's scope: runs of Han and kana (BMP), cut into character bigrams. Hangul is spaced (by phrase), and
# Thai has no bigram model here, so both stay whole words. script() below answers the per-character questions.
_CJK_RUN: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u30fc]+")
# Unicode name prefixes: Han is a word in one character (clean.py: "慢", slow, is an answer); these scripts are
# written without a space between words, or (Hangul) with particles attached, so a word edge has no token edge
# (codebook.keyword_pattern: "物流" in "物流太慢了").
_HAN_NAMES: Final = ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH")
_UNSPACED_NAMES: Final = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR")

_lock = threading.Lock()
_identifier: Any = None


def _detector() -> Any:
    global _identifier
    with _lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            ident.set_languages(list(DETECTABLE))
            _identifier = ident
        return _identifier


def detect(text: str) -> str:
    """ISO 639-1 code of ``text``'s language, or ``"und"`` when unsure."""
    if sum(c.isalpha() for c in text) < 3:
        return UNDETERMINED
    code, prob = _detector().classify(text)
    return str(code) if prob >= MIN_CONFIDENCE else UNDETERMINED


def detect_all(texts: Sequence[str]) -> list[str]:
    return [detect(t) for t in texts]


def survey_languages(langs: Sequence[str]) -> dict[str, int]:
    """Count per detected language, largest first (``und`` last)."""
    c = Counter(langs)
    return dict(sorted(c.items(), key=lambda kv: (kv[0] == UNDETERMINED, -kv[1], kv[0])))


def needs_multilingual(langs: Sequence[str]) -> bool:
    """Whether a survey is "not all English": enough confidently non-English texts."""
    other = sum(1 for code in langs if code not in ("en", UNDETERMINED))
    return other >= 2 and other >= MULTILINGUAL_SHARE * max(1, len(langs))


def keyword_set(langs: Sequence[str]) -> tuple[str, ...]:
    """The languages whose stopwords a survey's keywords use: English plus each present in ≥ 1 % (≥ 2 texts)."""
    counts = Counter(code for code in langs if code != UNDETERMINED)
    n = max(1, len(langs))
    keep = {code for code, k in counts.items() if k >= 2 and k >= 0.01 * n}
    return ("en", *sorted(keep - {"en"}))


@dataclass(frozen=True)
class Plan:
    """What a job's languages decide: the encoder, the keyword languages, and what was detected."""

    encoder: str
    keyword_languages: tuple[str, ...]
    #: Texts per detected language (``language="auto"`` only), else None.
    detected: dict[str, int] | None


def plan(language: str, default_encoder: str, texts: Sequence[str]) -> Plan:
    """The encoder and keyword languages of a job (deterministic in its params and texts).

    ``en``: the chosen English encoder, English keywords, nothing detected
    (the behaviour before languages existed). One other language: the
    multilingual encoder, that language's stopwords plus English. ``auto``:
    per-response detection; the multilingual encoder when the texts are not
    all English (:func:`needs_multilingual`), else the chosen encoder.
    """
    if language == "en":
        return Plan(default_encoder, ("en",), None)
    if language != "auto":
        return Plan("multilingual", ("en", language), None)
    langs = detect_all(texts)
    encoder = "multilingual" if needs_multilingual(langs) else default_encoder
    return Plan(encoder, keyword_set(langs), survey_languages(langs))


# --- keyword tokens --------------------------------------------------------------------------

_current: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "thematiq_keyword_languages", default=("en",)
)


@contextlib.contextmanager
def keyword_languages(langs: Sequence[str]) -> Iterator[None]:
    """Within this block ``keywords.terms``/``tokens`` use the stopwords and tokenisation of ``langs``."""
    token = _current.set(tuple(langs) or ("en",))
    try:
        yield
    finally:
        _current.reset(token)


def set_keyword_languages(langs: Sequence[str]) -> None:
    """Set the keyword languages for the rest of the current context (inside a ``keyword_languages`` block)."""
    _current.set(tuple(langs) or ("en",))


def current_languages() -> tuple[str, ...]:
    return _current.get()


#: stopwords_for per job languages tuple as set (``keyword_languages``): stopwords_for caches its lists by the sorted
#: set of the languages, which it builds on every call, and this is read once per response and phrase asked for
#: (issue 27: ~25,000 times per 2,000 answers).
_STOPWORDS_OF: dict[tuple[str, ...], frozenset[str]] = {}


def current_stopwords() -> frozenset[str]:
    langs = _current.get()
    got = _STOPWORDS_OF.get(langs)
    if got is None:
        got = _STOPWORDS_OF[langs] = stopwords_for(*langs)
    return got


def tokenize(text: str, language: str | None = None) -> list[str]:
    """Lower-case keyword tokens of ``text``.

    ``language=None`` uses the job's languages (``keyword_languages``): only
    English → the ASCII tokeniser (unchanged behaviour); otherwise the Unicode
    tokeniser with CJK bigrams.
    """
    langs = (language,) if language else _current.get()
    low = text.lower()
    if langs == ("en",):
        return [t.strip("'-") for t in _ASCII_TOKEN.findall(low)]
    out: list[str] = []
    pos = 0
    for m in _CJK_RUN.finditer(low):
        out.extend(_words(low[pos : m.start()]))
        run = m.group()
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        pos = m.end()
    out.extend(_words(low[pos:]))
    return out


def _words(s: str) -> list[str]:
    return [t.strip("'-") for t in _WORD.findall(s)]


def is_cjk(token: str) -> bool:
    return bool(_CJK_RUN.fullmatch(token))


def is_han(char: str) -> bool:
    """A Han character (Chinese hanzi, Japanese kanji), in any block: one is a word."""
    return bool(char) and unicodedata.name(char, "").startswith(_HAN_NAMES)


def is_unspaced(char: str) -> bool:
    """A character of a script whose word edges are not marked by spaces (Han, kana, Hangul, Thai, Lao, Khmer,
    Myanmar)."""
    return bool(char) and unicodedata.name(char, "").startswith(_UNSPACED_NAMES)
