"""A dry run's admission forecast (docs/PLANNING.md "What-if admission"): one plan of the
pool (four indexed reads) and Kueue's next pass over it; and the standing a GET of one QUEUED
workload answers.

Lists and streams answer the standing the controller recorded in the status, with its
`computed_at`. A GET of one workload does too in a pool of more than `FRESH_LIVE` live
workloads; in a smaller one, whose replay costs a few milliseconds, it computes the standing
as it answers. Both replays run in a thread, so the event loop is never held by one.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from app.domain.planning.forecast import forecast
from app.domain.planning.standing import queued_sentence, standing_of
from app.domain.planning.what_if import what_if
from app.domain.states import WorkloadState
from app.store import planning, workloads

if TYPE_CHECKING:
    import uuid

    from app.domain.planning.what_if import AdmissionForecast
    from app.domain.specs import WorkloadSpec
    from app.domain.workload_resources import WorkloadResource
    from app.store.db import Connection
    from app.store.pools import ProjectScope


#: A GET of a queued workload computes its standing when its pool has at most this many live
#: workloads; in a deeper pool it answers the one the controller recorded.
FRESH_LIVE = 20


async def with_fresh_standing(
    conn: Connection, project: ProjectScope, name: str
) -> WorkloadResource:
    """The workload named `name` (`NotFound`: there is none), with the standing computed now
    when it is QUEUED in a small pool."""
    workload, pool_live = await workloads.get_with_pool_depth(conn, project, name, FRESH_LIVE + 1)
    if workload.status.state != WorkloadState.QUEUED:
        return workload
    if pool_live is None or pool_live > FRESH_LIVE:
        return workload
    plan = await planning.pool_plan_by_name(conn, project.id, workload.compute_pool)
    if plan is None:
        return workload
    now = datetime.now(UTC)
    # The replay is pure CPU: in a thread, the other requests and the watches go on beside it.
    found = await asyncio.to_thread(
        forecast, plan.entries, plan.quota, plan.history, now, calibration=plan.calibration
    )
    mine = found.get(workload.uid)
    if mine is None:
        return workload
    standing = standing_of(mine, now)
    reason = workload.status.reason
    if workload.status.queue is not None:  # the recorded standing's sentence leads it
        recorded = queued_sentence(
            workload.status.queue, workload.compute_pool, workload.status.updated_at
        )
        reason = reason.removeprefix(recorded + " ")
    sentence = queued_sentence(standing, workload.compute_pool, now)
    status = msgspec.structs.replace(workload.status, queue=standing, reason=f"{sentence} {reason}")
    return msgspec.structs.replace(workload, status=status)


async def planned_admission(
    conn: Connection, project: ProjectScope, spec: WorkloadSpec, workload_id: uuid.UUID
) -> AdmissionForecast | None:
    """What Kueue would do with the workload just written in this (dry-run) transaction: the
    row is in the pool's plan as a waiting one (a replace: its new generation, at the back of
    its priority), planned against the others."""
    plan = await planning.pool_plan_by_name(conn, project.id, spec.compute_pool)
    mine = next((e for e in plan.entries if e.id == workload_id), None) if plan else None
    if plan is None or mine is None:
        return None
    others = [e for e in plan.entries if e.id != workload_id]
    candidate = dataclasses.replace(mine, holding=False, held_since=None)
    return await asyncio.to_thread(
        what_if,
        others,
        plan.quota,
        candidate,
        plan.history,
        datetime.now(UTC),
        pool=spec.compute_pool,
        calibration=plan.calibration,
    )
