"""The audit trail and the reconciler doorbell, written inside the caller's transaction.

Every create, update and delete records an event row naming its actor (``admin``,
``token:<id>`` or ``controller:<instance>``). A write that needs reconciling also rings
``NOTIFY aicp_work, '<kind>:<id>'``; PostgreSQL delivers it only if the transaction commits,
so a reconciler is never woken for intent that was rolled back.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from app.store.queries import QUERIES

if TYPE_CHECKING:
    from app.domain.events import EventReason, EventType
    from app.domain.kinds import Kind, SubjectKind
    from app.store.db import Connection

# Bindings are keyed by their class name; events need a uuid, so derive a stable one.
_BINDING_NAMESPACE = uuid.UUID("6f1f3c2a-5b0e-4d38-9a57-61696370b1d0")


def binding_resource_id(accelerator_class: str) -> uuid.UUID:
    """A deterministic uuid for an accelerator binding, for its event rows."""
    return uuid.uuid5(_BINDING_NAMESPACE, accelerator_class)


async def record_event(
    conn: Connection,
    *,
    project_id: uuid.UUID | None,
    kind: SubjectKind,
    resource_id: uuid.UUID,
    resource_name: str,
    type: EventType,
    message: str,
    actor: str,
    reason: EventReason | None = None,
    generation: int | None = None,
    once_key: str | None = None,
) -> None:
    """Append one event row (``type`` such as ``Accepted``, ``SpecUpdated``, ``Revoked``).

    With ``once_key``, the row records a fact that happens once per resource: if a row with the
    same key exists for the resource, nothing is appended."""
    await conn.execute(
        QUERIES["insert_event"],
        project_id,
        kind,
        resource_id,
        resource_name,
        type,
        reason,
        message,
        generation,
        actor,
        once_key,
    )


async def ring_doorbell(conn: Connection, kind: Kind, resource_id: uuid.UUID) -> None:
    """Wake the reconcilers about ``kind:id`` when (and only if) this transaction commits."""
    await conn.execute(QUERIES["ring_doorbell"], f"{kind}:{resource_id}")


async def record_change(
    conn: Connection,
    *,
    project_id: uuid.UUID,
    kind: Kind,
    resource_id: uuid.UUID,
    resource_name: str,
    type: EventType,
    message: str,
    generation: int,
    actor: str,
    reason: EventReason | None = None,
    doorbell: bool = True,
) -> None:
    """A write to a reconciled resource: its event at ``generation`` and, unless ``doorbell``
    is False (the caller leases the resource in this transaction instead), its doorbell."""
    await record_event(
        conn,
        project_id=project_id,
        kind=kind,
        resource_id=resource_id,
        resource_name=resource_name,
        type=type,
        reason=reason,
        message=message,
        generation=generation,
        actor=actor,
    )
    if doorbell:
        await ring_doorbell(conn, kind, resource_id)
