"""What the reconcile steps read and write in PostgreSQL (queries: section "reconcile steps").

Loads return the stored row joined with what rendering needs (project and pool names, the
accelerator binding), or None once the row is gone (finalized). Status writes are fenced
(invariant 5) and generation-guarded (invariant 6) in one statement and report both outcomes:

- `Written.held` False: the lease moved; the caller must drop the resource (`LeaseLost`);
- `Written.written` False with `held` True: the row moved on meanwhile (a new generation or a
  deletion request); nothing was written and the step should simply run again.

Finalization statements (`insert_tombstone`, `delete_*`) carry no lease predicate: they run
inside `app.reconcile.fencing.fenced_transaction`, which holds the lease row locked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, LiteralString

from app.domain.states import ResourceState, ServiceState, WorkloadState
from app.store.queries import QUERIES

if TYPE_CHECKING:
    import uuid
    from collections.abc import Sequence
    from datetime import datetime

    import asyncpg

    from app.domain.kinds import Kind
    from app.store.db import Connection


@dataclass(frozen=True, slots=True)
class ProjectRow:
    id: uuid.UUID
    name: str
    generation: int
    observed_generation: int
    state: ResourceState
    state_reason: str | None
    observed: dict[str, Any]
    deleting: bool


@dataclass(frozen=True, slots=True)
class PoolRow:
    id: uuid.UUID
    project_id: uuid.UUID
    project: str
    project_ready: bool  # the project's namespace has been applied at least once
    name: str
    accelerator_class: str
    quota: dict[str, Any]
    generation: int
    observed_generation: int
    state: ResourceState
    state_reason: str | None
    observed: dict[str, Any]
    deleting: bool
    binding: dict[str, Any]  # the accelerator_bindings columns a BindingPut is built from


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    id: uuid.UUID
    project_id: uuid.UUID
    project: str
    pool: str
    queues_ready: bool  # the namespace and the pool's queues have been applied at least once
    name: str
    spec: dict[str, Any]
    generation: int
    observed_generation: int
    state: WorkloadState
    state_reason: str | None
    observed: dict[str, Any]
    deleting: bool
    created_at: datetime
    accelerator_resource: str


@dataclass(frozen=True, slots=True)
class ServiceRow:
    id: uuid.UUID
    project_id: uuid.UUID
    project: str
    pool: str
    queues_ready: bool  # the namespace and the pool's queues have been applied at least once
    name: str
    spec: dict[str, Any]
    generation: int
    observed_generation: int
    state: ServiceState
    state_reason: str | None
    observed: dict[str, Any]
    deleting: bool
    accelerator_resource: str


@dataclass(frozen=True, slots=True)
class Written:
    """The outcome of a fenced, generation-guarded status write."""

    held: bool
    written: bool
    age_seconds: float | None = None  # workloads: time since accepted, by the database clock


async def load_project(conn: Connection, project_id: uuid.UUID) -> ProjectRow | None:
    row = await conn.fetchrow(QUERIES["steps_project_load"], project_id)
    if row is None:
        return None
    return ProjectRow(
        id=row["id"],
        name=row["name"],
        generation=row["generation"],
        observed_generation=row["observed_generation"],
        state=ResourceState(row["state"]),
        state_reason=row["state_reason"],
        observed=row["observed"] or {},
        deleting=row["deletion_requested_at"] is not None,
    )


async def load_pool(conn: Connection, pool_id: uuid.UUID) -> PoolRow | None:
    row = await conn.fetchrow(QUERIES["steps_pool_load"], pool_id)
    if row is None:
        return None
    return PoolRow(
        id=row["id"],
        project_id=row["project_id"],
        project=row["project_name"],
        project_ready=row["project_observed_generation"] > 0,
        name=row["name"],
        accelerator_class=row["accelerator_class"],
        quota=row["spec"]["quota"],
        generation=row["generation"],
        observed_generation=row["observed_generation"],
        state=ResourceState(row["state"]),
        state_reason=row["state_reason"],
        observed=row["observed"] or {},
        deleting=row["deletion_requested_at"] is not None,
        binding={
            "resource_name": row["resource_name"],
            "flavor": row["flavor"],
            "node_labels": row["node_labels"] or {},
            "tolerations": row["tolerations"] or [],
            "description": row["description"],
        },
    )


async def load_workload(conn: Connection, workload_id: uuid.UUID) -> WorkloadRow | None:
    return (await load_workloads(conn, [workload_id]))[0]


async def load_workloads(
    conn: Connection, workload_ids: Sequence[uuid.UUID]
) -> list[WorkloadRow | None]:
    """The rows of `workload_ids`, in their order (None: gone), in one statement."""
    found = {
        row["id"]: _workload_row(row)
        for row in await conn.fetch(QUERIES["steps_workload_load"], list(workload_ids))
    }
    return [found.get(workload_id) for workload_id in workload_ids]


def _workload_row(row: asyncpg.Record) -> WorkloadRow:
    return WorkloadRow(
        id=row["id"],
        project_id=row["project_id"],
        project=row["project_name"],
        pool=row["pool_name"],
        queues_ready=row["project_observed_generation"] > 0 and row["pool_observed_generation"] > 0,
        name=row["name"],
        spec=row["spec"],
        generation=row["generation"],
        observed_generation=row["observed_generation"],
        state=WorkloadState(row["state"]),
        state_reason=row["state_reason"],
        observed=row["observed"] or {},
        deleting=row["deletion_requested_at"] is not None,
        created_at=row["created_at"],
        accelerator_resource=row["accelerator_resource"],
    )


async def load_service(conn: Connection, service_id: uuid.UUID) -> ServiceRow | None:
    row = await conn.fetchrow(QUERIES["steps_service_load"], service_id)
    if row is None:
        return None
    return ServiceRow(
        id=row["id"],
        project_id=row["project_id"],
        project=row["project_name"],
        pool=row["pool_name"],
        queues_ready=row["project_observed_generation"] > 0 and row["pool_observed_generation"] > 0,
        name=row["name"],
        spec=row["spec"],
        generation=row["generation"],
        observed_generation=row["observed_generation"],
        state=ServiceState(row["state"]),
        state_reason=row["state_reason"],
        observed=row["observed"] or {},
        deleting=row["deletion_requested_at"] is not None,
        accelerator_resource=row["accelerator_resource"],
    )


async def pool_routes(conn: Connection) -> list[tuple[uuid.UUID, str, str]]:
    """(pool id, project name, pool name) of every pool."""
    rows = await conn.fetch(QUERIES["steps_pool_routes"])
    return [(r["id"], r["project_name"], r["pool_name"]) for r in rows]


async def project_namespaces(conn: Connection) -> list[tuple[uuid.UUID, str]]:
    """(project id, project name) of every live project whose namespace was applied."""
    rows = await conn.fetch(QUERIES["steps_project_namespaces"])
    return [(r["id"], r["name"]) for r in rows]


@dataclass(frozen=True, slots=True)
class LiveJob:
    """A workload reported as having a Job (QUEUED, ADMITTED or RUNNING), and that Job."""

    id: uuid.UUID
    project: str
    name: str
    state: str
    job_name: str | None
    job_uid: str | None


async def live_workload_jobs(conn: Connection) -> list[LiveJob]:
    """Every workload reported as having a Job, with the Job's recorded name and uid."""
    rows = await conn.fetch(QUERIES["steps_live_workload_jobs"])
    return [
        LiveJob(r["id"], r["project_name"], r["name"], r["state"], r["job_name"], r["job_uid"])
        for r in rows
    ]


async def workloads_still_on_jobs(
    conn: Connection, ids: list[uuid.UUID], job_uids: list[str]
) -> int:
    """How many of `ids` are still QUEUED, ADMITTED or RUNNING on one of `job_uids`."""
    count: int = await conn.fetchval(QUERIES["steps_workloads_still_on_jobs"], ids, job_uids)
    return count


def _written(row: asyncpg.Record | None) -> Written:
    assert row is not None  # the statement always returns one row
    age = row.get("age")
    return Written(held=row["held"], written=row["written"], age_seconds=age)


_SET_STATUS: dict[Kind, LiteralString] = {
    "project": QUERIES["steps_project_set_status"],
    "pool": QUERIES["steps_pool_set_status"],
    "service": QUERIES["steps_service_set_status"],
}


@dataclass(frozen=True, slots=True)
class StatusEvent:
    """One event row recorded with a status write (`once_key`: see `app.store.audit`)."""

    type: str
    message: str
    reason: str | None = None
    once_key: str | None = None


@dataclass(frozen=True, slots=True)
class Audit:
    """Who and what a status write's event rows name, and the events themselves."""

    project_id: uuid.UUID | None
    resource_name: str
    actor: str
    events: Sequence[StatusEvent] = ()


async def set_status(
    conn: Connection,
    kind: Kind,
    *,
    owner: str,
    epoch: int,
    resource_id: uuid.UUID,
    generation: int,
    state: WorkloadState | ResourceState | ServiceState,
    reason: str,
    observed: dict[str, Any],
    audit: Audit,
) -> Written:
    """Write state, reason, observed facts and `observed_generation = generation`, if this
    owner still holds the lease at `epoch` and the row is still at `generation`, not deleting;
    with the write (and only then) `audit`'s events, in order. One statement, one round trip:
    on a connection outside a transaction it is a transaction of its own."""
    if kind == "workload":
        write = StatusWrite(owner, epoch, resource_id, generation, state, reason, observed, audit)
        return (await set_workload_statuses(conn, [write]))[0]
    events = audit.events
    row = await conn.fetchrow(
        _SET_STATUS[kind],
        owner,
        epoch,
        resource_id,
        generation,
        state,
        reason,
        observed,
        audit.project_id,
        audit.resource_name,
        audit.actor,
        [event.type for event in events],
        [event.reason for event in events],
        [event.message for event in events],
        [event.once_key for event in events],
    )
    return _written(row)


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """One workload's fenced status write (`set_status`'s arguments)."""

    owner: str
    epoch: int
    resource_id: uuid.UUID
    generation: int
    state: WorkloadState | ResourceState | ServiceState
    reason: str
    observed: dict[str, Any]
    audit: Audit


async def set_workload_statuses(conn: Connection, writes: Sequence[StatusWrite]) -> list[Written]:
    """`set_status` of many workloads in one statement, each write fenced and guarded as it
    would be alone; their outcomes in order. The writes are of one owner and one actor (one
    replica's steps) and of distinct workloads."""
    owner, actor = writes[0].owner, writes[0].audit.actor
    assert all(w.owner == owner and w.audit.actor == actor for w in writes)
    events = [(n, event) for n, w in enumerate(writes, 1) for event in w.audit.events]
    rows = await conn.fetch(
        QUERIES["steps_workload_set_status"],
        owner,
        actor,
        [w.resource_id for w in writes],
        [w.epoch for w in writes],
        [w.generation for w in writes],
        [w.state for w in writes],
        [w.reason for w in writes],
        [w.observed for w in writes],
        [w.audit.project_id for w in writes],
        [w.audit.resource_name for w in writes],
        [n for n, _ in events],
        [event.type for _, event in events],
        [event.reason for _, event in events],
        [event.message for _, event in events],
        [event.once_key for _, event in events],
    )
    return [_written(row) for row in rows]


async def set_workload_observed(
    conn: Connection, *, owner: str, epoch: int, workload_id: uuid.UUID, observed: dict[str, Any]
) -> bool:
    """Replace the workload's evidence only; False when the lease moved."""
    row = await conn.fetchrow(
        QUERIES["steps_workload_set_observed"], owner, epoch, workload_id, observed
    )
    return row is not None


async def insert_tombstone(
    conn: Connection,
    *,
    kind: Kind,
    resource_id: uuid.UUID,
    project_id: uuid.UUID | None,
    name: str,
    final: dict[str, Any],
) -> None:
    await conn.execute(
        QUERIES["steps_insert_tombstone"], kind, resource_id, project_id, name, final
    )


_DELETE: dict[Kind, LiteralString] = {
    "project": QUERIES["steps_delete_project"],
    "pool": QUERIES["steps_delete_pool"],
    "workload": QUERIES["steps_delete_workload"],
    "service": QUERIES["steps_delete_service"],
}


async def delete_row(conn: Connection, kind: Kind, resource_id: uuid.UUID) -> bool:
    """Delete a row whose deletion was requested; False if there was none."""
    status = await conn.execute(_DELETE[kind], resource_id)
    return status != "DELETE 0"


async def pool_has_workloads(conn: Connection, pool_id: uuid.UUID) -> bool:
    return bool(await conn.fetchval(QUERIES["steps_pool_has_workloads"], pool_id))


async def project_has_children(conn: Connection, project_id: uuid.UUID) -> bool:
    return bool(await conn.fetchval(QUERIES["steps_project_has_children"], project_id))


async def lock_flavor(conn: Connection, flavor: str) -> None:
    """Inside a transaction: serialize with every other apply or delete of `flavor`."""
    await conn.execute(QUERIES["steps_lock_flavor"], flavor)


async def flavor_other_users(conn: Connection, flavor: str, pool_id: uuid.UUID) -> int:
    """How many live pools other than `pool_id` use `flavor`."""
    return int(await conn.fetchval(QUERIES["steps_flavor_other_users"], flavor, pool_id) or 0)


async def workload_state_counts(conn: Connection) -> dict[str, int]:
    """Live (unfinished) workloads by state."""
    rows = await conn.fetch(QUERIES["steps_workload_state_counts"])
    return {r["state"]: int(r["count"]) for r in rows}


async def workload_finished_counts(conn: Connection) -> dict[str, int]:
    """Finished workloads by state (SUCCEEDED, FAILED): reads every finished row."""
    rows = await conn.fetch(QUERIES["steps_workload_finished_counts"])
    return {r["state"]: int(r["count"]) for r in rows}


async def stuck_deleting_counts(conn: Connection) -> dict[str, int]:
    rows = await conn.fetch(QUERIES["steps_stuck_deleting_counts"])
    return {r["kind"]: int(r["count"]) for r in rows}
