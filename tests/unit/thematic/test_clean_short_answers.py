"""Cleaning: a short real answer is not gibberish; an explicit non-answer is ``no_answer`` (schema 1.4)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipelines.thematic.clean import NO_ANSWERS, REASONS, clean, is_gibberish, is_no_answer
from pipelines.thematic.result import AssignmentOut


@pytest.mark.parametrize("text", [
    "TV", "Thx", "SMS", "I did", "ok", "App", "tv", "sms", "pc", "dvd", "pls", "np", "HTML", "hmm", "Idk",
    "ok ok", "no no no", "https://bit.ly/3xYz", "www.example.com/help", "see example.com", "CCTV-12",
])
def test_short_real_answers_are_not_gibberish(text: str) -> None:
    # Before: all but "ok", "App", "Idk" and the two bare links were gibberish (no vowel, two letters repeated, or
    # "https" counted as an unpronounceable word).
    assert not is_gibberish(text)


@pytest.mark.parametrize("text", ["How to get from xhtml to excel to xhtml", "Are peekCString and peekCStringLen lazy?",
                                  "Why does my sfdxcli crash on startup", "the nginx hdrs stopped working"])
def test_technical_words_in_a_sentence_are_not_gibberish(text: str) -> None:
    # Before: gibberish (half the long words have no vowel or five consonants in a row): StackOverflow titles.
    assert not is_gibberish(text)


@pytest.mark.parametrize("text", ["the asdfgh", "zxcvb the zxcvb", "qwrtp xcvbn to"])
def test_one_word_of_the_lexicon_does_not_save_mashing(text: str) -> None:
    assert is_gibberish(text)


@pytest.mark.parametrize("text", [
    "asdfgh", "jjjjj", "qwerty123", "qwerty", "qwe qwe qwe", "kdjf slkd fjsl", "hgfdsa lkjh", "xxxxx", "zzz",
    "sdf", "lkjh", "azerty", "?????", "123", "x", "hahahaha", "zzz zzz", "asdf app",
])
def test_keyboard_mash_stays_gibberish(text: str) -> None:
    # "qwerty123", "qwerty", "qwe qwe qwe", "azerty" and "asdf app" were ok before: vowels, no long consonant run.
    assert is_gibberish(text)


@pytest.mark.parametrize("text", [
    "N/A", "n/a", "NA", "n.a.", "none", "None.", "NONE!", "-", ".", "...", "--", "\u2014", "nothing", "Nothing!",
    "no comment", "No comments.", "not applicable", "nil",
])
def test_explicit_non_answers(text: str) -> None:
    assert is_no_answer(text)
    assert [r.status for r in clean([{"id": 1, "text": text}])] == ["no_answer"]


@pytest.mark.parametrize("text", [
    "k.A.", "Keine Angabe", "nichts", "entfällt", "Rien.", "sans objet", "Néant", "nada", "Sin comentarios",
    "niente", "nessun commento", "não se aplica", "N.v.t.", "geen opmerkingen", "brak uwag", "nie dotyczy",
    "Ничего", "hiçbir şey", "特になし", "なし", "ナシ", "无", "暂无", "없음", "해당 없음", "لا يوجد", "ไม่มี",
])
def test_non_answers_in_the_languages_the_pipeline_reads(text: str) -> None:
    # Before: all were "ok" (clustered as answers) and "无" was gibberish. The list was English only, so a German
    # survey's "k.A." rows formed a theme of their own.
    assert is_no_answer(text)
    assert [r.status for r in clean([{"id": 1, "text": text}])] == ["no_answer"]


@pytest.mark.parametrize("text", ["nein", "нет", "non", "NIC", "Nic", "Keine Probleme", "rien à redire sur le service",
                                  "nada mal", "なしでいい", "没有问题"])
def test_answers_in_other_languages_are_not_non_answers(text: str) -> None:
    # "no" / "nein" / "нет" answer a yes-no question; the others are whole answers that contain a listed word.
    assert not is_no_answer(text)


@pytest.mark.parametrize("text", ["好", "贵", "慢", "良", "好!", "慢。"])
def test_one_han_character_is_an_answer(text: str) -> None:
    # Before: gibberish (fewer than two letters). In Chinese one character is a word: good, expensive, slow.
    assert not is_gibberish(text)
    assert [r.status for r in clean([{"id": 1, "text": text}])] == ["ok"]


@pytest.mark.parametrize("text", ["ดี", "มี", "ดี!", "ดู"])
def test_one_thai_letter_with_its_vowel_sign_is_an_answer(text: str) -> None:
    # Before (audit41): gibberish, since WORD_RE stops at the vowel sign (no \w) and left one letter: "ดี" is "good".
    assert not is_gibberish(text)


@pytest.mark.parametrize("text", ["x", "Ж", "ね", "7", "!", "x\u0301"])
def test_one_letter_of_an_alphabet_stays_noise(text: str) -> None:
    assert is_gibberish(text)


@pytest.mark.parametrize("text", ["?????", "no", "nothing else works", "None of the couriers were on time", "TV",
                                  "nan", "n/a n/a n/a", "!!!"])
def test_answers_and_noise_are_not_non_answers(text: str) -> None:
    assert not is_no_answer(text)


def test_non_answers_are_not_duplicates_and_come_before_gibberish() -> None:
    rows = clean([{"id": "a", "text": "N/A"}, {"id": "b", "text": "n/a"}, {"id": "c", "text": "N/A"},
                  {"id": "d", "text": "-"}, {"id": "e", "text": "TV"}, {"id": "f", "text": "TV"},
                  {"id": "g", "text": ""}])
    assert [(r.status, r.duplicate_of) for r in rows] == [
        ("no_answer", None), ("no_answer", None), ("no_answer", None), ("no_answer", None), ("ok", None),
        ("exact_duplicate", "e"), ("empty", None)]


def test_reasons_are_listed_once() -> None:
    assert REASONS == ("empty", "no_answer", "gibberish", "exact_duplicate", "near_duplicate")
    # The list is compared by near_key: its entries are already in that form.
    assert all(k == " ".join(k.split()) and k == k.lower() for k in NO_ANSWERS)
    assert AssignmentOut(response_id=1, bucket="unusable", themes=[], reason="no_answer").reason == "no_answer"
    with pytest.raises(ValidationError):
        AssignmentOut.model_validate({"response_id": 1, "bucket": "unusable", "themes": [], "reason": "bogus"})


def test_the_bundled_sample_is_marked_as_its_labels_say() -> None:
    # Before: "qwe qwe qwe" (labelled gibberish) was ok, "N/A" (labelled empty) ok, "n/a" a near duplicate of it,
    # "-" and "." gibberish.
    root = Path(__file__).resolve().parents[3] / "samples"
    with (root / "feedback.csv").open(encoding="utf-8", newline="") as f:
        items = [{"id": r["id"], "text": r["text"]} for r in csv.DictReader(f)]
    with (root / "feedback_labels.csv").open(encoding="utf-8", newline="") as f:
        labels = {r["id"]: (r["theme"], r["note"]) for r in csv.DictReader(f)}
    for row in clean(items):
        theme, note = labels[str(row.id)]
        if note == "gibberish":
            assert row.status == "gibberish", row
        elif note == "empty":
            assert row.status in ("empty", "no_answer"), row
        elif note.startswith("exact duplicate of "):
            assert (row.status, row.duplicate_of) == ("exact_duplicate", note.removeprefix("exact duplicate of ")), row
        else:
            assert theme != "unusable" and row.status == "ok", row


@pytest.mark.parametrize("text", ["gg ff asdfgh", "kk jj sdfghjk", "jk xd qwrtzp", "np ty fghjkl", "lol xd dfghj",
                                  "ok gg hjkl"])
def test_chat_tokens_of_the_lexicon_do_not_save_mashing(text: str) -> None:
    # Before (audit41): not gibberish, since two different words of the lexicon made any text language, and VADER's
    # lexicon holds chat tokens that mashing types ("gg", "ff", "kk", "jj", "jk", "xd", "np", "ty").
    assert is_gibberish(text)


@pytest.mark.parametrize(("first", "second"), [
    ("ガス", "カス"),  # gas / dregs: kana's voicing mark
    ("ぶた", "ふた"),  # pig / lid
    ("ข่าว", "ขาว"),  # news / white: a Thai tone mark
    ("ดี", "ดู"),  # good / look: Thai vowels above and below
])
def test_marks_that_are_part_of_a_letter_keep_answers_apart(first: str, second: str) -> None:
    # Before (audit41): near_key dropped every combining mark and split words at Thai vowels, so the second answer
    # was a near_duplicate of the first and counted with its themes.
    assert [r.status for r in clean([{"id": 1, "text": first}, {"id": 2, "text": second}])] == ["ok", "ok"]


@pytest.mark.parametrize(("first", "second"), [("café", "cafe"), ("Ёлка", "елка"), ("كَتَبَ", "كتب"), ("ガス!", "ガス")])
def test_accents_still_make_near_duplicates(first: str, second: str) -> None:
    assert [r.status for r in clean([{"id": 1, "text": first}, {"id": 2, "text": second}])] == ["ok", "near_duplicate"]
