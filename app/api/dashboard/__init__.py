"""The web dashboard, served by aicp itself at ``/`` (docs/DASHBOARD.md).

Pages are rendered on the server from Jinja2 templates (escaped, no inline script or style),
then filled and kept live by one small script (``static/dashboard.js``) that reads the same
``/api/v1`` as any client, authenticated by the session cookie (app/api/sessions.py). The
project table is updated from the change feed's deltas (``live.py``), row by row; a spec
pasted as YAML or JSON is read on the server (``spec_text.py``) and submitted through the API.
"""

from __future__ import annotations

from typing import Any

from app.api.dashboard import live, pages, spec_text


def routes() -> list[Any]:
    """Every dashboard route: the pages, the sign-in, the live feed and the assets."""
    return [*pages.ROUTES, *live.ROUTES, *spec_text.ROUTES, pages.assets()]
