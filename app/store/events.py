"""Reading a resource's event trail (writes go through `app.store.audit`).

Events are paged newest first by their id (a bigserial; the `(kind, resource_id, id desc)`
index answers each page directly). A cursor is the smallest id seen so far: an event
committed while a client pages either sorts above the cursor (it is newer than the page the
client started from, as in any newest-first list) or below it (it shows up exactly once on a
later page). No event is returned twice.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.domain.errors import FieldError, ValidationFailed
from app.domain.workload_resources import EventResource, event_from_row
from app.store.paging import Position
from app.store.queries import QUERIES

if TYPE_CHECKING:
    import uuid

    from app.domain.kinds import SubjectKind
    from app.store.db import Connection

_FIRST_PAGE = 2**63 - 1


async def page(
    conn: Connection,
    *,
    kind: SubjectKind,
    resource_id: uuid.UUID,
    after: Position | None,
    limit: int,
) -> tuple[list[EventResource], Position | None]:
    """Up to `limit` events of one resource older than `after`, newest first, and the next
    page's position (None on the last page). The position's id is the event id."""
    try:
        before = int(after.id) if after is not None else _FIRST_PAGE
    except ValueError as exc:
        raise ValidationFailed(
            [FieldError("cursor", "is not a cursor returned by this list")], location="query"
        ) from exc
    rows = await conn.fetch(QUERIES["resource_events_page"], kind, resource_id, before, limit + 1)
    if len(rows) <= limit:
        return [event_from_row(row) for row in rows], None
    last = rows[limit - 1]
    at: datetime = last["at"]
    return [event_from_row(row) for row in rows[:limit]], Position(
        at.astimezone(UTC), str(last["id"])
    )
