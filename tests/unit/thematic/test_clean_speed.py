"""The clean stage's shortcuts (issue 27: ASCII fast paths, keyboard runs as a set, a word's reading memoised,
one near_key per answer) give what the plain per-character code they replace gives."""

from __future__ import annotations

import random
import unicodedata
from itertools import pairwise
from typing import Any

from pipelines.thematic import clean as C
from pipelines.thematic.stopwords import EN as EN_STOPWORDS


def _plain_near_key(text: str) -> str:
    # A mark is off where it is an accent (the combining diacritics, variation selectors, Latin, Greek, Cyrillic,
    # Arabic, Hebrew and Syriac marks) and stays where it is part of the letter (kana, Thai, Devanagari); anything
    # else that is not alphanumeric splits.
    out = []
    for c in unicodedata.normalize("NFKD", text.casefold()):
        if unicodedata.category(c).startswith("M"):
            name = unicodedata.name(c, "COMBINING")
            if "KATAKANA-HIRAGANA" in name or name.split()[0] not in ("COMBINING", "VARIATION", "LATIN", "GREEK",
                                                                     "CYRILLIC", "ARABIC", "HEBREW", "SYRIAC"):
                out.append(c)
        else:
            out.append(c if c.isalnum() else " ")
    return " ".join("".join(out).split())


def _plain_base(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def _plain_latin(word: str) -> bool:
    return all(c.isascii() or unicodedata.name(c, "").startswith("LATIN") for c in word)


def _plain_no_answer(text: str) -> bool:
    key = _plain_near_key(text)
    if not key:
        return bool(text) and all(c in C.NO_ANSWER_MARKS for c in text)
    return key in C.NO_ANSWERS


def _plain_keyboard_run(word: str) -> bool:
    return len(word) >= 3 and any(word in row or word in row[::-1] for row in C.KEYBOARD_ROWS)


def _plain_real_word(word: str, written: str) -> bool:
    if _plain_keyboard_run(word) or C._one_letter(word):
        return False
    if word in C._lexicon():
        return True
    if written.isupper() and 2 <= len(written) <= 5 and len(set(word)) >= 2:
        return True
    if len(word) <= 3:
        return True
    return bool(C.VOWELS & set(word)) and not C.CONSONANT_RUN_RE.search(word)


def _plain_is_gibberish(text: str) -> bool:
    if C.URL_RE.search(text):
        return False
    written = C.WORD_RE.findall(text)
    words = [_plain_base(w.lower()) for w in written]
    letters = sum(len(w) for w in words)
    marked = any(unicodedata.category(c)[0] == "M" and p.isalpha() and not _plain_latin(p) for p, c in pairwise(text))
    if letters < 2 and not (letters == 1 and (unicodedata.name(words[0], "").startswith("CJK") or marked)):
        return True
    lexicon = C._lexicon()
    if len(set(text.lower().replace(" ", ""))) <= 2 and len(text) >= 5:
        if not all(w in lexicon and not C._one_letter(w) for w in words):
            return True
    real = [not _plain_latin(w) or _plain_real_word(w, orig) for w, orig in zip(words, written, strict=True)]
    if not any(real):
        return True
    if sum(1 for w in set(words) if len(w) > 1 and w in EN_STOPWORDS) > 1:
        return False
    long_words = [ok for w, ok in zip(words, real, strict=True) if len(w) >= 4]
    return bool(long_words) and long_words.count(False) / len(long_words) >= 0.5


def _plain_clean(items: list[dict[str, Any]]) -> list[C.CleanedResponse]:
    out: list[C.CleanedResponse] = []
    exact: dict[str, str | int] = {}
    near: dict[str, str | int] = {}
    for i, item in enumerate(items):
        text = C.normalise(str(item.get("text", "")))
        rid = item["id"]
        status: Any = "ok"
        dup: str | int | None = None
        if not text:
            status = "empty"
        elif _plain_no_answer(text):
            status = "no_answer"
        elif _plain_is_gibberish(text):
            status = "gibberish"
        elif text in exact:
            status, dup = "exact_duplicate", exact[text]
        else:
            key = _plain_near_key(text)
            if key and key in near:
                status, dup = "near_duplicate", near[key]
            else:
                exact[text] = rid
                if key:
                    near[key] = rid
        out.append(C.CleanedResponse(i, rid, text, status, dup))
    return out


def _texts() -> list[str]:
    rng = random.Random(27)
    alphabet = ("abcdefghijklmnopqrstuvwxyz" "BCDFGHJKLMNPQRSTVWXZ" "0123456789 .,!?-_'/" "éèüöäßçñøåœ" "\u0301\u0308"
                "ﬁﬂ²½" "привет" "γειά" "مرحبا" "客服态度" "안녕" "สวัสดี" "\u200b\ufeff\u2013"
                "ガバぱ\u3099" "ข่าวไม่" "َ" "नमस्ते")
    fixed = ["Great service!!", "great service", "Ｆｕｌｌ ｗｉｄｔｈ", "café", "cafe\u0301", "stürzt ab", "bcdfgh",
             "qwrtzp xcvbnm", "aaaaaaa", "hahahaha", "Привет мир", "ﬁnal ﬂight", "ok", "x", "42 !!", "", "Ærø Ørsted",
             "naïve coöperation", "İstanbul", "ǅemal", "N/A", "n.a.", "None.", "-", "...", "no comment", "TV", "Thx",
             "SMS", "qwe qwe qwe", "asdfgh", "lkjh", "zzz", "I did", "ok ok", "www.example.com", "QWERTY", "Ytrewq",
             "poiuytrewq", "mnbvcxz", "azerty", "wxcvbn!", "好", "慢!", "无", "k.A.", "特になし", "n.v.t.", "없음",
             "ガス", "カス", "ข่าว", "ขาว", "ไม่มี", "كَتَبَ", "नमस्ते", "\u0301x"]
    keys = "".join(C.KEYBOARD_ROWS)
    rand = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    words = ["".join(rng.choice("bcdfghklmnprstvwxz" if rng.random() < 0.7 else "aeiouy") for _ in range(rng.randint(1, 9)))
             for _ in range(400)]
    words += [keys[i : i + rng.randint(1, 6)] for i in rng.choices(range(len(keys)), k=200)]
    words += [w.upper() for w in rng.sample(words, 60)] + sorted(C._lexicon())[:300:3]
    sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(3000)]
    return fixed + rand + sentences + [C.normalise(t) for t in fixed + rand]


def test_shortcuts_equal_the_per_character_code() -> None:
    texts = _texts()
    seen = {True: 0, False: 0}
    for t in texts:
        assert C.near_key(t) == _plain_near_key(t), t
        assert C.is_no_answer(t) == _plain_no_answer(t), t
        got = C.is_gibberish(t)
        assert got == _plain_is_gibberish(t), t
        seen[got] += 1
        for w in C.WORD_RE.findall(t):
            low = _plain_base(w.lower())
            assert C._base(w.lower()) == low, w
            assert C._latin(w) == _plain_latin(w), w
            assert C._keyboard_run(low) == _plain_keyboard_run(low), w
            assert C._word(w) == (low, not _plain_latin(low) or _plain_real_word(low, w)), w
    assert min(seen.values()) > 300  # both answers are exercised
    assert sum(not t.isascii() for t in texts) > 1000 and sum(t.isascii() for t in texts) > 1000
    assert sum(_plain_keyboard_run(w) for t in texts for w in C.WORD_RE.findall(t.lower())) > 50


def test_clean_equals_the_plain_loop() -> None:
    texts = _texts()
    rng = random.Random(5)
    texts += [rng.choice(texts) for _ in range(2000)]  # copies and near copies too
    texts += [t.upper() + "!" for t in rng.sample(texts, 500)]
    items = [{"id": i, "text": t} for i, t in enumerate(texts)]
    got, want = C.clean(items), _plain_clean(items)
    assert got == want
    statuses = {r.status for r in got}
    assert statuses == {"ok", *C.REASONS}, statuses


def test_has_url_is_the_regex_answer() -> None:
    # has_url searches URL_RE only where "://", "www." or a dot before a top-level domain is: the same answer, also
    # for the letters the case-insensitive regex folds (the Kelvin sign for "k", dotted and dotless i) and near misses.
    links = ["www.example.com", "WWW.EXAMPLE", "see HTTPS://x", "ftp://host", "example.COM", "shop.co.UK/basket",
             "bbc.co.\u212a", "site.\u0130O", "site.\u0131o", "my-site.info/page", "a.b.c.de", "x.dev", "me.ly",
             "example.company", "e.g. the co", "U.S. economy", "file.txt", "v1.2.3", "no link here", "dot.com.",
             "-.com", "_x.org", "café.fr", "end.", "www", "http:/x", "user@mail.net", "3.14 io"]
    rng = random.Random(45)
    words = ["the", "refund", "arrived", ".", ",", "late", "co", "uk"]
    texts = links + [" ".join(rng.choice(words + links) for _ in range(rng.randint(1, 10))) for _ in range(400)]
    found = 0
    for t in texts:
        assert C.has_url(t) == bool(C.URL_RE.search(t)), t
        found += C.has_url(t)
    assert 50 < found < len(texts) - 50
