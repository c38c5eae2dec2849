"""``client.responses(job, theme=…)``: every response with its text and coding, as a lazy iterator over pages,
against a real host on Azurite running the real thematic pipeline."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.support.thematic_data import feedback
from thematiq_client import ApiError, Client, Job, ResponseRow


def _items() -> list[dict[str, Any]]:
    rng = random.Random(5)
    items, _ = feedback(per_theme=10, seed=5)
    return [{"id": f"c{it['id']}", "text": it["text"],
             "metadata": {"plan": rng.choice(["free", "pro"]), "vip": n % 3 == 0, "seats": n % 4,
                          "tags": ["a", "b"] if n % 2 else ["c"]}}
            for n, it in enumerate(items)]


@pytest.fixture(scope="module")
def finished(client_host: Any) -> tuple[Client, Job, list[dict[str, Any]], dict[str, Any]]:
    client = Client(client_host.url + "/api", key=client_host.env["DEVHOST_FUNCTION_KEY"])
    items = _items()
    job = client.wait(client.submit("thematic", items, {"llm": "off", "min_theme_size": 3}), timeout=300)
    assert job.status == "succeeded", job
    return client, job, items, client.result(job)


def test_every_row_in_submitted_order_with_text_metadata_and_themes(finished: Any) -> None:
    client, job, items, doc = finished
    rows = list(client.responses(job, limit=7))
    assert all(isinstance(r, ResponseRow) for r in rows)
    assert [r.id for r in rows] == [it["id"] for it in items]
    assert [r.text for r in rows] == [it["text"] for it in items]
    assert [r.metadata for r in rows] == [it["metadata"] for it in items]
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    for r in rows:
        assert [t.theme_id for t in r.themes] == [t["theme_id"] for t in by_id[r.id]["themes"]]
        assert r.bucket == by_id[r.id]["bucket"]


def test_pages_are_fetched_only_when_the_iterator_gets_there(finished: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, job, items, _ = finished
    calls: list[str] = []
    real = client.request

    def counting(method: str, path: str, *a: Any, **kw: Any) -> Any:
        calls.append(path)
        return real(method, path, *a, **kw)

    monkeypatch.setattr(client, "request", counting)
    it = client.responses(job, limit=5)
    assert calls == []
    first = [next(it) for _ in range(5)]
    assert len(calls) == 1 and [r.id for r in first] == [x["id"] for x in items[:5]]
    next(it)
    assert len(calls) == 2
    assert len(list(it)) == len(items) - 6
    assert len(calls) == -(-len(items) // 5)


def test_filters_match_the_result(finished: Any) -> None:
    client, job, items, doc = finished
    theme = max(doc["themes"], key=lambda t: t["count"])["id"]
    want = [a["response_id"] for a in doc["assignments"] if any(t["theme_id"] == theme for t in a["themes"])]
    assert [r.id for r in client.responses(job, theme=theme)] == want
    pro = [it["id"] for it in items if it["metadata"]["plan"] == "pro"]
    assert [r.id for r in client.responses(job, metadata={"plan": "pro"})] == pro
    page = next(client.response_pages(job, theme=theme, metadata={"plan": "pro"}, limit=500))
    assert page.total == len(set(want) & set(pro)) and page.next_cursor is None


def test_metadata_filters_take_the_values_as_submitted(finished: Any) -> None:
    # The client sent str(value): True went as "True", 2.0 as "2.0" and a list as Python's repr, none of which is
    # how the service writes them ("true", "2", JSON), so these filters matched nothing.
    client, job, items, _ = finished
    for key, value in (("vip", True), ("vip", False), ("seats", 2.0), ("seats", 3), ("tags", ["a", "b"])):
        want = [it["id"] for it in items if it["metadata"][key] == value]
        assert want, (key, value)
        assert [r.id for r in client.responses(job, metadata={key: value})] == want, (key, value)


def test_bad_filter_and_another_tenant(finished: Any, client_host: Any) -> None:
    client, job, _, _ = finished
    with pytest.raises(ApiError) as err:
        list(client.responses(job, theme="t999"))
    assert err.value.status == 422 and [e["field"] for e in err.value.errors] == ["theme"]
    other = Client(client_host.url + "/api", key=client_host.env["DEVHOST_FUNCTION_KEY"], tenant="someone-else")
    with pytest.raises(ApiError) as err:
        next(other.responses(job))
    assert err.value.status == 404


def test_each_theme_of_a_row_names_its_broad_theme_multi_label_too(client_host: Any) -> None:
    # 2026-12-08: a row named only its primary theme's broad theme (`broad`); each theme now names its own, so a
    # multi-label response's every broad theme is on the row (the CLI's CSV writes them all, as the service's does).
    client = Client(client_host.url + "/api", key=client_host.env["DEVHOST_FUNCTION_KEY"])
    items = _items()
    # Answers that say two things (one answer of each of two themes, joined), so some get a second theme.
    items += [{"id": f"m{k}", "text": f"{items[k]['text']} Also, {items[-1 - k]['text'].lower()}"} for k in range(12)]
    job = client.wait(client.submit("thematic", items, {"llm": "off", "min_theme_size": 3, "multi_label": True}),
                      timeout=300)
    assert job.status == "succeeded", job
    doc = client.result(job)
    parent = {t["id"]: t.get("parent") for t in doc["themes"]}
    broad_is_parents = doc["levels"]["broad"] == "parents"
    labels = {t["id"]: t["label"] for t in doc["themes"]} | {p["id"]: p["label"] for p in doc.get("parents") or []}
    rows = list(client.responses(job))
    assert any(len(r.themes) > 1 for r in rows)
    for r in rows:
        if r.themes:
            assert r.themes[0].broad == r.broad
        for t in r.themes:
            want = parent[t.theme_id] if broad_is_parents else t.theme_id
            assert t.broad is not None and (t.broad.id, t.broad.label) == (want, labels[want]), (r.id, t)
