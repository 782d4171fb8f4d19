"""``/api/v1/accelerator-bindings``: platform admin writes; any valid token reads."""

from typing import Annotated, Any

from litestar import Request, Response, delete, get, put
from litestar.params import PathParameter

from app.api.auth import PLATFORM_ADMIN, requires
from app.api.cluster_objects import refuse_foreign
from app.api.deps import CallerDep, DbDep
from app.api.docs import READ, WRITE, json_body, problems, success
from app.api.dry_runs import DryRun, answer, stored, transaction
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.api.pools import raise_violations
from app.domain.dry_runs import BindingDryRun
from app.domain.resources import Binding, BindingList
from app.domain.specs import NAME_PATTERN, BindingPut
from app.domain.validation import check_binding
from app.kube.resources import RESOURCE_FLAVORS
from app.store import bindings

ClassPath = Annotated[
    str,
    PathParameter(
        pattern=NAME_PATTERN,
        min_length=1,
        max_length=63,
        description="Portable accelerator class (DNS-1123 label)",
        examples=[],
    ),
]


BINDING_BODY = json_body(
    "H100 nodes",
    {
        "resource_name": "nvidia.com/gpu",
        "flavor": "h100-80g",
        "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "description": "H100 80GB SXM nodes",
    },
)


@put(
    "/accelerator-bindings/{accelerator_class:str}",
    opt=requires(PLATFORM_ADMIN),
    summary="Create or replace an accelerator binding",
    description="201 when created, 200 when replaced. Pools using the class are reconciled "
    "again with the new flavor and node labels. The resource name must be an extended "
    "resource (`nvidia.com/gpu`, never `cpu` or `memory`); node labels (at most 8) and "
    "tolerations (at most 8) follow Kubernetes' and Kueue's ResourceFlavor rules. A flavor "
    "belongs to one shape: naming a flavor another class renders with other node labels or "
    "tolerations is 422 (field `flavor`). Changing the resource name, flavor, node labels or "
    "tolerations while workloads of the class are unfinished is 409 `in-use` (naming them). "
    "A ResourceFlavor of that name that exists and is not aicp's is 409 `object-not-owned`. "
    "`dry_run=true`: 200 with a BindingDryRun (what it would store and change, and "
    "`status_code` 201 or 200), nothing written.",
    responses={
        200: success(Binding | BindingDryRun, "Replaced; with dry_run=true, a BindingDryRun"),
        201: success(Binding, "Created"),
        **problems(*WRITE),
    },
    tags=["accelerator-bindings"],
)
async def put_binding(
    request: Request[Any, Any, Any],
    accelerator_class: ClassPath,
    data: Annotated[BindingPut, BINDING_BODY],
    caller: CallerDep,
    db: DbDep,
    dry_run: DryRun = False,
) -> Response[Any]:
    raise_violations(check_binding(data))
    await refuse_foreign(request, RESOURCE_FLAVORS, None, data.flavor, {})
    async with transaction(db, dry_run=dry_run) as conn:
        before = await stored(bindings.get(conn, accelerator_class)) if dry_run else None
        binding, created = await bindings.put(
            conn, accelerator_class=accelerator_class, spec=data, actor=caller.actor
        )
    status = 201 if created else 200
    if dry_run:
        return answer(BindingDryRun, binding, before, status)
    return Response(binding, status_code=status)


@get(
    "/accelerator-bindings",
    summary="List accelerator bindings",
    description="Any valid token may read them. Newest first; page with `cursor`.",
    responses=problems(*READ),
    tags=["accelerator-bindings"],
)
async def list_bindings(
    db: DbDep, paging: PagingDep, limit: Limit = DEFAULT_LIMIT, cursor: CursorParam = None
) -> BindingList:
    page = paging.list("accelerator-bindings")
    async with db.connection() as conn:
        items, position = await bindings.page(conn, after=page.after(cursor), limit=limit)
    return BindingList(items=items, next_cursor=page.next(position))


@get(
    "/accelerator-bindings/{accelerator_class:str}",
    summary="Get an accelerator binding",
    description="Any valid token may read it.",
    responses=problems(*READ),
    tags=["accelerator-bindings"],
)
async def get_binding(accelerator_class: ClassPath, db: DbDep) -> Binding:
    async with db.connection() as conn:
        return await bindings.get(conn, accelerator_class)


@delete(
    "/accelerator-bindings/{accelerator_class:str}",
    opt=requires(PLATFORM_ADMIN),
    status_code=204,
    summary="Delete an accelerator binding",
    description="409 in-use (naming the pools) while any compute pool uses the class.",
    responses=problems(401, 403, 404, 409, 422, 503),
    tags=["accelerator-bindings"],
)
async def delete_binding(accelerator_class: ClassPath, caller: CallerDep, db: DbDep) -> None:
    async with db.transaction() as conn:
        await bindings.delete(conn, accelerator_class=accelerator_class, actor=caller.actor)


ROUTES = [put_binding, list_bindings, get_binding, delete_binding]
