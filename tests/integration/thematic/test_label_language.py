"""``params.label_language`` (issue 17): with an LLM, theme labels and descriptions are asked for in a chosen
language while the quotes stay in their own; without one, asking is a 422 (tests/integration/platform/test_api.py)."""

from __future__ import annotations

from pipelines.thematic import PIPELINE, ThematicParams
from pipelines.thematic.result import ThematicResult
from pipelines.thematic.run import run_with
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeContext, FakeLLM


def _label_prompts(llm: FakeLLM) -> list[str]:
    return [messages[0]["content"] for purpose, messages in llm.calls if purpose == "thematic.label"]


def test_labels_are_asked_for_in_the_chosen_language_and_quotes_stay_as_written() -> None:
    items, _ = feedback(per_theme=15, seed=3)
    texts = {str(it["id"]): it["text"] for it in items}
    german = FakeLLM()
    doc = run_with(FakeContext(), ThematicParams(llm="auto", label_language="de"), PIPELINE.validate_input(items),
                   client=german)
    ThematicResult.model_validate(doc)
    prompts = _label_prompts(german)
    assert prompts and all("in German, whatever the language of the examples" in p for p in prompts)
    assert all(t["labelled_by"] == "llm" for t in doc["themes"])
    for theme in doc["themes"]:
        for quote in theme["quotes"]:
            assert quote["text"] == texts[str(quote["response_id"])]  # never translated
    default = FakeLLM()
    run_with(FakeContext(), ThematicParams(llm="auto"), PIPELINE.validate_input(items), client=default)
    assert _label_prompts(default) and not any("Write the label" in p for p in _label_prompts(default))
