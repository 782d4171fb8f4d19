"""A step's status write and its events are one statement: the events land, in order, exactly
when the status does (the audit trail never misses a change nor shows one that did not land)."""

from __future__ import annotations

from app.domain.states import WorkloadState
from app.store import reconciling
from app.store.db import Database
from app.store.leases import ResourceKey
from tests.integration.reconcile.rows import add_workloads

OWNER = "replica-a"


async def _lease(db: Database, key: ResourceKey, *, owner: str = OWNER) -> None:
    async with db.connection() as conn:
        await conn.execute(
            "INSERT INTO leases (kind, resource_id, owner, epoch, expires_at)"
            " VALUES ($1, $2, $3, 1, now() + interval '1 minute')",
            key.kind,
            key.id,
            owner,
        )


async def _write(
    db: Database, key: ResourceKey, *events: reconciling.StatusEvent, generation: int = 1
) -> reconciling.Written:
    async with db.connection() as conn:
        return await reconciling.set_status(
            conn,
            "workload",
            owner=OWNER,
            epoch=1,
            resource_id=key.id,
            generation=generation,
            state=WorkloadState.QUEUED,
            reason="Queued.",
            observed={"job": {"name": "j"}},
            audit=reconciling.Audit(
                project_id=None, resource_name="w", actor="controller:a", events=events
            ),
        )


async def _events(db: Database, key: ResourceKey) -> list[tuple[str, str | None, str]]:
    async with db.connection() as conn:
        rows = await conn.fetch(
            "SELECT type, reason, message FROM events WHERE resource_id = $1 ORDER BY id",
            key.id,
        )
    return [(r["type"], r["reason"], r["message"]) for r in rows]


async def _state(db: Database, key: ResourceKey) -> str:
    async with db.connection() as conn:
        state: str = await conn.fetchval("SELECT state FROM workloads WHERE id = $1", key.id)
    return state


async def test_the_status_and_its_events_land_together_in_order(db: Database) -> None:
    [key] = await add_workloads(db, notify=False)
    await _lease(db, key)

    written = await _write(
        db,
        key,
        reconciling.StatusEvent("JobCreated", "Created Job j.", once_key="JobCreated:1"),
        reconciling.StatusEvent("DriftCorrected", "Restored.", reason="LabelsRestored"),
        reconciling.StatusEvent("Started", "Started."),
    )

    assert (written.held, written.written) == (True, True)
    assert written.age_seconds is not None and written.age_seconds >= 0
    assert await _state(db, key) == "QUEUED"
    assert await _events(db, key) == [
        ("JobCreated", None, "Created Job j."),
        ("DriftCorrected", "LabelsRestored", "Restored."),
        ("Started", None, "Started."),
    ]


async def test_a_fact_recorded_once_is_not_recorded_again(db: Database) -> None:
    [key] = await add_workloads(db, notify=False)
    await _lease(db, key)
    once = reconciling.StatusEvent("JobCreated", "Created Job j.", once_key="JobCreated:1")

    await _write(db, key, once)
    again = await _write(db, key, once, reconciling.StatusEvent("Admitted", "Admitted."))

    assert again.written
    assert [e[0] for e in await _events(db, key)] == ["JobCreated", "Admitted"]


async def test_without_the_lease_or_at_another_generation_nothing_is_recorded(
    db: Database,
) -> None:
    [mine, theirs] = await add_workloads(db, 2, notify=False)
    await _lease(db, mine)
    await _lease(db, theirs, owner="replica-b")
    event = reconciling.StatusEvent("Started", "Started.")

    lost = await _write(db, theirs, event)
    stale = await _write(db, mine, event, generation=2)

    assert (lost.held, lost.written) == (False, False)
    assert (stale.held, stale.written) == (True, False)
    assert await _events(db, theirs) == [] and await _events(db, mine) == []
    assert await _state(db, theirs) == await _state(db, mine) == "PENDING"


async def test_a_write_without_events_records_none(db: Database) -> None:
    [key] = await add_workloads(db, notify=False)
    await _lease(db, key)

    written = await _write(db, key)

    assert written.written
    assert await _events(db, key) == []
