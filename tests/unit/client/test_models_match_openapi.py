"""The client's models and the service's OpenAPI components describe the same JSON (no host needed)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import thematiq_client
from shared.api.openapi import document
from thematiq_client import models

REF = "#/components/schemas/{model}"
#: Documentation and strictness differ on purpose: the client ignores unknown fields (forward compatible).
_IGNORED = {"title", "description", "additionalProperties", "default"}


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if k not in _IGNORED}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def _client_schemas() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model in (models.SubmitBody, models.JobView, models.JobList, models.ResponseList, models.Health, models.Problem):
        schema = model.model_json_schema(ref_template=REF, by_alias=True)
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    return out


def test_every_component_has_a_client_model_with_the_same_schema() -> None:
    server = document()["components"]["schemas"]
    client = _client_schemas()
    assert set(server) == set(client), "a component without a client model, or the reverse"
    for name in server:
        assert _norm(client[name]) == _norm(server[name]), f"{name} differs between client and OpenAPI"


def test_client_reads_what_the_server_writes() -> None:
    from datetime import UTC, datetime

    from shared.api.views import public
    from shared.core.jobs import Job, Status

    now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    job = Job(tenant="t", id="f" * 28, pipeline="echo", status=Status.QUEUED, params={"a": 1}, created_at=now,
              available_at=now, max_attempts=3, callback_url="https://example.com/h", callback_status="pending")
    parsed = thematiq_client.Job.model_validate(public(job, "/api"))
    assert parsed.created_at == now and parsed.callback is not None and parsed.callback.status == "pending"
    # Unknown fields from a newer service are ignored, not an error.
    assert thematiq_client.Job.model_validate({**public(job, "/api"), "new_field": 1}).id == job.id


@pytest.mark.parametrize("name", ["Job", "Status", "Problem", "Client", "ApiError", "WaitTimeout"])
def test_public_names(name: str) -> None:
    assert hasattr(thematiq_client, name)
    obj = getattr(thematiq_client, name)
    assert obj is not None and (not isinstance(obj, type) or not issubclass(obj, BaseModel) or obj.model_fields)


def test_webhook_secret_models_match_the_secrets_routes() -> None:
    """The secrets routes' bodies are inline schemas, not components: the client's models match them too."""
    paths = document()["paths"]
    created = paths["/webhooks/secrets"]["post"]["responses"]
    listed = paths["/webhooks/secrets"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    for status in ("201", "200"):
        server = created[status]["content"]["application/json"]["schema"]
        assert _norm(models.WebhookSecret.model_json_schema()) == _norm(server)
    schema = models.WebhookSecretList.model_json_schema(ref_template=REF)
    info = schema.pop("$defs")["WebhookSecretInfo"]
    assert _norm(info) == _norm(listed["properties"]["items"]["items"])
    schema["properties"]["items"]["items"] = listed["properties"]["items"]["items"]
    assert _norm(schema) == _norm(listed)
