"""What a create of a named resource does when its insert finds the name held."""

from __future__ import annotations

from typing import TYPE_CHECKING, LiteralString

from app.domain.errors import Conflict, name_taken

if TYPE_CHECKING:
    from app.store.db import Connection


async def taken(
    conn: Connection, noun: str, name: str, holder: LiteralString, *args: object
) -> Conflict:
    """The 409 for a create whose insert found `name` held: the `holder` query (with `args`)
    reads the row holding it, and one whose deletion was requested is `being-deleted`, a live one
    `already-exists`. The caller raises it."""
    row = await conn.fetchrow(holder, *args)
    deleting = row is not None and row["deletion_requested_at"] is not None
    return name_taken(noun, name, being_deleted=deleting)
