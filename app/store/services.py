"""Service rows: create, read, page, replace and scale (new generations), soft delete.

Write functions run in the caller's transaction and leave behind, together, the row change,
its event row (with the actor) and the doorbell `service:<id>` on `aicp_work`. A service is
created in, or moved to, a pool under that pool's key-share lock, as a workload is
(`app.store.pools.lock_for_workload`): a concurrent pool deletion never leaves it behind.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Final

import msgspec

from app.domain.errors import BeingDeleted, NotFound, check_generation
from app.domain.events import EventReason, EventType
from app.domain.service_resources import ACCEPTED_REASON, ServiceResource, service_from_row
from app.domain.service_specs import ServiceSpec
from app.domain.validation import is_name
from app.store.audit import record_change
from app.store.creates import taken
from app.store.paging import NIL_UUID, ByteBound, Position, fetch_page
from app.store.queries import QUERIES
from app.store.workloads import WorkloadFilter, pool_that_fits

if TYPE_CHECKING:
    import asyncpg

    from app.domain.kinds import Kind
    from app.domain.node_fit import NodeSource
    from app.store.db import Connection
    from app.store.pools import ProjectScope

KIND: Final[Kind] = "service"
DELETING_REASON = "Deletion requested; waiting for the controller to remove the Deployment."
#: A page ends early once its rows' text passes this (bounded memory whatever the `limit`).
PAGE_BOUND = ByteBound("row_bytes", 2 << 20)


def _changed_reason(generation: int) -> str:
    return f"Generation {generation} accepted; waiting for the controller to apply it."


async def create(
    conn: Connection,
    project: ProjectScope,
    spec: ServiceSpec,
    *,
    actor: str,
    doorbell: bool = True,
    nodes: NodeSource | None = None,
) -> ServiceResource:
    """Insert a PENDING service at generation 1 with its Accepted event (and its doorbell,
    unless the caller leases the new row in this transaction instead).

    Raises what `app.store.workloads.create` raises for the pool (no such pool, being
    deleted, one replica larger than the pool's quota or than every node of its class),
    `AlreadyExists`, or `BeingDeleted`.
    """
    pool_id = await pool_that_fits(conn, project, spec, nodes)
    service_id = uuid.uuid4()
    row = await conn.fetchrow(
        QUERIES["insert_service"],
        service_id,
        project.id,
        pool_id,
        spec.name,
        msgspec.to_builtins(spec),
        ACCEPTED_REASON,
        actor,
    )
    if row is None:
        raise await taken(
            conn, "Service", spec.name, QUERIES["service_by_name"], project.id, spec.name
        )
    await record_change(
        conn,
        project_id=project.id,
        kind=KIND,
        resource_id=service_id,
        resource_name=spec.name,
        type=EventType.ACCEPTED,
        reason=EventReason.CREATED,
        message=f"Service {spec.name} accepted at generation 1 in compute pool "
        f"{spec.compute_pool} with {spec.replicas} replicas.",
        generation=1,
        actor=actor,
        doorbell=doorbell,
    )
    return service_from_row(row, project.name)


async def _row(conn: Connection, project: ProjectScope, name: str) -> asyncpg.Record:
    row = (
        await conn.fetchrow(QUERIES["service_by_name"], project.id, name) if is_name(name) else None
    )
    if row is None:
        raise NotFound(f"Service {name!r} not found.")
    return row


async def get(conn: Connection, project: ProjectScope, name: str) -> ServiceResource:
    """The service; `NotFound` when there is none (never created, or finalized)."""
    return service_from_row(await _row(conn, project, name), project.name)


async def get_id(conn: Connection, project: ProjectScope, name: str) -> uuid.UUID:
    """The service's id (for its events); `NotFound` when there is none."""
    service_id: uuid.UUID = (await _row(conn, project, name))["id"]
    return service_id


async def page(
    conn: Connection,
    project: ProjectScope,
    view: WorkloadFilter,
    *,
    after: Position | None,
    limit: int,
) -> tuple[list[ServiceResource], Position | None]:
    """Up to `limit` services older than `after`, newest first, in `view` (state, pool, name
    text), and the next page's position (None on the last page)."""
    if view.no_pool:
        return [], None
    rows, position = await fetch_page(
        conn,
        QUERIES["list_services"],
        project.id,
        view.state,
        view.pool_id,
        view.name_pattern,
        after=after,
        limit=limit,
        first_id=NIL_UUID,
        bound=PAGE_BOUND,
    )
    return [service_from_row(row, project.name) for row in rows], position


async def _lock(
    conn: Connection, project: ProjectScope, name: str, if_match: int | None
) -> asyncpg.Record:
    row = await conn.fetchrow(QUERIES["lock_service"], project.id, name) if is_name(name) else None
    if row is None:
        raise NotFound(f"Service {name!r} not found.")
    check_generation(if_match, row["generation"])
    return row


async def replace(
    conn: Connection,
    project: ProjectScope,
    spec: ServiceSpec,
    *,
    if_match: int | None,
    actor: str,
    nodes: NodeSource | None = None,
    reason: EventReason = EventReason.REPLACED,
) -> ServiceResource:
    """Make `spec` the service's next generation (SpecUpdated event, doorbell); the replicas
    keep serving until the reconciler rolls the new generation out. `BeingDeleted` once
    deletion was requested; the pool checks of `create`."""
    current = await _lock(conn, project, spec.name, if_match)
    if current["deletion_requested_at"] is not None:
        raise BeingDeleted(f"Service {spec.name!r} is being deleted and cannot be changed.")
    pool_id = await pool_that_fits(conn, project, spec, nodes)
    generation = current["generation"] + 1
    row = await conn.fetchrow(
        QUERIES["replace_service"],
        current["id"],
        msgspec.to_builtins(spec),
        pool_id,
        _changed_reason(generation),
    )
    assert row is not None  # this transaction holds the row lock
    message = (
        f"Service {spec.name} scaled to {spec.replicas} replicas at generation {generation}."
        if reason is EventReason.SCALED
        else f"Service {spec.name} replaced by generation {generation}."
    )
    await record_change(
        conn,
        project_id=project.id,
        kind=KIND,
        resource_id=current["id"],
        resource_name=spec.name,
        type=EventType.SPEC_UPDATED,
        reason=reason,
        message=message,
        generation=generation,
        actor=actor,
    )
    return service_from_row(row, project.name)


async def scale(
    conn: Connection,
    project: ProjectScope,
    name: str,
    replicas: int,
    *,
    if_match: int | None,
    actor: str,
) -> ServiceResource:
    """The service's spec with `replicas` changed, as its next generation (a `Scaled` event).
    The same replica count again changes nothing."""
    current = await _lock(conn, project, name, if_match)
    spec = msgspec.convert(current["spec"], ServiceSpec)
    if spec.replicas == replicas and current["deletion_requested_at"] is None:
        return service_from_row(current, project.name)
    return await replace(
        conn,
        project,
        msgspec.structs.replace(spec, replicas=replicas),
        if_match=None,
        actor=actor,
        reason=EventReason.SCALED,
    )


async def request_deletion(
    conn: Connection, project: ProjectScope, name: str, *, if_match: int | None, actor: str
) -> ServiceResource:
    """Mark the service DELETING (DeletionRequested event, doorbell); it stays readable until
    the reconciler finalizes it. Repeating the request changes nothing."""
    current = await _lock(conn, project, name, if_match)
    if current["deletion_requested_at"] is not None:
        return service_from_row(current, project.name)
    row = await conn.fetchrow(QUERIES["request_service_deletion"], current["id"], DELETING_REASON)
    assert row is not None  # this transaction holds the row lock
    await record_change(
        conn,
        project_id=project.id,
        kind=KIND,
        resource_id=current["id"],
        resource_name=name,
        type=EventType.DELETION_REQUESTED,
        reason=EventReason.DELETED,
        message=f"Deletion of service {name} requested.",
        generation=current["generation"],
        actor=actor,
    )
    return service_from_row(row, project.name)
