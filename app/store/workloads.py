"""Workload rows: create, read, page, replace (new generation), soft delete.

Write functions run in the caller's transaction and leave behind, together, the row change,
its event row (with the actor) and the doorbell `workload:<id>` on `aicp_work`.

A workload is created in, or moved to, a pool under that pool's key-share lock
(`app.store.pools.lock_for_workload`); see `app.store.pools` for why that keeps a concurrent
pool deletion from leaving a workload behind in a pool that is going away. The project row is
not locked: a project with a pool cannot be deleted, and the pool is locked.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec

from app.domain.errors import (
    BeingDeleted,
    ExceedsNodeCapacity,
    ExceedsPoolCapacity,
    FieldError,
    NotFound,
    check_generation,
)
from app.domain.events import EventReason, EventType
from app.domain.node_fit import check_fits_node
from app.domain.service_specs import ServiceSpec
from app.domain.specs import Quota, WorkloadSpec
from app.domain.validation import check_fits_pool, is_name
from app.domain.workload_resources import ACCEPTED_REASON, WorkloadResource, workload_from_row
from app.store import pools
from app.store.audit import record_change, ring_doorbell
from app.store.creates import taken
from app.store.paging import NIL_UUID, ByteBound, Position, fetch_page
from app.store.queries import QUERIES

if TYPE_CHECKING:
    import asyncpg

    from app.domain.kinds import Kind
    from app.domain.node_fit import NodeSource
    from app.domain.specs import PodRequest
    from app.store.db import Connection
    from app.store.pools import ProjectScope

KIND: Final[Kind] = "workload"
DELETING_REASON = "Deletion requested; waiting for the controller to remove the Job."


def _replaced_reason(generation: int) -> str:
    return (
        f"Spec replaced by generation {generation}; waiting for the controller to replace the Job."
    )


def _pods_times(spec: PodRequest) -> str:
    """How a shortfall's total is made: `replicas x per-replica` (as always), for a
    multi-node workload `nodes (4) x per-node`, for a service one replica's request."""
    if isinstance(spec, ServiceSpec):
        return "one replica's"
    if isinstance(spec, WorkloadSpec) and spec.distributed:
        return f"nodes ({spec.nodes}) x per-node"
    return "replicas x per-replica"


async def pool_that_fits(
    conn: Connection, project: ProjectScope, spec: PodRequest, nodes: NodeSource | None
) -> uuid.UUID:
    """Key-share-lock the spec's pool and check the workload can ever fit it, and one of its
    pods some node of the pool's class (when `nodes` knows the cluster's nodes); its id."""
    pool = await pools.lock_for_workload(conn, project, spec.compute_pool)
    shortfall = check_fits_pool(
        spec, msgspec.convert(pool.quota, Quota), accelerator_class=pool.accelerator_class
    )
    if shortfall is not None:
        raise ExceedsPoolCapacity(
            compute_pool=shortfall.compute_pool,
            accelerator_class=shortfall.accelerator_class,
            requested=shortfall.requested,
            pool_capacity=shortfall.pool_capacity,
            errors=[
                FieldError(
                    name,
                    f"{_pods_times(spec)} {name} = {shortfall.requested[name]} exceeds the "
                    f"pool's {shortfall.pool_capacity[name]}",
                )
                for name in shortfall.exceeded
            ],
            detail=shortfall.detail,
        )
    if nodes is not None:
        _check_fits_node(spec, pool, nodes)
    return pool.id


def _check_fits_node(spec: PodRequest, pool: pools.PoolRef, nodes: NodeSource) -> None:
    """`ExceedsNodeCapacity` when nodes of the class exist and none can hold one pod
    (docs/API.md: no node of the class, or nodes not listed yet, is no refusal)."""
    known = nodes()
    if known is None or pool.binding is None:
        return
    resource_name, node_labels = pool.binding
    shortfall = check_fits_node(
        spec,
        accelerator_class=pool.accelerator_class,
        resource_name=resource_name,
        node_labels=node_labels,
        nodes=known,
    )
    if shortfall is None:
        return
    raise ExceedsNodeCapacity(
        compute_pool=shortfall.compute_pool,
        accelerator_class=shortfall.accelerator_class,
        requested=shortfall.requested,
        node_capacity=shortfall.node_capacity,
        largest_nodes=shortfall.largest_nodes,
        errors=[
            FieldError(
                name,
                f"{shortfall.requested[name]} per pod exceeds the largest node of class "
                f"{shortfall.accelerator_class} ({shortfall.largest_nodes[name]}: "
                f"{shortfall.node_capacity[name]})"
                if name in shortfall.exceeded
                else f"{shortfall.requested[name]} per pod fits some node of class "
                f"{shortfall.accelerator_class}, but none together with the rest of the pod",
            )
            for name in shortfall.exceeded or list(shortfall.requested)
        ],
        detail=shortfall.detail,
    )


async def create(
    conn: Connection,
    project: ProjectScope,
    spec: WorkloadSpec,
    *,
    actor: str,
    doorbell: bool = True,
    nodes: NodeSource | None = None,
) -> WorkloadResource:
    """Insert a PENDING workload at generation 1 with its Accepted event and, unless
    `doorbell` is False (the caller leases the new workload in this transaction instead,
    docs/DESIGN.md §5), its doorbell.

    Raises `ValidationFailed` on `compute_pool` (no such pool, or it is being deleted),
    `ExceedsPoolCapacity`, `ExceedsNodeCapacity` (with `nodes`: the cluster's nodes, for a pod
    no node of the class can hold), `AlreadyExists`, or `BeingDeleted` (the name's previous workload
    is still being cleaned up). Of concurrent creates of one name the unique constraint lets
    exactly one through; the others find the winner's row.
    """
    pool_id = await pool_that_fits(conn, project, spec, nodes)
    workload_id = uuid.uuid4()
    row = await conn.fetchrow(
        QUERIES["insert_workload"],
        workload_id,
        project.id,
        pool_id,
        spec.name,
        msgspec.to_builtins(spec),
        ACCEPTED_REASON,
        actor,
        EventType.ACCEPTED,
        EventReason.CREATED,
        f"Workload {spec.name} accepted at generation 1 in compute pool {spec.compute_pool}.",
    )
    if row is None:
        raise await taken(
            conn, "Workload", spec.name, QUERIES["workload_by_name"], project.id, spec.name
        )
    if doorbell:
        await ring_doorbell(conn, KIND, workload_id)
    return workload_from_row(row, project.name)


async def _row(conn: Connection, project: ProjectScope, name: str) -> asyncpg.Record:
    row = (
        await conn.fetchrow(QUERIES["workload_by_name"], project.id, name)
        if is_name(name)
        else None
    )
    if row is None:
        raise NotFound(f"Workload {name!r} not found.")
    return row


async def get(conn: Connection, project: ProjectScope, name: str) -> WorkloadResource:
    """The workload; `NotFound` when there is none (never created, or finalized)."""
    return workload_from_row(await _row(conn, project, name), project.name)


async def get_with_pool_depth(
    conn: Connection, project: ProjectScope, name: str, up_to: int
) -> tuple[WorkloadResource, int | None]:
    """The workload (`NotFound` as `get`) and, when it is QUEUED, how many live workloads its
    pool has, counted up to `up_to` (None when it is not QUEUED): one round trip."""
    row = (
        await conn.fetchrow(QUERIES["workload_by_name_with_pool_depth"], project.id, name, up_to)
        if is_name(name)
        else None
    )
    if row is None:
        raise NotFound(f"Workload {name!r} not found.")
    return workload_from_row(row, project.name), row["pool_live"]


async def get_id(conn: Connection, project: ProjectScope, name: str) -> uuid.UUID:
    """The workload's id (for its events); `NotFound` when there is none."""
    row = await _row(conn, project, name)
    workload_id: uuid.UUID = row["id"]
    return workload_id


#: A page of workloads ends early once its rows' text passes this (a handful of the largest
#: specs): what one list request holds in memory stays bounded whatever its `limit`.
PAGE_BOUND = ByteBound("row_bytes", 2 << 20)


@dataclass(frozen=True, slots=True)
class WorkloadFilter:
    """Which of a project's workloads a list or a stream shows: one name, one state, one pool
    (by id), names containing a text (`name_contains`: any case, `%` and `_` literal). The
    list (`page`), a stream's first page (`app.store.changes.current_page`) and a stream's
    live changes (`match`) all filter through it. `no_pool`: the pool asked for does not exist
    in the project, so no workload is in it."""

    name: str | None = None
    state: str | None = None
    pool_id: uuid.UUID | None = None
    no_pool: bool = False
    name_contains: str | None = None

    @property
    def name_pattern(self) -> str | None:
        """`name_contains` as an ILIKE pattern (escape `\\`), its `%`, `_` and `\\` literal."""
        if self.name_contains is None:
            return None
        text = self.name_contains
        escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return f"%{escaped}%"

    def match(self, row: Any) -> bool:
        """Whether a `workloads` row, or a change row of the log, is in this view."""
        if self.no_pool:
            return False
        if self.name is not None and row["name"] != self.name:
            return False
        if self.state is not None and row["state"] != self.state:
            return False
        if self.name_contains is not None and (
            self.name_contains.lower() not in str(row["name"]).lower()
        ):
            return False
        return self.pool_id is None or row["pool_id"] == self.pool_id


async def workload_filter(
    conn: Connection,
    project_id: uuid.UUID,
    *,
    name: str | None = None,
    state: str | None = None,
    compute_pool: str | None = None,
    name_contains: str | None = None,
) -> WorkloadFilter:
    """The filter of a request: the pool named `compute_pool` resolved to its id."""
    if compute_pool is None:
        return WorkloadFilter(name=name, state=state, name_contains=name_contains)
    pool_id = await conn.fetchval(QUERIES["pool_id_by_name"], project_id, compute_pool)
    return WorkloadFilter(
        name=name,
        state=state,
        pool_id=pool_id,
        no_pool=pool_id is None,
        name_contains=name_contains,
    )


async def page(
    conn: Connection,
    project: ProjectScope,
    view: WorkloadFilter,
    *,
    after: Position | None,
    limit: int,
) -> tuple[list[WorkloadResource], Position | None]:
    """Up to `limit` workloads older than `after`, newest first, in `view` (by state, pool and
    name text; a list has no exact-name filter), and the next page's position (None on the
    last page)."""
    if view.no_pool:
        return [], None  # no such pool in the project: no workload is in it
    state, pool_id, pattern = view.state, view.pool_id, view.name_pattern
    if pool_id is None:
        query, args = (
            (QUERIES["list_workloads"], [project.id, pattern])
            if state is None
            else (QUERIES["list_workloads_in_state"], [project.id, state, pattern])
        )
    else:
        query, args = (
            (QUERIES["list_workloads_in_pool"], [project.id, pool_id, pattern])
            if state is None
            else (
                QUERIES["list_workloads_in_pool_in_state"],
                [project.id, pool_id, state, pattern],
            )
        )
    rows, position = await fetch_page(
        conn, query, *args, after=after, limit=limit, first_id=NIL_UUID, bound=PAGE_BOUND
    )
    return [workload_from_row(row, project.name) for row in rows], position


async def _lock(
    conn: Connection, project: ProjectScope, name: str, if_match: int | None
) -> asyncpg.Record:
    row = await conn.fetchrow(QUERIES["lock_workload"], project.id, name) if is_name(name) else None
    if row is None:
        raise NotFound(f"Workload {name!r} not found.")
    check_generation(if_match, row["generation"])
    return row


async def replace(
    conn: Connection,
    project: ProjectScope,
    spec: WorkloadSpec,
    *,
    if_match: int | None,
    actor: str,
    nodes: NodeSource | None = None,
) -> WorkloadResource:
    """Make `spec` the workload's next generation, PENDING until the reconciler replaces the
    Job (SpecUpdated event, doorbell). `BeingDeleted` once deletion was requested; the fit
    checks of `create` (`nodes` as there)."""
    current = await _lock(conn, project, spec.name, if_match)
    if current["deletion_requested_at"] is not None:
        raise BeingDeleted(f"Workload {spec.name!r} is being deleted and cannot be changed.")
    pool_id = await pool_that_fits(conn, project, spec, nodes)
    generation = current["generation"] + 1
    row = await conn.fetchrow(
        QUERIES["replace_workload"],
        current["id"],
        msgspec.to_builtins(spec),
        pool_id,
        _replaced_reason(generation),
    )
    assert row is not None  # this transaction holds the row lock
    await record_change(
        conn,
        project_id=project.id,
        kind=KIND,
        resource_id=current["id"],
        resource_name=spec.name,
        type=EventType.SPEC_UPDATED,
        reason=EventReason.REPLACED,
        message=f"Workload {spec.name} replaced by generation {generation}.",
        generation=generation,
        actor=actor,
    )
    return workload_from_row(row, project.name)


async def request_deletion(
    conn: Connection, project: ProjectScope, name: str, *, if_match: int | None, actor: str
) -> WorkloadResource:
    """Mark the workload DELETING (DeletionRequested event, doorbell); it stays readable until
    the reconciler finalizes it. Repeating the request changes nothing."""
    current = await _lock(conn, project, name, if_match)
    if current["deletion_requested_at"] is not None:
        return workload_from_row(current, project.name)
    row = await conn.fetchrow(QUERIES["request_workload_deletion"], current["id"], DELETING_REASON)
    assert row is not None  # this transaction holds the row lock
    await record_change(
        conn,
        project_id=project.id,
        kind=KIND,
        resource_id=current["id"],
        resource_name=name,
        type=EventType.DELETION_REQUESTED,
        reason=EventReason.DELETED,
        message=f"Deletion of workload {name} requested.",
        generation=current["generation"],
        actor=actor,
    )
    return workload_from_row(row, project.name)
