"""How fast rung and unrung resources reach a reconcile step, and the doorbell's resilience."""

from __future__ import annotations

import time
import uuid

import asyncpg
import pytest

from app.domain.errors import StoreUnavailable
from app.store.db import Database
from tests.integration.reconcile.conftest import EngineFactory
from tests.integration.reconcile.rows import add_project, add_workloads, lease_of
from tests.integration.reconcile.steps import Recorder
from tests.support.pg_fixtures import connected
from tests.support.waiting import wait_until


async def test_a_rung_resource_is_reconciled_within_milliseconds(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    engine = recorder.attach(await start_engine(sweep_interval=60.0))

    committed = time.perf_counter()
    key = await add_project(db)
    run = await recorder.started.get()

    assert run.key == key
    assert run.at - committed < 0.5
    assert run.owner == engine.owner and run.epoch == 1
    lease = await lease_of(db, key)
    assert lease is not None and lease["owner"] == engine.owner and lease["live"]


async def test_a_resource_whose_doorbell_was_lost_is_found_by_the_sweep(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    engine = recorder.attach(await start_engine(sweep_interval=0.2))

    [key] = await add_workloads(db, notify=False)

    run = await wait_until(
        lambda: next((r for r in recorder.runs if r.key == key), None), timeout=3
    )
    assert run.owner == engine.owner
    assert engine.holds("workload", key.id)


async def test_the_doorbell_reconnects_after_its_connection_is_killed_and_sweeps_what_it_missed(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    # A sweep interval far beyond the test's timeouts: only the reconnect's sweep can find the
    # resource rung while nobody listened.
    engine = recorder.attach(await start_engine(sweep_interval=600.0, probe_interval=0.2))
    await wait_until(lambda: engine.sweeper.sweeps >= 1, timeout=3)
    pid = engine.doorbell.backend_pid
    assert pid is not None

    async with db.connection() as conn:
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
        [missed] = await add_workloads(db, notify=True)

    await wait_until(lambda: engine.doorbell.connects >= 2, timeout=5, message="reconnect")
    assert engine.doorbell.backend_pid not in (None, pid)
    await wait_until(lambda: recorder.ran(missed), timeout=5, message="missed key reconciled")

    rung = await add_project(db)
    await wait_until(lambda: recorder.ran(rung), timeout=2, message="doorbell after reconnect")


async def test_a_malformed_or_unknown_doorbell_is_ignored(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    recorder.attach(await start_engine(sweep_interval=600.0))
    async with db.connection() as conn:
        for payload in ("nonsense", "cluster:1", "workload:not-a-uuid", f"pool:{uuid.uuid4()}"):
            await conn.execute("SELECT pg_notify('aicp_work', $1)", payload)
    key = await add_project(db)

    await wait_until(lambda: recorder.ran(key), timeout=2)
    assert [r.key for r in recorder.runs] == [key]
    async with db.connection() as conn:
        assert await conn.fetchval("SELECT count(*) FROM leases") == 1


async def test_the_engine_keeps_working_after_every_database_connection_is_killed(
    db: Database, start_engine: EngineFactory, database_url: str
) -> None:
    recorder = Recorder()
    engine = recorder.attach(await start_engine(sweep_interval=0.1, probe_interval=0.2))
    [before] = await add_workloads(db)
    await wait_until(lambda: recorder.ran(before), timeout=3)
    connects = engine.doorbell.connects

    async with connected(database_url) as admin:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    assert killed >= 2  # the pool's connections and the doorbell's

    await wait_until(lambda: engine.doorbell.connects > connects, timeout=5)

    async def add_after_outage() -> list[object]:
        try:
            return list(await add_workloads(db))
        except (StoreUnavailable, asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
            return []  # the test's own pool meets a dead connection first

    [after] = await wait_until(add_after_outage, timeout=5)
    await wait_until(lambda: recorder.ran(after), timeout=5)
    assert engine.holds("workload", before.id)


async def test_start_fails_clearly_when_the_database_cannot_be_reached(
    db: Database, start_engine: EngineFactory
) -> None:
    with pytest.raises(TimeoutError):
        await start_engine(dsn="postgresql://postgres@127.0.0.1:1/nowhere", start_timeout=0.5)
