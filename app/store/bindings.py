"""Accelerator bindings: platform configuration, keyed by accelerator class."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from app.domain.errors import InUse, NotFound
from app.domain.resources import Binding
from app.domain.specs import BindingPut, Toleration
from app.store.audit import binding_resource_id, record_event
from app.store.paging import Position, fetch_page
from app.store.queries import QUERIES

if TYPE_CHECKING:
    import asyncpg

    from app.store.db import Connection


def binding_from_row(row: asyncpg.Record) -> Binding:
    return Binding(
        accelerator_class=row["accelerator_class"],
        resource_name=row["resource_name"],
        flavor=row["flavor"],
        node_labels=row["node_labels"],
        tolerations=msgspec.convert(row["tolerations"], list[Toleration]),
        description=row["description"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


async def put_binding(
    conn: Connection, *, accelerator_class: str, spec: BindingPut, actor: str
) -> tuple[Binding, bool]:
    """Create or replace a binding; return it and whether it was created.

    Replacing one rings the doorbell of every pool that uses it: their flavor and node labels
    are rendered from it.
    """
    row = await conn.fetchrow(
        QUERIES["upsert_binding"],
        accelerator_class,
        spec.resource_name,
        spec.flavor,
        spec.node_labels,
        msgspec.to_builtins(spec.tolerations),
        spec.description,
    )
    assert row is not None
    created = bool(row["inserted"])
    await record_event(
        conn,
        project_id=None,
        kind="binding",
        resource_id=binding_resource_id(accelerator_class),
        resource_name=accelerator_class,
        type="Created" if created else "SpecUpdated",
        message=(
            f"Accelerator binding {accelerator_class} {'created' if created else 'replaced'}: "
            f"{spec.resource_name}, flavor {spec.flavor}."
        ),
        actor=actor,
    )
    if not created:
        await conn.execute(QUERIES["ring_pools_of_binding"], accelerator_class)
    return binding_from_row(row), created


async def get_binding(conn: Connection, accelerator_class: str) -> Binding:
    row = await conn.fetchrow(QUERIES["binding_by_class"], accelerator_class)
    if row is None:
        raise NotFound(f"Accelerator binding {accelerator_class!r} not found.")
    return binding_from_row(row)


async def list_bindings(
    conn: Connection, *, after: Position | None, limit: int
) -> tuple[list[Binding], Position | None]:
    rows, position = await fetch_page(
        conn,
        QUERIES["list_bindings"],
        after=after,
        limit=limit,
        first_id="",
        key="accelerator_class",
    )
    return [binding_from_row(row) for row in rows], position


async def delete_binding(conn: Connection, *, accelerator_class: str, actor: str) -> None:
    """Delete a binding no pool uses; 409 in-use (naming the pools) otherwise."""
    if await conn.fetchval(QUERIES["lock_binding_for_delete"], accelerator_class) is None:
        raise NotFound(f"Accelerator binding {accelerator_class!r} not found.")
    references = [
        row["ref"] for row in await conn.fetch(QUERIES["binding_references"], accelerator_class)
    ]
    if references:
        raise InUse(
            references,
            f"Accelerator binding {accelerator_class!r} is used by {', '.join(references)}.",
        )
    await conn.execute(QUERIES["delete_binding"], accelerator_class)
    await record_event(
        conn,
        project_id=None,
        kind="binding",
        resource_id=binding_resource_id(accelerator_class),
        resource_name=accelerator_class,
        type="Deleted",
        message=f"Accelerator binding {accelerator_class} deleted.",
        actor=actor,
    )
