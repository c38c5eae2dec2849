"""Stage 1: normalise texts and mark what cannot be analysed (empty, a non-answer, gibberish, duplicates).

Duplicates are kept out of clustering so that a copy-pasted answer cannot form
a theme of its own; they are marked (reason ``exact_duplicate``/``near_duplicate``
and the id of the first copy), and the result counts each with its first copy's
themes (``params.count_duplicates``; with false they are ``unusable``).

An explicit non-answer ("N/A", "none", "-", "no comment": :data:`NO_ANSWERS`) is ``no_answer``, not gibberish and
not a duplicate of the first one. A short real answer ("TV", "Thx", "SMS", "ok", a pasted link) is not gibberish:
see :func:`is_gibberish`.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import unicodedata
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Final, Literal, get_args

from .lang import is_han
from .stopwords import EN as EN_STOPWORDS

#: Why a response is unusable (``assignments[].reason``, the keys of ``run.counts.unusable``), in this order.
Reason = Literal["empty", "no_answer", "gibberish", "exact_duplicate", "near_duplicate"]
REASONS: Final[tuple[str, ...]] = get_args(Reason)

WS_RE: Final = re.compile(r"\s+")
# Zero-width and BOM characters survive NFKC and break duplicate detection.
INVISIBLE_RE: Final = re.compile("[\u200b-\u200f\u2060\ufeff]")
WORD_RE: Final = re.compile(r"[^\W\d_]+")
ALNUM_RE: Final = re.compile(r"[^\W_]+")
CONSONANT_RUN_RE: Final = re.compile(r"[bcdfghjklmnpqrstvwxz]{5,}")
VOWELS: Final = frozenset("aeiouy")

#: Explicit non-answers, compared by :func:`near_key` (case, accents and punctuation off: "N/A", "n.a." and "n/a"
#: are all ``n a``). A closed list on purpose: a short real answer is an answer. "nothing" is here by decision: a
#: reader codes it as "no answer given"; to "what should we improve?" it can mean "no complaints", and every such
#: answer is still listed (bucket ``unusable``, reason ``no_answer``). The same few phrases (n/a, none, nothing, no
#: comment, not applicable) in the languages the multilingual encoder reads, as survey tools print them ("k.A.",
#: "n.v.t.", "特になし"); the clean stage does not know the language yet, so one list serves every job, and a
#: phrase that is also an English answer, or a bare yes/no, is left out ("no", "nein", "нет": to "would you
#: recommend us?" they are answers; Polish "nic" is also "NIC" and a name). "yok", "没有", "ありません" are "none". Written as people type them; :data:`NO_ANSWERS` holds their near_keys.
NO_ANSWER_PHRASES: Final = {
    "en": ("n/a", "na", "none", "nothing", "no comment", "no comments", "not applicable", "nil"),
    "de": ("k.A.", "keine Angabe", "keine Angaben", "keine", "nichts", "kein Kommentar", "entfällt",
           "trifft nicht zu"),
    "fr": ("rien", "aucun", "aucune", "néant", "sans commentaire", "sans commentaires", "pas de commentaire",
           "sans objet", "non applicable"),
    "es": ("nada", "ninguno", "ninguna", "sin comentarios", "sin comentario", "no aplica"),
    "it": ("niente", "nulla", "nessuno", "nessuna", "nessun commento", "non applicabile"),
    "pt": ("nenhum", "nenhuma", "sem comentários", "sem comentário", "não se aplica", "não aplicável"),
    "nl": ("niets", "geen", "geen commentaar", "geen opmerkingen", "n.v.t.", "nvt"),
    "pl": ("brak", "brak uwag", "bez komentarza", "nie dotyczy"),
    "ru": ("ничего", "без комментариев", "нет комментариев", "не применимо"),
    "tr": ("yok", "hiçbir şey", "yorum yok"),
    "ja": ("なし", "ナシ", "無し", "特になし", "特にナシ", "特に無し", "特にありません", "ありません"),
    "zh": ("无", "無", "没有", "沒有", "暂无", "暫無", "无意见", "沒意見", "没意见"),
    "ko": ("없음", "없습니다", "해당 없음", "특별히 없음"),
    "ar": ("لا يوجد", "لا شيء", "لا تعليق"),
    "th": ("ไม่มี", "ไม่มีความคิดเห็น"),
}
#: An answer of only these characters ("-", ".", "--", "...") is a non-answer too (its near_key is empty);
#: other punctuation alone ("?????", "!!!") stays gibberish.
NO_ANSWER_MARKS: Final = frozenset("-._ \u2010\u2011\u2012\u2013\u2014\u2015")  # ASCII and Unicode dashes
#: A pasted link is an answer a reader can follow: a scheme or www., or a host under a common top-level domain.
_TLDS: Final = "com|org|net|edu|gov|io|co|uk|de|fr|eu|app|dev|me|ly|info"
URL_RE: Final = re.compile(
    r"(?i)\b(?:https?://|www\.)\S+"
    r"|\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:" + _TLDS + r")\b(?:/\S*)?"
)
#: What every match of URL_RE holds besides "://" or "www." (any case): a dot, a top-level domain and a word edge, the
#: end of its host. A search for this literal-led pattern is ~20x cheaper than URL_RE's, whose host branch starts at
#: every word (see :func:`has_url`).
_TLD_RE: Final = re.compile(r"(?i)\.(?:" + _TLDS + r")\b")
#: Letter rows of the QWERTY, QWERTZ and AZERTY keyboards: three or more neighbouring keys of one row, either way
#: ("qwe", "asdfgh", "lkjh"), are mashing, not a word.
KEYBOARD_ROWS: Final = ("qwertyuiop", "asdfghjkl", "zxcvbnm", "qwertzuiop", "yxcvbnm", "azertyuiop", "qsdfghjklm",
                        "wxcvbn")


@dataclass
class CleanedResponse:
    index: int
    id: str | int
    text: str
    """Normalised text (NFKC, single spaces); what is embedded."""
    status: Literal["ok"] | Reason
    """``ok`` or the reason it is unusable (:data:`REASONS`): empty, no_answer, gibberish, exact_duplicate,
    near_duplicate."""
    duplicate_of: str | int | None = None


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = INVISIBLE_RE.sub("", text)
    return WS_RE.sub(" ", text).strip()


#: Marks that are optional accents, which :func:`near_key` drops ("café" is "cafe", "ё" is "е", Arabic's and Hebrew's
#: vowel points; also variation selectors). Any other mark is part of its letter and stays: kana's voicing marks (ガス
#: "gas" is not カス "dregs"), Thai's vowels and tones (ข่าว "news" is not ขาว "white"), Devanagari's vowel signs.
_ACCENT_MARKS: Final = ("COMBINING", "VARIATION SELECTOR", "LATIN", "GREEK", "CYRILLIC", "ARABIC", "HEBREW", "SYRIAC")


class _KeyTable(dict[int, str | None]):
    """:func:`near_key`'s ``str.translate`` table, filled as characters are met: a letter or digit stays, an accent
    goes, another mark stays, anything else is a space."""

    def __missing__(self, code: int) -> str | None:
        char = chr(code)
        if unicodedata.category(char).startswith("M"):
            name = unicodedata.name(char, "COMBINING")
            kept = "KATAKANA-HIRAGANA" in name or not name.startswith(_ACCENT_MARKS)
            value: str | None = char if kept else None
        else:
            value = char if char.isalnum() else " "
        if len(self) < 1 << 16:  # the characters answers use; a text of every code point does not grow it further
            self[code] = value
        return value


_KEY_TABLE: Final = _KeyTable()


def near_key(text: str) -> str:
    """Case-, accent- and punctuation-insensitive key: "Great service!!" == "great service"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    # Digits count: "late by 3 days" and "late by 9 days" are different answers.
    if decomposed.isascii():  # no marks to weigh (issue 27: most answers are ASCII)
        return " ".join(ALNUM_RE.findall(decomposed))
    return " ".join(decomposed.translate(_KEY_TABLE).split())


#: :data:`NO_ANSWER_PHRASES` as :func:`near_key` reads them ("N/A" and "n/a" are ``n a``).
NO_ANSWERS: Final = frozenset(near_key(p) for phrases in NO_ANSWER_PHRASES.values() for p in phrases)


def _base(word: str) -> str:
    if word.isascii():  # NFKD leaves ASCII as it is, and ASCII has no combining marks: the same string
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def _latin(word: str) -> bool:
    return word.isascii() or all(c.isascii() or unicodedata.name(c, "").startswith("LATIN") for c in word)


def is_no_answer(text: str) -> bool:
    """An explicit non-answer (:data:`NO_ANSWERS`, :data:`NO_ANSWER_MARKS`): "N/A", "None.", "-", "no comment"."""
    return _no_answer(text, near_key(text))


def _no_answer(text: str, key: str) -> bool:
    """:func:`is_no_answer` given the text's :func:`near_key` (:func:`clean` needs the key anyway)."""
    if not key:
        return bool(text) and all(c in NO_ANSWER_MARKS for c in text)
    return key in NO_ANSWERS


#: Every run of three or more neighbouring keys of one row of :data:`KEYBOARD_ROWS`, either way: a word is such a
#: run exactly when it has >= 3 letters and is a substring of a row or of a reversed row.
_KEYBOARD_RUNS: Final = frozenset(r[i:j] for row in KEYBOARD_ROWS for r in (row, row[::-1])
                                  for i in range(len(r)) for j in range(i + 3, len(r) + 1))


def _keyboard_run(word: str) -> bool:
    return word in _KEYBOARD_RUNS


def _one_letter(word: str) -> bool:
    return len(word) >= 3 and len(set(word)) == 1


@functools.cache
def _lexicon() -> frozenset[str]:
    """Words the project already ships: the English stopwords and VADER's lexicon (whose 7,500 entries include the
    chat abbreviations "thx", "pls", "plz", "wtf", "smh", "np"). Read from the package's file without importing its
    analyser; an installation without it has the stopwords only."""
    words = set(EN_STOPWORDS)
    spec = importlib.util.find_spec("vaderSentiment")
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "vader_lexicon.txt"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                token = line.split("\t", 1)[0].strip().lower()
                if token.isalpha():
                    words.add(token)
    return frozenset(words)


def _real_word(word: str, written: str) -> bool:
    """Whether a Latin-script ``word`` (lower case, accents off; ``written`` as in the text) can be a word.

    In this order: a run of neighbouring keys ("qwe", "asdfgh") or one letter three times ("zzz") is not; a word
    of the shipped lexicons (:func:`_lexicon`) is; so is an acronym written in capitals, 2-5 letters of at least
    two kinds ("TV", "SMS", "HTML"). A word of three letters or fewer is too short for the vowel test
    (abbreviations are vowel-less by nature: "tv", "pc", "dvd"); a longer one needs a vowel and no run of five
    consonants.
    """
    if _keyboard_run(word) or _one_letter(word):
        return False
    if word in _lexicon():
        return True
    if written.isupper() and 2 <= len(written) <= 5 and len(set(word)) >= 2:
        return True
    if len(word) <= 3:
        return True
    return not VOWELS.isdisjoint(word) and not CONSONANT_RUN_RE.search(word)


@functools.lru_cache(maxsize=1 << 16)
def _word(written: str) -> tuple[str, bool]:
    """A word as :func:`is_gibberish` reads it (lower case, accents off) and whether it counts as real (not Latin,
    or :func:`_real_word`): a function of the written word alone, so answers that share a word share the work."""
    word = _base(written.lower())
    return word, not _latin(word) or _real_word(word, written)


def _marked_letter(text: str) -> bool:
    """A letter of a script other than Latin with a mark after it (Thai "ดี", Devanagari "है"): one written word."""
    return any(unicodedata.category(c).startswith("M") and p.isalpha() and not _latin(p) for p, c in pairwise(text))


def has_url(text: str) -> bool:
    """``URL_RE`` finds a link in ``text``; the regex runs only on a text holding "://", "www." or a dot before a
    top-level domain (:data:`_TLD_RE`), as each of its matches does (issue 27: ~8 µs an answer, most answers have
    none)."""
    return ("://" in text or "www." in text.lower() or _TLD_RE.search(text) is not None) and bool(URL_RE.search(text))


def is_gibberish(text: str) -> bool:
    """Keyboard mashing and noise: no real words, or mostly unpronounceable ones.

    Heuristic by design: a false positive only moves a response to the
    ``unusable`` bucket with its reason, where a reader can see it. A short real
    answer is not gibberish: "TV", "Thx", "SMS", "ok", "App", "I did" and a
    pasted link are answers (:func:`_real_word`, :data:`URL_RE`).
    """
    if has_url(text):
        return False
    # Accents off (as near_key does) so that "stürzt" has its vowel: the tests below count a-e-i-o-u-y only.
    read = [_word(w) for w in WORD_RE.findall(text)]
    words = [w for w, _ in read]
    letters = sum(len(w) for w in words)
    if letters < 2 and not (letters == 1 and (is_han(words[0]) or _marked_letter(text))):
        # Only digits/punctuation/emoji, or one letter ("x"); one Han character is a word ("好", "贵"), and so is a
        # letter with its vowel sign (Thai "ดี" good, "มี": WORD_RE does not take the sign, which is no \w).
        return True
    # One or two characters repeated ("aaaaaaa", "hahahaha") carry no theme; words of the lexicon written with two
    # letters are still words ("I did", "ok ok", "no no no").
    lexicon = _lexicon()
    if len(set(text.lower().replace(" ", ""))) <= 2 and len(text) >= 5:
        if not all(w in lexicon and not _one_letter(w) for w in words):
            return True
    # The vowel and consonant-run tests know only the Latin alphabet: a Cyrillic, Greek, Arabic, CJK, Hangul or
    # Thai word has no a/e/i/o/u, and without this every answer in those scripts (languages the pipeline
    # supports) was "gibberish", so a Russian survey failed with "no usable responses". Such a word counts as real.
    real = [ok for _, ok in read]
    if not any(real):
        return True
    # Two different function words (the English stopwords) make it language, whatever else it holds: a developer's
    # "How to get from xhtml to excel" or "Are peekCString and peekCStringLen lazy?" has long words without vowels or
    # with five consonants in a row, and mashing does not type "how", "to" and "from". Not any word of the lexicon:
    # VADER's chat tokens ("gg", "ff", "kk", "jk", "xd", "gla") are what mashing does type ("gg ff asdfgh").
    if len({w for w in words if len(w) >= 2 and w in EN_STOPWORDS}) >= 2:
        return False
    long_words = [ok for w, ok in zip(words, real, strict=True) if len(w) >= 4]
    return bool(long_words) and long_words.count(False) / len(long_words) >= 0.5


def clean(items: list[dict[str, Any]]) -> list[CleanedResponse]:
    out: list[CleanedResponse] = []
    exact: dict[str, str | int] = {}
    near: dict[str, str | int] = {}
    for i, item in enumerate(items):
        text = normalise(str(item.get("text", "")))
        rid = item["id"]
        status: Literal["ok"] | Reason = "ok"
        dup: str | int | None = None
        key = near_key(text)
        if not text:
            status = "empty"
        elif _no_answer(text, key):
            status = "no_answer"
        elif is_gibberish(text):
            status = "gibberish"
        elif text in exact:
            status, dup = "exact_duplicate", exact[text]
        else:
            if key and key in near:
                status, dup = "near_duplicate", near[key]
            else:
                exact[text] = rid
                if key:
                    near[key] = rid
        out.append(CleanedResponse(i, rid, text, status, dup))
    return out


def to_json(rows: list[CleanedResponse]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def from_json(rows: list[dict[str, Any]]) -> list[CleanedResponse]:
    return [CleanedResponse(**r) for r in rows]
