"""Route template matching, without a server."""

from __future__ import annotations

from devhost.routes import Route, split_path


def m(template: str, path: str) -> dict[str, str] | None:
    return Route.parse(template).match(split_path(path))


def test_literal_and_params() -> None:
    assert m("items/{id}", "items/7") == {"id": "7"}
    assert m("items/{id}", "ITEMS/7") == {"id": "7"}  # literals are case-insensitive
    assert m("items/{id}", "items") is None
    assert m("items/{id}", "items/7/x") is None


def test_optional_default_catch_all() -> None:
    assert m("items/{id?}", "items") == {}
    assert m("items/{id=5}", "items") == {"id": "5"}
    assert m("files/{*path}", "files/a/b%20c") == {"path": "a/b c"}
    assert m("files/{*path}", "files") == {}


def test_constraints() -> None:
    assert m("x/{id:int}", "x/12") == {"id": "12"}
    assert m("x/{id:int}", "x/ab") is None
    assert m("x/{id:guid}", "x/6f1e1c3e-6a4b-4d5e-9a3c-0e4f1a2b3c4d") is not None
    assert m("x/{id:guid}", "x/nope") is None
    assert m("x/{s:alpha:minlength(2)}", "x/ab") == {"s": "ab"}
    assert m("x/{s:alpha:minlength(2)}", "x/a") is None
    assert m("x/{n:int:range(1,5)}", "x/6") is None
    assert m("x/{s:regex(^a+$)}", "x/aaa") == {"s": "aaa"}
    assert m("x/{s:regex(^a+$)}", "x/ab") is None
    assert m("x/{n:int?}", "x") == {}


def test_precedence_orders_literals_first() -> None:
    routes = sorted([Route.parse("{a}/{b}"), Route.parse("echo/{id:int}"), Route.parse("echo/special")],
                    key=lambda r: r.precedence)
    assert [r.template for r in routes] == ["echo/special", "echo/{id:int}", "{a}/{b}"]


def test_host_json_overrides_from_app_settings() -> None:
    """``AzureFunctionsJobHost__a__b`` app settings override host.json, as in Azure."""
    from devhost.config import apply_overrides

    host_json = {"extensions": {"queues": {"batchSize": 4}}}
    apply_overrides(host_json, {
        "AzureFunctionsJobHost__extensions__queues__BatchSize": "1",
        "AzureFunctionsJobHost__extensions__queues__newBatchThreshold": "0",
        "UNRELATED": "x",
    })
    assert host_json == {"extensions": {"queues": {"batchSize": "1", "newBatchThreshold": "0"}}}
