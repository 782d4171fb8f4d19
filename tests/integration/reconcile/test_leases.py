"""Leases between replicas: exclusivity, renewal, takeover, release, fencing."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from app.reconcile.errors import LeaseLost
from app.reconcile.fencing import Fence, fenced_execute, fenced_transaction
from app.reconcile.workers import Result
from app.store import leases
from app.store.db import Database
from app.store.leases import ResourceKey
from tests.integration.reconcile.conftest import EngineFactory
from tests.integration.reconcile.rows import (
    add_workloads,
    finish_workload,
    lease_of,
    lease_released,
    leave_leases,
)
from tests.integration.reconcile.steps import Recorder
from tests.support.waiting import wait_until

# The shape every observation write takes (app/reconcile/fencing.py): $1 owner, $2 epoch.
FENCED_OBSERVATION = """
UPDATE workloads w SET state = $4
FROM leases l
WHERE w.id = $3
  AND l.kind = 'workload' AND l.resource_id = w.id
  AND l.owner = $1 AND l.epoch = $2 AND l.expires_at > now()
"""


async def test_two_replicas_never_run_one_resource_at_once_and_each_ignores_the_others(
    db: Database, start_engine: EngineFactory
) -> None:
    async def slow(fence: Fence, attempt: int) -> Result:
        await asyncio.sleep(0.01)  # a step's own I/O, so steps overlap
        return Result.requeue(after=0.05)

    recorder = Recorder(behaviour=slow)
    a = recorder.attach(await start_engine("a", lease_ttl=5.0))
    b = recorder.attach(await start_engine("b", lease_ttl=5.0))

    keys = await add_workloads(db, 40)
    await wait_until(lambda: all(recorder.ran(k) for k in keys), timeout=5)
    # Both replicas keep requeueing and informers keep poking: the other one must not bite.
    for key in keys:
        a.enqueue_local("workload", key.id)
        b.enqueue_local("workload", key.id)
    await wait_until(lambda: all(recorder.attempts(k) >= 3 for k in keys), timeout=5)

    assert recorder.max_in_flight == 1
    assert all(len(recorder.owners(k)) == 1 for k in keys)
    a_keys = [k for k in keys if a.holds("workload", k.id)]
    b_keys = [k for k in keys if b.holds("workload", k.id)]
    assert len(a_keys) + len(b_keys) == len(keys)
    assert not set(a_keys) & set(b_keys)


async def test_leases_outlive_their_ttl_while_the_replica_renews_them(
    db: Database, start_engine: EngineFactory
) -> None:
    ttl = 1.0
    recorder = Recorder()
    engine = recorder.attach(await start_engine(lease_ttl=ttl))
    [key] = await add_workloads(db)
    await wait_until(lambda: recorder.ran(key), timeout=5)
    first = await _expiry(db, key)

    async def renewed_past_the_first_ttl() -> bool:
        # The lease's own expiry, by the database clock, moved more than one ttl on: it was
        # renewed more than once, not merely still inside its first ttl.
        return (await _expiry(db, key) - first).total_seconds() > ttl

    await wait_until(renewed_past_the_first_ttl, timeout=10, message="two renewals")

    assert engine.holds("workload", key.id)
    lease = await lease_of(db, key)
    assert lease is not None and lease["live"] and lease["epoch"] == 1


async def _expiry(db: Database, key: ResourceKey) -> datetime:
    async with db.connection() as conn:
        expires: datetime = await conn.fetchval(
            "SELECT expires_at FROM leases WHERE kind = $1 AND resource_id = $2", key.kind, key.id
        )
    return expires


async def test_a_peer_takes_over_when_a_replica_dies_within_ttl_plus_sweep(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    ttl, sweep = 1.0, 0.2
    a = recorder.attach(await start_engine("a", lease_ttl=ttl, sweep_interval=sweep))
    keys = await add_workloads(db, 5)
    await wait_until(lambda: all(recorder.ran(k) for k in keys), timeout=3)
    b = recorder.attach(await start_engine("b", lease_ttl=ttl, sweep_interval=sweep))

    died = time.perf_counter()
    await a.halt()  # no release: the leases must run out

    await wait_until(lambda: all(b.holds("workload", k.id) for k in keys), timeout=ttl + 2)
    taken = time.perf_counter() - died
    assert taken < ttl + sweep + 0.8
    for key in keys:
        last = [r for r in recorder.runs if r.key == key][-1]
        assert last.owner == b.owner
        assert last.epoch == 2  # the owner changed once


async def test_a_graceful_shutdown_hands_leases_to_the_peer_at_once(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    # Long TTL and sweep: only the release (and its doorbells) can explain a quick takeover.
    a = recorder.attach(await start_engine("a", lease_ttl=30.0, sweep_interval=30.0))
    keys = await add_workloads(db, 5)
    await wait_until(lambda: all(recorder.ran(k) for k in keys), timeout=3)
    b = recorder.attach(await start_engine("b", lease_ttl=30.0, sweep_interval=30.0))

    stopped = time.perf_counter()
    await a.stop(grace=1.0)
    await wait_until(lambda: all(b.holds("workload", k.id) for k in keys), timeout=3)

    assert time.perf_counter() - stopped < 1.0
    assert len(a.book) == 0


async def test_graceful_shutdown_lets_a_running_step_finish_within_the_grace(
    db: Database, start_engine: EngineFactory
) -> None:
    release = asyncio.Event()
    finished: list[bool] = []

    async def slow(fence: Fence, attempt: int) -> Result:
        await release.wait()
        finished.append(True)
        return Result.done()

    recorder = Recorder(behaviour=slow)
    engine = recorder.attach(await start_engine())
    [key] = await add_workloads(db)
    await recorder.started.get()

    stopping = asyncio.ensure_future(engine.stop(grace=5.0))
    _, pending = await asyncio.wait({stopping}, timeout=0.1)
    assert pending, "stop must wait for the step in flight"
    release.set()
    await asyncio.wait_for(stopping, 5)

    assert finished == [True]
    assert await lease_released(db, key)


async def test_a_fenced_write_after_the_lease_moved_raises_lease_lost_and_drops_the_key(
    db: Database, start_engine: EngineFactory
) -> None:
    outcomes: list[str] = []
    steal = asyncio.Event()

    async def observe(fence: Fence, attempt: int) -> Result:
        if attempt == 1:
            return Result.requeue(after=0.05)
        async with db.connection() as conn:
            if not steal.is_set():
                # A peer took the lease over (as after a long pause of this replica).
                await conn.execute(
                    "UPDATE leases SET owner = 'peer', epoch = epoch + 1"
                    " WHERE kind = $1 AND resource_id = $2",
                    fence.kind,
                    fence.resource_id,
                )
                steal.set()
            try:
                await fenced_execute(conn, FENCED_OBSERVATION, fence, fence.resource_id, "RUNNING")
            except LeaseLost:
                outcomes.append("lost")
                raise
        outcomes.append("written")
        return Result.done()

    recorder = Recorder(behaviour=observe)
    engine = recorder.attach(await start_engine())
    [key] = await add_workloads(db)

    await wait_until(lambda: outcomes, timeout=3)
    assert outcomes == ["lost"]
    # The step appended "lost" just before raising; the worker drops the key as it catches it.
    await wait_until(lambda: not engine.holds("workload", key.id), timeout=2)
    engine.enqueue_local("workload", key.id)  # an informer event after the loss is ignored
    async with db.connection() as conn:
        assert await conn.fetchval("SELECT state FROM workloads WHERE id = $1", key.id) == "PENDING"
    assert recorder.attempts(key) == 2


async def test_a_fenced_transaction_runs_only_while_the_lease_is_held(
    db: Database, start_engine: EngineFactory
) -> None:
    fences: list[Fence] = []

    async def keep(fence: Fence, attempt: int) -> Result:
        fences.append(fence)
        return Result.done()

    engine = Recorder(behaviour=keep).attach(await start_engine())
    [key] = await add_workloads(db)
    fence = await wait_until(lambda: fences and fences[0], timeout=3)

    async with fenced_transaction(db, fence) as conn:
        await conn.execute("UPDATE workloads SET state = 'QUEUED' WHERE id = $1", key.id)
    await engine.stop(grace=0)  # releases the lease

    with pytest.raises(LeaseLost):
        async with fenced_transaction(db, fence) as conn:
            await conn.execute("UPDATE workloads SET state = 'RUNNING' WHERE id = $1", key.id)
    async with db.connection() as conn:
        assert await conn.fetchval("SELECT state FROM workloads WHERE id = $1", key.id) == "QUEUED"


async def test_a_step_that_releases_its_lease_leaves_the_resource_to_anyone(
    db: Database, start_engine: EngineFactory
) -> None:
    async def finish(fence: Fence, attempt: int) -> Result:
        await finish_workload(db, fence.key)
        return Result.release()

    recorder = Recorder(behaviour=finish)
    engine = recorder.attach(await start_engine())
    [key] = await add_workloads(db)

    await wait_until(lambda: recorder.ran(key), timeout=3)
    await wait_until(lambda: lease_released(db, key), timeout=3)
    # Finished and released: later sweeps leave it alone.
    runs, sweeps = recorder.attempts(key), engine.sweeper.sweeps
    await wait_until(lambda: engine.sweeper.sweeps >= sweeps + 3, timeout=3)
    assert recorder.attempts(key) == runs
    assert not engine.holds("workload", key.id)


async def test_a_released_lease_names_nobody_and_taking_it_again_is_a_new_epoch(
    db: Database, start_engine: EngineFactory
) -> None:
    # A finished resource's released lease stays in the table for good; it must not stay in
    # its last owner's set (renewal, resync and counts walk that set every few seconds).
    finished = False

    async def finish_once(fence: Fence, attempt: int) -> Result:
        nonlocal finished
        if not finished:
            finished = True
            await finish_workload(db, fence.key)
        return Result.release()

    recorder = Recorder(behaviour=finish_once)
    engine = recorder.attach(await start_engine())
    [key] = await add_workloads(db)

    await wait_until(lambda: lease_released(db, key), timeout=3)
    first = await lease_of(db, key)
    assert first is not None and first["owner"] == ""
    assert await leases.held_count(db.pool, owner=engine.owner) == 0

    # A new generation needs work again: the sweep claims it back, as a change of owner.
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE workloads SET generation = generation + 1, updated_at = now() WHERE id = $1",
            key.id,
        )
    runs = recorder.attempts(key)
    await wait_until(lambda: recorder.attempts(key) > runs, timeout=5)
    again = await lease_of(db, key)
    assert again is not None and again["epoch"] == first["epoch"] + 1


async def test_a_burst_of_doorbells_racing_the_sweep_on_two_replicas_claims_everything_cleanly(
    db: Database, start_engine: EngineFactory, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    a = recorder.attach(await start_engine("a", sweep_interval=0.05, lease_ttl=10.0))
    b = recorder.attach(await start_engine("b", sweep_interval=0.05, lease_ttl=10.0))

    keys = await add_workloads(db, 400)  # one transaction, 400 doorbells

    await wait_until(lambda: all(recorder.ran(k) for k in keys), timeout=15)
    assert len(a.book) + len(b.book) == len(keys)
    assert all(len(recorder.owners(k)) == 1 for k in keys)
    failures = [r for r in caplog.records if r.name.startswith("app.reconcile") and r.exc_info]
    assert not failures, [r.getMessage() for r in failures]


async def test_a_lease_taken_over_in_the_database_is_dropped_at_the_next_renewal(
    db: Database, start_engine: EngineFactory
) -> None:
    recorder = Recorder()
    engine = recorder.attach(await start_engine(lease_ttl=0.9))
    kept, taken = await add_workloads(db, 2)
    await wait_until(lambda: engine.holds("workload", taken.id), timeout=3)

    async with db.connection() as conn:
        await conn.execute(
            "UPDATE leases SET owner = 'peer', epoch = epoch + 1 WHERE resource_id = $1",
            taken.id,
        )

    await wait_until(lambda: not engine.holds("workload", taken.id), timeout=2)
    assert engine.holds("workload", kept.id)
    assert not engine.enqueue_local("workload", taken.id)  # a peer's resource: ignored
    assert engine.enqueue_local("workload", kept.id)


async def test_a_replica_restarted_under_the_same_owner_takes_its_old_leases_over_at_start(
    db: Database, start_engine: EngineFactory
) -> None:
    """The dead incarnation's lease is expired at start, never renewed: the new process (or a
    peer) takes it over at once, under a new epoch, instead of after its TTL."""
    [key] = await add_workloads(db, notify=False)
    # What the previous process under this owner left behind when it died.
    await leave_leases(db, [key], owner="pod-0", epoch=4, lasting=timedelta(hours=1))
    recorder = Recorder()
    engine = recorder.attach(await start_engine(instance_id="pod-0", lease_ttl=0.9))

    run = await wait_until(lambda: next(iter(recorder.runs), None), timeout=5)
    assert run.key == key and run.owner == "pod-0"
    assert run.epoch == 5  # a new incarnation is a new owner: the old fence no longer fits
    assert engine.keeper.strays_released == 0  # nothing was renewed only to be released
    assert engine.holds("workload", key.id)


async def test_a_dead_peers_lease_is_taken_over_as_it_expires_not_at_the_next_sweep_tick(
    db: Database, start_engine: EngineFactory
) -> None:
    """The sweep wakes when a peer's lease on a resource that needs work runs out: a dead
    replica's work moves at its lease's expiry, even with a sweep interval far longer."""
    [key] = await add_workloads(db, notify=False)
    # A replica that died holding the workload: its lease runs out in 1.5 s.
    await leave_leases(db, [key], owner="dead-peer", epoch=2, lasting=timedelta(seconds=1.5))
    expires = await _expiry(db, key)
    recorder = Recorder()
    engine = recorder.attach(await start_engine(sweep_interval=30.0))

    run = await wait_until(lambda: next(iter(recorder.runs), None), timeout=10, interval=0.01)
    async with db.connection() as conn:
        late = await conn.fetchval(
            "SELECT extract(epoch FROM now() - $1::timestamptz)::float8", expires
        )
    assert run.key == key and run.owner == engine.owner and run.epoch == 3
    assert late < 1.0, late  # at the expiry, not at the 30 s tick


async def test_a_dead_peers_many_leases_are_claimed_in_a_few_large_batches(
    db: Database, start_engine: EngineFactory
) -> None:
    """The sweep the alarm wakes claims in the largest batch (16 times the configured one),
    and full batches keep it sweeping: 250 leases move in two statements, not 25."""
    keys = await add_workloads(db, 250, notify=False)
    await leave_leases(db, keys, owner="dead-peer", epoch=1, lasting=timedelta(seconds=1.5))
    engine = await start_engine(sweep_interval=30.0, sweep_batch=10)
    # the sweep at start: nothing due yet, so it sets its alarm for the expiry
    await wait_until(lambda: engine.sweeper.next_expiry is not None, timeout=5, interval=0.01)
    before = engine.sweeper.sweeps

    await wait_until(
        lambda: all(engine.holds("workload", key.id) for key in keys), timeout=10, interval=0.01
    )
    # 160 (the alarm's batch), then the remaining 90 in a batch of up to 320
    assert engine.sweeper.sweeps - before == 2


async def test_a_renewal_does_not_wait_for_a_lease_row_a_step_has_locked(
    db: Database, start_engine: EngineFactory
) -> None:
    """A step's fenced write holds its lease row FOR SHARE until it commits. The renewal skips
    that row instead of queueing behind it (and behind every other step in turn): the other
    leases are extended at once, the locked one stays held at its current deadline."""
    recorder = Recorder()
    engine = recorder.attach(await start_engine(lease_ttl=6.0))
    locked, free = await add_workloads(db, 2)
    await wait_until(lambda: recorder.ran(locked) and recorder.ran(free), timeout=5)
    before = {key: await _expiry(db, key) for key in (locked, free)}

    async with db.transaction() as step:  # a step's write in flight on `locked`
        await step.execute(
            "SELECT 1 FROM leases WHERE kind = $1 AND resource_id = $2 FOR SHARE",
            locked.kind,
            locked.id,
        )
        skipped = engine.keeper.busy_skipped
        await asyncio.wait_for(engine.keeper.renew_once(), timeout=1.0)

        assert engine.keeper.busy_skipped == skipped + 1
        assert await _expiry(db, free) > before[free]
        assert await _expiry(db, locked) == before[locked]
        assert engine.holds("workload", locked.id) and engine.holds("workload", free.id)

    await asyncio.wait_for(engine.keeper.renew_once(), timeout=1.0)
    assert await _expiry(db, locked) > before[locked]  # renewed once the step committed


async def test_leases_are_renewed_while_every_pooled_connection_is_busy(
    db: Database, start_engine: EngineFactory
) -> None:
    """Renewals have a connection of their own: a replica whose workers and API requests hold
    the whole pool (a burst after an outage) still renews before its leases lapse."""
    recorder = Recorder()
    engine = recorder.attach(await start_engine(lease_ttl=6.0))
    [key] = await add_workloads(db)
    await wait_until(lambda: recorder.ran(key), timeout=5)
    await asyncio.wait_for(engine.keeper.renew_once(), timeout=5.0)  # its connection is open
    before = await _expiry(db, key)

    async with _every_pooled_connection_taken(db):
        await asyncio.wait_for(engine.keeper.renew_once(), timeout=1.0)

    assert await _expiry(db, key) > before
    assert engine.holds("workload", key.id)


async def test_a_dead_peers_lease_is_taken_over_while_every_pooled_connection_is_busy(
    db: Database, start_engine: EngineFactory
) -> None:
    """The sweep runs on the reserved connections too: a replica whose workers hold the whole
    pool (the burst a dead peer leaves behind) still takes the peer's leases over as they
    expire, not once a pooled connection frees up."""
    [key] = await add_workloads(db, notify=False)
    await leave_leases(db, [key], owner="dead-peer", epoch=1, lasting=timedelta(seconds=2))
    engine = Recorder().attach(await start_engine(sweep_interval=30.0))
    await asyncio.wait_for(engine.keeper.renew_once(), timeout=5.0)  # reserved pool open
    assert not engine.holds("workload", key.id)

    async with _every_pooled_connection_taken(db):
        await wait_until(lambda: engine.holds("workload", key.id), timeout=4, interval=0.02)


@contextlib.asynccontextmanager
async def _every_pooled_connection_taken(db: Database) -> AsyncIterator[None]:
    """The shared pool fully in use (workers and requests holding it), for the block."""
    held = [await db.pool.acquire() for _ in range(db.size)]
    try:
        yield
    finally:
        for conn in held:
            await db.pool.release(conn)
