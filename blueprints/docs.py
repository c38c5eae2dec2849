"""HTTP triggers: the API's OpenAPI 3.1 document (``shared.api.openapi``) and the page that renders it.

Auth level ``function`` like every route except health: the issue allows
anonymous access only where a probe needs it, and the document is for clients
that hold a key anyway.

``GET /api/docs`` is Swagger UI (npm ``swagger-ui-dist``, installed from its
lock by the build step into ``web/static/build/swagger-ui/`` and checked by
sha256; see ``blueprints/swagger_assets.py``) inlined into one HTML response
the way the dashboard is (``blueprints/ui.py``): no CDN, no asset URL that
would need the key, and a Content-Security-Policy that admits exactly the
inlined blocks by hash (computed from the files served) and same-origin
``fetch``. Without the build, the page answers 503 naming the build step; every
other route works.
"""

from __future__ import annotations

import logging
import urllib.parse
from pathlib import Path
from types import MappingProxyType

import azure.functions as func

from blueprints import swagger_assets as S
from shared import platform
from shared.api.http import AUTH_LEVEL, api_handler, html_page, json_response, problem
from shared.api.openapi import document
from shared.api.pages import Inline, Page, PageCache, inline

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger("thematiq.api")


@bp.function_name("openapi")
@bp.route(route="openapi.json", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def openapi(req: func.HttpRequest) -> func.HttpResponse:
    return json_response(200, document())


STATIC_DIR = Path(__file__).resolve().parent.parent / "web" / "static"
#: The tags docs.html references; the page is refused if one is missing (``inline``).
_TAGS = MappingProxyType({
    "css": '<link rel="stylesheet" href="build/swagger-ui/swagger-ui.css">',
    "bundle": '<script src="build/swagger-ui/swagger-ui-bundle.js"></script>',
    "init": '<script src="docs.js"></script>',
})


def build_docs_page(static_dir: Path = STATIC_DIR, assets_dir: Path | None = None) -> Page:
    files = S.load(assets_dir)
    return inline(
        (static_dir / "docs.html").read_text(encoding="utf-8"),
        [
            Inline(_TAGS["css"], "style", files["swagger-ui.css"]),
            Inline(_TAGS["bundle"], "script", files["swagger-ui-bundle.js"]),
            Inline(_TAGS["init"], "script", (static_dir / "docs.js").read_text(encoding="utf-8")),
        ],
        "docs.html",
    )


def _page() -> Page:
    """The built page, rebuilt when a source file changes (the build folder is read per call: tests move it)."""
    d = S.build_dir()

    def make() -> PageCache:
        sources = (STATIC_DIR / "docs.html", STATIC_DIR / "docs.js", *S.watched(d))
        # Absolute paths: the build folder need not be under STATIC_DIR (joining an absolute path yields it).
        return PageCache(STATIC_DIR, [str(p) for p in sources], lambda: build_docs_page(assets_dir=d))

    cache = platform.current().page(f"docs:{d}", make)  # one per build folder
    if not (d / S.MANIFEST).is_file():
        raise S.AssetsMissing(f"Swagger UI is not installed in {d}: run {S.BUILD_STEP}")
    return cache.get()


@bp.function_name("docs")
@bp.route(route="docs", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def docs(req: func.HttpRequest) -> func.HttpResponse:
    try:
        built = _page()
    except (S.AssetsMissing, S.AssetsMismatch, FileNotFoundError) as err:
        # Not the client's fault and not transient: a build step did not run (or its output was changed).
        log.warning("GET /api/docs: %s", err)
        what = (
            "do not match the sha256 recorded when they were installed, or were installed from another version "
            "than the lock pins"
            if isinstance(err, S.AssetsMismatch)
            else "are not installed"
        )
        return problem(
            503,
            "docs-not-built",
            "API reference not installed",
            f"Swagger UI's files (npm {S.PACKAGE}) {what}. They are installed by the build step {S.BUILD_STEP}, "
            "which the azd prepackage hook also runs. The API itself and /api/openapi.json work.",
            urllib.parse.urlsplit(req.url).path,
        )
    return html_page(built.html, built.csp)
