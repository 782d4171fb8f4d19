"""``/api/v1/role-bindings`` (platform admin only): identity-provider groups → roles; and
``/api/v1/whoami``: who the bearer token names and the roles it has.

A binding gives the members of one group `platform-admin`, or `admin`, `editor` or `viewer` of
one project (`app.store.role_bindings`); a person's roles are the union of their groups'
bindings, read on every request, so a change holds from the next request on.
"""

import uuid
from typing import Annotated

from litestar import Response, delete, get, post
from litestar.params import PathParameter, QueryParameter

from app.api.auth import PLATFORM_ADMIN, requires
from app.api.deps import CallerDep, DbDep
from app.api.docs import DELETE, WRITE, json_body, problems, success
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.domain.errors import NotFound
from app.domain.resources import ProjectGrant, RoleBinding, RoleBindingList, WhoAmI
from app.domain.specs import ProjectName, RoleBindingCreate
from app.domain.states import Role
from app.store import role_bindings
from app.store.role_bindings import PLATFORM_ADMIN_ROLE

BindingId = Annotated[str, PathParameter(description="The role binding's id (a UUID)", examples=[])]
ROLE_BINDING_BODY = json_body(
    "Editors of project vision", {"group": "vision-team", "role": "editor", "project": "vision"}
)


def _binding_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise NotFound("No such role binding.") from exc


@post(
    "/role-bindings",
    opt=requires(PLATFORM_ADMIN),
    summary="Create a role binding",
    description="Members of the identity-provider group `group` (as the access token's groups "
    "claim carries it) get `role`: `platform-admin` (give no `project`), or `admin`, "
    "`editor` or `viewer` of `project`. A person's roles are the union of their groups' "
    "bindings. 422 naming `project` when it is missing, superfluous or unknown; 409 when the "
    "group already has a binding in that scope. Audited (event kind `role-binding`).",
    responses={201: success(RoleBinding, "Created"), **problems(*WRITE)},
    tags=["role-bindings"],
)
async def create_role_binding(
    data: Annotated[RoleBindingCreate, ROLE_BINDING_BODY], caller: CallerDep, db: DbDep
) -> Response[RoleBinding]:
    async with db.transaction() as conn:
        binding = await role_bindings.create_role_binding(
            conn, group=data.group, role=data.role, project_name=data.project, actor=caller.actor
        )
    return Response(binding, status_code=201)


@get(
    "/role-bindings",
    opt=requires(PLATFORM_ADMIN),
    summary="List role bindings",
    description="Every binding, or those of one `project`. Newest first; page with `cursor`.",
    responses=problems(401, 403, 422, 429, 503),
    tags=["role-bindings"],
)
async def list_role_bindings(
    db: DbDep,
    paging: PagingDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
    project: Annotated[
        ProjectName | None, QueryParameter(description="Only this project's bindings")
    ] = None,
) -> RoleBindingList:
    page = paging.list("role-bindings", project)
    async with db.connection() as conn:
        project_id = None
        if project is not None:
            project_id = await role_bindings.project_id(conn, project)
            if project_id is None:
                return RoleBindingList(items=[], next_cursor=None)
        items, position = await role_bindings.list_role_bindings(
            conn, project_id=project_id, after=page.after(cursor), limit=limit
        )
    return RoleBindingList(items=items, next_cursor=page.next(position))


@get(
    "/role-bindings/{binding_id:str}",
    opt=requires(PLATFORM_ADMIN),
    summary="Get a role binding",
    responses=problems(401, 403, 404, 429, 503),
    tags=["role-bindings"],
)
async def get_role_binding(binding_id: BindingId, db: DbDep) -> RoleBinding:
    async with db.connection() as conn:
        return await role_bindings.get_role_binding(conn, _binding_id(binding_id))


@delete(
    "/role-bindings/{binding_id:str}",
    opt=requires(PLATFORM_ADMIN),
    status_code=204,
    summary="Delete a role binding",
    description="The group's members lose the role from their next request on (a person "
    "whose groups then match no binding gets 403). Audited.",
    responses=problems(*DELETE),
    tags=["role-bindings"],
)
async def delete_role_binding(binding_id: BindingId, caller: CallerDep, db: DbDep) -> None:
    async with db.transaction() as conn:
        await role_bindings.delete_role_binding(
            conn, binding_id=_binding_id(binding_id), actor=caller.actor
        )


@get(
    "/whoami",
    opt={"any_person": True},
    summary="Who am I",
    description="Who the bearer token names and what it may do: the platform admin token; a "
    "project token (its project and role); or a person signed in through OpenID Connect "
    "(subject, username, groups, and the roles those groups give, each with the groups that "
    "give it). A person whose groups match no binding gets 200 here with no roles (every "
    "other route answers them 403).",
    responses=problems(401, 429, 503),
    tags=["identity"],
)
async def whoami(caller: CallerDep, db: DbDep) -> WhoAmI:
    person = caller.person
    if person is None:
        if caller.is_admin:
            return WhoAmI(kind="admin", actor=caller.actor, platform_admin=True, roles=[])
        # A project token: the guard scoped it to no project; its own is in token_project_id.
        assert caller.token_project_id is not None and caller.role is not None
        async with db.connection() as conn:
            name = await role_bindings.project_name(conn, caller.token_project_id)
        return WhoAmI(
            kind="token",
            actor=caller.actor,
            platform_admin=False,
            roles=[ProjectGrant(project=name or "", role=caller.role.value, groups=[])],
            expires_at=caller.expires_at,
        )
    by_project: dict[str, dict[str, list[str]]] = {}
    for grant in person.grants:
        if grant.role == PLATFORM_ADMIN_ROLE or grant.project_name is None:
            continue
        by_project.setdefault(grant.project_name, {}).setdefault(grant.role, []).append(grant.group)
    roles = []
    for project, granted in sorted(by_project.items()):
        best = max(granted, key=lambda role: Role(role).rank)
        groups = sorted({g for role_groups in granted.values() for g in role_groups})
        roles.append(ProjectGrant(project=project, role=best, groups=groups))
    identity = person.identity
    return WhoAmI(
        kind="oidc",
        actor=caller.actor,
        platform_admin=person.is_admin,
        roles=roles,
        subject=identity.subject,
        username=identity.username,
        issuer=identity.issuer,
        groups=list(identity.groups),
        admin_groups=list(person.admin_groups),
        expires_at=identity.expires_at,
    )


ROUTES = [create_role_binding, list_role_bindings, get_role_binding, delete_role_binding, whoami]
