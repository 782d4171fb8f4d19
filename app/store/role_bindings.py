"""Role bindings: a group of the identity provider → platform-admin, or a role in one project.

A person signed in through OpenID Connect has the union of the bindings of the groups their
token carries (`grants_of_groups`), read once per request with one indexed query, so a binding
created or deleted holds from the next request on, on every replica. Creates and deletes are
audited as events of kind `role-binding` (a project's binding in that project's events).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.errors import AlreadyExists, FieldError, NotFound, ValidationFailed
from app.domain.events import EventType
from app.domain.resources import RoleBinding
from app.store.audit import record_event
from app.store.paging import NIL_UUID, Position, fetch_page
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from collections.abc import Sequence

    import asyncpg

    from app.store.db import Connection

PLATFORM_ADMIN_ROLE = "platform-admin"


@dataclass(frozen=True)
class Grant:
    """One binding that applies to a person: through `group`, `role` in `project_id`/`name`
    (both None for platform-admin)."""

    group: str
    role: str
    project_id: uuid.UUID | None
    project_name: str | None


def binding_from_row(row: asyncpg.Record) -> RoleBinding:
    return RoleBinding(
        id=str(row["id"]),
        group=row["group_name"],
        role=row["role"],
        project=row["project_name"],
        created_at=row["created_at"],
        created_by=row["created_by"],
    )


async def _project_of(conn: Connection, role: str, name: str | None) -> uuid.UUID | None:
    if role == PLATFORM_ADMIN_ROLE:
        if name is not None:
            raise ValidationFailed(
                [FieldError("project", "platform-admin is platform-wide: give no project")]
            )
        return None
    if name is None:
        raise ValidationFailed(
            [FieldError("project", f"the {role} role is a role in a project: name it")]
        )
    found = await project_id(conn, name)
    if found is None:
        raise ValidationFailed([FieldError("project", f"no project is named {name!r}")])
    return found


def _describe(group: str, role: str, project: str | None) -> str:
    where = "platform-wide" if project is None else f"in project {project}"
    return f"group {group!r} → {role} {where}"


async def create_role_binding(
    conn: Connection, *, group: str, role: str, project_name: str | None, actor: str
) -> RoleBinding:
    """Bind; 422 naming `project` when it is missing for a project role, given for
    platform-admin, or names no project; 409 when the group already has a binding in that
    scope (delete it first)."""
    project_id = await _project_of(conn, role, project_name)
    binding_id = uuid.uuid4()
    row = await conn.fetchrow(
        QUERIES["insert_role_binding"], binding_id, group, role, project_id, actor
    )
    if row is None:
        where = "platform-wide" if project_id is None else f"in project {project_name!r}"
        raise AlreadyExists(
            f"Group {group!r} already has a role binding {where}; delete it to change its role."
        )
    await record_event(
        conn,
        project_id=project_id,
        kind="role-binding",
        resource_id=binding_id,
        resource_name=group,
        type=EventType.CREATED,
        message=f"Role binding created: {_describe(group, role, project_name)}.",
        actor=actor,
    )
    return RoleBinding(
        id=str(binding_id),
        group=group,
        role=role,
        project=project_name,
        created_at=row["created_at"],
        created_by=row["created_by"],
    )


async def list_role_bindings(
    conn: Connection, *, project_id: uuid.UUID | None, after: Position | None, limit: int
) -> tuple[list[RoleBinding], Position | None]:
    rows, position = await fetch_page(
        conn,
        QUERIES["list_role_bindings"],
        project_id,
        after=after,
        limit=limit,
        first_id=NIL_UUID,
    )
    return [binding_from_row(row) for row in rows], position


async def get_role_binding(conn: Connection, binding_id: uuid.UUID) -> RoleBinding:
    row = await conn.fetchrow(QUERIES["get_role_binding"], binding_id)
    if row is None:
        raise NotFound("No such role binding.")
    return binding_from_row(row)


async def delete_role_binding(conn: Connection, *, binding_id: uuid.UUID, actor: str) -> None:
    """Delete it (404 when there is none); its group's members lose the role at once."""
    row = await conn.fetchrow(QUERIES["get_role_binding"], binding_id)
    if row is None:
        raise NotFound("No such role binding.")
    await conn.execute(QUERIES["delete_role_binding"], binding_id)
    await record_event(
        conn,
        project_id=row["project_id"],
        kind="role-binding",
        resource_id=binding_id,
        resource_name=row["group_name"],
        type=EventType.DELETED,
        message="Role binding deleted: "
        f"{_describe(row['group_name'], row['role'], row['project_name'])}.",
        actor=actor,
    )


async def grants_of_groups(conn: Connection, groups: Sequence[str]) -> list[Grant]:
    """Every binding of any of `groups`."""
    if not groups:
        return []
    rows = await conn.fetch(QUERIES["role_bindings_of_groups"], list(groups))
    return [
        Grant(row["group_name"], row["role"], row["project_id"], row["project_name"])
        for row in rows
    ]


async def project_id(conn: Connection, name: str) -> uuid.UUID | None:
    found: uuid.UUID | None = await conn.fetchval(QUERIES["project_id_by_name"], name)
    return found


async def project_name(conn: Connection, project_id: uuid.UUID) -> str | None:
    found: str | None = await conn.fetchval(QUERIES["project_name_by_id"], project_id)
    return found
