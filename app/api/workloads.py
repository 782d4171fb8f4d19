"""`/api/v1/projects/{project}/workloads`: batch accelerator jobs. Editors (and above) write;
every member of the project reads. Reads come from PostgreSQL, never from the cluster."""

from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from litestar import Request, Response, delete, get, post, put
from litestar.params import JSONBody, Parameter, QueryParameter

from app.api.auth import requires
from app.api.creating import CreateLease
from app.api.deps import CallerDep, DbDep
from app.api.docs import CREATE, DELETE, READ, STREAM, STREAMS, WRITE, problems, stream_of, success
from app.api.dry_runs import DryRun, answer, create_dry, stored, transaction
from app.api.idempotency import Created, IdempotencyKey
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.api.pools import raise_violations
from app.api.preconditions import IfMatch, expected_generation, versioned
from app.api.standings import planned_admission, with_fresh_standing
from app.api.watches import LastEventId, open_stream, stream_doc
from app.domain.dry_runs import WorkloadDryRun
from app.domain.errors import FieldError, ValidationFailed
from app.domain.node_fit import NodeSource
from app.domain.specs import NAME_PATTERN, WorkloadSpec
from app.domain.states import Role, WorkloadState
from app.domain.validation import check_workload
from app.domain.workload_resources import WatchEvent, WorkloadList, WorkloadResource
from app.store import workloads
from app.store.db import Connection

if TYPE_CHECKING:
    from app.domain.planning.what_if import AdmissionForecast

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
NameContainsFilter = Annotated[
    str | None,
    Parameter(
        min_length=1,
        max_length=40,
        description="Only workloads whose name contains this text (case-insensitive; `%` and "
        "`_` are plain characters, not wildcards); at most 40 characters",
    ),
]


#: `app.state` key of the start deadline filled into a spec that names none.
START_DEADLINE_KEY = "workload_start_deadline_seconds"


def with_start_deadline(request: Request[Any, Any, Any], spec: WorkloadSpec) -> WorkloadSpec:
    """`spec` with the installation's start deadline when it names none: the stored spec (and
    GET) shows the deadline in effect, which a later change of the setting does not move."""
    if spec.start_deadline_seconds is not None:
        return spec
    default: int = request.app.state[START_DEADLINE_KEY]
    return msgspec.structs.replace(spec, start_deadline_seconds=default)


#: `app.state` key of the cluster's nodes (the Node informer's view; None without a cluster):
#: a pod no node of its class can hold is refused at submit (`exceeds-node-capacity`).
NODES_KEY = "cluster_nodes"


def cluster_nodes(request: Request[Any, Any, Any]) -> NodeSource | None:
    nodes: NodeSource | None = request.app.state.get(NODES_KEY)
    return nodes


def workload_location(project: str, name: str) -> str:
    return f"/api/v1/projects/{project}/workloads/{name}"


def state_filter_value(value: str | None) -> str | None:
    """The `state` filter of a list or stream (422 naming `state` when it is not one)."""
    if value is None or value in WorkloadState.__members__:
        return value
    allowed = ", ".join(WorkloadState)
    raise ValidationFailed([FieldError("state", f"must be one of {allowed}")], location="query")


@post(
    PATH,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Submit a workload",
    description="Editor. Answers 202 with the workload (defaults filled, state PENDING) and "
    "its `Location`; the reconciler creates its Job. `compute_pool` must exist and not be "
    "being deleted (else 422 naming it); `replicas` x the per-replica request must fit the "
    "pool's quota (else 422 exceeds-pool-capacity); one pod must fit on some node of the "
    "pool's accelerator class once nodes of it exist (else 422 exceeds-node-capacity naming "
    "the largest node). Honours `Idempotency-Key`. "
    "`dry_run=true`: 200 with what it would store and the `admission` forecast (admitted "
    "now, preempting, or queued with its position and estimated start), nothing written.",
    responses={
        200: success(WorkloadDryRun, "Dry run: what the request would store and change"),
        202: success(WorkloadResource, "Accepted"),
        **problems(*CREATE),
    },
    tags=["workloads"],
)
async def create_workload(
    request: Request[Any, Any, Any],
    data: JSONBody[WorkloadSpec],
    caller: CallerDep,
    db: DbDep,
    idempotency_key_header: IdempotencyKey = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    raise_violations(check_workload(data))
    data = with_start_deadline(request, data)
    project = caller.require_project()
    lease = CreateLease(request, dry_run=dry_run)
    nodes = cluster_nodes(request)

    async def create(conn: Connection) -> Created:
        workload = await workloads.create(
            conn, project, data, actor=caller.actor, doorbell=False, nodes=nodes
        )
        await lease.take(conn, "workload", workload.uid, project.id)
        location = workload_location(project.name, workload.name)
        return Created(workload, location, "workload", workload.uid)

    if dry_run:
        planned: list[AdmissionForecast | None] = []

        async def create_planned(conn: Connection) -> Created:
            created = await create(conn)
            planned.append(await planned_admission(conn, project, data, created.resource.uid))
            return created

        created = await create_dry(request, db, create_planned)
        return answer(WorkloadDryRun, created.resource, None, 202, admission=planned[0])
    return await lease.respond(request, db, caller, create)


STREAM_DOC = stream_doc("workload")
WatchFlag = Annotated[
    bool,
    Parameter(
        description="Answer `text/event-stream`: each matching workload, then every change "
        "(one that stops matching the filters is sent as DELETED)"
    ),
]


@get(
    PATH,
    summary="List workloads, or stream them (`?watch=true`)",
    description="Newest first; filter by `state`, `compute_pool` and `name_contains`; page "
    "with `cursor`. With "
    "`watch=true`, a Server-Sent Events stream of the matching workloads instead (no paging)."
    + STREAM_DOC,
    responses={
        200: success(WorkloadList, "A page of workloads; `text/event-stream` with watch=true"),
        **problems(*STREAM),
    },
    tags=["workloads"],
    opt={STREAMS: WatchEvent},
)
async def list_workloads(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    state_filter: StateFilter = None,
    compute_pool: PoolFilter = None,
    name_contains: NameContainsFilter = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
    watch: WatchFlag = False,
    last_event_id: LastEventId = None,
) -> Response[Any]:
    project = caller.require_project()
    state = state_filter_value(state_filter)
    if watch:
        async with db.connection() as conn:
            view = await workloads.workload_filter(
                conn,
                project.id,
                state=state,
                compute_pool=compute_pool,
                name_contains=name_contains,
            )
        return await open_stream(request, caller, db, view, last_event_id)
    page = paging.list("workloads", project.id, state, compute_pool, name_contains)
    after = page.after(cursor)
    async with db.connection() as conn:
        view = await workloads.workload_filter(
            conn, project.id, state=state, compute_pool=compute_pool, name_contains=name_contains
        )
        # A page carries the standing the controller last recorded (as streams do): replaying
        # a pool's queue costs too much to pay on every list (docs/PLANNING.md).
        items, position = await workloads.page(conn, project, view, after=after, limit=limit)
    return Response(WorkloadList(items=items, next_cursor=page.next(position)))


@get(
    ONE + "/watch",
    summary="Stream a workload's changes",
    description="A Server-Sent Events stream: the workload now (ADDED), then one event per "
    "change of its state, reason, admission, nodes or evidence (MODIFIED), and DELETED when "
    "it is gone, which ends the stream." + STREAM_DOC,
    media_type="text/event-stream",
    responses={200: stream_of(WatchEvent), **problems(*STREAM)},
    tags=["workloads"],
)
async def watch_workload(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    last_event_id: LastEventId = None,
) -> Response[Any]:
    return await open_stream(
        request, caller, db, workloads.WorkloadFilter(name=name), last_event_id
    )


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
    project = caller.require_project()
    async with db.connection() as conn:
        # In a deep pool, the standing the controller recorded (with its computed_at), as
        # lists answer: a replay of 1,000 live workloads costs seconds (docs/PLANNING.md).
        found = await with_fresh_standing(conn, project, name)
    return versioned(found, 200)


@put(
    ONE,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Replace a workload's spec",
    description="Editor. The full spec becomes a new generation (202): the reconciler removes "
    "the old Job and creates one for the new generation. The body's `name` must be the "
    'path\'s. `If-Match: "<generation>"` makes it conditional (412 on mismatch); 409 '
    "being-deleted once deletion was requested. `dry_run=true`: 200 with what it would store, "
    "the fields it would change and the `admission` forecast, nothing written.",
    responses={
        200: success(WorkloadDryRun, "Dry run: what the request would store and change"),
        **problems(*WRITE),
        **problems(412),
    },
    tags=["workloads"],
)
async def replace_workload(
    request: Request[Any, Any, Any],
    data: JSONBody[WorkloadSpec],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    if_match_header: IfMatch = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    violations = check_workload(data)
    if data.name != name:
        violations.insert(0, ("name", f"must be the name in the path ({name!r})"))
    raise_violations(violations)
    data = with_start_deadline(request, data)
    if_match = expected_generation(request)
    project = caller.require_project()
    async with transaction(db, dry_run=dry_run) as conn:
        before = await stored(workloads.get(conn, project, name)) if dry_run else None
        replaced = await workloads.replace(
            conn, project, data, if_match=if_match, actor=caller.actor, nodes=cluster_nodes(request)
        )
        admission = await planned_admission(conn, project, data, replaced.uid) if dry_run else None
    if dry_run:
        return answer(WorkloadDryRun, replaced, before, 202, admission=admission)
    return versioned(replaced, 202)


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
    return versioned(deleting, 202)


ROUTES = [
    create_workload,
    list_workloads,
    watch_workload,
    get_workload,
    replace_workload,
    delete_workload,
]
