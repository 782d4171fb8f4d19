"""Simulated time: real time scaled by `time_scale`, plus manual advances (`POST /_sim/time`).

`time_scale=1.0` runs at wall-clock speed; `2.0` twice as fast; `0` stops the clock so that only
`advance()` moves it (tests that must not wait on the wall clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime


class Clock:
    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        self.time_scale = time_scale
        self._real_start = time.monotonic()
        self._sim_start = time.time()
        self._offset = 0.0
        self._advanced = asyncio.Event()

    def now(self) -> float:
        """Simulated seconds since the epoch."""
        elapsed = (time.monotonic() - self._real_start) * self.time_scale
        return self._sim_start + elapsed + self._offset

    def now_rfc3339(self) -> str:
        """Now as Kubernetes writes timestamps: RFC 3339, whole seconds, `Z`."""
        return datetime.fromtimestamp(self.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def advance(self, seconds: float) -> None:
        """Move simulated time forward and wake every sleeper whose deadline has come."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self._offset += seconds
        event, self._advanced = self._advanced, asyncio.Event()
        event.set()

    async def sleep(self, seconds: float) -> None:
        """Sleep `seconds` of simulated time."""
        deadline = self.now() + seconds
        while (remaining := deadline - self.now()) > 0:
            event = self._advanced
            timeout = remaining / self.time_scale if self.time_scale > 0 else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
