"""Keyset pagination, newest first by ``(created_at, id)``.

A list query takes ``(cursor_created_at, cursor_id, limit)`` as its last three parameters and
returns rows strictly older than the cursor. Because the position is a key and not an offset,
rows inserted while a client pages never shift what it has not seen yet: every row that existed
when paging began is returned exactly once, and ``created_at`` (``clock_timestamp()``) plus the
unique id totally orders rows even when two share a timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, LiteralString

if TYPE_CHECKING:
    import asyncpg

    from app.store.db import Connection

# datetime.max is sent to PostgreSQL as 'infinity': every row sorts before it.
FIRST_PAGE_TIME = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Position:
    """Where the previous page ended: the last row's ``created_at`` and id (as text)."""

    created_at: datetime
    id: str


async def fetch_page(
    conn: Connection,
    query: LiteralString,
    *args: Any,
    after: Position | None,
    limit: int,
    first_id: Any,
    key: str = "id",
) -> tuple[list[asyncpg.Record], Position | None]:
    """Up to ``limit`` rows after ``after``, and the position of the next page (None at the end).

    ``first_id`` is the id value sent with the first page's 'infinity' time (any value of the
    key's type). One extra row is fetched to learn whether another page exists.
    """
    if after is None:
        cursor_time, cursor_id = FIRST_PAGE_TIME, first_id
    else:
        cursor_time, cursor_id = after.created_at, after.id
    rows = await conn.fetch(query, *args, cursor_time, cursor_id, limit + 1)
    if len(rows) <= limit:
        return list(rows), None
    last = rows[limit - 1]
    return list(rows[:limit]), Position(last["created_at"], str(last[key]))
