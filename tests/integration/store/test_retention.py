"""Events and tombstones past their retention are purged; everything younger stays."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from app.store import retention, sessions
from app.store.db import Database
from app.store.retention import Purger, Retention
from tests.integration.reconcile.rows import add_workloads
from tests.support.waiting import wait_until

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def _events(db: Database, ages_in_days: list[float]) -> None:
    """One event per age, written oldest first (as events are)."""
    async with db.connection() as conn:
        for age in sorted(ages_in_days, reverse=True):
            await conn.execute(
                "INSERT INTO events (kind, resource_id, resource_name, at, type, actor)"
                " VALUES ('workload', $1, 'w', $2, 'Accepted', 'admin')",
                uuid.uuid4(),
                NOW - timedelta(days=age),
            )


async def _tombstones(db: Database, ages_in_days: list[float]) -> None:
    async with db.connection() as conn:
        for age in ages_in_days:
            await conn.execute(
                "INSERT INTO tombstones (kind, resource_id, name, deleted_at)"
                " VALUES ('workload', $1, 'w', $2)",
                uuid.uuid4(),
                NOW - timedelta(days=age),
            )


async def _ages(db: Database, table: str, column: str) -> list[int]:
    async with db.connection() as conn:
        rows = await conn.fetch(f"SELECT {column} AS t FROM {table} ORDER BY {column}")
    return sorted(round((NOW - row["t"]).total_seconds() / 86400) for row in rows)


async def test_events_and_tombstones_older_than_their_retention_go_and_the_rest_stay(
    db: Database,
) -> None:
    await _events(db, [400, 91, 89, 1, 0])
    await _tombstones(db, [45, 31, 29, 2])

    purged = await retention.purge(db, Retention(event_days=90, tombstone_days=30), now=NOW)

    assert (purged.events, purged.tombstones) == (2, 2)
    assert await _ages(db, "events", "at") == [0, 1, 89]
    assert await _ages(db, "tombstones", "deleted_at") == [2, 29]


async def test_zero_days_keeps_them_forever(db: Database) -> None:
    await _events(db, [4000])
    await _tombstones(db, [4000])

    purged = await retention.purge(db, Retention(event_days=0, tombstone_days=0), now=NOW)

    assert (purged.events, purged.tombstones) == (0, 0)
    assert await _ages(db, "events", "at") == [4000]


async def test_a_purge_larger_than_one_batch_drains_in_batches(db: Database) -> None:
    await _events(db, [100] * 7 + [1])

    purged = await retention.purge(
        db, Retention(event_days=90, tombstone_days=30), now=NOW, batch=3
    )

    assert purged.events == 7
    assert await _ages(db, "events", "at") == [1]


async def test_the_purge_round_forgets_expired_dashboard_sessions_and_keeps_live_ones(
    db: Database,
) -> None:
    admin = "a" * 32
    # A sign-in purges the expired sessions before it opens its own, so the live one comes first.
    await sessions.open_session(db, token_id=None, admin_token=admin, lifetime_seconds=3600)
    await sessions.open_session(db, token_id=None, admin_token=admin, lifetime_seconds=-1)

    async def stored() -> int:
        async with db.connection() as conn:
            return int(await conn.fetchval("SELECT count(*) FROM dashboard_sessions"))

    assert await stored() == 2
    purger = Purger(db, Retention(event_days=90, tombstone_days=30), interval=3600)
    await purger.start()
    try:
        await wait_until(lambda: _one_left(stored), timeout=10, message="expired session purged")
    finally:
        await purger.stop()


async def _one_left(stored: Callable[[], Awaitable[int]]) -> bool:
    return await stored() == 1


async def _forecast(
    db: Database,
    workload: uuid.UUID,
    made_days_ago: float,
    started_days_ago: float | None,
) -> None:
    """One estimate of `workload`'s generation 1, made and (if given) scored that long ago."""
    async with db.connection() as conn:
        await conn.execute(
            "INSERT INTO workload_forecasts (workload_id, pool_id, generation, made_at,"
            " position, basis, started_at)"
            " SELECT id, pool_id, 1, $2, 1, 'made $2', $3 FROM workloads WHERE id = $1",
            workload,
            NOW - timedelta(days=made_days_ago),
            None if started_days_ago is None else NOW - timedelta(days=started_days_ago),
        )


async def test_start_estimates_go_after_their_retention_unless_their_workload_still_waits(
    db: Database,
) -> None:
    [waiting] = await add_workloads(db, notify=False, state="QUEUED")
    [started] = await add_workloads(db, notify=False, state="RUNNING")
    await _forecast(db, started.id, 40, 35)  # scored long ago: goes
    await _forecast(db, started.id, 40, 20)  # made long ago, scored within the retention: stays
    await _forecast(db, started.id, 10, 9)  # recent: stays
    await _forecast(db, started.id, 45, None)  # never scored, its workload moved on: goes
    await _forecast(db, waiting.id, 45, None)  # still waiting for its admission: stays

    purged = await retention.purge(
        db, Retention(event_days=90, tombstone_days=30, forecast_days=30), now=NOW, batch=1
    )

    assert purged.forecasts == 2
    async with db.connection() as conn:
        kept = await conn.fetch(
            "SELECT workload_id, round(extract(epoch FROM $1 - made_at) / 86400) AS age"
            " FROM workload_forecasts ORDER BY made_at",
            NOW,
        )
    assert [(row["workload_id"], int(row["age"])) for row in kept] == [
        (waiting.id, 45),
        (started.id, 40),
        (started.id, 10),
    ]
    untouched = await retention.purge(db, Retention(event_days=0, tombstone_days=0), now=NOW)
    assert untouched.forecasts == 0
