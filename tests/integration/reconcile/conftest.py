"""Fixtures for the reconcile engine: a pool on the per-test database, and running engines.

`database_url` (tests/support/pg_fixtures.py) is a fresh copy of the migrated template per test.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from app.reconcile.engine import EngineConfig, Reconciler
from app.store.db import Database
from tests.support.listening import listening


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = await Database.connect(database_url, size=8)
    yield database
    await database.close()


EngineFactory = Callable[..., Awaitable[Reconciler]]


@pytest.fixture
async def start_engine(db: Database, database_url: str) -> AsyncIterator[EngineFactory]:
    """Start engines (replicas) sharing the test database, each with its own LISTEN connection
    (`dsn`, `probe_interval`: the listener's); each is stopped at teardown."""
    engines: list[Reconciler] = []
    async with contextlib.AsyncExitStack() as listeners:

        async def start(
            name: str = "replica-a",
            *,
            dsn: str = database_url,
            probe_interval: float = 0.5,
            **overrides: object,
        ) -> Reconciler:
            settings: dict[str, object] = {
                "instance_id": f"{name}-{uuid.uuid4().hex[:6]}",
                "lease_ttl": 2.0,
                "sweep_interval": 0.2,
                "workers": 4,
                "retry_base": 0.05,
                "retry_cap": 1.0,
            }
            settings.update(overrides)
            listener = await listeners.enter_async_context(
                listening(dsn, probe_interval=probe_interval)
            )
            engine = Reconciler(db, EngineConfig(**settings), listener)  # type: ignore[arg-type]
            engines.append(engine)
            await engine.start()
            return engine

        yield start
        for engine in engines:
            await engine.stop(grace=1.0)
