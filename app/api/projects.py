"""``/api/v1/projects``: tenants. The platform admin creates and deletes; members read."""

from typing import Annotated, Any

from litestar import Request, Response, delete, get, patch, post

from app.api.auth import PLATFORM_ADMIN, requires
from app.api.cluster_objects import refuse_foreign
from app.api.deps import CallerDep, DbDep
from app.api.docs import CREATE, DELETE, READ, WRITE, json_body, problems, success
from app.api.dry_runs import DryRun, answer, create_dry, transaction
from app.api.idempotency import Created, IdempotencyKey, respond_once
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.api.pools import raise_violations
from app.api.preconditions import IfMatch, expected_generation, versioned
from app.domain.dry_runs import ProjectDryRun
from app.domain.naming import namespace_for, reserved_project_problem
from app.domain.render import namespace_owner_labels
from app.domain.resources import Project, ProjectList
from app.domain.specs import ProjectCreate, ProjectPatch
from app.domain.validation import check_labels, check_limits, check_name, check_plain_text
from app.kube.resources import NAMESPACES
from app.store import projects
from app.store.db import Connection

PROJECT_BODY = json_body(
    "A project",
    {
        "name": "research",
        "display_name": "Research",
        "labels": {"team": "nlp"},
        "limits": {"accelerators": {"h100-80g": 16}, "cpu": "256", "memory": "2Ti"},
    },
)
LIMITS_BODY = json_body(
    "New limits", {"limits": {"accelerators": {"h100-80g": 32}, "cpu": "512", "memory": "4Ti"}}
)


def project_location(name: str) -> str:
    return f"/api/v1/projects/{name}"


@post(
    "/projects",
    opt=requires(PLATFORM_ADMIN),
    status_code=202,
    summary="Create a project",
    description="Platform admin only. Answers 202 with the PENDING project and its Location; "
    "the reconciler creates its namespace `aicp-<name>`. `default` and the name whose "
    "namespace is aicp's own (`system` in `aicp-system`) are reserved (422); a namespace "
    "`aicp-<name>` that exists and is not aicp's is 409 `object-not-owned`. `limits` "
    "(optional) caps what the project's compute pools hold together: accelerators per class (a "
    "class not named may have none once `accelerators` is set), cpu and memory; a null "
    "ceiling, or no `limits`, is none. Honours `Idempotency-Key`. `dry_run=true`: 200 with "
    "what it would store, nothing written.",
    responses={
        200: success(ProjectDryRun, "Dry run: what the request would store and change"),
        202: success(Project, "Accepted"),
        **problems(*CREATE),
    },
    tags=["projects"],
)
async def create_project(
    request: Request[Any, Any, Any],
    data: Annotated[ProjectCreate, PROJECT_BODY],
    caller: CallerDep,
    db: DbDep,
    idempotency_key_header: IdempotencyKey = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    reserved = reserved_project_problem(data.name, request.app.state["install_namespace"])
    violations = [
        *([("name", reserved)] if reserved else []),
        *check_name("name", data.name),
        *check_plain_text("display_name", data.display_name),
        *check_labels("labels", data.labels),
        *check_limits("limits", data.limits),
    ]
    raise_violations(violations)

    async def create(conn: Connection) -> Created:
        project = await projects.create(
            conn,
            name=data.name,
            display_name=data.display_name,
            labels=data.labels,
            actor=caller.actor,
            limits=data.limits,
        )
        namespace = namespace_for(project.name)
        expected = namespace_owner_labels(project.name, str(project.uid))
        await refuse_foreign(request, NAMESPACES, None, namespace, expected)
        return Created(project, project_location(project.name), "project", project.uid)

    if dry_run:
        created = await create_dry(request, db, create)
        return answer(ProjectDryRun, created.resource, None, 202)
    return await respond_once(request, db, caller, status=202, create=create)


@get(
    "/projects",
    summary="List projects",
    description="The platform admin sees every project; a project token sees its own; a "
    "person signed in through OpenID Connect sees those their groups are bound to. "
    "Newest first; page with `cursor`.",
    responses=problems(*READ),
    tags=["projects"],
)
async def list_projects(
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> ProjectList:
    only_ids = caller.visible_project_ids
    page = paging.list("projects", *(only_ids if only_ids is not None else (None,)))
    async with db.connection() as conn:
        items, position = await projects.page(
            conn, only_ids=only_ids, after=page.after(cursor), limit=limit
        )
    return ProjectList(items=items, next_cursor=page.next(position))


@get(
    "/projects/{project:str}",
    summary="Get a project",
    description="`ETag` carries the generation, for `If-Match` on DELETE.",
    responses=problems(*READ),
    tags=["projects"],
)
async def get_project(caller: CallerDep, db: DbDep) -> Response[Project]:
    async with db.connection() as conn:
        project = await projects.get(conn, caller.require_project().name)
    return versioned(project)


@patch(
    "/projects/{project:str}",
    opt=requires(PLATFORM_ADMIN),
    status_code=202,
    summary="Change a project's limits",
    description="Platform admin only. Replaces `limits` (null: no ceilings) as a new "
    "generation (202). Limits below what the project's pools already hold are 409 "
    "limit-below-allocation naming each: shrink or delete pools first. Honours "
    '`If-Match: "<generation>"` (412 generation-mismatch). `dry_run=true`: 200 with what it '
    "would store and the fields it would change, nothing written.",
    responses={
        200: success(ProjectDryRun, "Dry run: what the request would store and change"),
        **problems(*WRITE),
        **problems(412),
    },
    tags=["projects"],
)
async def patch_project(
    request: Request[Any, Any, Any],
    data: Annotated[ProjectPatch, LIMITS_BODY],
    caller: CallerDep,
    db: DbDep,
    if_match_header: IfMatch = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    raise_violations(check_limits("limits", data.limits))
    ref = caller.require_project()
    expected = expected_generation(request)
    async with transaction(db, dry_run=dry_run) as conn:
        before = await projects.get(conn, ref.name) if dry_run else None
        project = await projects.set_limits(
            conn,
            project_id=ref.id,
            name=ref.name,
            limits=data.limits,
            actor=caller.actor,
            expected_generation=expected,
        )
    if dry_run:
        return answer(ProjectDryRun, project, before, 202)
    return versioned(project, 202)


@delete(
    "/projects/{project:str}",
    opt=requires(PLATFORM_ADMIN),
    status_code=202,
    summary="Delete a project",
    description="Platform admin only. 202 with the project in state DELETING; it stays readable "
    "until the reconciler has removed its namespace. 409 in-use while pools or workloads exist. "
    'Honours `If-Match: "<generation>"` (412 generation-mismatch).',
    responses=problems(*DELETE),
    tags=["projects"],
)
async def delete_project(
    request: Request[Any, Any, Any], caller: CallerDep, db: DbDep, if_match_header: IfMatch = None
) -> Project:
    ref = caller.require_project()
    expected = expected_generation(request)
    async with db.transaction() as conn:
        return await projects.request_deletion(
            conn,
            project_id=ref.id,
            name=ref.name,
            actor=caller.actor,
            expected_generation=expected,
        )


ROUTES = [create_project, list_projects, get_project, patch_project, delete_project]
