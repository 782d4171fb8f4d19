"""A recording reconcile step: what ran, where, when, and how many at once."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from uuid import UUID

from app.domain.kinds import KINDS
from app.reconcile.engine import Reconciler
from app.reconcile.fencing import Fence
from app.reconcile.workers import Result
from app.store.leases import ResourceKey

Behaviour = Callable[[Fence, int], Awaitable[Result]]


async def done(fence: Fence, attempt: int) -> Result:
    return Result.done()


@dataclass
class Run:
    key: ResourceKey
    owner: str
    epoch: int
    at: float  # time.perf_counter() when the step started


@dataclass
class Recorder:
    """Register on engines with `attach`; every step start is recorded before `behaviour` runs."""

    behaviour: Behaviour = done
    runs: list[Run] = field(default_factory=list)
    in_flight: Counter[ResourceKey] = field(default_factory=Counter)
    max_in_flight: int = 0
    started: asyncio.Queue[Run] = field(default_factory=asyncio.Queue)

    def attach(self, engine: Reconciler) -> Reconciler:
        for kind in KINDS:
            engine.register(kind, self._step)
        return engine

    async def _step(self, resource_id: UUID, fence: Fence, /) -> Result:
        run = Run(fence.key, fence.owner, fence.epoch, time.perf_counter())
        self.runs.append(run)
        self.started.put_nowait(run)
        self.in_flight[fence.key] += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight[fence.key])
        try:
            return await self.behaviour(fence, self.attempts(fence.key))
        finally:
            self.in_flight[fence.key] -= 1

    def attempts(self, key: ResourceKey) -> int:
        return sum(1 for r in self.runs if r.key == key)

    def owners(self, key: ResourceKey) -> set[str]:
        return {r.owner for r in self.runs if r.key == key}

    def ran(self, key: ResourceKey) -> bool:
        return any(r.key == key for r in self.runs)
