"""What the planner reads and records (docs/PLANNING.md): a pool's queue and quota, the
project's history and the pool's newest submissions, in four indexed reads; the estimates made
and how they turned out.

PostgreSQL is the source of truth for the queue: every workload of a pool is a row with its
state (QUEUED: its Job waits for Kueue; ADMITTED or RUNNING: Kueue reserved its quota), its
priority and the time its generation was accepted, so the order Kueue keeps is computed from
the rows alone, with no read of the cluster. The pool's newest scored estimates calibrate the
band (`app.domain.planning.calibration`). The rows lag Kueue by one reconcile (a workload
Kueue has just admitted is QUEUED until the step writes it), which a forecast absorbs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from app.domain.planning.calibration import NEWEST_SCORED, Calibration, Scored, inside_band
from app.domain.planning.forecast import (
    RECENT_ARRIVALS,
    Finished,
    History,
    history_of,
    with_arrivals,
)
from app.domain.planning.queue import Demand, Entry, demand_of, quota_demand
from app.domain.render.queues import PRIORITY_VALUES
from app.domain.specs import Quota, WorkloadSpec
from app.domain.states import WorkloadState
from app.store.queries import QUERIES

if TYPE_CHECKING:
    import uuid

    from app.domain.planning.forecast import Forecast
    from app.store.db import Connection

#: Finished workloads read for history: the newest of the project.
HISTORY_ROWS = 500

_HOLDING = (WorkloadState.ADMITTED.value, WorkloadState.RUNNING.value)


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """Everything a forecast of one pool needs."""

    pool_id: uuid.UUID
    pool: str
    quota: Demand
    entries: list[Entry]
    history: History
    #: How the pool's past estimates turned out (None: too few scored yet).
    calibration: Calibration | None = None


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    return value if isinstance(value, datetime) else msgspec.convert(value, datetime)


def _labels(raw: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in (raw or {}).items()))


def entry_of(row: Any) -> Entry:
    """A live workload row as the planner sees it."""
    spec = msgspec.convert(row["spec"], WorkloadSpec)
    observed = row["observed"] or {}
    holding = row["state"] in _HOLDING
    held_since = None
    current = row["observed_generation"] == row["generation"]
    if holding and current:
        held_since = _time((observed.get("admission") or {}).get("admitted_at"))
    # Kueue orders by its Workload's creation (whole seconds) and uid; until the Workload is
    # seen, by when the generation was accepted (its Job, and so its Workload, follow).
    workload = (observed.get("kueue_workload") or {}) if current else {}
    queued_since = _time(workload.get("created_at")) or row["generation_at"]
    return Entry(
        id=row["id"],
        name=row["name"],
        priority=PRIORITY_VALUES[spec.priority],
        queued_since=queued_since,
        demand=demand_of(spec),
        max_runtime_seconds=spec.max_runtime_seconds,
        holding=holding,
        held_since=held_since,
        labels=_labels(spec.labels),
        kueue_uid=str(workload.get("uid") or ""),
    )


def arrival_of(row: Any) -> Entry:
    """A submission of the pool as one of the recent ones (`queued_since`: when it came)."""
    spec = msgspec.convert(row["spec"], WorkloadSpec)
    return Entry(
        id=row["id"],
        name=row["name"],
        priority=PRIORITY_VALUES[spec.priority],
        queued_since=row["created_at"],
        demand=demand_of(spec),
        max_runtime_seconds=spec.max_runtime_seconds,
        labels=_labels(spec.labels),
    )


def _finished(row: Any) -> Finished | None:
    observed = row["observed"] or {}
    admitted = _time((observed.get("admission") or {}).get("admitted_at"))
    finished = _time(observed.get("finished_at"))
    if admitted is None or finished is None or finished < admitted:
        return None
    return Finished(row["name"], _labels(row["labels"]), (finished - admitted).total_seconds())


async def _plan(conn: Connection, pool: Any) -> PoolPlan:
    live = await conn.fetch(QUERIES["planning_live_workloads"], pool["id"])
    done = await conn.fetch(
        QUERIES["planning_finished_workloads"], pool["project_id"], HISTORY_ROWS
    )
    finished = [(row, item) for row in done if (item := _finished(row)) is not None]
    history = history_of(
        [item for _, item in finished],
        pool=[item.seconds for row, item in finished if row["pool_id"] == pool["id"]],
    )
    recent = await conn.fetch(QUERIES["planning_recent_arrivals"], pool["id"], RECENT_ARRIVALS)
    history = with_arrivals(history, [arrival_of(row) for row in recent], datetime.now(UTC))
    scored = await conn.fetch(QUERIES["planning_scored_forecasts"], pool["id"], NEWEST_SCORED)
    return PoolPlan(
        pool_id=pool["id"],
        pool=pool["name"],
        quota=quota_demand(msgspec.convert(pool["spec"]["quota"], Quota)),
        entries=[entry_of(row) for row in live],
        history=history,
        calibration=Calibration.of(
            [
                Scored(
                    row["made_at"], row["earliest"], row["likely"], row["latest"], row["started_at"]
                )
                for row in scored
            ]
        ),
    )


async def pool_plan(conn: Connection, pool_id: uuid.UUID) -> PoolPlan | None:
    """The plan of the pool with this id (None: it is gone)."""
    pool = await conn.fetchrow(QUERIES["planning_pool"], pool_id)
    return None if pool is None else await _plan(conn, pool)


async def pool_id(conn: Connection, project_id: uuid.UUID, pool: str) -> uuid.UUID | None:
    """The id of the project's pool of this name (None: there is none)."""
    found: uuid.UUID | None = await conn.fetchval(QUERIES["pool_id_by_name"], project_id, pool)
    return found


async def pool_plan_by_name(conn: Connection, project_id: uuid.UUID, pool: str) -> PoolPlan | None:
    """The plan of the project's pool of this name (None: there is none)."""
    found = await conn.fetchrow(QUERIES["planning_pool_by_name"], project_id, pool)
    return None if found is None else await _plan(conn, found)


async def record_forecast(
    conn: Connection, plan: PoolPlan, workload_id: uuid.UUID, generation: int, found: Forecast
) -> None:
    """Keep one estimate, to score it when the workload is admitted."""
    band, replay = found.band, found.replay_band
    await conn.execute(
        QUERIES["planning_record_forecast"],
        workload_id,
        plan.pool_id,
        generation,
        found.position,
        band.earliest if band else None,
        band.likely if band else None,
        band.latest if band else None,
        found.basis,
        replay.earliest if replay else None,
        replay.likely if replay else None,
        replay.latest if replay else None,
    )


@dataclass(frozen=True, slots=True)
class Score:
    """One estimate scored at the admission: seconds late (negative: early), and whether the
    admission fell inside the band."""

    error_seconds: float
    inside: bool


async def record_start(
    conn: Connection, workload_id: uuid.UUID, generation: int, admitted_at: datetime
) -> list[Score]:
    """Score the generation's open estimates against Kueue's admission time."""
    rows = await conn.fetch(QUERIES["planning_record_start"], workload_id, generation, admitted_at)
    return [
        Score(
            (admitted_at - row["likely"]).total_seconds(),
            inside_band(row["earliest"], row["latest"], admitted_at),
        )
        for row in rows
        if row["likely"] is not None
    ]


@dataclass(frozen=True, slots=True)
class Accuracy:
    samples: int
    without_estimate: int
    median_absolute_error_seconds: float | None
    inside_band: float | None
    p90_wait_seconds: float | None
    median_band_seconds: float | None


async def accuracy(conn: Connection, pool_id: uuid.UUID, window_seconds: float) -> Accuracy:
    """How the pool's estimates of the last `window_seconds` turned out."""
    row = await conn.fetchrow(QUERIES["planning_accuracy"], pool_id, window_seconds)
    assert row is not None  # an aggregate always answers a row

    def number(name: str) -> float | None:
        value = row[name]
        return None if value is None else float(value)

    return Accuracy(
        samples=int(row["samples"]),
        without_estimate=int(row["without_estimate"]),
        median_absolute_error_seconds=number("median_absolute_error_seconds"),
        inside_band=number("inside_band"),
        p90_wait_seconds=number("p90_wait_seconds"),
        median_band_seconds=number("median_band_seconds"),
    )
