"""How regularly a replica renews its leases, and how fast it answers, seen from outside.

`Cadence` polls the `leases` rows of one owner over its own database connection: each renewal
sets `expires_at` to the database's `now() + ttl`, so the distinct expiries seen, less the TTL,
are the renewals as PostgreSQL saw them, whatever the poller's own delays. The gap still open
at the last poll counts too: a replica whose leases lapsed renews nothing any more.
`Readiness` times `GET /readyz` in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx


@dataclass
class Cadence:
    """Renewal instants of `owner`'s leases (database clock), and the widest gap between them."""

    ttl: float
    renewals: list[float] = field(default_factory=list)
    last_poll: float = 0.0  # the database's clock at the latest poll
    lapsed: int = 0  # polls that saw none of the owner's leases live

    @property
    def worst_gap(self) -> float:
        """The longest time without a renewal, up to the latest poll."""
        instants = [*self.renewals, max(self.last_poll, *self.renewals[-1:])]
        return max((b - a for a, b in itertools.pairwise(instants)), default=0.0)

    def reset(self) -> None:
        """Forget what was seen, but the latest renewal (the next gap is counted from it)."""
        self.renewals[:] = self.renewals[-1:]
        self.lapsed = 0


@dataclass
class Readiness:
    """Latencies of `GET /readyz` (seconds) and how many did not answer 200."""

    latencies: list[float] = field(default_factory=list)
    failures: int = 0

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)

    def reset(self) -> None:
        self.latencies.clear()
        self.failures = 0


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run `work` (a loop) as a task while the block runs; cancel it after."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def watch_cadence(
    database_url: str, owner: str, ttl: float, interval: float = 0.05
) -> AsyncIterator[Cadence]:
    """Poll `owner`'s newest lease expiry every `interval` s while the block runs; `ttl` is
    the owner's lease TTL."""
    cadence = Cadence(ttl)
    conn = await asyncpg.connect(database_url)

    async def poll() -> None:
        while True:
            row = await conn.fetchrow(
                "SELECT extract(epoch FROM max(expires_at))::float8 AS newest,"
                " extract(epoch FROM now())::float8 AS now,"
                " coalesce(bool_or(expires_at > now()), false) AS live"
                " FROM leases WHERE owner = $1",
                owner,
            )
            assert row is not None  # an aggregate always has its row
            cadence.last_poll = row["now"]
            renewed = None if row["newest"] is None else row["newest"] - ttl
            if renewed is not None and (not cadence.renewals or renewed > cadence.renewals[-1]):
                cadence.renewals.append(renewed)
            if not row["live"]:
                cadence.lapsed += 1
            await asyncio.sleep(interval)

    try:
        async with in_background(poll()):
            yield cadence
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def watch_readiness(url: str, interval: float = 0.1) -> AsyncIterator[Readiness]:
    """Time `GET {url}/readyz` every `interval` s while the block runs."""
    readiness = Readiness()

    async def probe(client: httpx.AsyncClient) -> None:
        while True:
            started = time.perf_counter()
            try:
                response = await client.get("/readyz")
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            readiness.latencies.append(time.perf_counter() - started)
            readiness.failures += not ok
            await asyncio.sleep(interval)

    async with httpx.AsyncClient(base_url=url, timeout=60) as client, in_background(probe(client)):
        yield readiness
