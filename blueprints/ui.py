"""HTTP trigger functions: the web dashboard (``GET /api/ui``) and the retry endpoint it uses.

The dashboard is one HTML response: ``web/static/index.html`` with ``app.css`` and ``app.js``
inlined, so the page needs exactly one authenticated request and no asset URL ever has to carry
the function key. A Content-Security-Policy allows only those two inline blocks (by hash) and
same-origin ``fetch``. See docs/dashboard.md.
"""

from __future__ import annotations

from pathlib import Path

import azure.functions as func

from shared import platform
from shared.api import polling, views
from shared.api.http import AUTH_LEVEL, api_handler, base_url, html_page, json_response, tenant_of
from shared.api.pages import Inline, Page, PageCache, inline
from shared.api.retry_job import retry_job
from shared.observability import telemetry

bp = func.Blueprint()  # type: ignore[no-untyped-call]
#: Deployed with the app (see .funcignore); no build step.
STATIC_DIR = Path(__file__).resolve().parent.parent / "web" / "static"
_CSS_TAG = '<link rel="stylesheet" href="app.css">'
_JS_TAG = '<script type="module" src="app.js"></script>'
def build_page(static_dir: Path = STATIC_DIR) -> Page:
    """index.html with the CSS and JS inlined, and a CSP that admits exactly those two blocks."""
    return inline(
        (static_dir / "index.html").read_text(encoding="utf-8"),
        [
            Inline(_CSS_TAG, "style", (static_dir / "app.css").read_text(encoding="utf-8")),
            Inline(_JS_TAG, "script", (static_dir / "app.js").read_text(encoding="utf-8"), '<script type="module">'),
        ],
        "index.html",
    )


def _page() -> Page:
    """The built dashboard, rebuilt when a source file changes (cheap: three small files)."""
    return platform.current().page(
        "ui", lambda: PageCache(STATIC_DIR, ("index.html", "app.css", "app.js"), build_page)
    ).get()


@bp.function_name("ui")
@bp.route(route="ui", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def ui(req: func.HttpRequest) -> func.HttpResponse:
    built = _page()
    return html_page(built.html, built.csp)


@bp.function_name("retry_job")
@bp.route(route="jobs/{id}/retry", methods=["POST"], auth_level=AUTH_LEVEL)
@api_handler
def retry(req: func.HttpRequest) -> func.HttpResponse:
    # The span this request runs in, as submit stores it; never the caller's header verbatim (any text at all).
    service = platform.current().service
    submitted = retry_job(service, tenant_of(req), req.route_params["id"], telemetry.traceparent())
    body = views.public(submitted.job, base_url(req))
    job = submitted.job
    headers = {"Location": body["links"]["self"], **polling.headers(job, service.pipeline_timeout(job.pipeline))}
    return json_response(202 if submitted.created else 200, body, headers)
