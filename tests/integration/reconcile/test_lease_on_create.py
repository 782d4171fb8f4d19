"""The accepting replica may lease a new resource in its creating transaction: no doorbell."""

from __future__ import annotations

import uuid

import pytest

from app.store.db import Database
from tests.integration.reconcile.conftest import EngineFactory
from tests.integration.reconcile.steps import Recorder
from tests.support.waiting import wait_until

INSERT_PROJECT = "INSERT INTO projects (id, name, created_by) VALUES ($1, $2, 'admin')"


async def test_a_resource_leased_in_its_creating_transaction_runs_here_without_a_doorbell(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    # No sweeps during the test: only the local enqueue can explain the run.
    here = recorder.attach(await start_engine("here", sweep_interval=600.0))
    peer = recorder.attach(await start_engine("peer", sweep_interval=0.1))
    project = uuid.uuid4()

    async with db.transaction() as conn:
        await conn.execute(INSERT_PROJECT, project, "created-here")
        lease = await here.lease_new(conn, "project", project)
    assert lease is not None
    here.lease_committed(lease)

    run = await wait_until(lambda: next(iter(recorder.runs), None), timeout=2)
    assert run.owner == here.owner and run.key.id == project
    sweeps = peer.sweeper.sweeps
    await wait_until(lambda: peer.sweeper.sweeps >= sweeps + 3, timeout=3)
    assert recorder.owners(run.key) == {here.owner}


class RequestFailed(Exception):
    """A request that fails after taking the lease, rolling its transaction back."""


async def test_a_lease_taken_in_a_rolled_back_transaction_leaves_nothing_behind(
    db: Database, start_engine: EngineFactory
) -> None:
    engine = await start_engine(sweep_interval=600.0)
    project = uuid.uuid4()

    with pytest.raises(RequestFailed):
        async with db.transaction() as conn:
            await conn.execute(INSERT_PROJECT, project, "rolled-back")
            assert await engine.lease_new(conn, "project", project) is not None
            raise RequestFailed

    async with db.connection() as check:
        assert await check.fetchval("SELECT count(*) FROM leases") == 0


async def test_a_lease_never_reported_as_committed_is_freed_and_swept_up(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    engine = recorder.attach(await start_engine(lease_ttl=0.9, sweep_interval=0.1))
    project = uuid.uuid4()
    async with db.transaction() as conn:
        await conn.execute(INSERT_PROJECT, project, "handler-died")
        assert await engine.lease_new(conn, "project", project) is not None
    # ... and the request handler died before calling lease_committed.

    run = await wait_until(lambda: next(iter(recorder.runs), None), timeout=5)
    assert run.key.id == project and run.owner == engine.owner
    assert engine.keeper.strays_released == 1
