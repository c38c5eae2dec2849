"""HTTP trigger functions: the web dashboard (``GET /api/ui``) and the retry endpoint it uses.

The dashboard is one HTML response: ``web/static/index.html`` with ``app.css`` and ``app.js``
inlined, so the page needs exactly one authenticated request and no asset URL ever has to carry
the function key. A Content-Security-Policy allows only those two inline blocks (by hash) and
same-origin ``fetch``. See docs/dashboard.md.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

import azure.functions as func

from shared.api import polling, views
from shared.api.http import AUTH_LEVEL, api_handler, base_url, html_page, json_response, tenant_of
from shared.api.retry_job import retry_job
from shared.api.service import JobService

bp = func.Blueprint()  # type: ignore[no-untyped-call]
#: Deployed with the app (see .funcignore); no build step.
STATIC_DIR = Path(__file__).resolve().parent.parent / "web" / "static"
_CSS_TAG = '<link rel="stylesheet" href="app.css">'
_JS_TAG = '<script type="module" src="app.js"></script>'
_service: JobService | None = None


def service() -> JobService:
    global _service
    if _service is None:
        _service = JobService()
    return _service


@dataclass(frozen=True)
class Page:
    html: bytes
    csp: str


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def build_page(static_dir: Path = STATIC_DIR) -> Page:
    """index.html with the CSS and JS inlined, and a CSP that admits exactly those two blocks."""
    html = (static_dir / "index.html").read_text(encoding="utf-8")
    css = (static_dir / "app.css").read_text(encoding="utf-8")
    js = (static_dir / "app.js").read_text(encoding="utf-8")
    if _CSS_TAG not in html or _JS_TAG not in html:
        raise RuntimeError("index.html must reference app.css and app.js with the exact tags build_page replaces")
    if "</script" in js.lower() or "</style" in css.lower():
        raise RuntimeError("app.js/app.css must not contain a closing </script> or </style> tag")
    html = html.replace(_CSS_TAG, f"<style>{css}</style>").replace(_JS_TAG, f'<script type="module">{js}</script>')
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_sha256(js)}",
            f"style-src {_sha256(css)}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return Page(html.encode("utf-8"), csp)


_page: tuple[float, Page] | None = None


def page() -> Page:
    """The built page, rebuilt when a source file changes (cheap: three small files)."""
    global _page
    stamp = max((STATIC_DIR / n).stat().st_mtime for n in ("index.html", "app.css", "app.js"))
    if _page is None or _page[0] != stamp:
        _page = (stamp, build_page())
    return _page[1]


@bp.function_name("ui")
@bp.route(route="ui", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def ui(req: func.HttpRequest) -> func.HttpResponse:
    built = page()
    return html_page(built.html, built.csp)


@bp.function_name("retry_job")
@bp.route(route="jobs/{id}/retry", methods=["POST"], auth_level=AUTH_LEVEL)
@api_handler
def retry(req: func.HttpRequest) -> func.HttpResponse:
    submitted = retry_job(service(), tenant_of(req), req.route_params["id"], req.headers.get("traceparent"))
    body = views.public(submitted.job, base_url(req))
    job = submitted.job
    headers = {"Location": body["links"]["self"], **polling.headers(job, service().pipeline_timeout(job.pipeline))}
    return json_response(202 if submitted.created else 200, body, headers)
