"""The queue standing of QUEUED workloads in what the API answers, and a dry run's
admission forecast (docs/PLANNING.md).

Computed when one workload is read: one plan for its pool (three indexed reads and a replay of
its queue). Lists answer the standing the controller last recorded instead.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from app.domain.planning.forecast import forecast
from app.domain.planning.standing import queued_sentence, standing_of
from app.domain.planning.what_if import what_if
from app.domain.states import WorkloadState
from app.store import planning

if TYPE_CHECKING:
    import uuid

    from app.domain.planning.forecast import Forecast
    from app.domain.planning.what_if import AdmissionForecast
    from app.domain.specs import WorkloadSpec
    from app.domain.workload_resources import WorkloadResource
    from app.store.db import Connection
    from app.store.pools import ProjectScope


def with_standing(
    workload: WorkloadResource, found: Forecast | None, now: datetime
) -> WorkloadResource:
    """`workload` with `status.queue` and the sentence leading its reason (unchanged when
    there is no forecast for it)."""
    if found is None:
        return workload
    standing = standing_of(found)
    sentence = queued_sentence(standing, workload.compute_pool, now)
    reason = workload.status.reason
    if workload.status.queue is not None:  # the recorded standing's sentence leads it
        recorded = queued_sentence(
            workload.status.queue, workload.compute_pool, workload.status.updated_at
        )
        reason = reason.removeprefix(recorded + " ")
    status = msgspec.structs.replace(workload.status, queue=standing, reason=f"{sentence} {reason}")
    return msgspec.structs.replace(workload, status=status)


async def with_standings(
    conn: Connection, project: ProjectScope, items: list[WorkloadResource]
) -> list[WorkloadResource]:
    """`items` with the standing of each QUEUED one."""
    pools = {w.compute_pool for w in items if w.status.state == WorkloadState.QUEUED}
    if not pools:
        return items
    now = datetime.now(UTC)
    found: dict[uuid.UUID, Forecast] = {}
    for pool in sorted(pools):
        plan = await planning.pool_plan_by_name(conn, project.id, pool)
        if plan is not None:
            found.update(forecast(plan.entries, plan.quota, plan.history, now))
    return [
        with_standing(w, found.get(w.uid), now) if w.status.state == WorkloadState.QUEUED else w
        for w in items
    ]


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
    return what_if(
        others, plan.quota, candidate, plan.history, datetime.now(UTC), pool=spec.compute_pool
    )
