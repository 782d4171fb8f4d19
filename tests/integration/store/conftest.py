"""A connection pool on the per-test database (a fresh copy of the migrated template)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.store.db import Database


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = await Database.connect(database_url, size=4)
    yield database
    await database.close()
