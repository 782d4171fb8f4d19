"""The interactive API documentation page, ``/schema/swagger``, served without any CDN.

Litestar renders Swagger UI's page; its JavaScript, CSS and favicon come from the
``swagger-ui-py`` package (Swagger UI's own release files), served by this process under
``/schema/swagger-ui/``, so the page works on a machine with no internet access. The page reads
the same OpenAPI document as ``/schema/openapi.json``; "Authorize" takes a bearer token.
The server's bare URL ``/`` is the web dashboard (app/api/dashboard/).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.static_files import create_static_files_router

if TYPE_CHECKING:
    from litestar.router import Router

ASSETS_PATH = "/schema/swagger-ui"
PAGE_PATH = "/swagger"  # under the OpenAPI path: /schema/swagger
SWAGGER_URL_PATH = "/schema" + PAGE_PATH


def _assets_directory() -> Path:
    """swagger-ui-py's ``static`` directory, found without importing the package (its
    ``__init__`` imports web-framework adapters aicp does not use)."""
    spec = importlib.util.find_spec("swagger_ui")
    assert spec is not None and spec.submodule_search_locations, "swagger-ui-py is installed"
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def swagger_plugin() -> SwaggerRenderPlugin:
    return SwaggerRenderPlugin(
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
        path=PAGE_PATH,
    )


def swagger_assets() -> Router:
    """The static files the page loads (never listed in the OpenAPI document)."""
    return create_static_files_router(
        path=ASSETS_PATH,
        directories=[_assets_directory()],
        include_in_schema=False,
        name="swagger-ui-assets",
    )
