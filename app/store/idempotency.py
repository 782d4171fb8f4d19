"""Stored first responses for ``Idempotency-Key`` replays (24 hours, per caller identity)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.errors import IdempotencyKeyReused
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from app.store.db import Connection


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: bytes
    location: str | None


async def claim(
    conn: Connection, *, identity: str, key: str, request_sha256: bytes
) -> StoredResponse | None:
    """Own ``(identity, key)`` for this transaction, or return the response stored under it.

    None: this transaction owns the key and must call ``store`` before committing. A
    ``StoredResponse``: replay it. A different request under the same key raises
    ``IdempotencyKeyReused``. Concurrent requests with one key serialize on its primary key:
    the second waits for the first to commit and then replays its response.
    """
    owned = await conn.fetchval(QUERIES["claim_idempotency_key"], identity, key, request_sha256)
    if owned is not None:
        return None
    row = await conn.fetchrow(QUERIES["idempotent_response"], identity, key)
    if row is None:  # purged between the two statements: treat as never seen
        await conn.fetchval(QUERIES["claim_idempotency_key"], identity, key, request_sha256)
        return None
    if bytes(row["request_sha256"]) != request_sha256:
        raise IdempotencyKeyReused()
    return StoredResponse(row["status"], bytes(row["body"]), row["location"])


async def store(
    conn: Connection, *, identity: str, key: str, status: int, body: bytes, location: str | None
) -> None:
    """Record the response of the request that owns the key (same transaction as its write)."""
    await conn.execute(QUERIES["store_idempotent_response"], identity, key, status, body, location)


async def purge_expired(conn: Connection) -> int:
    """Forget keys older than 24 hours; return how many."""
    result = await conn.execute(QUERIES["purge_idempotency_keys"])
    return int(result.split()[-1])
