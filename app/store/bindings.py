"""Accelerator bindings: platform configuration, keyed by accelerator class."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from app.domain.errors import FieldError, InUse, NotFound, ValidationFailed
from app.domain.events import EventType
from app.domain.resources import Binding
from app.domain.specs import BindingPut, Toleration
from app.store.audit import binding_resource_id, record_event
from app.store.paging import Position, fetch_page
from app.store.queries import QUERIES

if TYPE_CHECKING:
    import asyncpg

    from app.store.db import Connection


async def _record(
    conn: Connection, accelerator_class: str, type: EventType, message: str, actor: str
) -> None:
    """The binding's event: platform-wide (no project), keyed by its class."""
    await record_event(
        conn,
        project_id=None,
        kind="binding",
        resource_id=binding_resource_id(accelerator_class),
        resource_name=accelerator_class,
        type=type,
        message=message,
        actor=actor,
    )


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


async def put(
    conn: Connection, *, accelerator_class: str, spec: BindingPut, actor: str
) -> tuple[Binding, bool]:
    """Create or replace a binding; return it and whether it was created.

    A ResourceFlavor has one shape: a binding naming a flavor that another class's binding
    renders with other node labels or tolerations is refused (422 naming ``flavor``), so two
    pools never rewrite one flavor back and forth. A replacement that changes what pods were
    admitted with (resource name, flavor, node labels, tolerations) is refused (409 in-use)
    while workloads of the class are unfinished: their pods would keep the old node selector
    and never schedule. Description changes are always accepted.

    Replacing one rings the doorbell of every pool that uses it: their flavor and node labels
    are rendered from it.
    """
    await conn.execute(QUERIES["binding_lock_flavor"], spec.flavor)
    await _check_flavor_owner(conn, accelerator_class, spec)
    current = await conn.fetchrow(QUERIES["binding_for_update"], accelerator_class)
    if current is not None and _changes_admission(current, spec):
        unfinished = [
            row["ref"]
            for row in await conn.fetch(QUERIES["binding_unfinished_workloads"], accelerator_class)
        ]
        if unfinished:
            raise InUse(
                unfinished,
                f"Accelerator binding {accelerator_class!r} is in use by unfinished workloads "
                f"({', '.join(unfinished)}); their pods were admitted with its current resource "
                "name, flavor, node labels and tolerations. Change it once they have finished, "
                "or bind a new accelerator class.",
            )
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
    await _record(
        conn,
        accelerator_class,
        EventType.CREATED if created else EventType.SPEC_UPDATED,
        f"Accelerator binding {accelerator_class} {'created' if created else 'replaced'}: "
        f"{spec.resource_name}, flavor {spec.flavor}.",
        actor,
    )
    if not created:
        await conn.execute(QUERIES["ring_pools_of_binding"], accelerator_class)
    return binding_from_row(row), created


def _tolerations(value: object) -> list[Toleration]:
    return msgspec.convert(value, list[Toleration])


def _changes_admission(current: asyncpg.Record, spec: BindingPut) -> bool:
    return (
        current["resource_name"] != spec.resource_name
        or current["flavor"] != spec.flavor
        or current["node_labels"] != spec.node_labels
        or _tolerations(current["tolerations"]) != spec.tolerations
    )


async def _check_flavor_owner(conn: Connection, accelerator_class: str, spec: BindingPut) -> None:
    """422 (field ``flavor``) when another class renders ``spec.flavor`` differently."""
    for other in await conn.fetch(
        QUERIES["binding_flavor_sharers"], spec.flavor, accelerator_class
    ):
        if other["node_labels"] != spec.node_labels or (
            _tolerations(other["tolerations"]) != spec.tolerations
        ):
            raise ValidationFailed(
                [
                    FieldError(
                        "flavor",
                        f"ResourceFlavor {spec.flavor!r} belongs to accelerator class "
                        f"{other['accelerator_class']!r} with other node labels or tolerations; "
                        "name another flavor, or give exactly the same node labels and "
                        "tolerations",
                    )
                ]
            )


async def get(conn: Connection, accelerator_class: str) -> Binding:
    row = await conn.fetchrow(QUERIES["binding_by_class"], accelerator_class)
    if row is None:
        raise NotFound(f"Accelerator binding {accelerator_class!r} not found.")
    return binding_from_row(row)


async def page(
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


async def delete(conn: Connection, *, accelerator_class: str, actor: str) -> None:
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
    await _record(
        conn,
        accelerator_class,
        EventType.DELETED,
        f"Accelerator binding {accelerator_class} deleted.",
        actor,
    )
