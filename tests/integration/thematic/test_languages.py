"""Languages: detection, keyword tokens and stopwords per language, and one mixed-language survey."""

from __future__ import annotations

import pytest

from pipelines.thematic import PIPELINE, ThematicParams
from pipelines.thematic import lang as L
from pipelines.thematic.keywords import TOKEN_RE, ctfidf, terms
from pipelines.thematic.stopwords import EN, stopwords_for
from tests.support.thematic_fakes import FakeContext

# Parallel answers (written for this test): the same five themes in English and German, pair i ↔ i.
THEMES_EN = {
    "delivery": [
        "My parcel arrived two weeks late",
        "The delivery took far too long",
        "Shipping was very slow this time",
        "The courier delivered my order a week after the promised date",
        "I waited ages for the package to arrive",
        "Delivery was delayed again and nobody told me",
        "The order came much later than expected",
        "Slow shipping, the box arrived late",
    ],
    "price": [
        "The prices are far too high",
        "It is much too expensive for what you get",
        "The subscription costs too much money",
        "Your prices went up again, that is too expensive",
        "Cheaper competitors offer the same for less money",
        "The monthly fee is too high for me",
        "I cannot afford these prices any more",
        "Too expensive, please lower the price",
    ],
    "staff": [
        "The staff in the shop were very friendly",
        "The employee on the phone was really helpful and kind",
        "Customer service was friendly and solved my problem",
        "The support agent was polite and patient",
        "Very kind and helpful staff",
        "The saleswoman gave me great advice",
        "Friendly team, they helped me quickly",
        "The service desk staff were extremely helpful",
    ],
    "app": [
        "The app crashes every time I open it",
        "The app keeps freezing on my phone",
        "After the update the app does not start any more",
        "The mobile app is full of bugs",
        "The app crashes when I try to log in",
        "The application is very slow and crashes often",
        "I cannot use the app, it closes immediately",
        "The new app version crashes constantly",
    ],
    "refund": [
        "I am still waiting for my refund",
        "I returned the item but never got my money back",
        "The refund has not arrived after a month",
        "They promised a refund but nothing happened",
        "My money was not refunded for the cancelled order",
        "I want my money back for the returned goods",
        "The reimbursement is taking far too long",
        "Still no refund for my return",
    ],
}
THEMES_DE = {
    "delivery": [
        "Mein Paket kam zwei Wochen zu spät an",
        "Die Lieferung hat viel zu lange gedauert",
        "Der Versand war diesmal sehr langsam",
        "Der Kurier hat meine Bestellung eine Woche nach dem versprochenen Termin geliefert",
        "Ich habe ewig auf das Paket gewartet",
        "Die Lieferung hat sich wieder verzögert und niemand hat mir Bescheid gesagt",
        "Die Bestellung kam viel später als erwartet",
        "Langsamer Versand, der Karton kam zu spät",
    ],
    "price": [
        "Die Preise sind viel zu hoch",
        "Es ist viel zu teuer für das, was man bekommt",
        "Das Abonnement kostet zu viel Geld",
        "Ihre Preise sind schon wieder gestiegen, das ist zu teuer",
        "Günstigere Konkurrenten bieten dasselbe für weniger Geld",
        "Die monatliche Gebühr ist mir zu hoch",
        "Ich kann mir diese Preise nicht mehr leisten",
        "Zu teuer, bitte senken Sie den Preis",
    ],
    "staff": [
        "Die Mitarbeiter im Laden waren sehr freundlich",
        "Der Mitarbeiter am Telefon war wirklich hilfsbereit und nett",
        "Der Kundenservice war freundlich und hat mein Problem gelöst",
        "Die Supportmitarbeiterin war höflich und geduldig",
        "Sehr nettes und hilfsbereites Personal",
        "Die Verkäuferin hat mich toll beraten",
        "Freundliches Team, sie haben mir schnell geholfen",
        "Die Mitarbeiter am Serviceschalter waren äußerst hilfsbereit",
    ],
    "app": [
        "Die App stürzt jedes Mal ab, wenn ich sie öffne",
        "Die App friert auf meinem Handy ständig ein",
        "Nach dem Update startet die App nicht mehr",
        "Die mobile App ist voller Fehler",
        "Die App stürzt ab, wenn ich mich anmelden will",
        "Die Anwendung ist sehr langsam und stürzt oft ab",
        "Ich kann die App nicht benutzen, sie schließt sich sofort",
        "Die neue App-Version stürzt ständig ab",
    ],
    "refund": [
        "Ich warte immer noch auf meine Rückerstattung",
        "Ich habe den Artikel zurückgeschickt, aber nie mein Geld zurückbekommen",
        "Die Rückerstattung ist nach einem Monat immer noch nicht da",
        "Sie haben eine Erstattung versprochen, aber nichts ist passiert",
        "Mein Geld für die stornierte Bestellung wurde nicht erstattet",
        "Ich möchte mein Geld für die zurückgesendete Ware zurück",
        "Die Erstattung dauert viel zu lange",
        "Immer noch keine Rückerstattung für meine Rücksendung",
    ],
}


def test_detection_is_confident_or_undetermined() -> None:
    assert L.detect("The app keeps crashing when I upload photos") == "en"
    assert L.detect("Die App stürzt ständig ab, wenn ich Fotos hochlade") == "de"
    assert L.detect("L'application plante sans cesse quand j'envoie des photos") == "fr"
    assert L.detect("Obsługa klienta była bardzo pomocna") == "pl"
    assert L.detect("应用程序一直崩溃，客服也不回复") == "zh"
    assert L.detect("アプリがクラッシュし続けます") == "ja"
    assert L.detect("ok") == L.UNDETERMINED
    assert not L.needs_multilingual(["en"] * 99 + ["de"])  # one stray detection does not switch encoders
    assert L.needs_multilingual(["en"] * 90 + ["de"] * 10)


def test_tokens_english_unchanged_other_languages_unicode_and_cjk_bigrams() -> None:
    text = "Customer-service wasn't great; the app's 2 crashes & fees!"
    assert L.tokenize(text) == [t.strip("'-") for t in TOKEN_RE.findall(text.lower())]
    assert L.tokenize("Die Rückerstattung für größere Bestellungen", "de") == [
        "die",
        "rückerstattung",
        "für",
        "größere",
        "bestellungen",
    ]
    assert L.tokenize("客服态度很好", "zh") == ["客服", "服态", "态度", "度很", "很好"]
    with L.keyword_languages(("en", "zh")):
        assert "客服" in terms("客服态度很好") and not any(" " in t for t in terms("客服态度很好"))
    # Outside a job the English defaults apply again.
    assert L.current_languages() == ("en",)


@pytest.mark.parametrize(
    ("lang", "word"),
    [("de", "und"), ("fr", "les"), ("es", "los"), ("it", "della"), ("pt", "não"), ("nl", "het"), ("pl", "się")],
)
def test_stopwords_per_language(lang: str, word: str) -> None:
    sw = stopwords_for(lang)
    assert word in sw and len(sw) > 100
    assert stopwords_for("en") == EN and stopwords_for("en", lang) >= EN | sw


def test_german_keywords_drop_german_stopwords() -> None:
    groups = [THEMES_DE["app"], THEMES_DE["price"]]
    with L.keyword_languages(("en", "de")):
        kws = ctfidf(groups, top=5)
    words = {w for g in kws for term, _ in g for w in term.split()}
    assert {"app"} & words and not words & {"die", "der", "ist", "und", "zu"}


def test_plan_detects_only_under_auto() -> None:
    assert L.plan("en", "fast", ["Die App stürzt ab"] * 5) == L.Plan("fast", ("en",), None)
    assert L.plan("de", "fast", ["x"]).encoder == "multilingual"
    english = [t for ts in THEMES_EN.values() for t in ts]
    p = L.plan("auto", "quality", english)
    assert p.encoder == "quality" and p.detected is not None and p.detected.get("en", 0) >= 35
    mixed = english + [t for ts in THEMES_DE.values() for t in ts]
    p = L.plan("auto", "fast", mixed)
    assert p.encoder == "multilingual" and p.keyword_languages == ("en", "de")


def test_mixed_language_survey_gives_one_set_of_themes() -> None:
    en = [t for ts in THEMES_EN.values() for t in ts]
    de = [t for ts in THEMES_DE.values() for t in ts]
    items = [{"id": f"en{i}", "text": t} for i, t in enumerate(en)] + [
        {"id": f"de{i}", "text": t} for i, t in enumerate(de)
    ]
    params = ThematicParams(llm="off", language="auto", min_theme_size=3)
    doc = PIPELINE.run(FakeContext(), params, PIPELINE.validate_input(items))
    model = doc["run"]["embedding_model"]
    assert model["encoder"] == "multilingual" and set(model["languages"]) >= {"en", "de"}
    primary = {a["response_id"]: (a["themes"][0]["theme_id"] if a["themes"] else "other") for a in doc["assignments"]}
    same = sum(primary[f"en{i}"] == primary[f"de{i}"] != "other" for i in range(len(en)))
    assert same >= 0.9 * len(en), f"only {same}/{len(en)} parallel pairs share a theme"
    # Not one theme per language: every theme holds both languages.
    for th in doc["themes"]:
        members = [rid for rid, t in primary.items() if t == th["id"]]
        assert any(m.startswith("en") for m in members) and any(m.startswith("de") for m in members)
    assert len(doc["themes"]) <= 2 * len(THEMES_EN)
