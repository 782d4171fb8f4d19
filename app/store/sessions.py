"""Dashboard sessions: a random id in the browser's cookie, its digest and identity here.

A session stands for one token: a project token (by id: revoking or expiring the token ends
its sessions at their next request, the lookup reads the token's state) or the platform admin
token (by its digest: another admin token ends them); or for a person signed in through OpenID
Connect (their subject, username and groups at sign-in: their role bindings are read per
request). The session id itself is never stored,
only its SHA-256 digest, like a token's secret. Expired rows are purged at every sign-in.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime  # noqa: TC003 - a dataclass field
from typing import TYPE_CHECKING

from app.store.queries import QUERIES

if TYPE_CHECKING:
    import uuid

    from app.store.db import Connection, Database


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


@dataclass(frozen=True)
class Opened:
    """What the browser gets: the session id (its cookie) and the CSRF token (its pages)."""

    session_id: str
    csrf: str


@dataclass(frozen=True)
class SessionPerson:
    """The person a single sign-on session stands for, as their tokens named them."""

    subject: str
    username: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class SessionIdentity:
    """A live session, as the lookup read it."""

    csrf: str
    admin_digest: bytes | None
    """The admin token's digest for a platform admin session; None for a project token."""
    token_id: uuid.UUID | None
    project_id: uuid.UUID | None
    project_name: str | None
    role: str | None
    revoked: bool
    expired: bool
    expires_at: datetime | None
    """When the project token expires; None: never (or an admin session)."""
    session_expires_at: datetime | None = None
    person: SessionPerson | None = None
    """The person of a single sign-on session; None for a token's."""

    def is_admin_for(self, admin_token: str | None) -> bool:
        """An admin session opened with `admin_token` (the one in force now)."""
        return (
            self.admin_digest is not None
            and admin_token is not None
            and secrets.compare_digest(self.admin_digest, admin_digest(admin_token))
        )


def admin_digest(admin_token: str) -> bytes:
    return _digest(admin_token)


async def open_session(
    db: Database,
    *,
    token_id: uuid.UUID | None,
    admin_token: str | None,
    lifetime_seconds: float,
    person: SessionPerson | None = None,
) -> Opened:
    """A new session for a project token (`token_id`), the admin (`admin_token`) or a
    `person` (exactly one)."""
    assert [token_id, admin_token, person].count(None) == 2
    opened = Opened(session_id=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32))
    async with db.transaction() as conn:
        await purge_expired(conn)
        await conn.execute(
            QUERIES["session_insert"],
            _digest(opened.session_id),
            token_id,
            None if admin_token is None else admin_digest(admin_token),
            opened.csrf,
            lifetime_seconds,
            None if person is None else person.subject,
            None if person is None else person.username,
            None if person is None else list(person.groups),
        )
    return opened


async def find_session(db: Database, session_id: str) -> SessionIdentity | None:
    """The live session with this id; None when unknown or expired."""
    async with db.connection() as conn:
        row = await conn.fetchrow(QUERIES["session_lookup"], _digest(session_id))
    if row is None:
        return None
    return SessionIdentity(
        csrf=row["csrf"],
        admin_digest=row["admin_sha256"],
        token_id=row["token_id"],
        project_id=row["project_id"],
        project_name=row["project_name"],
        role=row["role"],
        revoked=bool(row["revoked"]),
        expired=bool(row["expired"]),
        expires_at=row["expires_at"],
        session_expires_at=row["session_expires_at"],
        person=None
        if row["person_subject"] is None
        else SessionPerson(
            row["person_subject"], row["person_username"], tuple(row["person_groups"])
        ),
    )


async def close_session(db: Database, session_id: str) -> None:
    """Sign out: the session is gone (unknown ids are ignored)."""
    async with db.connection() as conn:
        await conn.execute(QUERIES["session_delete"], _digest(session_id))


async def purge_expired(conn: Connection) -> int:
    """Forget the sessions past their expiry (at every sign-in and with the hourly purge);
    return how many."""
    result = await conn.execute(QUERIES["sessions_purge_expired"])
    return int(result.split()[-1])
