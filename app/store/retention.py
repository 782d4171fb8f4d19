"""Retention: the event trail and the tombstones are kept for a configured time, then purged.

Events (`AICP_EVENT_RETENTION_DAYS`, default 90), tombstones (`AICP_TOMBSTONE_RETENTION_DAYS`,
default 30) and the estimates of queued workloads' starts (`AICP_FORECAST_RETENTION_DAYS`,
default 30; an estimate still waiting for its workload's admission stays until it is scored)
older than their retention are deleted in batches of `BATCH` rows, one short
transaction each, so a purge never holds locks for long nor bloats one transaction; 0 days keeps
them forever. The process's purge task (`Purger`) calls `purge` hourly, beside the 24-hour
idempotency keys (see docs/OPERATIONS.md "Retention"); a round that fails is logged and the next
one tries again (the API does not depend on it). Expired dashboard sessions go in the same
round (and at every sign-in).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, LiteralString

from app.store import idempotency, sessions
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from app.config import Settings
    from app.store.db import Database

log = logging.getLogger("aicp")

#: Rows per purge statement.
BATCH = 5000
#: How often expired idempotency keys, and events, tombstones and estimates past retention, are
#: purged.
PURGE_INTERVAL_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class Retention:
    """How many days to keep events, tombstones and scored start estimates; 0 keeps them
    forever."""

    event_days: int
    tombstone_days: int
    forecast_days: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Retention:
        """The retention the environment sets (app/config.py states the defaults)."""
        return cls(
            event_days=settings.event_retention_days,
            tombstone_days=settings.tombstone_retention_days,
            forecast_days=settings.forecast_retention_days,
        )


@dataclass(frozen=True, slots=True)
class Purged:
    events: int
    tombstones: int
    forecasts: int = 0


async def purge(
    db: Database, retention: Retention, *, now: datetime | None = None, batch: int = BATCH
) -> Purged:
    """Delete every event, tombstone and start estimate past its retention, batch by batch;
    return how many."""
    at = now or datetime.now(UTC)
    events = tombstones = forecasts = 0
    if retention.event_days > 0:
        cutoff = at - timedelta(days=retention.event_days)
        events = await _drain(db, QUERIES["purge_events_before"], cutoff, batch)
    if retention.tombstone_days > 0:
        cutoff = at - timedelta(days=retention.tombstone_days)
        tombstones = await _drain(db, QUERIES["purge_tombstones_before"], cutoff, batch)
    if retention.forecast_days > 0:
        cutoff = at - timedelta(days=retention.forecast_days)
        forecasts = await _drain(db, QUERIES["purge_forecasts_before"], cutoff, batch)
    return Purged(events, tombstones, forecasts)


async def _drain(db: Database, query: LiteralString, cutoff: datetime, batch: int) -> int:
    total = 0
    while True:
        async with db.connection() as conn:
            status = await conn.execute(query, cutoff, batch)
        deleted = int(status.split()[-1])
        total += deleted
        if deleted < batch:
            return total


class Purger:
    """The process's purge task: every `interval` seconds, expired idempotency keys and
    dashboard sessions, then events and tombstones past `retention`; from `start()` until
    `stop()`."""

    def __init__(
        self, db: Database, retention: Retention, *, interval: float = PURGE_INTERVAL_SECONDS
    ) -> None:
        self.db = db
        self.retention = retention
        self.interval = interval
        self._stopping = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name="retention-purge")

    async def stop(self) -> None:
        """Let a round under way finish, then end."""
        self._stopping.set()
        if self.task is not None:
            await self.task

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                async with self.db.connection() as conn:
                    keys = await idempotency.purge_expired(conn)
                    signed_out = await sessions.purge_expired(conn)
                purged = await purge(self.db, self.retention)
                log.debug(
                    "purged %d idempotency keys, %d dashboard sessions, %d events, "
                    "%d tombstones, %d start estimates",
                    keys,
                    signed_out,
                    purged.events,
                    purged.tombstones,
                    purged.forecasts,
                )
            except Exception:  # the next round tries again; the API does not depend on it
                log.warning("purging old rows failed", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)
