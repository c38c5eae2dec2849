"""A typed Python client of the Thematiq jobs API (stdlib + pydantic).

    from thematiq_client import Client
    client = Client("https://contoso.azure-api.net/thematiq", subscription_key="...")
    job = client.wait(client.submit("thematic", [{"id": "r1", "text": "Delivery was late"}]))
    print(client.result(job, format="md"))
"""

from __future__ import annotations

__version__ = "0.2.0"

from .client import (
    Client,
    Codebook,
    MetadataValue,
    Poll,
    RatingRange,
    ResponseFilters,
    ScoreParam,
    ScoreScale,
    SentimentFromParam,
    Submitted,
    metadata_text,
    parse_retry_after,
)
from .errors import ApiError, ThematiqError, TransportError, WaitTimeout
from .models import (
    CallbackView,
    ErrorView,
    Health,
    Job,
    JobList,
    JobView,
    Page,
    Problem,
    ProgressView,
    ResponseList,
    ResponseRow,
    Status,
    WebhookSecret,
    WebhookSecretInfo,
)

__all__ = [
    "ApiError",
    "CallbackView",
    "Client",
    "Codebook",
    "ErrorView",
    "Health",
    "Job",
    "JobList",
    "JobView",
    "MetadataValue",
    "Page",
    "Poll",
    "Problem",
    "ProgressView",
    "RatingRange",
    "ResponseFilters",
    "ResponseList",
    "ResponseRow",
    "ScoreParam",
    "ScoreScale",
    "SentimentFromParam",
    "Status",
    "Submitted",
    "ThematiqError",
    "TransportError",
    "WaitTimeout",
    "WebhookSecret",
    "WebhookSecretInfo",
    "metadata_text",
    "parse_retry_after",
]
