"""What-if admission: what Kueue would do with a workload submitted now (a dry run's
`admission`), from the same replay as the forecasts (`app.domain.planning.forecast`).

A feasibility check against the pool as the database knows it now, not a reservation: a
workload submitted a moment later may meet another queue.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Literal

import msgspec

from app.domain.planning.forecast import forecast, start_replay
from app.domain.planning.queue import NO_DEMAND, Demand, Entry
from app.domain.quantity import format_bytes, format_cpu

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.planning.calibration import Calibration
    from app.domain.planning.forecast import History


class QuotaNumbers(msgspec.Struct, kw_only=True):
    """One resource of the pool: its quota, what admitted workloads hold, what is free, and
    what the workload asks for."""

    resource: Annotated[str, msgspec.Meta(examples=["accelerators"])]
    quota: Annotated[str, msgspec.Meta(examples=["8"])]
    in_use: Annotated[str, msgspec.Meta(examples=["6"])]
    free: Annotated[str, msgspec.Meta(examples=["2"])]
    requested: Annotated[str, msgspec.Meta(examples=["4"])]


class EstimatedStart(msgspec.Struct, kw_only=True):
    """An estimate of when Kueue admits a queued workload, not a reservation: p10 (earliest),
    p50 (likely) and p90 (latest) of replays of the pool's queue, never before now."""

    earliest: datetime
    likely: datetime
    latest: datetime


class AdmissionForecast(msgspec.Struct, kw_only=True):
    """What Kueue would do with the workload if it were submitted now (an estimate)."""

    verdict: Annotated[
        Literal["admit_now", "preempt", "queue"],
        msgspec.Meta(
            description="`admit_now`: it fits the free quota and Kueue admits it at once; "
            "`preempt`: it does not fit, but its priority makes Kueue stop `preempts` for it; "
            "`queue`: it waits, at `position`"
        ),
    ]
    reason: Annotated[str, msgspec.Meta(examples=["Fits the free quota of pool h100-pool now."])]
    quota: list[QuotaNumbers]
    position: (
        Annotated[int, msgspec.Meta(ge=1, description="its place in the pool's queue, 1-based")]
        | None
    ) = None
    ahead: Annotated[
        list[str], msgspec.Meta(description="the queued workloads before it, head first")
    ] = []
    eta: EstimatedStart | None = None
    eta_basis: str | None = None
    preempts: Annotated[
        list[str], msgspec.Meta(description="the workloads Kueue would stop for it")
    ] = []


def _numbers(quota: Demand, used: Demand, wanted: Demand) -> list[QuotaNumbers]:
    free = quota - used

    def cpu(millis: int) -> str:
        return format_cpu(Decimal(millis) / 1000)

    def mem(value: int) -> str:
        return format_bytes(Decimal(value))

    return [
        QuotaNumbers(
            resource="accelerators",
            quota=str(quota.accelerators),
            in_use=str(used.accelerators),
            free=str(max(free.accelerators, 0)),
            requested=str(wanted.accelerators),
        ),
        QuotaNumbers(
            resource="cpu",
            quota=cpu(quota.cpu_millis),
            in_use=cpu(used.cpu_millis),
            free=cpu(max(free.cpu_millis, 0)),
            requested=cpu(wanted.cpu_millis),
        ),
        QuotaNumbers(
            resource="memory",
            quota=mem(quota.memory_bytes),
            in_use=mem(used.memory_bytes),
            free=mem(max(free.memory_bytes, 0)),
            requested=mem(wanted.memory_bytes),
        ),
    ]


def _short(quota: Demand, used: Demand, wanted: Demand) -> str:
    free = quota - used
    parts = []
    if wanted.accelerators > free.accelerators:
        parts.append(f"{wanted.accelerators} accelerators (free {max(free.accelerators, 0)})")
    if wanted.cpu_millis > free.cpu_millis:
        parts.append(
            f"cpu {format_cpu(Decimal(wanted.cpu_millis) / 1000)} "
            f"(free {format_cpu(Decimal(max(free.cpu_millis, 0)) / 1000)})"
        )
    if wanted.memory_bytes > free.memory_bytes:
        parts.append(
            f"memory {format_bytes(Decimal(wanted.memory_bytes))} "
            f"(free {format_bytes(Decimal(max(free.memory_bytes, 0)))})"
        )
    return ", ".join(parts)


def what_if(
    entries: Sequence[Entry],
    quota: Demand,
    candidate: Entry,
    history: History,
    now: datetime,
    *,
    pool: str,
    seed: int = 0,
    calibration: Calibration | None = None,
) -> AdmissionForecast:
    """Kueue's first pass with `candidate` among `entries` (a replaced workload's current
    generation must not be in `entries`), and its forecast when it would wait."""
    everyone = [*entries, candidate]
    used = NO_DEMAND
    for entry in entries:
        if entry.holding:
            used = used + entry.demand
    numbers = _numbers(quota, used, candidate.demand)
    first = start_replay(everyone, quota, history, now, seed)
    first.lag = False
    first.admit(0.0)
    if candidate.id in first.starts:
        victims = first.preempted.get(candidate.id, [])
        if victims:
            return AdmissionForecast(
                verdict="preempt",
                reason=f"Does not fit the free quota of pool {pool} "
                f"({_short(quota, used, candidate.demand)}); its priority makes Kueue preempt "
                f"{len(victims)} lower-priority workload{'s' if len(victims) != 1 else ''} "
                "for it.",
                quota=numbers,
                preempts=victims,
            )
        return AdmissionForecast(
            verdict="admit_now",
            reason=f"Fits the free quota of pool {pool} now; Kueue admits it at its next pass.",
            quota=numbers,
        )
    mine = forecast(everyone, quota, history, now, seed=seed, calibration=calibration)[candidate.id]
    short = _short(quota, used, candidate.demand)
    why = (
        f"Waits for quota in pool {pool}: {short}."
        if short
        else f"Fits the free quota of pool {pool}, but workloads ahead of it take it first."
    )
    band = mine.band
    return AdmissionForecast(
        verdict="queue",
        reason=why,
        quota=numbers,
        position=mine.position,
        ahead=list(mine.ahead),
        eta=EstimatedStart(earliest=band.earliest, likely=band.likely, latest=band.latest)
        if band
        else None,
        eta_basis=mine.basis,
    )
