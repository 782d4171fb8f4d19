"""A running `app.store.listener.Listener` for tests that build components without the service."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from app.store.listener import Listener

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def listening(dsn: str, **options: float) -> AsyncIterator[Listener]:
    """A listener on `dsn` whose loop runs until the block ends (it may never connect)."""
    listener = Listener(dsn, **options)
    task = asyncio.create_task(listener.run(), name="test-listener")
    try:
        yield listener
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
