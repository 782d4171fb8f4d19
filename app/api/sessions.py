"""The browser's side of a dashboard session: its cookie and its CSRF header.

Signing in (app/api/dashboard/pages.py) checks a token exactly as a bearer request would, then
opens a session (app/store/sessions.py) and sets the cookie ``aicp_session``: a random id,
``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends it),
``Path=/``, ``Secure`` unless the page was served over plain HTTP to a loopback address. The
token itself is never put in the cookie, a URL, the page or a log.

With the cookie, a request authenticates as the session's token (app/api/auth.py); a write
(any method but GET, HEAD, OPTIONS) must also carry the session's CSRF token in
``X-CSRF-Token`` (403 ``csrf-rejected`` otherwise), which the dashboard's pages hold in a
``<meta>`` element. An ``Authorization`` header always wins over the cookie.

Any other way of signing in (OpenID Connect) opens its session with
``app.store.sessions.open_session`` and answers with ``session_cookie``.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from litestar.datastructures import Cookie

if TYPE_CHECKING:
    from litestar.connection import ASGIConnection

    from app.store.sessions import Opened

COOKIE = "aicp_session"
CSRF_HEADER = "x-csrf-token"
#: How long a session lasts (a project token's also ends with the token).
LIFETIME_SECONDS = 12 * 3600.0


def session_id_of(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The session id the browser sent (None without the cookie)."""
    value = connection.cookies.get(COOKIE)
    return value or None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def secure_cookie(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """``Secure`` unless served over plain HTTP on a loopback address (``make run``)."""
    if connection.url.scheme == "https":
        return True
    return not _loopback(connection.url.hostname or "")


def session_cookie(connection: ASGIConnection[Any, Any, Any, Any], opened: Opened) -> Cookie:
    return Cookie(
        key=COOKIE,
        value=opened.session_id,
        path="/",
        max_age=int(LIFETIME_SECONDS),
        httponly=True,
        samesite="strict",
        secure=secure_cookie(connection),
    )


def cleared_cookie(connection: ASGIConnection[Any, Any, Any, Any]) -> Cookie:
    return Cookie(
        key=COOKIE,
        value="",
        path="/",
        max_age=0,
        httponly=True,
        samesite="strict",
        secure=secure_cookie(connection),
    )
