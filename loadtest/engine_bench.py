"""Reconcile engine latency and claim throughput, against a real PostgreSQL.

    .venv/bin/python loadtest/engine_bench.py --submissions 1000 --claims 20000

Creates a throwaway database (migrated), runs one engine whose steps only record when they
start, and measures:

1. doorbell latency: `--submissions` workloads inserted one per transaction with
   `pg_notify('aicp_work', 'workload:<id>')`, `--concurrency` writers at a time; for each, the
   time from the commit returning to the reconcile step starting (p50/p99);
2. doorbell throughput: `--claims` workloads inserted in one transaction, each rung: time until
   every step has started (claims per second through NOTIFY → batched claim → queue → worker);
3. sweep throughput: `--claims` workloads inserted without a doorbell: time until the sweep
   has claimed them all (claims per second, batch `--batch` per kind);
4. with every workload leased and running: the cost of one sweep that finds nothing, and of
   one renewal of every lease.

Prints one line per measurement. The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.reconcile.engine import EngineConfig, Reconciler
from app.reconcile.workers import Result
from app.store.db import Database
from app.store.listener import Listener
from app.store.migrations import migrate
from loadtest.databases import with_database
from loadtest.latency import report

if TYPE_CHECKING:
    from app.reconcile.fencing import Fence


class Starts:
    """A step that records when each resource's first step started."""

    def __init__(self) -> None:
        self.at: dict[uuid.UUID, float] = {}
        self.waiters: dict[uuid.UUID, asyncio.Future[float]] = {}
        self.everything = asyncio.Event()
        self.expected = 0

    async def step(self, resource_id: uuid.UUID, fence: Fence, /) -> Result:
        now = time.perf_counter()
        if resource_id not in self.at:
            self.at[resource_id] = now
            waiter = self.waiters.pop(resource_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(now)
            if self.expected and len(self.at) >= self.expected:
                self.everything.set()
        return Result.done()


SETUP = """
INSERT INTO accelerator_bindings (accelerator_class, resource_name, flavor)
VALUES ('h100-80g', 'nvidia.com/gpu', 'h100');
INSERT INTO projects (id, name, created_by, observed_generation, state)
VALUES ('00000000-0000-0000-0000-000000000001', 'bench', 'admin', 1, 'READY');
INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec, created_by,
                           observed_generation, state)
VALUES ('00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000001',
        'gpus', 'h100-80g', '{}', 'admin', 1, 'READY');
"""
PROJECT = uuid.UUID("00000000-0000-0000-0000-000000000001")
POOL = uuid.UUID("00000000-0000-0000-0000-000000000002")
INSERT = (
    "INSERT INTO workloads (id, project_id, pool_id, name, spec, created_by)"
    " VALUES ($1, $2, $3, $4, '{}', 'bench')"
)
INSERT_MANY = (
    "INSERT INTO workloads (id, project_id, pool_id, name, spec, created_by)"
    " SELECT id, $2, $3, 'w-' || id::text, '{}', 'bench' FROM unnest($1::uuid[]) AS id"
)


async def submit(db: Database, starts: Starts) -> float:
    """One workload, one transaction with its doorbell; ms from commit to step start."""
    wid = uuid.uuid4()
    waiter = asyncio.get_running_loop().create_future()
    starts.waiters[wid] = waiter
    async with db.transaction() as conn:
        await conn.execute(INSERT, wid, PROJECT, POOL, f"w-{wid.hex}")
        await conn.execute("SELECT pg_notify('aicp_work', $1)", f"workload:{wid}")
    committed = time.perf_counter()
    started = await asyncio.wait_for(waiter, 10)
    return (started - committed) * 1000


async def latency(db: Database, starts: Starts, submissions: int, concurrency: int) -> None:
    samples: list[float] = []

    async def writer(count: int) -> None:
        for _ in range(count):
            samples.append(await submit(db, starts))

    share = [
        submissions // concurrency + (i < submissions % concurrency) for i in range(concurrency)
    ]
    await asyncio.gather(*(writer(n) for n in share))
    report(f"commit -> step start (c={concurrency})", samples, number="6.2f")


async def burst(db: Database, engine: Reconciler, starts: Starts, count: int, ring: bool) -> None:
    ids = [uuid.uuid4() for _ in range(count)]
    starts.everything.clear()
    starts.expected = len(starts.at) + count
    async with db.transaction() as conn:
        await conn.execute(INSERT_MANY, ids, PROJECT, POOL)
        if ring:
            await conn.execute(
                "SELECT pg_notify('aicp_work', 'workload:' || id::text)"
                " FROM unnest($1::uuid[]) AS id",
                ids,
            )
    committed = time.perf_counter()
    await asyncio.wait_for(starts.everything.wait(), 300)
    seconds = time.perf_counter() - committed
    path = "doorbell" if ring else "sweep"
    print(
        f"{path + ' claims':<34} n={count}  {seconds:6.2f} s  {count / seconds:8.0f} claims/s"
        f"  (leases held: {len(engine.book)})"
    )


async def idle_costs(engine: Reconciler) -> None:
    """With every resource leased: what one sweep (finding nothing) and one renewal cost."""
    for title, probe in (
        ("idle sweep", engine.sweeper.sweep_once),
        ("renewal", engine.keeper.renew_once),
    ):
        samples = []
        for _ in range(10):
            started = time.perf_counter()
            await probe()
            samples.append((time.perf_counter() - started) * 1000)
        report(f"{title} ({len(engine.book)} leases held)", samples, number="6.2f")


async def main(args: argparse.Namespace) -> None:
    name = f"aicp_engine_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(args.admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(args.admin_url, name)
    db = await Database.connect(url, size=args.pool_size)
    listener = Listener(url, application_name="aicp engine bench")
    listening = asyncio.create_task(listener.run(), name="listener")
    engine: Reconciler | None = None
    try:
        await migrate(db)
        async with db.connection() as conn:
            await conn.execute(SETUP)
        starts = Starts()
        engine = Reconciler(
            db,
            EngineConfig(
                instance_id="bench",
                lease_ttl=30.0,
                sweep_interval=args.sweep_interval,
                workers=args.workers,
                sweep_batch=args.batch,
            ),
            listener,
        )
        engine.register("workload", starts.step)
        await engine.start()
        await latency(db, starts, args.submissions, 1)
        await latency(db, starts, args.submissions, args.concurrency)
        await burst(db, engine, starts, args.claims, ring=True)
        await burst(db, engine, starts, args.claims, ring=False)
        await idle_costs(engine)
    finally:
        if engine is not None:
            await engine.stop(grace=1.0)
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        await db.close()
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--sweep-interval", type=float, default=1.0)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(parser.parse_args()))
