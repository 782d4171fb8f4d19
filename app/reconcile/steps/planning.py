"""The queue standing in a queued workload's status, and the scoring of the estimates
(docs/PLANNING.md).

While a workload is QUEUED its step looks again every `REFRESH_SECONDS` and puts its standing
(position, the workloads ahead, the band) into the row's `observed` facts, where streams see
it; it writes only when the standing tells something new (another position, or a band that
moved by more than `MOVED_SHARE` of the wait, at least `MOVED_SECONDS`), and records each
written estimate (`workload_forecasts`). The replay of one pool is shared by the steps of its
queued workloads for `SHARED_SECONDS`. When Kueue admits the generation, its estimates are
scored against the admission time (`aicp_forecast_error_seconds`,
`aicp_forecast_starts_total`, `GET .../compute-pools/{pool}/forecast-accuracy`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from app.domain.events import EventType
from app.domain.planning.forecast import forecast
from app.domain.planning.standing import QueueStanding, standing_of
from app.domain.states import WorkloadState
from app.observability.metrics import FORECAST_ERROR, FORECAST_STARTS
from app.store import planning

if TYPE_CHECKING:
    import uuid

    from app.domain.classify.evidence import Evidence
    from app.domain.planning.forecast import Forecast
    from app.store.db import Database
    from app.store.planning import PoolPlan
    from app.store.reconciling import WorkloadRow

#: A queued workload's standing is looked at again this often, or less often in a deep pool:
#: its queued workloads look again at `REFRESH_LOOKS_PER_SECOND` in all at most (a pool of
#: 3,000 waiting: each every 60 s), so a backlog does not cost more per workload the longer it
#: is.
REFRESH_SECONDS = 30.0
REFRESH_LOOKS_PER_SECOND = 50.0
#: One pool's replay serves its queued workloads' steps for this long.
SHARED_SECONDS = 5.0
#: A pool is replayed again no sooner than this after its last replay began, and no sooner
#: than `REPLAY_SPACING` times that replay's duration: under a burst of submissions (each new
#: workload missing from the last replay) the replays of a deep pool take at most about a
#: quarter of a core, instead of one O(queue) replay per new workload (O(queue²) in all).
#: The workloads that arrived meanwhile get their standing from the next replay.
MIN_REPLAY_SECONDS = 1.0
REPLAY_SPACING = 4.0
MOVED_SECONDS = 60.0
MOVED_SHARE = 0.1

QUEUE_KEY = "queue"


@dataclasses.dataclass(frozen=True, slots=True)
class NewEstimate:
    """An estimate to record once the status write carrying it landed."""

    plan: PoolPlan
    forecast: Forecast


@dataclasses.dataclass(frozen=True, slots=True)
class _Pooled:
    """One replay of a pool: its plan, the forecast of each waiting workload, and when."""

    plan: PoolPlan
    found: dict[Any, Forecast]
    at: datetime
    #: When the replay began (monotonic) and the earliest the pool may be replayed again.
    began: float = 0.0
    next_at: float = 0.0


class Planner:
    """The standing of queued workloads, one replay per pool at a time."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._shared: dict[tuple[uuid.UUID, str], _Pooled] = {}
        self._replaying: dict[tuple[uuid.UUID, str], asyncio.Future[_Pooled | None]] = {}
        # Workloads left out of a replay for its spacing: id -> when the next one may begin;
        # and when each generation was left out (once only: one that the next replay does not
        # hold either, e.g. not queued in the rows yet, looks again at `refresh_after`).
        self._deferred: dict[uuid.UUID, float] = {}
        self._left_out: dict[tuple[uuid.UUID, int], float] = {}

    def refresh_after(self, row: WorkloadRow) -> float:
        """Seconds until a queued workload looks at its standing again (`REFRESH_SECONDS`,
        longer in a deep pool: by the last replay of the row's pool)."""
        shared = self._shared.get((row.project_id, row.pool))
        waiting = len(shared.found) if shared is not None else 0
        return max(REFRESH_SECONDS, waiting / REFRESH_LOOKS_PER_SECOND)

    def deferred(self, workload_id: uuid.UUID) -> float | None:
        """Seconds until the standing of a workload the last replay did not hold can be
        computed (its step looks again then), or None when it was not left out."""
        next_at = self._deferred.pop(workload_id, None)
        return None if next_at is None else max(next_at - time.monotonic(), 0.0)

    async def _pool(self, row: WorkloadRow) -> _Pooled | None:
        key = (row.project_id, row.pool)
        while (replaying := self._replaying.get(key)) is not None:
            # The steps of one pool's queued workloads wake together: one replay serves them
            # (one that failed or was cancelled leaves the next to replay).
            await asyncio.wait([replaying])
            if not replaying.cancelled() and replaying.result() is None:
                return None
        now = time.monotonic()
        shared = self._shared.get(key)
        if shared is not None:
            if row.id in shared.found and now - shared.began < SHARED_SECONDS:
                return shared
            if now < shared.next_at:
                if (row.id, row.generation) not in self._left_out:
                    self._left_out[(row.id, row.generation)] = now
                    self._deferred[row.id] = shared.next_at
                return shared  # too soon to replay the pool again: what the last replay knows
        future: asyncio.Future[_Pooled | None] = asyncio.get_running_loop().create_future()
        self._replaying[key] = future
        try:
            pooled = await self._replay(row, key, now)
            future.set_result(pooled)
            return pooled
        finally:
            future.cancel()  # a no-op once it has its result
            if self._replaying.get(key) is future:
                del self._replaying[key]

    async def _replay(
        self, row: WorkloadRow, key: tuple[uuid.UUID, str], now: float
    ) -> _Pooled | None:
        async with self.db.connection() as conn:
            plan = await planning.pool_plan_by_name(conn, row.project_id, row.pool)
        if plan is None:
            return None
        # The row says what the step saw before this observation: Kueue may just have taken
        # the workload back (preempted), so it waits now whatever the row says.
        entries = [
            dataclasses.replace(e, holding=False, held_since=None) if e.id == row.id else e
            for e in plan.entries
        ]
        at = datetime.now(UTC)
        # A replay of a deep pool takes tens of milliseconds of CPU: in a thread, the event
        # loop (the API's answers, the watches) goes on between its slices of the GIL.
        found = await asyncio.to_thread(
            forecast, entries, plan.quota, plan.history, at, calibration=plan.calibration
        )
        spacing = max(MIN_REPLAY_SECONDS, REPLAY_SPACING * (time.monotonic() - now))
        pooled = _Pooled(plan, found, at, began=now, next_at=now + spacing)
        for stale in [
            k for k, v in self._shared.items() if now >= max(v.began + SHARED_SECONDS, v.next_at)
        ]:
            del self._shared[stale]
        self._shared[key] = pooled
        for gone in [k for k, next_at in self._deferred.items() if next_at < now]:
            del self._deferred[gone]  # (their steps did not come back for it)
        for left in [k for k, at in self._left_out.items() if at < now - REFRESH_SECONDS]:
            del self._left_out[left]
        return pooled

    async def standing(
        self, row: WorkloadRow, state: WorkloadState, facts: dict[str, Any]
    ) -> tuple[dict[str, Any], NewEstimate | None]:
        """`facts` as the status write should carry them: with the standing while QUEUED (the
        write is of the row's generation, so its first QUEUED status carries one, unless the
        pool's last replay is too recent to run another and did not hold it: `deferred`)."""
        if state != WorkloadState.QUEUED:
            return facts, None
        return await self.queued_facts(row, facts)

    async def written(
        self,
        row: WorkloadRow,
        estimate: NewEstimate | None,
        crossed: list[tuple[EventType, str]],
        evidence: Evidence,
    ) -> None:
        """After a status write landed: record its estimate; score at the admission."""
        if estimate is not None:
            await self.record(row, estimate)
        if any(kind == EventType.ADMITTED for kind, _ in crossed):
            await self.score(row, evidence)

    async def queued_facts(
        self, row: WorkloadRow, facts: dict[str, Any]
    ) -> tuple[dict[str, Any], NewEstimate | None]:
        """`facts` with the workload's standing: the recorded one while the new one tells the
        same, else the new one and the estimate to record."""
        pooled = await self._pool(row)
        found = pooled.found.get(row.id) if pooled else None
        if pooled is None or found is None:
            return facts, None
        new = standing_of(found, pooled.at)
        before = row.observed.get(QUEUE_KEY) if row.observed_generation == row.generation else None
        if before is not None:
            old = msgspec.convert(before, QueueStanding, strict=False)
            if _same(old, new, datetime.now(UTC)):
                return {**facts, QUEUE_KEY: before}, None
        return {**facts, QUEUE_KEY: msgspec.to_builtins(new)}, NewEstimate(pooled.plan, found)

    async def record(self, row: WorkloadRow, estimate: NewEstimate) -> None:
        async with self.db.connection() as conn:
            await planning.record_forecast(
                conn, estimate.plan, row.id, row.generation, estimate.forecast
            )

    async def score(self, row: WorkloadRow, evidence: Evidence) -> None:
        """Kueue admitted the row's generation: score its estimates."""
        admitted = evidence.admission.admitted_at if evidence.admission else None
        if admitted is None:
            return
        async with self.db.connection() as conn:
            scored = await planning.record_start(conn, row.id, row.generation, admitted)
        for one in scored:
            FORECAST_ERROR.observe(abs(one.error_seconds))
            FORECAST_STARTS.labels("true" if one.inside else "false").inc()


def _same(old: QueueStanding, new: QueueStanding, now: datetime) -> bool:
    if old.position != new.position or old.ahead != new.ahead:
        return False
    if old.eta is None or new.eta is None:
        return old.eta is None and new.eta is None and old.eta_basis == new.eta_basis
    wait = max((new.eta.latest - now).total_seconds(), 0.0)
    allowed = max(MOVED_SECONDS, MOVED_SHARE * wait)
    return (
        all(
            abs((a - b).total_seconds()) <= allowed
            for a, b in (
                (old.eta.earliest, new.eta.earliest),
                (old.eta.likely, new.eta.likely),
                (old.eta.latest, new.eta.latest),
            )
        )
        and old.eta.earliest >= now
    )
