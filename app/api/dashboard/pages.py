"""The dashboard's pages and its sign-in.

Every page checks the session (app/api/auth.py ``authenticate``: the same tokens, revocation
and expiry as the API) and the path's project (``scope``: a project token sees only its own;
404 otherwise) before it renders; without a session it leads to the sign-in. A page holds no
data of its own beyond names and whether the caller may write there (which write controls it
shows): ``static/dashboard.js`` reads everything from ``/api/v1``, where every list and stream
is scoped again by the server and every write's role checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from litestar import Request, Response, get, post
from litestar.datastructures import CacheControlHeader
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect
from litestar.static_files import create_static_files_router

from app.api import auth, sessions
from app.api.dashboard import single_sign_on
from app.api.dashboard.rendering import ASSETS_PATH, STATIC_DIR, page
from app.api.dashboard.single_sign_on import sign_in_page
from app.domain.errors import Forbidden, NotFound, Unauthorized
from app.domain.states import Role
from app.store import sessions as session_store

if TYPE_CHECKING:
    from litestar.router import Router

    from app.api.auth import Caller
    from app.store.db import Database
    from app.store.sessions import SessionIdentity

SIGN_IN = "/sign-in"


async def _session(request: Request[Any, Any, Any]) -> tuple[Caller, SessionIdentity] | None:
    """The signed-in caller and its session; None when not signed in (or no longer valid)."""
    session_id = sessions.session_id_of(request)
    if session_id is None or request.headers.get("authorization") is not None:
        return None
    db: Database = request.app.state["db"]
    found = await session_store.find_session(db, session_id)
    if found is None:
        return None
    try:
        caller = await auth.authenticate(request, csrf_header=False)
    except Unauthorized:
        return None
    return caller, found


def _who(caller: Caller) -> dict[str, Any]:
    role = caller.role
    own = None if caller.project is None else caller.project.name
    if caller.person is not None:  # a person: their name, their role here (else their highest)
        role = role or caller.person.highest_role
        own = own or _first_project(caller)
        shown = "platform admin" if caller.is_admin else str(role)
        return {
            "is_admin": caller.is_admin,
            "role": f"{caller.person.identity.username} · {shown}",
            "own_project": own,
        }
    return {
        "is_admin": caller.is_admin,
        "role": "platform admin" if caller.is_admin else str(role),
        "own_project": own,
    }


def _first_project(caller: Caller) -> str | None:
    """The first (by name) project a person's bindings give them."""
    assert caller.person is not None
    names = sorted({g.project_name for g in caller.person.grants if g.project_name is not None})
    return names[0] if names else None


async def _project_page(
    request: Request[Any, Any, Any], template: str, **context: Any
) -> Response[Any] | Redirect:
    signed_in = await _session(request)
    if signed_in is None:
        return Redirect(SIGN_IN, status_code=303)
    caller, found = signed_in
    try:
        scoped = await auth.scope(request, caller)
    except NotFound as exc:
        return page("error.html", status=404, message=exc.detail, csrf=found.csrf, **_who(caller))
    project = scoped.require_project().name
    return page(
        template,
        project=project,
        csrf=found.csrf,
        writes=_writes(scoped),
        **_who(caller),
        **context,
    )


def _writes(caller: Caller) -> bool:
    """Whether the caller may write in the path's project (an editor or above): the page then
    offers its write controls. The API checks the role again on every write."""
    if caller.is_admin:
        return True
    return caller.role is not None and caller.role.rank >= Role.EDITOR.rank


@get("/", include_in_schema=False)
async def index(request: Request[Any, Any, Any]) -> Response[Any] | Redirect:
    """Signed in: the admin view, or a project token's project; else the sign-in."""
    signed_in = await _session(request)
    if signed_in is None:
        return Redirect(SIGN_IN, status_code=303)
    caller, found = signed_in
    if caller.is_admin:
        return Redirect("/admin", status_code=303)
    if caller.person is not None:
        first = _first_project(caller)
        if first is None:  # their bindings were removed since they signed in
            try:
                caller.person.require_some_role()
            except Forbidden as exc:
                return page(
                    "error.html", status=403, message=exc.detail, csrf=found.csrf, **_who(caller)
                )
        return Redirect(f"/projects/{first}", status_code=303)
    assert caller.project is not None
    return Redirect(f"/projects/{caller.project.name}", status_code=303)


@get(SIGN_IN, include_in_schema=False)
async def sign_in_form(request: Request[Any, Any, Any]) -> Response[Any]:
    return sign_in_page(request)


def _same_origin(request: Request[Any, Any, Any]) -> bool:
    """A form post from a page of this server (a browser always sends Origin on a POST)."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


@post(SIGN_IN, include_in_schema=False, status_code=303)
async def sign_in(
    request: Request[Any, Any, Any],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Response[Any] | Redirect:
    """Check the pasted token as the API would, open a session, set its cookie."""
    secret = (data.get("token") or "").strip()

    def refused(message: str, status: int = 401) -> Response[Any]:
        return sign_in_page(request, status=status, error=message)

    if not _same_origin(request):
        return refused("Sign in from this server's own page.", status=403)
    if not secret:
        return refused("Paste an API token.", status=422)
    try:
        caller = await auth.authenticate_secret(request, secret)
    except Unauthorized as exc:
        return refused(exc.detail)
    db: Database = request.app.state["db"]
    opened = await session_store.open_session(
        db,
        token_id=caller.token_id,
        admin_token=secret if caller.is_admin else None,
        lifetime_seconds=sessions.LIFETIME_SECONDS,
    )
    response = Redirect("/", status_code=303)
    response.cookies.append(sessions.session_cookie(request, opened))
    return response


@post("/sign-out", include_in_schema=False, status_code=303)
async def sign_out(
    request: Request[Any, Any, Any],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect:
    """End the session (its CSRF token must come with the form)."""
    signed_in = await _session(request)
    session_id = sessions.session_id_of(request)
    if signed_in is not None and session_id is not None and _same_origin(request):
        _, found = signed_in
        if data.get("csrf") == found.csrf:
            db: Database = request.app.state["db"]
            await session_store.close_session(db, session_id)
    response = Redirect(SIGN_IN, status_code=303)
    response.cookies.append(sessions.cleared_cookie(request))
    return response


@get("/projects/{project:str}", include_in_schema=False)
async def project_view(request: Request[Any, Any, Any]) -> Response[Any] | Redirect:
    return await _project_page(request, "project.html")


@get("/projects/{project:str}/workloads/{name:str}", include_in_schema=False)
async def workload_view(
    request: Request[Any, Any, Any], name: FromPath[str]
) -> Response[Any] | Redirect:
    return await _project_page(request, "workload.html", workload=name)


@get("/projects/{project:str}/services/{name:str}", include_in_schema=False)
async def service_view(
    request: Request[Any, Any, Any], name: FromPath[str]
) -> Response[Any] | Redirect:
    return await _project_page(request, "service.html", service=name)


@get("/projects/{project:str}/submit", include_in_schema=False)
async def submit_view(request: Request[Any, Any, Any]) -> Response[Any] | Redirect:
    return await _project_page(request, "submit.html")


@get("/admin", include_in_schema=False)
async def admin_view(request: Request[Any, Any, Any]) -> Response[Any] | Redirect:
    signed_in = await _session(request)
    if signed_in is None:
        return Redirect(SIGN_IN, status_code=303)
    caller, found = signed_in
    if not caller.is_admin:
        return page(
            "error.html",
            status=403,
            message="Only the platform admin may see this view.",
            csrf=found.csrf,
            **_who(caller),
        )
    return page("admin.html", csrf=found.csrf, **_who(caller))


def assets() -> Router:
    """The script and the stylesheet (never listed in the OpenAPI document)."""
    return create_static_files_router(
        path=ASSETS_PATH,
        directories=[STATIC_DIR],
        include_in_schema=False,
        name="dashboard-assets",
        cache_control=CacheControlHeader(no_cache=True),
    )


ROUTES = [
    index,
    sign_in_form,
    sign_in,
    *single_sign_on.ROUTES,
    sign_out,
    project_view,
    workload_view,
    service_view,
    submit_view,
    admin_view,
]
