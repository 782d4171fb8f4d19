"""Retention: the event trail and the tombstones are kept for a configured time, then purged.

Events (`AICP_EVENT_RETENTION_DAYS`, default 90) and tombstones (`AICP_TOMBSTONE_RETENTION_DAYS`,
default 30) older than their retention are deleted in batches of `BATCH` rows, one short
transaction each, so a purge never holds locks for long nor bloats one transaction; 0 days keeps
them forever. The process's purge task calls `purge` hourly, beside the 24-hour idempotency
keys (see docs/OPERATIONS.md "Retention").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, LiteralString

from app.store.queries import QUERIES

if TYPE_CHECKING:
    from app.store.db import Database

#: Rows per purge statement.
BATCH = 5000


@dataclass(frozen=True, slots=True)
class Retention:
    """How many days to keep events and tombstones; 0 keeps them forever."""

    event_days: int = 90
    tombstone_days: int = 30


@dataclass(frozen=True, slots=True)
class Purged:
    events: int
    tombstones: int


async def purge(
    db: Database, retention: Retention, *, now: datetime | None = None, batch: int = BATCH
) -> Purged:
    """Delete every event and tombstone past its retention, batch by batch; return how many."""
    at = now or datetime.now(UTC)
    events = tombstones = 0
    if retention.event_days > 0:
        cutoff = at - timedelta(days=retention.event_days)
        events = await _drain(db, QUERIES["purge_events_before"], cutoff, batch)
    if retention.tombstone_days > 0:
        cutoff = at - timedelta(days=retention.tombstone_days)
        tombstones = await _drain(db, QUERIES["purge_tombstones_before"], cutoff, batch)
    return Purged(events, tombstones)


async def _drain(db: Database, query: LiteralString, cutoff: datetime, batch: int) -> int:
    total = 0
    while True:
        async with db.connection() as conn:
            status = await conn.execute(query, cutoff, batch)
        deleted = int(status.split()[-1])
        total += deleted
        if deleted < batch:
            return total
