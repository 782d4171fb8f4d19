"""Who is calling, what they may see, and what they may do.

One Litestar guard (``authorize``) runs before every ``/api/`` handler, in this order:

1. **Authenticate** — ``Authorization: Bearer <token>``, or else the dashboard's session cookie
   (app/api/sessions.py: the session stands for a token, checked as below on every request, or
   for a person signed in through single sign-on, whose role bindings are read as below; a
   write needs the session's ``X-CSRF-Token`` too, 403 ``csrf-rejected``). The platform admin
   token is compared in constant time; any other token is looked up by its SHA-256 digest: in
   this replica's token cache (app/store/token_cache.py), else with one indexed read. A
   revocation holds from the next request on on the replica that revoked it, and on the others
   as soon as the database's notification arrives (a cache that may have missed one is not
   used). Missing, malformed, unknown, expired or revoked → 401. A token not of the form
   `new_secret` makes, or one this replica rejected before (`RejectedTokens`), is refused
   without a database read; a client address whose tokens failed a read too often
   (app/api/ratelimit.py) is answered 429 instead of the next read.
   Then a project token's request spends from its rate limits (429 beyond).
   A bearer JWT, when an OpenID Connect issuer is configured, is a person's access token:
   verified (`app.identity`; 401 when bad, 503 when the issuer's keys cannot be fetched) and
   resolved to their role bindings (`app.api.people`). A person none of whose groups has a
   binding is 403 with a sentence naming the groups seen (except on routes marked
   ``opt={"any_person": True}``, such as ``/whoami``).
2. **Scope** — a ``{project}`` path parameter must name a project the caller can see: any
   existing project for the admin, only its own for a project token, those their groups are
   bound to for a person. Otherwise 404, never 403, so a token cannot learn which other
   projects exist.
3. **Authorize** — the handler declares the role it needs with ``opt=requires(...)``. Reads
   default to ``viewer``; a write that declares nothing needs the platform admin (fail closed).
   Too low a role on a visible project → 403 with ``required_role``.

The result is a ``Caller`` in ``request.state``; handlers receive it as the ``caller``
dependency. A request body never names the caller's tenant.
"""

from __future__ import annotations

import dataclasses
import hmac
import uuid  # noqa: TC003 - Litestar resolves Caller's annotations at runtime
from dataclasses import dataclass
from datetime import datetime  # noqa: TC003 - as above
from typing import TYPE_CHECKING, Any, cast

from app.api import sessions
from app.api.methods import READ_METHODS
from app.api.people import SIGN_ON_KEY, Person, SignOn, person_of, resolve_person
from app.domain.errors import CsrfRejected, Forbidden, NotFound, Unauthorized
from app.domain.states import Role
from app.identity.verifier import Identity, looks_like_jwt
from app.observability.metrics import AUTH_FAILURES
from app.store import sessions as session_store
from app.store import tokens
from app.store.queries import QUERIES
from app.store.tokens import TOKEN_FORM

if TYPE_CHECKING:
    from litestar.connection import ASGIConnection
    from litestar.handlers.base import BaseRouteHandler
    from litestar.types import HTTPScope

    from app.api.ratelimit import RateLimiter
    from app.store.db import Database
    from app.store.token_cache import RejectedTokens, TokenCache

PLATFORM_ADMIN = "platform-admin"
_STATE_KEY = "caller"
LIMITER_KEY = "rate_limiter"
REJECTED_KEY = "rejected_tokens"


@dataclass(frozen=True)
class ProjectRef:
    """The project named in the path, as the caller may see it."""

    id: uuid.UUID
    name: str


@dataclass(frozen=True)
class Caller:
    """An authenticated caller and the project in scope for this request (if any)."""

    actor: str
    """``admin``, ``token:<id>`` or ``user:<username> (<subject>)``: recorded in events and
    ``created_by``."""
    is_admin: bool
    role: Role | None
    """The project token's role, or a person's role in the path's project (their highest
    when the path names none); None for the platform admin."""
    token_project_id: uuid.UUID | None
    project: ProjectRef | None
    token_id: uuid.UUID | None = None
    """The project token's id; None for the platform admin."""
    expires_at: datetime | None = None
    """When the project token (or a person's access token) expires (open streams end then);
    None: never."""
    person: Person | None = None
    """Who signed in through OpenID Connect; None for API tokens."""

    @property
    def identity(self) -> str:
        """The scope of Idempotency-Keys: one caller's keys never collide with another's."""
        if self.person is not None:  # the subject is stable, the username may change
            return f"oidc:{self.person.identity.subject}"
        return self.actor

    @property
    def visible_project_ids(self) -> tuple[uuid.UUID, ...] | None:
        """The projects this caller may see; None: every project (the platform admin)."""
        if self.is_admin:
            return None
        if self.person is not None:
            return self.person.project_ids
        return () if self.token_project_id is None else (self.token_project_id,)

    def require_project(self) -> ProjectRef:
        """The path's project; routes with ``{project}`` always have one."""
        if self.project is None:
            raise NotFound("No project in scope.")
        return self.project


def requires(role: Role | str) -> dict[str, Any]:
    """Route ``opt`` declaring the least role a handler needs (or ``PLATFORM_ADMIN``)."""
    return {"role": str(role)}


def _bearer(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    header = connection.headers.get("authorization")
    if not header:
        raise Unauthorized("Send Authorization: Bearer <token>.")
    scheme, _, credentials = header.partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials or " " in credentials:
        raise Unauthorized("The Authorization header must be 'Bearer <token>'.")
    return credentials


def _database(connection: ASGIConnection[Any, Any, Any, Any]) -> Database:
    db: Database = connection.app.state["db"]
    return db


def client_address(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The peer's address (a proxy in front shares one address among its clients)."""
    client = connection.client
    return client.host if client is not None else ""


def _limiter(connection: ASGIConnection[Any, Any, Any, Any]) -> RateLimiter | None:
    limiter: RateLimiter | None = connection.app.state.get(LIMITER_KEY)
    return limiter


async def authenticate(
    connection: ASGIConnection[Any, Any, Any, Any], *, csrf_header: bool = True
) -> Caller:
    """The caller of this request: its bearer token, else its dashboard session (401 without
    either). A session's write needs its CSRF header unless `csrf_header` is False (a
    dashboard form that carries the CSRF token in its body checks it itself)."""
    if connection.headers.get("authorization") is None:
        session_id = sessions.session_id_of(connection)
        if session_id is not None:
            return await _session_caller(connection, session_id, csrf_header=csrf_header)
    return await authenticate_secret(connection, _bearer(connection))


async def _session_caller(
    connection: ASGIConnection[Any, Any, Any, Any], session_id: str, *, csrf_header: bool
) -> Caller:
    found = await session_store.find_session(_database(connection), session_id)
    if found is None:
        AUTH_FAILURES.labels("session").inc()
        raise Unauthorized("The dashboard session has ended; sign in again.")
    method = cast("HTTPScope", connection.scope)["method"]
    if csrf_header and method not in READ_METHODS:
        sent = connection.headers.get(sessions.CSRF_HEADER) or ""
        if not hmac.compare_digest(sent.encode("utf-8"), found.csrf.encode("utf-8")):
            raise CsrfRejected()
    admin_token: str | None = connection.app.state.get("admin_token")
    if found.admin_digest is not None:
        if not found.is_admin_for(admin_token):
            raise Unauthorized("The dashboard session has ended; sign in again.")
        return Caller(actor="admin", is_admin=True, role=None, token_project_id=None, project=None)
    if found.person is not None:
        return await _session_person(connection, found)
    if found.revoked or found.expired or found.token_id is None:
        AUTH_FAILURES.labels("session").inc()
        raise Unauthorized(
            "The token has been revoked." if found.revoked else "The token has expired."
        )
    assert found.project_id is not None and found.project_name is not None
    assert found.role is not None
    return _token_caller(
        found.token_id, found.role, found.project_id, found.project_name, found.expires_at
    )


async def _session_person(
    connection: ASGIConnection[Any, Any, Any, Any], found: session_store.SessionIdentity
) -> Caller:
    """A single sign-on session: the person as signed in, their role bindings as they are now."""
    sign_on: SignOn | None = connection.app.state.get(SIGN_ON_KEY)
    assert found.person is not None and found.session_expires_at is not None
    if sign_on is None:  # single sign-on was turned off since
        AUTH_FAILURES.labels("session").inc()
        raise Unauthorized("The dashboard session has ended; sign in again.")
    identity = Identity(
        issuer=sign_on.verifier.config.issuer,
        subject=found.person.subject,
        username=found.person.username,
        groups=found.person.groups,
        expires_at=found.session_expires_at,
    )
    person = await person_of(sign_on, _database(connection), identity)
    return _person_caller(person, found.session_expires_at)


async def authenticate_secret(
    connection: ASGIConnection[Any, Any, Any, Any], secret: str
) -> Caller:
    """The caller a token's secret stands for (401 when it is not a valid token)."""
    admin_token: str | None = connection.app.state.get("admin_token")
    if admin_token is not None and hmac.compare_digest(
        secret.encode("utf-8"), admin_token.encode("utf-8")
    ):
        return Caller(actor="admin", is_admin=True, role=None, token_project_id=None, project=None)
    if not TOKEN_FORM.fullmatch(secret):
        sign_on: SignOn | None = connection.app.state.get(SIGN_ON_KEY)
        if sign_on is not None and looks_like_jwt(secret):
            return await _authenticate_person(connection, sign_on, secret)
        AUTH_FAILURES.labels("malformed").inc()
        raise Unauthorized("The token is not valid.")
    key = tokens.digest(secret)
    rejected: RejectedTokens | None = connection.app.state.get(REJECTED_KEY)
    known = rejected.reason(key) if rejected is not None else None
    if known is not None:
        AUTH_FAILURES.labels("known-bad").inc()
        raise Unauthorized(known)
    limiter = _limiter(connection)
    address = client_address(connection)

    def before_read() -> None:
        # A token not cached as valid costs a read: refused once this address failed too often.
        if limiter is not None:
            limiter.check_client(address)

    cache: TokenCache | None = connection.app.state.get("token_cache")
    found = await tokens.authenticate_cached(
        _database(connection), cache, secret, before_read=before_read
    )
    reason = (
        "The token is not valid."
        if found is None
        else "The token has been revoked."
        if found.revoked
        else "The token has expired."
        if found.expired
        else None
    )
    if reason is not None:
        AUTH_FAILURES.labels("looked-up").inc()
        if limiter is not None:
            limiter.auth_failed(address)
        if rejected is not None:
            rejected.reject(key, reason)
        raise Unauthorized(reason)
    assert found is not None
    return _token_caller(
        found.id, found.role, found.project_id, found.project_name, found.expires_at
    )


def _person_caller(person: Person, expires_at: datetime | None) -> Caller:
    """The caller a signed-in person stands for: their own roles, no project token's."""
    return Caller(
        actor=person.actor,
        is_admin=person.is_admin,
        role=None,
        token_project_id=None,
        project=None,
        expires_at=expires_at,
        person=person,
    )


def _token_caller(
    token_id: uuid.UUID,
    role: str,
    project_id: uuid.UUID,
    project_name: str,
    expires_at: datetime | None,
) -> Caller:
    """The caller a valid project token stands for."""
    return Caller(
        actor=f"token:{token_id}",
        is_admin=False,
        role=Role(role),
        token_project_id=project_id,
        project=ProjectRef(project_id, project_name),
        token_id=token_id,
        expires_at=expires_at,
    )


async def _authenticate_person(
    connection: ASGIConnection[Any, Any, Any, Any], sign_on: SignOn, token: str
) -> Caller:
    limiter = _limiter(connection)
    address = client_address(connection)
    if limiter is not None:  # verifying costs a signature check: not for a client failing often
        limiter.check_client(address)
    try:
        person = await resolve_person(sign_on, _database(connection), token)
    except Unauthorized:
        AUTH_FAILURES.labels("oidc").inc()
        if limiter is not None:
            limiter.auth_failed(address)
        raise
    return _person_caller(person, person.identity.expires_at)


async def _scope_person(
    connection: ASGIConnection[Any, Any, Any, Any], caller: Caller, person: Person
) -> Caller:
    name = connection.path_params.get("project")
    if name is None:
        return dataclasses.replace(caller, project=None, role=person.highest_role)
    async with _database(connection).connection() as conn:
        project_id = await conn.fetchval(QUERIES["project_id_by_name"], name)
    role = None if project_id is None else person.role_in(project_id)
    if role is None:
        raise NotFound(f"Project {name!r} not found.")
    return dataclasses.replace(caller, project=ProjectRef(project_id, name), role=role)


async def scope(connection: ASGIConnection[Any, Any, Any, Any], caller: Caller) -> Caller:
    """The caller with the path's ``{project}`` in scope (404 when it may not see it)."""
    if caller.person is not None and not caller.is_admin:
        return await _scope_person(connection, caller, caller.person)
    name = connection.path_params.get("project")
    if name is None:
        # Routes without a project: a project token's own project must not leak into them.
        return dataclasses.replace(caller, project=None)
    if not caller.is_admin:
        assert caller.project is not None
        if caller.project.name != name:
            raise NotFound(f"Project {name!r} not found.")
        return caller
    async with _database(connection).connection() as conn:
        project_id = await conn.fetchval(QUERIES["project_id_by_name"], name)
    if project_id is None:
        raise NotFound(f"Project {name!r} not found.")
    return dataclasses.replace(caller, project=ProjectRef(project_id, name))


def check_role(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler, caller: Caller
) -> None:
    if handler.opt.get("any_person"):
        return  # any authenticated caller (``/whoami``)
    declared = handler.opt.get("role")
    if declared is None:
        method = cast("HTTPScope", connection.scope)["method"]
        declared = Role.VIEWER.value if method in READ_METHODS else PLATFORM_ADMIN
    if caller.is_admin:
        return
    if declared == PLATFORM_ADMIN:
        raise Forbidden(PLATFORM_ADMIN, "Only the platform admin may do this.")
    needed = Role(declared)
    assert caller.role is not None
    if caller.role.rank < needed.rank:
        who = "the token has" if caller.person is None else "your groups give you"
        raise Forbidden(
            needed.value,
            f"This operation requires the {needed.value} role; {who} {caller.role.value}.",
        )


async def authorize(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """The guard: authenticate, scope to the path's project, check the role (see module doc)."""
    if not connection.scope["path"].startswith("/api/") or handler.opt.get("public"):
        return
    caller = await authenticate(connection)
    if caller.person is not None and not handler.opt.get("any_person"):
        caller.person.require_some_role()
    limiter = _limiter(connection)
    if limiter is not None:
        limiter.admit(caller, cast("HTTPScope", connection.scope)["method"])
    caller = await scope(connection, caller)
    check_role(connection, handler, caller)
    connection.state[_STATE_KEY] = caller


def caller_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Caller:
    """The Caller the guard stored for this request."""
    caller: Caller = connection.state[_STATE_KEY]
    return caller
