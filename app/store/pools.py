"""Compute pool rows: create, read, page, change quota, soft delete.

Every write function runs inside the caller's transaction (`Database.transaction()`) and
leaves behind, in that same transaction, the row change, its event row (with the actor) and
the reconciler's doorbell (`pool:<id>` on `aicp_work`), so all three commit or none do.

Locking order, which keeps the in-use checks honest without serializable isolation:

* creating a pool share-locks its project row first (`ensure_project_live`); a project
  deletion locks that row before counting the project's pools, so it either sees the new pool
  or the pool's creator sees the project as being deleted;
* creating (or moving) a workload reads its pool FOR KEY SHARE (`lock_for_workload`) -- the
  lock its foreign key takes anyway, so concurrent creates in one pool do not queue; a pool
  deletion locks the row FOR UPDATE, which conflicts with that, and only then, in a later
  statement with a fresh snapshot, lists the workloads that still reference it. A quota change
  takes FOR NO KEY UPDATE and does not wait for creates.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import asyncpg

from app.domain.errors import (
    BeingDeleted,
    ExceedsProjectLimit,
    FieldError,
    InUse,
    NotFound,
    ValidationFailed,
    check_generation,
)
from app.domain.events import EventReason, EventType
from app.domain.pool_resources import DEFAULT_POOL_REASON, PoolResource, pool_from_row
from app.domain.project_limits import Holding, limits_from, overruns
from app.domain.validation import is_name
from app.store.audit import record_change
from app.store.creates import taken
from app.store.paging import NIL_UUID, Position, fetch_page
from app.store.projects import ensure_project_live
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from app.domain.kinds import Kind
    from app.domain.specs import PoolCreate, Quota
    from app.store.db import Connection

KIND: Final[Kind] = "pool"
DELETING_REASON = "Deletion requested; waiting for the controller to remove the pool's queues."
FINISHED_WORKLOAD_DELETING_REASON = (
    "Deletion requested with its compute pool; waiting for the controller to remove the Job."
)


class ProjectScope(Protocol):
    """The project a request works in (id for queries, name for resources and messages)."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class PoolRef:
    """What a workload needs from its pool, read under the pool's key-share lock."""

    id: uuid.UUID
    name: str
    accelerator_class: str
    quota: dict[str, Any]
    #: The class's binding (read with the pool, not locked): its resource name and node
    #: labels; None when the class has no binding.
    binding: tuple[str, dict[str, str]] | None = None


def _quota_dict(quota: Quota) -> dict[str, Any]:
    return {"accelerators": quota.accelerators, "cpu": quota.cpu, "memory": quota.memory}


async def check_project_limits(
    conn: Connection,
    project: ProjectScope,
    accelerator_class: str,
    quota: Quota,
    *,
    pool_id: uuid.UUID = NIL_UUID,
) -> None:
    """422 `ExceedsProjectLimit` when the project's pools, with this one (`pool_id`, if it
    exists already, at its new quota), would hold more than the project's limits allow.

    Call it under the project's FOR SHARE lock (`ensure_project_live`), which a limits change
    waits for. While the project has limits, creates and quota changes of its pools then take
    its advisory lock, so the second of two at once sees the first's pool."""
    limits = limits_from(await conn.fetchval(QUERIES["project_limits_for_pools"], project.id))
    if limits is None:
        return
    await conn.execute(QUERIES["lock_project_quota"], project.id)
    held = [
        Holding.of(row["accelerator_class"], row["quota"])
        for row in await conn.fetch(QUERIES["project_pool_quotas"], project.id, pool_id)
    ]
    over = overruns(limits, held, Holding.of(accelerator_class, quota))
    if over:
        raise ExceedsProjectLimit(project=project.name, overruns=over)


async def create(
    conn: Connection,
    project: ProjectScope,
    body: PoolCreate,
    *,
    actor: str,
    doorbell: bool = True,
) -> PoolResource:
    """Insert a new PENDING pool with its Accepted event and, unless `doorbell` is False (the
    caller leases the new pool in this transaction instead, docs/DESIGN.md §5), its doorbell.

    Raises `BeingDeleted` when the project or a pool of that name is being deleted,
    `AlreadyExists` when the name is taken, `ValidationFailed` (field `accelerator_class`)
    when no accelerator binding of that class exists.
    """
    await ensure_project_live(conn, project.id, project.name)
    await check_project_limits(conn, project, body.accelerator_class, body.quota)
    pool_id = uuid.uuid4()
    try:
        row = await conn.fetchrow(
            QUERIES["pool_insert"],
            pool_id,
            project.id,
            body.name,
            body.accelerator_class,
            {"quota": _quota_dict(body.quota)},
            DEFAULT_POOL_REASON,
            actor,
        )
    except asyncpg.ForeignKeyViolationError as exc:
        raise ValidationFailed(
            [
                FieldError(
                    "accelerator_class",
                    f"no accelerator binding {body.accelerator_class!r} exists; the platform "
                    f"admin creates it (`aicp create binding {body.accelerator_class} ...`, or "
                    f"PUT /api/v1/accelerator-bindings/{body.accelerator_class})",
                )
            ]
        ) from exc
    if row is None:
        raise await taken(
            conn, "Compute pool", body.name, QUERIES["pool_by_name"], project.id, body.name
        )
    await record_change(
        conn,
        project_id=project.id,
        kind=KIND,
        resource_id=pool_id,
        resource_name=body.name,
        type=EventType.ACCEPTED,
        reason=EventReason.CREATED,
        message=f"Compute pool {body.name} accepted at generation 1.",
        generation=1,
        actor=actor,
        doorbell=doorbell,
    )
    return pool_from_row(row, project.name)


async def get(conn: Connection, project: ProjectScope, name: str) -> PoolResource:
    """The pool with its usage; `NotFound` when there is none (or it was finalized)."""
    row = await conn.fetchrow(QUERIES["pool_by_name"], project.id, name) if is_name(name) else None
    if row is None:
        raise NotFound(f"Compute pool {name!r} not found.")
    return pool_from_row(row, project.name)


async def get_id(conn: Connection, project: ProjectScope, name: str) -> uuid.UUID:
    """The pool's id (for its events); `NotFound` when there is none."""
    return (await get(conn, project, name)).uid


async def page(
    conn: Connection, project: ProjectScope, *, after: Position | None, limit: int
) -> tuple[list[PoolResource], Position | None]:
    """Up to `limit` pools older than `after`, newest first, and the next page's position."""
    rows, position = await fetch_page(
        conn, QUERIES["list_pools"], project.id, after=after, limit=limit, first_id=NIL_UUID
    )
    return [pool_from_row(row, project.name) for row in rows], position


async def lock_for_workload(conn: Connection, project: ProjectScope, name: str) -> PoolRef:
    """Key-share-lock the pool a workload goes into; `ValidationFailed` on `compute_pool` when
    it does not exist or is being deleted (the body names it, so the body is what is wrong)."""
    row = await conn.fetchrow(QUERIES["pool_for_workload"], project.id, name)
    why = None
    if row is None:
        why = f"does not exist in project {project.name}"
    elif row["deletion_requested_at"] is not None:
        why = "is being deleted"
    if row is None or why is not None:
        raise ValidationFailed([FieldError("compute_pool", f"compute pool {name!r} {why}")])
    binding = None
    if row["resource_name"] is not None:
        binding = (row["resource_name"], row["node_labels"] or {})
    return PoolRef(row["id"], name, row["accelerator_class"], row["spec"]["quota"], binding)


async def _locked(
    conn: Connection, query: str, project: ProjectScope, name: str, if_match: int | None
) -> asyncpg.Record:
    row = await conn.fetchrow(query, project.id, name) if is_name(name) else None
    if row is None:
        raise NotFound(f"Compute pool {name!r} not found.")
    check_generation(if_match, row["generation"])
    return row


async def update_quota(
    conn: Connection,
    project: ProjectScope,
    name: str,
    quota: Quota,
    *,
    if_match: int | None,
    actor: str,
) -> PoolResource:
    """Replace the quota as a new generation (SpecUpdated event, doorbell); `BeingDeleted`
    while the pool is being deleted; `GenerationMismatch` when `if_match` is stale."""
    await ensure_project_live(conn, project.id, project.name)
    row = await _locked(conn, QUERIES["lock_pool_for_update"], project, name, if_match)
    if row["deletion_requested_at"] is not None:
        raise BeingDeleted(f"Compute pool {name!r} is being deleted and cannot be changed.")
    await check_project_limits(conn, project, row["accelerator_class"], quota, pool_id=row["id"])
    generation = await conn.fetchval(QUERIES["pool_update_quota"], row["id"], _quota_dict(quota))
    await record_change(
        conn,
        project_id=project.id,
        kind=KIND,
        resource_id=row["id"],
        resource_name=name,
        type=EventType.SPEC_UPDATED,
        reason=EventReason.QUOTA_CHANGED,
        message=(
            f"Quota set to {quota.accelerators} accelerators, cpu {quota.cpu}, "
            f"memory {quota.memory} at generation {generation}."
        ),
        generation=generation,
        actor=actor,
    )
    return await get(conn, project, name)


async def _delete_finished_workloads(
    conn: Connection, project: ProjectScope, pool_id: uuid.UUID, pool: str, actor: str
) -> None:
    """Request the deletion of the pool's finished workloads (their history stays as
    tombstones); rolled back with the rest when an unfinished one keeps the pool in use."""
    for workload in await conn.fetch(
        QUERIES["pool_finished_workloads_delete"], pool_id, FINISHED_WORKLOAD_DELETING_REASON
    ):
        await record_change(
            conn,
            project_id=project.id,
            kind="workload",
            resource_id=workload["id"],
            resource_name=workload["name"],
            type=EventType.DELETION_REQUESTED,
            reason=EventReason.DELETED,
            message=f"Deletion of workload {workload['name']} requested with its compute pool "
            f"{pool}.",
            generation=workload["generation"],
            actor=actor,
        )


async def request_deletion(
    conn: Connection, project: ProjectScope, name: str, *, if_match: int | None, actor: str
) -> PoolResource:
    """Mark the pool DELETING (DeletionRequested event, doorbell), and its finished workloads
    with it. `InUse` naming the workloads while unfinished ones not being deleted use it;
    repeating the request changes nothing."""
    row = await _locked(conn, QUERIES["lock_pool_for_delete"], project, name, if_match)
    if row["deletion_requested_at"] is None:
        await _delete_finished_workloads(conn, project, row["id"], name, actor)
        # A new statement after the FOR UPDATE lock: every workload created under the pool's
        # key-share lock has committed by now and is visible here.
        users = [user["ref"] for user in await conn.fetch(QUERIES["pool_users"], row["id"])]
        if users:
            raise InUse(
                users,
                f"Compute pool {name!r} is used by {', '.join(users)}; delete them first.",
            )
        generation = await conn.fetchval(
            QUERIES["request_pool_deletion"], row["id"], DELETING_REASON
        )
        await record_change(
            conn,
            project_id=project.id,
            kind=KIND,
            resource_id=row["id"],
            resource_name=name,
            type=EventType.DELETION_REQUESTED,
            reason=EventReason.DELETED,
            message=f"Deletion of compute pool {name} requested.",
            generation=generation,
            actor=actor,
        )
    return await get(conn, project, name)
