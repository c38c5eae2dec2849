"""Stage 1: normalise texts and mark what cannot be analysed (empty, gibberish, duplicates).

Duplicates are kept out of clustering so that a copy-pasted answer cannot form
a theme of its own, but they are reported (bucket ``unusable``, reason
``exact_duplicate``/``near_duplicate`` and the id of the first copy).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any, Final

WS_RE: Final = re.compile(r"\s+")
# Zero-width and BOM characters survive NFKC and break duplicate detection.
INVISIBLE_RE: Final = re.compile("[\u200b-\u200f\u2060\ufeff]")
WORD_RE: Final = re.compile(r"[^\W\d_]+")
ALNUM_RE: Final = re.compile(r"[^\W_]+")
CONSONANT_RUN_RE: Final = re.compile(r"[bcdfghjklmnpqrstvwxz]{5,}")
VOWELS: Final = frozenset("aeiouy")


@dataclass
class CleanedResponse:
    index: int
    id: str | int
    text: str
    """Normalised text (NFKC, single spaces); what is embedded."""
    status: str
    """``ok`` or the reason it is unusable: empty, gibberish, exact_duplicate, near_duplicate."""
    duplicate_of: str | int | None = None


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = INVISIBLE_RE.sub("", text)
    return WS_RE.sub(" ", text).strip()


def near_key(text: str) -> str:
    """Case-, accent- and punctuation-insensitive key: "Great service!!" == "great service"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    # Digits count: "late by 3 days" and "late by 9 days" are different answers.
    return " ".join(ALNUM_RE.findall(stripped))


def _base(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def _latin(word: str) -> bool:
    return all(c.isascii() or unicodedata.name(c, "").startswith("LATIN") for c in word)


def is_gibberish(text: str) -> bool:
    """Keyboard mashing and noise: no real words, or mostly unpronounceable ones.

    Heuristic by design: a false positive only moves a response to the
    ``unusable`` bucket with its reason, where a reader can see it.
    """
    # Accents off (as near_key does) so that "stürzt" has its vowel: the tests below count a-e-i-o-u-y only.
    words = [_base(w.lower()) for w in WORD_RE.findall(text)]
    letters = sum(len(w) for w in words)
    if letters < 2:
        return True  # only digits/punctuation/emoji
    # One or two characters repeated ("aaaaaaa", "hahahaha") carry no theme.
    if len(set(text.lower().replace(" ", ""))) <= 2 and len(text) >= 5:
        return True
    # The vowel and consonant-run tests know only the Latin alphabet: a Cyrillic, Greek, Arabic, CJK, Hangul or
    # Thai word has no a/e/i/o/u, and without this every answer in those scripts (languages the pipeline
    # supports) was "gibberish", so a Russian survey failed with "no usable responses". Such a word counts as real.
    latin = [w for w in words if _latin(w)]
    if len(latin) == len(words) and not any(VOWELS & set(w) for w in words):
        return True
    bad = sum(1 for w in latin if len(w) >= 4 and (CONSONANT_RUN_RE.search(w) or not VOWELS & set(w)))
    long_words = sum(1 for w in words if len(w) >= 4)
    return long_words > 0 and bad / long_words >= 0.5


def clean(items: list[dict[str, Any]]) -> list[CleanedResponse]:
    out: list[CleanedResponse] = []
    exact: dict[str, str | int] = {}
    near: dict[str, str | int] = {}
    for i, item in enumerate(items):
        text = normalise(str(item.get("text", "")))
        rid = item["id"]
        status, dup = "ok", None
        if not text:
            status = "empty"
        elif is_gibberish(text):
            status = "gibberish"
        elif text in exact:
            status, dup = "exact_duplicate", exact[text]
        else:
            key = near_key(text)
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
