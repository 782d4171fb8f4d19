"""Project API tokens: the secret is shown once and stored only as its SHA-256 digest."""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime  # noqa: TC003 - a dataclass field
from typing import TYPE_CHECKING

from app.domain.errors import AlreadyExists, NotFound, TokenLimitReached
from app.domain.events import EventType
from app.domain.resources import Token, TokenCreated
from app.store.audit import record_event
from app.store.paging import NIL_UUID, Position, fetch_page
from app.store.queries import QUERIES
from app.store.token_cache import TokenIdentity

if TYPE_CHECKING:
    from collections.abc import Callable

    import asyncpg

    from app.store.db import Connection, Database
    from app.store.token_cache import TokenCache

TOKEN_PREFIX = "aicp_"


#: What `new_secret` makes: anything else is refused by its form, without a database read.
TOKEN_FORM = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]{43}")


def new_secret() -> str:
    """``aicp_`` + 32 random bytes, url-safe base64 (43 characters)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


async def authenticate_cached(
    db: Database,
    cache: TokenCache | None,
    secret: str,
    *,
    before_read: Callable[[], None] | None = None,
) -> TokenIdentity | None:
    """The token with this secret (None when no token has it), answered from `cache` when it
    holds the token (no database round trip).

    A valid token read from the database is cached; see app/store/token_cache.py for when a
    cached answer stops being used (any change to any token, a lost LISTEN connection, expiry).
    `before_read` runs just before the database would be read (it may raise to refuse that).
    """
    key = digest(secret)
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit
    if before_read is not None:
        before_read()
    generation = cache.generation if cache is not None else 0
    async with db.connection() as conn:
        found = await _read_token(conn, key)
    if cache is not None and found is not None and not (found.revoked or found.expired):
        cache.put(key, found, generation)
    return found


async def _read_token(conn: Connection, key: bytes) -> TokenIdentity | None:
    row = await conn.fetchrow(QUERIES["authenticate_token"], key)
    if row is None:
        return None
    return TokenIdentity(
        id=row["id"],
        project_id=row["project_id"],
        project_name=row["project_name"],
        role=row["role"],
        revoked=row["revoked"],
        expired=row["expired"],
        expires_at=row["expires_at"],
    )


def token_from_row(row: asyncpg.Record) -> Token:
    return Token(
        id=str(row["id"]),
        name=row["name"],
        role=row["role"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        created_by=row["created_by"],
        minted_by=None if row["minted_by"] is None else str(row["minted_by"]),
    )


@dataclass(frozen=True)
class Minter:
    """The project token creating a token: the new one is its child (see `revoke`) and
    never outlives it."""

    id: uuid.UUID
    expires_at: datetime | None


async def _below_cap(conn: Connection, project_id: uuid.UUID, max_live: int) -> None:
    """Lock the project's token creates (until the transaction ends) and check it has fewer
    than `max_live` live tokens; `TokenLimitReached` when it has that many."""
    await conn.execute(QUERIES["lock_project_tokens"], project_id)
    live = await conn.fetchval(QUERIES["live_tokens_of_project"], project_id)
    if live >= max_live:
        raise TokenLimitReached(
            max_live,
            f"The project has {live} live tokens, its limit of {max_live}; revoke one "
            "(or let one expire) first.",
        )


async def create(
    conn: Connection,
    *,
    project_id: uuid.UUID,
    name: str,
    role: str,
    expires_in_days: int | None,
    actor: str,
    minter: Minter | None = None,
    max_live: int | None = None,
) -> TokenCreated:
    """Create a token; the returned secret exists nowhere else. 409 when the name is taken, 409
    `TokenLimitReached` when the project already has `max_live` live (unrevoked, unexpired)
    tokens. Token creates of one project are serialized, so two at once cannot both pass the
    cap. ``minter``: the project token creating it (None: the platform admin)."""
    if max_live is not None:
        await _below_cap(conn, project_id, max_live)
    token_id = uuid.uuid4()
    secret = new_secret()
    row = await conn.fetchrow(
        QUERIES["insert_token"],
        token_id,
        project_id,
        name,
        role,
        digest(secret),
        expires_in_days,
        actor,
        minter.id if minter is not None else None,
        minter.expires_at if minter is not None else None,
    )
    if row is None:
        raise AlreadyExists(
            f"A token named {name!r} already exists in this project (revoked tokens keep "
            "their name)."
        )
    await record_event(
        conn,
        project_id=project_id,
        kind="token",
        resource_id=token_id,
        resource_name=name,
        type=EventType.CREATED,
        message=f"Token {name} created with role {role}.",
        actor=actor,
    )
    return TokenCreated(
        id=str(token_id),
        name=name,
        role=role,
        token=secret,
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


async def page(
    conn: Connection, *, project_id: uuid.UUID, after: Position | None, limit: int
) -> tuple[list[Token], Position | None]:
    rows, position = await fetch_page(
        conn, QUERIES["list_tokens"], project_id, after=after, limit=limit, first_id=NIL_UUID
    )
    return [token_from_row(row) for row in rows], position


async def revoke(
    conn: Connection, *, project_id: uuid.UUID, token_id: uuid.UUID, actor: str
) -> int:
    """Revoke a token of this project and every token it minted, recursively, in this
    transaction (idempotent); 404 when the project has no such token. Returns how many this
    call revoked.

    The update notifies ``aicp_tokens`` (trigger of migration 0008): every replica's token
    cache drops itself when it hears that; the caller drops its own after the commit. One more
    notification per revoked token, on the same channel, carries its id, so that every replica
    closes those tokens' open streams at once.
    """
    rows = await conn.fetch(QUERIES["revoke_token"], token_id, project_id)
    if not rows:
        if not await conn.fetchval(QUERIES["token_exists"], token_id, project_id):
            raise NotFound("No such token in this project.")
        return 0
    root = next((row["name"] for row in rows if row["root"]), "a token")
    for row in rows:
        if row["root"]:
            message = f"Token {row['name']} revoked."
        else:
            message = f"Token {row['name']} revoked with {root}, which it descends from."
        await record_event(
            conn,
            project_id=project_id,
            kind="token",
            resource_id=row["id"],
            resource_name=row["name"],
            type=EventType.REVOKED,
            message=message,
            actor=actor,
        )
    await conn.execute(QUERIES["notify_token_revoked"], [row["id"] for row in rows])
    return len(rows)
