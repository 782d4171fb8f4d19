"""Rendering the dashboard's pages: Jinja2 with autoescaping, and the headers every page
carries (a Content-Security-Policy with no inline script or style at all)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar import Response

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
ASSETS_PATH = "/dashboard-assets"

#: Scripts, styles, images and connections from this origin only; no inline code, no frames.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.globals["assets"] = ASSETS_PATH


def page(
    template: str, status: int = 200, cookies: list[Any] | None = None, **context: Any
) -> Response[str]:
    """The template rendered as an HTML page with the dashboard's headers."""
    html = _ENV.get_template(template).render(**context)
    return Response(
        html,
        status_code=status,
        media_type="text/html",
        headers=HEADERS,
        cookies=cookies or [],
    )
