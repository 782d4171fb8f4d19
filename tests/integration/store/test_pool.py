"""The connection pool as a request sees it: an overloaded replica says so."""

from __future__ import annotations

import pytest

from app.domain.errors import StoreUnavailable
from app.store.db import ACQUIRE_TIMEOUT_SECONDS, Database


async def test_a_request_that_finds_every_connection_busy_gets_a_503_saying_overloaded(
    database_url: str,
) -> None:
    db = await Database.connect(database_url, size=1)
    try:
        async with db.connection():  # the whole pool, in use
            with pytest.raises(StoreUnavailable) as raised:
                async with db.connection() as conn:
                    await conn.fetchval("SELECT 1")  # never reached: no connection came
        assert "stayed busy" in str(raised.value)
        assert f"{ACQUIRE_TIMEOUT_SECONDS:g}s" in str(raised.value)
        assert "overloaded" in str(raised.value)
        async with db.connection() as conn:  # free again: nothing was lost
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await db.close()
