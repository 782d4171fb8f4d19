"""The dashboard's "Sign in with single sign-on" (when an OpenID Connect issuer is configured).

``GET /sign-in/sso`` makes one attempt's `state`, `nonce` and PKCE verifier
(`app.identity.code_flow`), keeps them in the cookie ``aicp_sign_on`` (HttpOnly,
``SameSite=Lax`` so that it comes back on the provider's redirect, ``Path=/sign-in/sso``, ten
minutes) and redirects to the issuer's authorization endpoint with the dashboard's public client
(``AICP_OIDC_DASHBOARD_CLIENT_ID``).

``GET /sign-in/sso/callback`` checks `state` against the cookie, redeems the code, verifies
the ID token (its `nonce` too) and the access token exactly as the API verifies a person's
bearer token (audience, groups), refuses a person none of whose groups has a role binding, and
opens the same dashboard session as a token sign-in, standing for the person
(app/store/sessions.py). It answers with a small page that moves on to ``/``: the session
cookie is ``SameSite=Strict``, and a browser does not send it on a redirect chain that began at
the provider's site. Every failure ends on the sign-in page with a sentence (4xx, or 503 when
the provider cannot be reached), never a 500.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from litestar import Request, Response, get
from litestar.datastructures import Cookie
from litestar.response import Redirect

from app.api import sessions
from app.api.dashboard.rendering import page
from app.api.people import SIGN_ON_KEY, SignOn, person_of
from app.domain.errors import Forbidden, ServiceUnavailable, Unauthorized
from app.identity import code_flow
from app.store import sessions as session_store
from app.store.sessions import SessionPerson

if TYPE_CHECKING:
    from app.identity.verifier import Identity
    from app.store.db import Database

START = "/sign-in/sso"
CALLBACK = "/sign-in/sso/callback"
ATTEMPT_COOKIE = "aicp_sign_on"
ATTEMPT_SECONDS = 600


def sign_on_of(request: Request[Any, Any, Any]) -> SignOn | None:
    found: SignOn | None = request.app.state.get(SIGN_ON_KEY)
    return found


def sign_in_page(
    request: Request[Any, Any, Any],
    *,
    error: str | None = None,
    sso_error: str | None = None,
    status: int = 200,
    cookies: list[Cookie] | None = None,
) -> Response[Any]:
    """The sign-in page: the token field, and the single sign-on button when configured; an
    `error` beside the token field, an `sso_error` beside the button."""
    return page(
        "sign_in.html",
        status=status,
        cookies=cookies,
        error=error,
        sso_error=sso_error,
        single_sign_on=sign_on_of(request) is not None,
        csrf=None,
        is_admin=False,
        own_project=None,
    )


def _redirect_uri(request: Request[Any, Any, Any]) -> str:
    return str(request.url.with_replacements(path=CALLBACK, query=""))


def _attempt_cookie(request: Request[Any, Any, Any], value: str, max_age: int) -> Cookie:
    return Cookie(
        key=ATTEMPT_COOKIE,
        value=value,
        path=START,
        max_age=max_age,
        httponly=True,
        samesite="lax",
        secure=sessions.secure_cookie(request),
    )


@get(START, include_in_schema=False)
async def start(request: Request[Any, Any, Any]) -> Response[Any] | Redirect:
    """Send the browser to the identity provider (state, nonce and PKCE kept in a cookie)."""
    sign_on = sign_on_of(request)
    if sign_on is None:
        return sign_in_page(
            request,
            status=404,
            sso_error="This installation has no single sign-on: use an API token.",
        )
    attempt = code_flow.new_attempt()
    try:
        url = await code_flow.authorization_url(
            sign_on.verifier,
            attempt,
            client_id=sign_on.dashboard_client_id,
            redirect_uri=_redirect_uri(request),
        )
    except ServiceUnavailable as exc:
        return sign_in_page(request, status=503, sso_error=exc.detail)
    response = Redirect(url, status_code=303)
    response.cookies.append(_attempt_cookie(request, attempt.encode(), ATTEMPT_SECONDS))
    return response


class _Refused(Exception):
    """A sign-in that ends on the sign-in page with `message` beside the button, as `status`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@get(CALLBACK, include_in_schema=False)
async def callback(request: Request[Any, Any, Any]) -> Response[Any]:
    """Finish the sign-in: check state, redeem the code, verify, open the session."""
    cleared = _attempt_cookie(request, "", 0)
    try:
        sign_on = sign_on_of(request)
        if sign_on is None:
            raise _Refused("This installation has no single sign-on: use an API token.", 404)
        attempt, code = _checked_redirect(request)
        db: Database = request.app.state["db"]
        checked = await _verified_person(request, sign_on, db, attempt, code)
    except _Refused as refused:
        return sign_in_page(
            request, status=refused.status, sso_error=refused.message, cookies=[cleared]
        )
    return await _signed_in(request, db, checked, cleared)


def _checked_redirect(request: Request[Any, Any, Any]) -> tuple[code_flow.Attempt, str]:
    """The attempt this browser started and the authorization code the provider sent back;
    400 when the provider refused, the attempt is missing or stale, `state` does not match,
    or there is no code."""
    query = request.query_params
    attempt = code_flow.Attempt.decode(request.cookies.get(ATTEMPT_COOKIE))
    error = query.get("error")
    if error is not None:
        said = (query.get("error_description") or error)[:200]
        raise _Refused(f"The identity provider did not sign you in: {said}.", 400)
    if attempt is None:
        raise _Refused(
            "This sign-in was not started in this browser, or took longer than "
            f"{ATTEMPT_SECONDS // 60} minutes. Sign in again.",
            400,
        )
    if not attempt.matches(query.get("state")):
        raise _Refused(
            "This sign-in does not match the one this browser started (state mismatch). "
            "Sign in again.",
            400,
        )
    code = query.get("code")
    if not code or len(code) > 4096:
        raise _Refused("The identity provider sent no authorization code. Sign in again.", 400)
    return attempt, code


async def _verified_person(
    request: Request[Any, Any, Any],
    sign_on: SignOn,
    db: Database,
    attempt: code_flow.Attempt,
    code: str,
) -> Identity:
    """The code redeemed, and the person its access token names, verified as the API verifies
    a bearer token and holding some role; 401, 403 or 503 (provider unreachable) otherwise."""
    try:
        identity, access_token = await code_flow.exchange(
            sign_on.verifier,
            attempt,
            code,
            client_id=sign_on.dashboard_client_id,
            redirect_uri=_redirect_uri(request),
        )
        # The access token under the API's own rules: its audience, its groups.
        checked = await sign_on.verifier.verify(access_token)
        if checked.subject != identity.subject:
            raise Unauthorized("The ID token and the access token name different people.")
        person = await person_of(sign_on, db, checked)
        person.require_some_role()
    except Unauthorized as exc:
        raise _Refused(exc.detail, 401) from exc
    except Forbidden as exc:
        raise _Refused(exc.detail, 403) from exc
    except ServiceUnavailable as exc:
        raise _Refused(exc.detail, 503) from exc
    return checked


async def _signed_in(
    request: Request[Any, Any, Any], db: Database, checked: Identity, cleared: Cookie
) -> Response[Any]:
    """The person's dashboard session opened, and the page that moves on to the dashboard."""
    opened = await session_store.open_session(
        db,
        token_id=None,
        admin_token=None,
        lifetime_seconds=sessions.LIFETIME_SECONDS,
        person=SessionPerson(checked.subject, checked.username, checked.groups),
    )
    return page(
        "signed_in.html",
        cookies=[cleared, sessions.session_cookie(request, opened)],
        username=checked.username,
        csrf=None,
        is_admin=False,
        own_project=None,
    )


ROUTES = [start, callback]
