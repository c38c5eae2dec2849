"""HTTP trigger: the API's OpenAPI 3.1 document (``shared.api.openapi``).

Auth level ``function`` like every route except health: the issue allows
anonymous access only where a probe needs it, and the document is for clients
that hold a key anyway.
"""

from __future__ import annotations

import azure.functions as func

from shared.api.http import api_handler, json_response
from shared.api.openapi import document

bp = func.Blueprint()  # type: ignore[no-untyped-call]


@bp.function_name("openapi")
@bp.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
@api_handler
def openapi(req: func.HttpRequest) -> func.HttpResponse:
    return json_response(200, document())
