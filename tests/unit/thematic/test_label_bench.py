"""The label bench measures both sides alike: BERTopic's words at our mean label length (not rounded up), and
a theme's majority label chosen the same way in every process (ties by name, not by string hashes)."""

from __future__ import annotations

import pytest

from tests.support.bench import load_bench


def test_bertopic_gets_our_mean_label_length_not_a_word_more() -> None:
    labels = load_bench("labels")
    hits = {1: 0.6, 2: 0.8, 3: 0.9, 4: 0.95}
    # 2.25 words on average is a mix of 75 % 2-word and 25 % 3-word labels: 0.825, not the 3-word 0.9.
    assert labels.at_length(hits, 2.25) == pytest.approx(0.825)
    assert labels.at_length(hits, 2.0) == pytest.approx(0.8)
    assert labels.at_length(hits, 0.7) == pytest.approx(0.6) and labels.at_length(hits, 5.0) == pytest.approx(0.95)


def test_a_tied_majority_is_broken_by_name_in_every_process() -> None:
    thematic = load_bench("thematic")
    # Twenty two-way ties: max() over a set picked the set's first, which follows PYTHONHASHSEED, so the same
    # labels scored differently run to run. Each tie now goes to the alphabetically first name.
    for n in range(20):
        first, second = f"alpha{n}_card", f"beta{n}_pin"
        truth = [second, first, second, first]
        pred = ["t1"] * 4
        assert thematic.label_hits(truth, pred, {"t1": "Card"}) == 1.0, n
        assert thematic.label_hits(truth, pred, {"t1": "Pin"}) == 0.0, n


def test_content_words_count_no_stopword_and_no_number() -> None:
    # At the same word budget the side with more content words has more chances to hit (2026-12-03).
    labels = load_bench("labels")
    assert labels.content_words("Change my pin") == 2 and labels.content_words("Change pin") == 2
    assert labels.content_words("long does it take") == 2 and labels.content_words("how to 25") == 0


def test_a_label_cut_before_its_last_word_is_counted_on_the_raw_texts() -> None:
    # The bench's count of cut-off labels (2026-12-03): the label's last word is followed by one same word (a content
    # word or a verb particle) in at least half of its uses in the theme's texts.
    labels = load_bench("labels")
    apple = ["How do I top up using my Apple Watch?", "top up using my apple watch", "Can I use my Apple Watch?",
             "Apple Pay, please"]
    assert labels.cut_off("Top up using apple", apple) == "watch"
    assert labels.cut_off("Cheque to top", ["a cheque to top up my account", "cheque to top up", "top it up"]) == "up"
    twice = ["charged twice for it", "charged twice for coffee", "charged twice"]
    assert labels.cut_off("Charged twice", twice) is None
    assert labels.cut_off("Card", ["card payment", "card details", "card pin", "my card"]) is None
    assert labels.cut_off("Virtual", ["virtual cards", "a virtual card", "virtual card now"]) == "card"


def test_a_stopword_shared_with_the_name_is_no_content_word_hit() -> None:
    # BERTopic's CountVectorizer keeps stopwords: its top words "you", "what" matched CLINC150's `are_you_a_bot`,
    # `what_is_your_name` on the measure. The content-word measure (2026-12-08) counts only a shared word that
    # is no stopword; a name of stopwords only ("no", "yes") is matched on all its words.
    labels = load_bench("labels")
    thematic = load_bench("thematic")
    truth = ["are_you_a_bot"] * 3 + ["no"] * 3
    pred = ["t1"] * 3 + ["t2"] * 3
    stop = {"t1": "you are", "t2": "no"}
    assert thematic.label_hits(truth, pred, stop) == 1.0
    assert labels.content_hits(truth, pred, stop) == 0.5
    assert labels.content_hits(truth, pred, {"t1": "Talking to a bot", "t2": "No thanks"}) == 1.0
    assert labels.content_hits(truth, pred, {"t1": "Robots", "t2": "Yes"}) == 0.0


def test_name_style_tells_a_covered_name_from_a_distinctive_one() -> None:
    # Banking77-like names are the word every text of a theme says, also said in the other themes ("card" in
    # card_arrival); CLINC150-like names the word that sets the theme apart, said by fewer of its texts ("pin").
    labels = load_bench("labels")
    covered = {
        "card_arrival": ["card post", "card post", "card", "card"],
        "card_fee": ["card bill", "card bill", "card", "card"],
        "card_limit": ["card cap", "card cap", "card", "card"],
    }
    assert labels.name_style(covered) == (3, 1.0, 0.0)
    distinct = {
        "pin_change": ["account pin", "account pin", "account", "account"],
        "freeze_request": ["account freeze", "account freeze", "account", "account"],
        "balance_query": ["account balance", "account balance", "account", "account"],
    }
    assert labels.name_style(distinct) == (3, 0.0, 1.0)
