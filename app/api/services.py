"""`/api/v1/projects/{project}/services`: inference services, long-running replicas behind a
ClusterIP Service, each replica admitted by Kueue against the compute pool's quota. Editors
(and above) write; every member of the project reads. Reads come from PostgreSQL, never from
the cluster."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from litestar import Request, Response, delete, get, patch, post, put
from litestar.params import JSONBody, Parameter, QueryParameter

from app.api.auth import ProjectRef, requires
from app.api.creating import CreateLease
from app.api.deps import CallerDep, DbDep
from app.api.docs import CREATE, DELETE, READ, STREAM, STREAMS, WRITE, problems, stream_of, success
from app.api.dry_runs import DryRun, answer, create_dry, stored, transaction
from app.api.events import trail
from app.api.idempotency import Created, IdempotencyKey
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.api.pools import raise_violations
from app.api.preconditions import IfMatch, expected_generation, versioned
from app.api.watches import LastEventId, open_stream, stream_doc
from app.api.workloads import cluster_nodes
from app.domain.dry_runs import ServiceDryRun
from app.domain.errors import FieldError, ValidationFailed
from app.domain.service_resources import ServiceList, ServiceResource, ServiceWatchEvent
from app.domain.service_specs import ServiceScale, ServiceSpec
from app.domain.specs import NAME_PATTERN
from app.domain.states import Role, ServiceState
from app.domain.validation import check_service
from app.domain.workload_resources import EventList
from app.store import services, workloads
from app.store.db import Connection, Database
from app.streams.kinds import SERVICE_STREAM

PATH = "/projects/{project:str}/services"
ONE = PATH + "/{name:str}"
NamePath = Parameter(description="Service name", examples=[])
StateFilter = Annotated[
    str | None,
    QueryParameter(
        name="state",
        description="Only services in this state",
        schema_extra={"enum": [state.value for state in ServiceState]},
    ),
]


PoolFilter = Annotated[
    str | None,
    Parameter(
        max_length=30, pattern=NAME_PATTERN, description="Only services of this compute pool"
    ),
]
NameContainsFilter = Annotated[
    str | None,
    Parameter(
        min_length=1,
        max_length=40,
        description="Only services whose name contains this text (case-insensitive; `%` and "
        "`_` are plain characters, not wildcards); at most 40 characters",
    ),
]


def service_location(project: str, name: str) -> str:
    return f"/api/v1/projects/{project}/services/{name}"


def _state(value: str | None) -> str | None:
    """The `state` filter (422 naming `state` when it is not a service state)."""
    if value is None or value in ServiceState.__members__:
        return value
    allowed = ", ".join(ServiceState)
    raise ValidationFailed([FieldError("state", f"must be one of {allowed}")], location="query")


@post(
    PATH,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Create a service",
    description="Editor. Answers 202 with the service (defaults filled, state PENDING) and its "
    "`Location`; the reconciler applies its Deployment, Service, PodDisruptionBudget, "
    "NetworkPolicy (and HorizontalPodAutoscaler with `autoscaling`). `compute_pool` must exist "
    "and not be being deleted (else 422 naming it); one replica must fit the pool's quota "
    "(else 422 exceeds-pool-capacity) and some node of the pool's accelerator class once "
    "nodes of it exist (else 422 exceeds-node-capacity). More replicas than the quota holds "
    "is no error: the extra ones wait for quota, and the status says so. Honours "
    "`Idempotency-Key`. `dry_run=true`: 200 with what it would store, nothing written.",
    responses={
        200: success(ServiceDryRun, "Dry run: what the request would store and change"),
        202: success(ServiceResource, "Accepted"),
        **problems(*CREATE),
    },
    tags=["services"],
)
async def create_service(
    request: Request[Any, Any, Any],
    data: JSONBody[ServiceSpec],
    caller: CallerDep,
    db: DbDep,
    idempotency_key_header: IdempotencyKey = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    raise_violations(check_service(data))
    project = caller.require_project()
    lease = CreateLease(request, dry_run=dry_run)
    nodes = cluster_nodes(request)

    async def create(conn: Connection) -> Created:
        service = await services.create(
            conn, project, data, actor=caller.actor, doorbell=False, nodes=nodes
        )
        await lease.take(conn, "service", service.uid, project.id)
        return Created(
            service, service_location(project.name, service.name), "service", service.uid
        )

    if dry_run:
        created = await create_dry(request, db, create)
        return answer(ServiceDryRun, created.resource, None, 202)
    return await lease.respond(request, db, caller, create)


STREAM_DOC = stream_doc("service")
WatchFlag = Annotated[
    bool,
    Parameter(
        description="Answer `text/event-stream`: each matching service, then every change "
        "(one that stops matching the filters is sent as DELETED)"
    ),
]


@get(
    PATH,
    summary="List services, or stream them (`?watch=true`)",
    description="Newest first; filter by `state`, `compute_pool` and `name_contains`; page "
    "with `cursor`. With `watch=true`, a Server-Sent Events stream of the matching services "
    "instead (no paging)." + STREAM_DOC,
    responses={
        200: success(ServiceList, "A page of services; `text/event-stream` with watch=true"),
        **problems(*STREAM),
    },
    tags=["services"],
    opt={STREAMS: ServiceWatchEvent},
)
async def list_services(
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
    state = _state(state_filter)
    async with db.connection() as conn:
        view = await workloads.workload_filter(
            conn, project.id, state=state, compute_pool=compute_pool, name_contains=name_contains
        )
        if not watch:
            page = paging.list("services", project.id, state, compute_pool, name_contains)
            items, position = await services.page(
                conn, project, view, after=page.after(cursor), limit=limit
            )
            return Response(ServiceList(items=items, next_cursor=page.next(position)))
    # The stream holds no connection of its own while it is open.
    return await open_stream(request, caller, db, view, last_event_id, SERVICE_STREAM)


@get(
    ONE + "/watch",
    summary="Stream a service's changes",
    description="A Server-Sent Events stream: the service now (ADDED), then one event per "
    "change of its spec, state, reason, replicas, pods or endpoint (MODIFIED), and DELETED "
    "when it is gone, which ends the stream." + STREAM_DOC,
    media_type="text/event-stream",
    responses={200: stream_of(ServiceWatchEvent), **problems(*STREAM)},
    tags=["services"],
)
async def watch_service(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    last_event_id: LastEventId = None,
) -> Response[Any]:
    view = workloads.WorkloadFilter(name=name)
    return await open_stream(request, caller, db, view, last_event_id, SERVICE_STREAM)


@get(
    ONE,
    summary="Get a service",
    description="The spec as submitted and the observed status: state, a reason sentence, the "
    "endpoint, replica counts and every replica with its node, readiness and restarts. "
    "`ETag` is its generation.",
    responses=problems(*READ),
    tags=["services"],
)
async def get_service(
    caller: CallerDep, db: DbDep, name: str = NamePath
) -> Response[ServiceResource]:
    async with db.connection() as conn:
        found = await services.get(conn, caller.require_project(), name)
    return versioned(found, 200)


async def _new_generation(
    db: Database,
    project: ProjectRef,
    name: str,
    write: Callable[[Connection], Awaitable[ServiceResource]],
    *,
    dry_run: bool,
) -> Response[Any]:
    """A replace or a scale: 202 with the new generation, or with `dry_run` 200 with what it
    would store and change (the write rolled back)."""
    async with transaction(db, dry_run=dry_run) as conn:
        before = await stored(services.get(conn, project, name)) if dry_run else None
        written = await write(conn)
    if dry_run:
        return answer(ServiceDryRun, written, before, 202)
    return versioned(written, 202)


@put(
    ONE,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Replace a service's spec",
    description="Editor. The full spec becomes a new generation (202): the reconciler rolls "
    "the replicas over to it (one at a time; the status says how far). The body's `name` must "
    'be the path\'s. `If-Match: "<generation>"` makes it conditional (412 on mismatch); 409 '
    "being-deleted once deletion was requested. `dry_run=true`: 200 with what it would store "
    "and the fields it would change, nothing written.",
    responses={
        200: success(ServiceDryRun, "Dry run: what the request would store and change"),
        **problems(*WRITE),
        **problems(412),
    },
    tags=["services"],
)
async def replace_service(
    request: Request[Any, Any, Any],
    data: JSONBody[ServiceSpec],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    if_match_header: IfMatch = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    violations = check_service(data)
    if data.name != name:
        violations.insert(0, ("name", f"must be the name in the path ({name!r})"))
    raise_violations(violations)
    if_match = expected_generation(request)
    project = caller.require_project()
    nodes = cluster_nodes(request)

    async def write(conn: Connection) -> ServiceResource:
        return await services.replace(
            conn, project, data, if_match=if_match, actor=caller.actor, nodes=nodes
        )

    return await _new_generation(db, project, name, write, dry_run=dry_run)


@patch(
    ONE,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Scale a service",
    description="Editor. A new replica count (0 scales to zero) is a new generation (202) with "
    "a `Scaled` event; the same count again changes nothing. With `autoscaling` the "
    "autoscaler owns the count and this only changes the stored spec. Honours `If-Match`. "
    "`dry_run=true`: 200 with what it would store and change, nothing written.",
    responses={
        200: success(ServiceDryRun, "Dry run: what the request would store and change"),
        **problems(*WRITE),
        **problems(412),
    },
    tags=["services"],
)
async def scale_service(
    request: Request[Any, Any, Any],
    data: JSONBody[ServiceScale],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    if_match_header: IfMatch = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    if_match = expected_generation(request)
    project = caller.require_project()

    async def write(conn: Connection) -> ServiceResource:
        return await services.scale(
            conn, project, name, data.replicas, if_match=if_match, actor=caller.actor
        )

    return await _new_generation(db, project, name, write, dry_run=dry_run)


@delete(
    ONE,
    opt=requires(Role.EDITOR),
    status_code=202,
    summary="Delete a service",
    description="Editor. 202 with the service in state DELETING; it stays readable until the "
    "reconciler has removed its objects and recorded a tombstone, then GET answers 404. "
    "Honours `If-Match`.",
    responses=problems(*DELETE),
    tags=["services"],
)
async def delete_service(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    if_match_header: IfMatch = None,
) -> Response[ServiceResource]:
    if_match = expected_generation(request)
    async with db.transaction() as conn:
        deleting = await services.request_deletion(
            conn, caller.require_project(), name, if_match=if_match, actor=caller.actor
        )
    return versioned(deleting, 202)


@get(
    ONE + "/events",
    summary="List a service's events",
    description="Accepted, SpecUpdated (replaced or Scaled), DeletionRequested and what the "
    "controller observed (Progressing, Ready, Degraded, DriftCorrected, Finalized), each with "
    "its actor. Newest first; page with `cursor`.",
    responses=problems(*READ),
    tags=["services"],
    operation_id="listServiceEvents",
)
async def service_events(
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    name: str = NamePath,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> EventList:
    async with db.connection() as conn:
        service_id = await services.get_id(conn, caller.require_project(), name)
        return await trail(conn, paging, "service", service_id, cursor, limit)


ROUTES = [
    create_service,
    list_services,
    watch_service,
    get_service,
    replace_service,
    scale_service,
    delete_service,
    service_events,
]
