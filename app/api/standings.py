"""A dry run's admission forecast (docs/PLANNING.md "What-if admission"): one plan of the
pool (three indexed reads) and Kueue's next pass over it.

The standing of a QUEUED workload is not computed here: every read (one workload, a list, a
stream) answers the one the controller recorded in its status, with its `computed_at`.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.domain.planning.what_if import what_if
from app.store import planning

if TYPE_CHECKING:
    import uuid

    from app.domain.planning.what_if import AdmissionForecast
    from app.domain.specs import WorkloadSpec
    from app.store.db import Connection
    from app.store.pools import ProjectScope


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
        others,
        plan.quota,
        candidate,
        plan.history,
        datetime.now(UTC),
        pool=spec.compute_pool,
        calibration=plan.calibration,
    )
