"""Event trails: `GET .../workloads/{name}/events` and `GET .../compute-pools/{pool}/events`.

The audit and lifecycle record of one resource (who accepted, changed or deleted it, and what
the controller observed), newest first, paginated. Readable by every member of the project
for as long as the resource exists.
"""

import uuid

from litestar import get
from litestar.params import Parameter

from app.api.deps import CallerDep, DbDep
from app.api.docs import READ, problems
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, Paging, PagingDep
from app.domain.kinds import Kind
from app.domain.workload_resources import EventList
from app.store import events, pools, workloads
from app.store.db import Connection


async def trail(
    conn: Connection,
    paging: Paging,
    kind: Kind,
    resource_id: uuid.UUID,
    cursor: str | None,
    limit: int,
) -> EventList:
    """A page of the events of `kind` `resource_id`; its cursors belong to that list alone."""
    page = paging.list(f"{kind}-events", resource_id)
    items, position = await events.page(
        conn, kind=kind, resource_id=resource_id, after=page.after(cursor), limit=limit
    )
    return EventList(items=items, next_cursor=page.next(position))


@get(
    "/projects/{project:str}/workloads/{name:str}/events",
    summary="List a workload's events",
    description="Accepted, SpecUpdated, DeletionRequested and what the controller observed "
    "(JobCreated, Admitted, Started, Succeeded, Failed, Preempted, ...), each with its actor. "
    "Newest first; page with `cursor`.",
    responses=problems(*READ),
    tags=["workloads"],
    operation_id="listWorkloadEvents",
)
async def workload_events(
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    name: str = Parameter(description="Workload name"),
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> EventList:
    async with db.connection() as conn:
        workload_id = await workloads.get_id(conn, caller.require_project(), name)
        return await trail(conn, paging, "workload", workload_id, cursor, limit)


@get(
    "/projects/{project:str}/compute-pools/{pool:str}/events",
    summary="List a compute pool's events",
    description="Accepted, SpecUpdated (quota changes), DeletionRequested and what the "
    "controller did, each with its actor. Newest first; page with `cursor`.",
    responses=problems(*READ),
    tags=["compute-pools"],
    operation_id="listPoolEvents",
)
async def pool_events(
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    pool: str = Parameter(description="Compute pool name"),
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> EventList:
    async with db.connection() as conn:
        pool_id = await pools.get_id(conn, caller.require_project(), pool)
        return await trail(conn, paging, "pool", pool_id, cursor, limit)


ROUTES = [workload_events, pool_events]
