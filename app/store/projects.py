"""Projects: tenants, each reconciled into a namespace ``aicp-<name>``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from app.domain.errors import (
    BeingDeleted,
    InUse,
    LimitBelowAllocation,
    NotFound,
    check_generation,
)
from app.domain.events import EventType
from app.domain.naming import namespace_for
from app.domain.project_limits import (
    Holding,
    describe,
    limits_from,
    limits_to_json,
    overruns,
)
from app.domain.resources import Project, Status
from app.store.audit import record_change
from app.store.creates import taken
from app.store.paging import NIL_UUID, Position, fetch_page
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from collections.abc import Sequence

    import asyncpg

    from app.domain.specs import ProjectLimits
    from app.store.db import Connection


def project_from_row(row: asyncpg.Record) -> Project:
    return Project(
        name=row["name"],
        uid=str(row["id"]),
        display_name=row["display_name"],
        labels=row["labels"],
        namespace=namespace_for(row["name"]),
        generation=row["generation"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        created_by=row["created_by"],
        limits=limits_from(row["limits"]),
        status=Status(
            state=row["state"],
            reason=row["state_reason"],
            observed_generation=row["observed_generation"],
            updated_at=row["updated_at"],
        ),
    )


async def _recorded(
    conn: Connection,
    row: asyncpg.Record,
    *,
    project_id: uuid.UUID,
    name: str,
    type: EventType,
    message: str,
    actor: str,
) -> Project:
    """After a change to the project: its event at the row's generation, its doorbell, and the
    project as the row now holds it."""
    await record_change(
        conn,
        project_id=project_id,
        kind="project",
        resource_id=project_id,
        resource_name=name,
        type=type,
        message=message,
        actor=actor,
        generation=row["generation"],
    )
    return project_from_row(row)


async def create(
    conn: Connection,
    *,
    name: str,
    display_name: str | None,
    labels: dict[str, str],
    actor: str,
    limits: ProjectLimits | None = None,
) -> Project:
    """Insert a PENDING project, its Accepted event and doorbell; 409 when the name is taken."""
    project_id = uuid.uuid4()
    reason = f"Accepted; waiting for namespace {namespace_for(name)} to be created."
    stored_limits = limits_to_json(limits)
    spec = {"display_name": display_name, "labels": labels, "limits": stored_limits}
    row = await conn.fetchrow(
        QUERIES["insert_project"],
        project_id,
        name,
        display_name,
        labels,
        spec,
        reason,
        actor,
        stored_limits,
    )
    if row is None:
        raise await taken(conn, "Project", name, QUERIES["project_by_name"], name)
    return await _recorded(
        conn,
        row,
        project_id=project_id,
        name=name,
        type=EventType.ACCEPTED,
        message=f"Project {name} created with {describe(limits)}.",
        actor=actor,
    )


async def get(conn: Connection, name: str) -> Project:
    row = await conn.fetchrow(QUERIES["project_by_name"], name)
    if row is None:
        raise NotFound(f"Project {name!r} not found.")
    return project_from_row(row)


async def page(
    conn: Connection,
    *,
    only_ids: Sequence[uuid.UUID] | None,
    after: Position | None,
    limit: int,
) -> tuple[list[Project], Position | None]:
    """All projects (``only_ids`` None: the platform admin) or just these (a project token's
    own, or those a person's groups are bound to)."""
    if only_ids is None:
        rows, position = await fetch_page(
            conn, QUERIES["list_projects"], after=after, limit=limit, first_id=NIL_UUID
        )
    else:
        rows, position = await fetch_page(
            conn,
            QUERIES["list_projects_by_id"],
            list(only_ids),
            after=after,
            limit=limit,
            first_id=NIL_UUID,
        )
    return [project_from_row(row) for row in rows], position


async def ensure_project_live(conn: Connection, project_id: uuid.UUID, name: str) -> None:
    """Lock the project row for a child create; 409 being-deleted once deletion was requested.

    Pools and workloads call this first in their create transaction. It takes FOR SHARE, which
    waits for a concurrent deletion request and then re-reads the row: a child can never be
    created in a project whose DELETE has been accepted.
    """
    live = await conn.fetchval(QUERIES["lock_live_project"], project_id)
    if live is None:
        raise NotFound(f"Project {name!r} not found.")
    if not live:
        raise BeingDeleted(f"Project {name!r} is being deleted.")


async def set_limits(
    conn: Connection,
    *,
    project_id: uuid.UUID,
    name: str,
    limits: ProjectLimits | None,
    actor: str,
    expected_generation: int | None = None,
) -> Project:
    """Replace the project's limits as a new generation (SpecUpdated event, doorbell).

    Limits below what the project's pools already hold are refused (409
    `LimitBelowAllocation`, naming each): the pools never hold more than their project's limits
    allow, so the platform admin shrinks or deletes pools first. The project row is locked FOR
    NO KEY UPDATE, which waits for pool creates and quota changes under way (FOR SHARE) and
    holds back new ones until this commits. 409 being-deleted once deletion was requested.
    """
    locked = await conn.fetchrow(QUERIES["lock_project_for_limits"], project_id)
    if locked is None:
        raise NotFound(f"Project {name!r} not found.")
    check_generation(expected_generation, locked["generation"])
    if not locked["live"]:
        raise BeingDeleted(f"Project {name!r} is being deleted and cannot be changed.")
    held = [
        Holding.of(row["accelerator_class"], row["quota"])
        for row in await conn.fetch(QUERIES["project_pool_quotas"], project_id, NIL_UUID)
    ]
    over = overruns(limits, held, None)
    if over:
        raise LimitBelowAllocation(project=name, overruns=over)
    stored = limits_to_json(limits)
    spec = {**(locked["spec"] or {}), "limits": stored}
    row = await conn.fetchrow(QUERIES["set_project_limits"], project_id, stored, spec)
    assert row is not None  # the row is locked: it is still there
    return await _recorded(
        conn,
        row,
        project_id=project_id,
        name=name,
        type=EventType.SPEC_UPDATED,
        message=f"Limits of project {name} set to {describe(limits)} at generation "
        f"{row['generation']}.",
        actor=actor,
    )


async def request_deletion(
    conn: Connection,
    *,
    project_id: uuid.UUID,
    name: str,
    actor: str,
    expected_generation: int | None = None,
) -> Project:
    """Mark the project DELETING (202), or 409 in-use while pools or workloads exist.

    ``expected_generation`` (from If-Match) is compared with the locked row: 412 on mismatch.
    A repeated DELETE of a project already being deleted answers it again, without a new event.
    """
    generation = await conn.fetchval(QUERIES["lock_project_for_delete"], project_id)
    if generation is None:
        raise NotFound(f"Project {name!r} not found.")
    check_generation(expected_generation, generation)
    references = [row["ref"] for row in await conn.fetch(QUERIES["project_references"], project_id)]
    if references:
        raise InUse(
            references,
            f"Project {name!r} still has {', '.join(references)}; delete them first.",
        )
    reason = f"Deletion requested; waiting for namespace {namespace_for(name)} to be removed."
    row = await conn.fetchrow(QUERIES["request_project_deletion"], project_id, reason)
    if row is None:
        return await get(conn, name)
    return await _recorded(
        conn,
        row,
        project_id=project_id,
        name=name,
        type=EventType.DELETION_REQUESTED,
        message=f"Deletion of project {name} requested.",
        actor=actor,
    )
