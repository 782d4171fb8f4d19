"""`/api/v1/projects/{project}/compute-pools`: quotas of one accelerator class plus cpu and
memory. Project admins (and the platform admin) write; every member of the project reads."""

from typing import Any

from litestar import Request, Response, delete, get, patch, post
from litestar.params import JSONBody, Parameter

from app.api.auth import requires
from app.api.cluster_objects import refuse_foreign
from app.api.creating import CreateLease
from app.api.deps import CallerDep, DbDep
from app.api.docs import CREATE, DELETE, READ, WRITE, problems, success
from app.api.dry_runs import DryRun, answer, create_dry, stored, transaction
from app.api.idempotency import Created, IdempotencyKey
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.api.preconditions import IfMatch, expected_generation, versioned
from app.domain.dry_runs import PoolDryRun
from app.domain.errors import FieldError, ValidationFailed
from app.domain.pool_resources import PoolList, PoolResource
from app.domain.render import PoolIdentity
from app.domain.specs import PoolCreate, PoolPatch
from app.domain.states import Role
from app.domain.validation import Violation, check_pool_create, check_pool_patch
from app.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES
from app.store import pools
from app.store.db import Connection

PATH = "/projects/{project:str}/compute-pools"
ONE = PATH + "/{pool:str}"
PoolPath = Parameter(description="Compute pool name", examples=[])


def pool_location(project: str, name: str) -> str:
    return f"/api/v1/projects/{project}/compute-pools/{name}"


def raise_violations(violations: list[Violation]) -> None:
    """422 validation-error listing every violation, if there is any."""
    if violations:
        raise ValidationFailed([FieldError(field, message) for field, message in violations])


@post(
    PATH,
    opt=requires(Role.ADMIN),
    status_code=202,
    summary="Create a compute pool",
    description="Project admin. Answers 202 with the PENDING pool and its `Location`; the "
    "reconciler creates its Kueue ClusterQueue (`status.cluster_queue`) and LocalQueue. The "
    "`accelerator_class` must name an existing accelerator binding (else 422 naming the "
    "field). A ClusterQueue or LocalQueue of those names that exists and is not aicp's is 409 "
    "`object-not-owned`. Honours `Idempotency-Key`. `dry_run=true`: 200 with what it would "
    "store, nothing written.",
    responses={
        200: success(PoolDryRun, "Dry run: what the request would store and change"),
        202: success(PoolResource, "Accepted"),
        **problems(*CREATE),
    },
    tags=["compute-pools"],
)
async def create_pool(
    request: Request[Any, Any, Any],
    data: JSONBody[PoolCreate],
    caller: CallerDep,
    db: DbDep,
    idempotency_key_header: IdempotencyKey = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    raise_violations(check_pool_create(data))
    project = caller.require_project()
    lease = CreateLease(request, dry_run=dry_run)

    async def create(conn: Connection) -> Created:
        pool = await pools.create(conn, project, data, actor=caller.actor, doorbell=False)
        identity = PoolIdentity(
            project=project.name,
            pool=pool.name,
            accelerator_class=pool.accelerator_class,
            uid=str(pool.uid),
        )
        expected = identity.owner_labels
        await refuse_foreign(request, CLUSTER_QUEUES, None, identity.cluster_queue, expected)
        await refuse_foreign(
            request, LOCAL_QUEUES, identity.namespace, identity.local_queue, expected
        )
        await lease.take(conn, "pool", pool.uid, project.id)
        return Created(pool, pool_location(project.name, pool.name), "pool", pool.uid)

    if dry_run:
        created = await create_dry(request, db, create)
        return answer(PoolDryRun, created.resource, None, 202)
    return await lease.respond(request, db, caller, create)


@get(
    PATH,
    summary="List compute pools",
    description="Newest first, with their usage; page with `cursor`.",
    responses=problems(*READ),
    tags=["compute-pools"],
)
async def list_pools(
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> PoolList:
    project = caller.require_project()
    page = paging.list("compute-pools", project.id)
    after = page.after(cursor)
    async with db.connection() as conn:
        items, position = await pools.page(conn, project, after=after, limit=limit)
    return PoolList(items=items, next_cursor=page.next(position))


@get(
    ONE,
    summary="Get a compute pool",
    description="The pool, its Kueue queue names and its usage. `ETag` is its generation.",
    responses=problems(*READ),
    tags=["compute-pools"],
)
async def get_pool(caller: CallerDep, db: DbDep, pool: str = PoolPath) -> Response[PoolResource]:
    async with db.connection() as conn:
        found = await pools.get(conn, caller.require_project(), pool)
    return versioned(found, 200)


@patch(
    ONE,
    opt=requires(Role.ADMIN),
    status_code=202,
    summary="Change a compute pool's quota",
    description="Project admin. The new quota is a new generation (202); the reconciler "
    'updates the ClusterQueue. `If-Match: "<generation>"` makes it conditional (412 on '
    "mismatch). 409 being-deleted once deletion was requested. `dry_run=true`: 200 with what "
    "it would store and the fields it would change, nothing written.",
    responses={
        200: success(PoolDryRun, "Dry run: what the request would store and change"),
        **problems(*WRITE),
        **problems(412),
    },
    tags=["compute-pools"],
)
async def patch_pool(
    request: Request[Any, Any, Any],
    data: JSONBody[PoolPatch],
    caller: CallerDep,
    db: DbDep,
    pool: str = PoolPath,
    if_match_header: IfMatch = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    raise_violations(check_pool_patch(data))
    if_match = expected_generation(request)
    project = caller.require_project()
    async with transaction(db, dry_run=dry_run) as conn:
        before = await stored(pools.get(conn, project, pool)) if dry_run else None
        updated = await pools.update_quota(
            conn, project, pool, data.quota, if_match=if_match, actor=caller.actor
        )
    if dry_run:
        return answer(PoolDryRun, updated, before, 202)
    return versioned(updated, 202)


@delete(
    ONE,
    opt=requires(Role.ADMIN),
    status_code=202,
    summary="Delete a compute pool",
    description="Project admin. 202 with the pool in state DELETING; it stays readable until "
    "the reconciler has removed its queues. 409 in-use (with `referenced_by`) while workloads "
    "that are not being deleted use it. Honours `If-Match`.",
    responses=problems(*DELETE),
    tags=["compute-pools"],
)
async def delete_pool(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    pool: str = PoolPath,
    if_match_header: IfMatch = None,
) -> Response[PoolResource]:
    if_match = expected_generation(request)
    async with db.transaction() as conn:
        deleting = await pools.request_deletion(
            conn, caller.require_project(), pool, if_match=if_match, actor=caller.actor
        )
    return versioned(deleting, 202)


ROUTES = [create_pool, list_pools, get_pool, patch_pool, delete_pool]
