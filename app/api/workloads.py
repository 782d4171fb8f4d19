"""`/api/v1/projects/{project}/workloads`: batch accelerator jobs. Editors (and above) write;
every member of the project reads. Reads come from PostgreSQL, never from the cluster."""

from typing import Annotated, Any

from litestar import Request, Response, delete, get, post, put
from litestar.params import JSONBody, Parameter, QueryParameter

from app.api.auth import requires
from app.api.creating import CreateLease
from app.api.deps import CallerDep, DbDep
from app.api.docs import DELETE, READ, WRITE, problems, success
from app.api.idempotency import IdempotencyKey, respond_once
from app.api.paging import CursorParam, Limit, PagingDep
from app.api.pools import raise_violations
from app.api.preconditions import IfMatch, etag, expected_generation
from app.domain.errors import FieldError, ValidationFailed
from app.domain.specs import NAME_PATTERN, WorkloadSpec
from app.domain.states import Role, WorkloadState
from app.domain.validation import check_workload
from app.domain.workload_resources import WorkloadList, WorkloadResource
from app.store import workloads
from app.store.db import Connection

PATH = "/projects/{project:str}/workloads"
ONE = PATH + "/{name:str}"
NamePath = Parameter(description="Workload name", examples=[])
# `state` is a reserved handler argument in Litestar (the application state), hence the alias;
# the value is checked here so a bad one is reported under its query name, `state`.
StateFilter = Annotated[
    str | None,
    QueryParameter(
        name="state",
        description="Only workloads in this state",
        schema_extra={"enum": [state.value for state in WorkloadState]},
    ),
]
PoolFilter = Annotated[
    str | None,
    Parameter(
        max_length=30, pattern=NAME_PATTERN, description="Only workloads of this compute pool"
    ),
]


def workload_location(project: str, name: str) -> str:
    return f"/api/v1/projects/{project}/workloads/{name}"


def _state(value: str | None) -> str | None:
    if value is None or value in WorkloadState.__members__:
        return value
    allowed = ", ".join(WorkloadState)
    raise ValidationFailed([FieldError("state", f"must be one of {allowed}")], location="query")


def _answer(workload: WorkloadResource, status: int) -> Response[WorkloadResource]:
    return Response(workload, status_code=status, headers={"ETag": etag(workload.generation)})


@post(
    PATH,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Submit a workload",
    description="Editor. Answers 202 with the workload (defaults filled, state PENDING) and "
    "its `Location`; the reconciler creates its Job. `compute_pool` must exist and not be "
    "being deleted (else 422 naming it); `replicas` x the per-replica request must fit the "
    "pool's quota (else 422 exceeds-pool-capacity). Honours `Idempotency-Key`.",
    responses={202: success(WorkloadResource, "Accepted"), **problems(*WRITE)},
    tags=["workloads"],
)
async def create_workload(
    request: Request[Any, Any, Any],
    data: JSONBody[WorkloadSpec],
    caller: CallerDep,
    db: DbDep,
    idempotency_key_header: IdempotencyKey = None,
) -> Response[bytes]:
    raise_violations(check_workload(data))
    project = caller.require_project()
    lease = CreateLease(request)

    async def create(conn: Connection) -> tuple[WorkloadResource, str]:
        workload = await workloads.create(conn, project, data, actor=caller.actor, doorbell=False)
        await lease.take(conn, "workload", workload.uid)
        return workload, workload_location(project.name, workload.name)

    response = await respond_once(request, db, caller, status=202, create=create)
    lease.committed()
    return response


@get(
    PATH,
    summary="List workloads",
    description="Newest first; filter by `state` and `compute_pool`; page with `cursor`.",
    responses=problems(*READ),
    tags=["workloads"],
)
async def list_workloads(
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    state_filter: StateFilter = None,
    compute_pool: PoolFilter = None,
    limit: Limit = 50,
    cursor: CursorParam = None,
) -> WorkloadList:
    project = caller.require_project()
    state = _state(state_filter)
    page = paging.list("workloads", project.id, state, compute_pool)
    after = page.after(cursor)
    async with db.connection() as conn:
        items, position = await workloads.page(
            conn, project, state=state, compute_pool=compute_pool, after=after, limit=limit
        )
    return WorkloadList(items=items, next_cursor=page.next(position))


@get(
    ONE,
    summary="Get a workload",
    description="The spec as submitted and the observed status: state, a reason sentence, "
    "the Job, Kueue admission, nodes and accelerators. `ETag` is its generation.",
    responses=problems(*READ),
    tags=["workloads"],
)
async def get_workload(
    caller: CallerDep, db: DbDep, name: str = NamePath
) -> Response[WorkloadResource]:
    async with db.connection() as conn:
        found = await workloads.get(conn, caller.require_project(), name)
    return _answer(found, 200)


@put(
    ONE,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Replace a workload's spec",
    description="Editor. The full spec becomes a new generation (202): the reconciler removes "
    "the old Job and creates one for the new generation. The body's `name` must be the "
    'path\'s. `If-Match: "<generation>"` makes it conditional (412 on mismatch); 409 '
    "being-deleted once deletion was requested.",
    responses={**problems(*WRITE), **problems(412)},
    tags=["workloads"],
)
async def replace_workload(
    request: Request[Any, Any, Any],
    data: JSONBody[WorkloadSpec],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    if_match_header: IfMatch = None,
) -> Response[WorkloadResource]:
    violations = check_workload(data)
    if data.name != name:
        violations.insert(0, ("name", f"must be the name in the path ({name!r})"))
    raise_violations(violations)
    if_match = expected_generation(request)
    async with db.transaction() as conn:
        replaced = await workloads.replace(
            conn, caller.require_project(), data, if_match=if_match, actor=caller.actor
        )
    return _answer(replaced, 202)


@delete(
    ONE,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Delete a workload",
    description="Editor. 202 with the workload in state DELETING; it stays readable until the "
    "reconciler has removed its Job and recorded the evidence, then GET answers 404. "
    "Honours `If-Match`.",
    responses=problems(*DELETE),
    tags=["workloads"],
)
async def delete_workload(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    if_match_header: IfMatch = None,
) -> Response[WorkloadResource]:
    if_match = expected_generation(request)
    async with db.transaction() as conn:
        deleting = await workloads.request_deletion(
            conn, caller.require_project(), name, if_match=if_match, actor=caller.actor
        )
    return _answer(deleting, 202)


ROUTES = [create_workload, list_workloads, get_workload, replace_workload, delete_workload]
