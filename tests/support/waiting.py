"""Waiting for a condition with a deadline, instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def wait_until(
    probe: Callable[[], Awaitable[T]] | Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.01,
    message: str = "condition",
) -> T:
    """Call `probe` until it returns something truthy; return that. Fail after `timeout` s.

    `probe` may be sync or async. The last value is shown in the failure to make it readable.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        result = probe()
        if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        last = result
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {message}; last: {last!r}"
            )
        await asyncio.sleep(interval)
