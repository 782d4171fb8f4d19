"""The reconcile engine starting while PostgreSQL refuses connections: it waits (bounded by
its start timeout) instead of failing at the first refusal, and gives up with an error past
the bound so the process supervisor can end the process."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.reconcile.engine import EngineConfig, Reconciler
from app.store.db import Database
from tests.faults.processes import PgProxy
from tests.support.waiting import wait_until


async def test_an_engine_starting_while_the_database_refuses_waits_for_it(
    proxy: PgProxy, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = await Database.connect(proxy.url_for(database_url), size=2)
    engine = Reconciler(db, EngineConfig("replica-a", proxy.url_for(database_url)))
    try:
        await proxy.refuse()
        starting = asyncio.create_task(engine.start())
        await wait_until(
            lambda: "database unavailable" in caplog.text or starting.done(), timeout=10
        )
        assert not starting.done()  # refused, and still trying
        await proxy.start()
        reopened = time.monotonic()
        await asyncio.wait_for(starting, 30)
        assert await engine.readiness() is None
        assert time.monotonic() - reopened < 5.0
    finally:
        await engine.stop(grace=1.0)
        await db.close()


async def test_an_engine_that_cannot_reach_the_database_in_time_fails_its_start(
    proxy: PgProxy, database_url: str
) -> None:
    db = await Database.connect(proxy.url_for(database_url), size=2)
    engine = Reconciler(
        db, EngineConfig("replica-a", proxy.url_for(database_url), start_timeout=2.0)
    )
    try:
        await proxy.refuse()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(engine.start(), 10)
    finally:
        await engine.halt()
        await db.close()
