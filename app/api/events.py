"""Event trails: `GET .../workloads/{name}/events` and `GET .../compute-pools/{pool}/events`.

The audit and lifecycle record of one resource (who accepted, changed or deleted it, and what
the controller observed), newest first, paginated. Readable by every member of the project
for as long as the resource exists.
"""

from litestar import get
from litestar.params import Parameter

from app.api.deps import CallerDep, DbDep
from app.api.docs import READ, problems
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.domain.workload_resources import EventList
from app.store import events, pools, workloads


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
        page = paging.list("workload-events", workload_id)
        items, position = await events.page(
            conn, kind="workload", resource_id=workload_id, after=page.after(cursor), limit=limit
        )
    return EventList(items=items, next_cursor=page.next(position))


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
        page = paging.list("pool-events", pool_id)
        items, position = await events.page(
            conn, kind="pool", resource_id=pool_id, after=page.after(cursor), limit=limit
        )
    return EventList(items=items, next_cursor=page.next(position))


ROUTES = [workload_events, pool_events]
