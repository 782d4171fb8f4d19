"""How regularly a replica renews its leases, and how fast it answers, seen from outside.

`Cadence` polls the `leases` rows of one owner over its own database connection: each renewal
sets `expires_at` to the database's `now() + ttl`, so the gaps between the distinct expiries
seen are the gaps between renewals as PostgreSQL saw them, whatever the poller's own delays.
`Readiness` times `GET /readyz` in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import httpx


@dataclass
class Cadence:
    """Renewal instants of `owner`'s leases (after `start`), and the widest gap between them."""

    expiries: list[float] = field(default_factory=list)
    lapsed: int = 0  # polls that saw none of the owner's leases live

    @property
    def worst_gap(self) -> float:
        gaps = [b - a for a, b in zip(self.expiries, self.expiries[1:], strict=False)]
        return max(gaps, default=0.0)

    def reset(self) -> None:
        """Forget what was seen, but the latest renewal (the next gap is counted from it)."""
        self.expiries[:] = self.expiries[-1:]
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
async def watch_cadence(
    database_url: str, owner: str, interval: float = 0.05
) -> AsyncIterator[Cadence]:
    """Poll `owner`'s newest lease expiry every `interval` s while the block runs."""
    cadence = Cadence()
    conn = await asyncpg.connect(database_url)

    async def poll() -> None:
        while True:
            row = await conn.fetchrow(
                "SELECT extract(epoch FROM max(expires_at))::float8 AS newest,"
                " bool_or(expires_at > now()) AS live FROM leases WHERE owner = $1",
                owner,
            )
            newest = row["newest"] if row is not None else None
            if newest is not None and (not cadence.expiries or newest > cadence.expiries[-1]):
                cadence.expiries.append(newest)
            if row is None or not row["live"]:
                cadence.lapsed += 1
            await asyncio.sleep(interval)

    task = asyncio.create_task(poll())
    try:
        yield cadence
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
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

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        task = asyncio.create_task(probe(client))
        try:
            yield readiness
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
