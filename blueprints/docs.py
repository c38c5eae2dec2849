"""HTTP triggers: the API's OpenAPI 3.1 document (``shared.api.openapi``) and the page that renders it.

Auth level ``function`` like every route except health: the issue allows
anonymous access only where a probe needs it, and the document is for clients
that hold a key anyway.

``GET /api/docs`` is Swagger UI (npm ``swagger-ui-dist``, vendored under
``web/static/vendor/swagger-ui`` and checked by sha256) inlined into one HTML
response the way the dashboard is (``blueprints/ui.py``): no CDN, no asset URL
that would need the key, and a Content-Security-Policy that admits exactly the
inlined blocks by hash and same-origin ``fetch``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import azure.functions as func

from shared.api.http import AUTH_LEVEL, api_handler, html_page, json_response
from shared.api.openapi import document
from shared.api.pages import Inline, Page, PageCache, inline

bp = func.Blueprint()  # type: ignore[no-untyped-call]


@bp.function_name("openapi")
@bp.route(route="openapi.json", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def openapi(req: func.HttpRequest) -> func.HttpResponse:
    return json_response(200, document())


STATIC_DIR = Path(__file__).resolve().parent.parent / "web" / "static"
VENDOR = "vendor/swagger-ui/"
#: The vendored files, pinned: a changed file is refused rather than served (see its README.md).
PINNED = {
    "swagger-ui-bundle.js": "e6a898692f2d768e807c3ba4626068a69a2c5dd960dd6c76f3e4d3a3de180af2",
    "swagger-ui.css": "5ed08757e53da3e026d6cbecc61fe5d43585c9560b302d534ad56692519a273d",
}
_TAGS = {
    "css": f'<link rel="stylesheet" href="{VENDOR}swagger-ui.css">',
    "bundle": f'<script src="{VENDOR}swagger-ui-bundle.js"></script>',
    "init": '<script src="docs.js"></script>',
}


def _vendored(name: str, static_dir: Path) -> str:
    data = (static_dir / VENDOR / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != PINNED[name]:
        raise RuntimeError(f"{VENDOR}{name} does not match its pinned sha256")
    return data.decode("utf-8")


def build_docs_page(static_dir: Path = STATIC_DIR) -> Page:
    return inline(
        (static_dir / "docs.html").read_text(encoding="utf-8"),
        [
            Inline(_TAGS["css"], "style", _vendored("swagger-ui.css", static_dir)),
            Inline(_TAGS["bundle"], "script", _vendored("swagger-ui-bundle.js", static_dir)),
            Inline(_TAGS["init"], "script", (static_dir / "docs.js").read_text(encoding="utf-8")),
        ],
        "docs.html",
    )


#: Rebuilt when a source file changes.
_PAGE = PageCache(
    STATIC_DIR, ("docs.html", "docs.js", VENDOR + "swagger-ui.css", VENDOR + "swagger-ui-bundle.js"), build_docs_page
)


@bp.function_name("docs")
@bp.route(route="docs", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def docs(req: func.HttpRequest) -> func.HttpResponse:
    built = _PAGE.get()
    return html_page(built.html, built.csp)
