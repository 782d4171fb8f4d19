"""People signed in through OpenID Connect: from a verified access token to a `Person` — who
they are and which roles their groups give them.

`resolve_person` is what the API's guard calls for a bearer JWT, and what a browser session
layer calls with the access token it holds: verification (`app.identity.verifier`), then the
role bindings of the token's groups (`app.store.role_bindings`) plus `AICP_OIDC_ADMIN_GROUPS`.

A person is platform admin when one of their groups is an admin group or has a platform-admin
binding; otherwise their role in a project is the highest one any of their groups has there.
They are named in events and audit rows as ``user:<username> (<subject>)``.
"""

from __future__ import annotations

import uuid  # noqa: TC003 - Caller (which holds a Person) is resolved at runtime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.errors import Forbidden
from app.domain.states import Role
from app.identity.verifier import Identity  # noqa: TC001 - as uuid above
from app.store import role_bindings
from app.store.role_bindings import PLATFORM_ADMIN_ROLE, Grant

if TYPE_CHECKING:
    from app.identity.verifier import Verifier
    from app.store.db import Database

#: `app.state` key of the `SignOn` (None: no issuer configured, JWTs are refused).
SIGN_ON_KEY = "sign_on"


@dataclass(frozen=True)
class SignOn:
    """What the service knows of its identity provider."""

    verifier: Verifier
    admin_groups: tuple[str, ...] = ()
    cli_client_id: str = "aicp-cli"
    dashboard_client_id: str = "aicp-dashboard"
    """The public client the dashboard's "Sign in with single sign-on" uses."""


@dataclass(frozen=True)
class Person:
    identity: Identity
    grants: tuple[Grant, ...]
    admin_groups: tuple[str, ...]
    """Those of the person's groups that make them platform admin (configured or bound)."""

    @property
    def actor(self) -> str:
        return f"user:{self.identity.username} ({self.identity.subject})"

    @property
    def is_admin(self) -> bool:
        return bool(self.admin_groups)

    def role_in(self, project_id: uuid.UUID) -> Role | None:
        roles = [
            Role(grant.role)
            for grant in self.grants
            if grant.project_id == project_id and grant.role != PLATFORM_ADMIN_ROLE
        ]
        return max(roles, key=lambda role: role.rank) if roles else None

    @property
    def highest_role(self) -> Role | None:
        roles = [Role(g.role) for g in self.grants if g.role != PLATFORM_ADMIN_ROLE]
        return max(roles, key=lambda role: role.rank) if roles else None

    @property
    def project_ids(self) -> tuple[uuid.UUID, ...]:
        return tuple(dict.fromkeys(g.project_id for g in self.grants if g.project_id is not None))

    def require_some_role(self) -> None:
        """403 naming the groups seen when no binding (and no admin group) matches them."""
        if self.is_admin or self.highest_role is not None:
            return
        groups = ", ".join(repr(g) for g in self.identity.groups)
        seen = f"with groups {groups}" if groups else "with no groups in the token"
        raise Forbidden(
            "role-binding",
            f"Signed in as {self.identity.username}, {seen}: no role binding matches these "
            "groups. Ask a platform admin to bind one of them to a role "
            "(aicp role-bindings create).",
        )


async def resolve_person(sign_on: SignOn, db: Database, token: str) -> Person:
    """Verify `token` and read the bindings of its groups (401/503 from the verifier)."""
    return await person_of(sign_on, db, await sign_on.verifier.verify(token))


async def person_of(sign_on: SignOn, db: Database, identity: Identity) -> Person:
    """The person `identity` names, with the role bindings of their groups as they are now."""
    async with db.connection() as conn:
        grants = await role_bindings.grants_of_groups(conn, identity.groups)
    admin = [g for g in identity.groups if g in sign_on.admin_groups]
    admin += [g.group for g in grants if g.role == PLATFORM_ADMIN_ROLE and g.group not in admin]
    return Person(identity, tuple(grants), tuple(admin))
