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
