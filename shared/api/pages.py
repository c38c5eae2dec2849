"""Self-contained HTML pages (the dashboard, the API docs): every asset inlined into one response, and a
Content-Security-Policy that admits exactly the inlined blocks, by hash, and same-origin ``fetch``.

One request needs the function key and no asset URL ever has to carry it; nothing comes from a CDN.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class Page:
    html: bytes
    csp: str


@dataclass(frozen=True)
class Inline:
    """An asset to inline: the exact tag of the HTML it replaces, and the element it becomes."""

    tag: str
    kind: Literal["style", "script"]
    text: str
    #: The opening tag of the inlined element (e.g. ``<script type="module">``); default ``<style>``/``<script>``.
    open_tag: str = ""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def inline(html: str, assets: Sequence[Inline], source: str) -> Page:
    """``html`` with each asset inlined in place of its tag, and the CSP for exactly those blocks.

    Refuses (RuntimeError) a page that lacks a tag it should reference, and an asset that would close its own
    element early (a ``</script>`` in a script): either would serve something other than what was pinned.
    """
    for asset in assets:
        if asset.tag not in html:
            raise RuntimeError(f"{source} must reference its assets with the exact tags inlined here: {asset.tag}")
        if f"</{asset.kind}" in asset.text.lower():
            raise RuntimeError(f"an inlined {asset.kind} must not contain a closing </{asset.kind}> tag")
        html = html.replace(asset.tag, f"{asset.open_tag or f'<{asset.kind}>'}{asset.text}</{asset.kind}>")
    hashes = {kind: " ".join(_hash(a.text) for a in assets if a.kind == kind) for kind in ("script", "style")}
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {hashes['script']}",
            f"style-src {hashes['style']}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return Page(html.encode("utf-8"), csp)


class PageCache:
    """A built page, rebuilt when one of its source files changes (a stat per request, no rebuild)."""

    def __init__(self, static_dir: Path, files: Sequence[str], build: Callable[[], Page]) -> None:
        self._paths = [static_dir / name for name in files]
        self._build = build
        self._built: tuple[float, Page] | None = None

    def get(self) -> Page:
        stamp = max(p.stat().st_mtime for p in self._paths)
        if self._built is None or self._built[0] != stamp:
            self._built = (stamp, self._build())
        return self._built[1]


__all__ = ["Inline", "Page", "PageCache", "inline"]
