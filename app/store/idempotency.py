"""Stored first responses for ``Idempotency-Key`` replays (24 hours, per caller identity)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from app.domain.errors import IdempotencyKeyReused
from app.store.queries import QUERIES

if TYPE_CHECKING:
    import uuid

    from app.store.db import Connection

CreatedKind = Literal["project", "pool", "workload", "service", "token"]
ResourceState = Literal["live", "deleting", "gone"]


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: bytes
    location: str | None
    resource_kind: CreatedKind | None = None
    resource_id: uuid.UUID | None = None


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
    return StoredResponse(
        row["status"],
        bytes(row["body"]),
        row["location"],
        row["resource_kind"],
        row["resource_id"],
    )


async def store(
    conn: Connection,
    *,
    identity: str,
    key: str,
    status: int,
    body: bytes,
    location: str | None,
    resource_kind: CreatedKind,
    resource_id: uuid.UUID,
) -> None:
    """Record the response of the request that owns the key and which resource it created
    (same transaction as its write)."""
    await conn.execute(
        QUERIES["store_idempotent_response"],
        identity,
        key,
        status,
        body,
        location,
        resource_kind,
        resource_id,
    )


async def resource_state(
    conn: Connection, kind: CreatedKind, resource_id: uuid.UUID
) -> ResourceState:
    """What became of a created resource: live, deleting (a token: revoked) or gone."""
    state = await conn.fetchval(QUERIES["idempotent_resource_state"], kind, resource_id)
    return "gone" if state is None else state


async def purge_expired(conn: Connection) -> int:
    """Forget keys older than 24 hours; return how many."""
    result = await conn.execute(QUERIES["purge_idempotency_keys"])
    return int(result.split()[-1])
