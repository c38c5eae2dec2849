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

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

import azure.functions as func

from shared.api.http import AUTH_LEVEL, api_handler, html_page, json_response
from shared.api.openapi import document

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


@dataclass(frozen=True)
class DocsPage:
    html: bytes
    csp: str


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _vendored(name: str, static_dir: Path) -> str:
    data = (static_dir / VENDOR / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != PINNED[name]:
        raise RuntimeError(f"{VENDOR}{name} does not match its pinned sha256")
    return data.decode("utf-8")


def build_docs_page(static_dir: Path = STATIC_DIR) -> DocsPage:
    html = (static_dir / "docs.html").read_text(encoding="utf-8")
    css = _vendored("swagger-ui.css", static_dir)
    bundle = _vendored("swagger-ui-bundle.js", static_dir)
    init = (static_dir / "docs.js").read_text(encoding="utf-8")
    if any(tag not in html for tag in _TAGS.values()):
        raise RuntimeError("docs.html must reference the stylesheet and scripts with the exact tags replaced here")
    for text in (bundle, init):
        if "</script" in text.lower():
            raise RuntimeError("an inlined script must not contain a closing </script> tag")
    if "</style" in css.lower():
        raise RuntimeError("the inlined stylesheet must not contain a closing </style> tag")
    html = (
        html.replace(_TAGS["css"], f"<style>{css}</style>")
        .replace(_TAGS["bundle"], f"<script>{bundle}</script>")
        .replace(_TAGS["init"], f"<script>{init}</script>")
    )
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_hash(bundle)} {_hash(init)}",
            f"style-src {_hash(css)}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return DocsPage(html.encode("utf-8"), csp)


_page: tuple[float, DocsPage] | None = None


def docs_page() -> DocsPage:
    """The built page, rebuilt when a source file changes."""
    global _page
    files = ("docs.html", "docs.js", VENDOR + "swagger-ui.css", VENDOR + "swagger-ui-bundle.js")
    stamp = max((STATIC_DIR / n).stat().st_mtime for n in files)
    if _page is None or _page[0] != stamp:
        _page = (stamp, build_docs_page())
    return _page[1]


@bp.function_name("docs")
@bp.route(route="docs", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def docs(req: func.HttpRequest) -> func.HttpResponse:
    built = docs_page()
    return html_page(built.html, built.csp)
