"""Fast unit tests of the pure parts: params, validation, cleaning, PII, keywords, clustering, renderers."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from pipelines.thematic import PIPELINE, ThematicParams, check_params
from pipelines.thematic.clean import clean, is_gibberish, normalise
from pipelines.thematic.cluster import cluster, silhouette, spherical_kmeans
from pipelines.thematic.keywords import ctfidf, label_from_keywords
from pipelines.thematic.pii import luhn_ok, redact
from pipelines.thematic.validate import validate_input
from shared.core.errors import ValidationFailed


def test_params_defaults_and_forbid_extra() -> None:
    p = ThematicParams()
    assert p.num_themes == "auto" and p.llm == "auto" and p.language == "en" and p.redact_pii is None
    with pytest.raises(ValidationError):
        ThematicParams.model_validate({"bogus": 1})
    with pytest.raises(ValidationError):
        ThematicParams.model_validate({"language": "xx"})
    with pytest.raises(ValidationError):
        ThematicParams.model_validate({"num_themes": 50, "max_themes": 10})
    with pytest.raises(ValidationError):
        ThematicParams.model_validate({"seed_themes": [{"name": "A"}, {"name": "a"}]})
    assert ThematicParams.model_validate({"num_themes": 4}).num_themes == 4
    # The automatic count's cap adapts to the data unless max_themes is given (cluster.auto_cap).
    assert p.max_themes is None and ThematicParams.model_validate({"num_themes": 150}).num_themes == 150


_INT_PARAMS = ["num_themes", "max_themes", "min_theme_size", "seed", "min_group_size", "fanout_min_responses",
               "fanout_chunk_size"]


@pytest.mark.parametrize("field", _INT_PARAMS)
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_no_count_a_422_naming_the_field(field: str, value: bool) -> None:
    # Lax pydantic took true as 1: {"num_themes": true} (or the CLI's --param num_themes=true) ran a one-theme job.
    with pytest.raises(ValidationError) as caught:
        ThematicParams.model_validate({field: value})
    assert [e["loc"] for e in caught.value.errors()] == [(field,)]
    assert ThematicParams.model_validate({field: 3}).model_dump()[field] == 3  # a number still is one


def test_llm_required_without_provider_is_422(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "none")
    with pytest.raises(ValidationFailed) as e:
        check_params(ThematicParams(llm="required"))
    assert e.value.errors[0]["field"] == "params.llm"
    check_params(ThematicParams(llm="auto"))


def test_validate_input_names_fields() -> None:
    with pytest.raises(ValidationFailed) as e:
        validate_input([{"id": 1, "text": "a"}, {"id": "1", "text": "b"}, {"id": 2, "text": 5}, {"text": "x"}])
    fields = [err["field"] for err in e.value.errors]
    assert fields == ["input[1].id", "input[2].text", "input[3].id"]
    with pytest.raises(ValidationFailed):
        validate_input([])
    with pytest.raises(ValidationFailed):
        validate_input({"a": 1})
    with pytest.raises(ValidationFailed) as e:
        validate_input([{"id": 1, "text": "x" * 20_001}])
    assert e.value.errors[0]["field"] == "input[0].text"
    ok = validate_input({"responses": [{"id": "a", "text": "hi", "metadata": {"k": 1}}]})
    assert ok == [{"id": "a", "text": "hi", "metadata": {"k": 1}}]
    assert PIPELINE.validate_input is validate_input


def test_clean_marks_empty_gibberish_duplicates() -> None:
    rows = clean([
        {"id": 1, "text": "  Great   service\u200b "},
        {"id": 2, "text": "Great service"},
        {"id": 3, "text": "great SERVICE!!"},
        {"id": 4, "text": "   "},
        {"id": 5, "text": "asdfghjkl qwrtzxcv"},
        {"id": 6, "text": "ｆｕｌｌｗｉｄｔｈ text is fine"},
    ])
    assert [r.status for r in rows] == ["ok", "exact_duplicate", "near_duplicate", "empty", "gibberish", "ok"]
    assert rows[1].duplicate_of == 1 and rows[2].duplicate_of == 1
    assert rows[5].text == "fullwidth text is fine"
    assert normalise("a\n\tb") == "a b"


@pytest.mark.parametrize("text", ["!!!", "123 456", "zzzzzzzz", "xkcdq brrrrt pfffft", "sdfghj"])
def test_gibberish(text: str) -> None:
    assert is_gibberish(text)


@pytest.mark.parametrize("text", ["ok", "Too expensive", "The app crashes", "WiFi is down", "meh"])
def test_not_gibberish(text: str) -> None:
    assert not is_gibberish(text)


@pytest.mark.parametrize("text", [
    "Доставка опоздала на час", "食べ物が冷たかった", "配送太慢了", "التوصيل متأخر جدا", "배달이 너무 늦었어요",
    "การจัดส่งช้ามาก", "Η παράδοση άργησε", "Die App stürzt ständig ab", "TV Доставка опоздала",
])
def test_answers_in_other_scripts_are_not_gibberish(text: str) -> None:
    # The vowel test knows only the Latin alphabet; before, every answer in these scripts was unusable and a
    # Russian survey failed with "no usable responses".
    assert not is_gibberish(text)


@pytest.mark.parametrize("text", ["ааааааа", "Доставка sdfghj", "ммм ммм ммм"])
def test_mashing_in_other_scripts_is_still_gibberish(text: str) -> None:
    assert is_gibberish(text)


def test_pii_redaction() -> None:
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    text, counts = redact("Mail me at jo.doe+x@example.co.uk or call +44 20 7946 0958; card 4111 1111 1111 1111, order 4111111111111112")
    assert "[EMAIL]" in text and "[PHONE]" in text and "[CARD]" in text
    assert "jo.doe" not in text and "4111 1111" not in text
    assert counts["email"] == 1 and counts["card"] == 1
    # A number failing Luhn is not a card (it may still look like a phone number).
    assert "[CARD]" not in redact("order 4111111111111112")[0]
    assert redact("I waited 3 days and paid 25 pounds")[0] == "I waited 3 days and paid 25 pounds"


def test_ctfidf_and_labels() -> None:
    groups = [
        ["customer service was rude", "customer service never answered", "rude customer service staff"],
        ["price too high", "the price is high", "high price again"],
    ]
    kw = ctfidf(groups)
    assert kw[0][0][0] == "customer service"
    assert "price" in [w for w, _ in kw[1][:3]]
    used: set[str] = set()
    a = label_from_keywords([w for w, _ in kw[0]], used)
    assert a.startswith("Customer service") and "cluster" not in a.lower()
    assert label_from_keywords([w for w, _ in kw[0]], used) != a  # unique
    assert label_from_keywords([], set()) == "Miscellaneous"


def _blobs(k: int, per: int, dim: int = 48, noise: float = 0.35, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim))
    x = np.concatenate([c + noise * rng.normal(size=(per, dim)) * np.linalg.norm(c) / np.sqrt(dim) for c in centres])
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    return x, np.repeat(np.arange(k), per)


@pytest.mark.parametrize(("k", "per"), [(3, 40), (6, 25), (15, 12)])
def test_auto_k_recovers_blob_count(k: int, per: int) -> None:
    x, y = _blobs(k, per)
    res = cluster(x, num_themes=None, max_themes=30, min_theme_size=3, seed=0)
    assert res.k == k, res.explanation
    assert res.criterion == "silhouette" and res.scores
    # Each found cluster is pure.
    for t in range(res.k):
        assert len(set(y[res.labels == t])) == 1


def test_cluster_fixed_and_tiny() -> None:
    x, _ = _blobs(4, 10)
    assert cluster(x, num_themes=4, max_themes=10, min_theme_size=1, seed=0).k == 4
    one = cluster(x[:3], num_themes=None, max_themes=10, min_theme_size=5, seed=0)
    assert one.k == 1 and (one.labels == 0).all()
    labels, cents = spherical_kmeans(x, 4, seed=1)
    assert cents.shape == (4, x.shape[1]) and silhouette(x, labels) > 0.3


def test_keyword_label_does_not_repeat_a_stem() -> None:
    from pipelines.thematic.keywords import label_from_keywords

    assert label_from_keywords(["fees", "fee", "delivery fee", "prices"]) == "Fees & prices"
    assert label_from_keywords(["crashes", "crash", "checkout"]) == "Crashes & checkout"
    assert label_from_keywords(["late", "delivery"]) == "Late & delivery"
