"""Keyset pagination, newest first by ``(created_at, id)``.

A list query takes ``(cursor_created_at, cursor_id, limit)`` as its last three parameters and
returns rows strictly older than the cursor. Because the position is a key and not an offset,
rows inserted while a client pages never shift what it has not seen yet: every row that existed
when paging began is returned exactly once, and ``created_at`` (``clock_timestamp()``) plus the
unique id totally orders rows even when two share a timestamp.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, LiteralString

if TYPE_CHECKING:
    import asyncpg

    from app.store.db import Connection

#: The nil UUID: the id sent where no row is meant (the first page's cursor id, "no pool").
NIL_UUID = uuid.UUID(int=0)
# datetime.max is sent to PostgreSQL as 'infinity': every row sorts before it.
FIRST_PAGE_TIME = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Position:
    """Where the previous page ended: the last row's ``created_at`` and id (as text)."""

    created_at: datetime
    id: str


#: A byte-bounded page reads this many rows first, then as many as the room left in bytes
#: holds at the rows' average size so far: small rows take two statements, large ones stop at
#: the bound without `limit` of them read first.
FIRST_CHUNK_ROWS = 16


@dataclass(frozen=True)
class ByteBound:
    """Stop a page once the rows' `column` (a byte count the query selects) add up to `bytes`."""

    column: str
    bytes: int


async def fetch_page(
    conn: Connection,
    query: LiteralString,
    *args: Any,
    after: Position | None,
    limit: int,
    first_id: Any,
    key: str = "id",
    bound: ByteBound | None = None,
) -> tuple[list[asyncpg.Record], Position | None]:
    """Up to ``limit`` rows after ``after``, and the position of the next page (None at the end).

    ``first_id`` is the id value sent with the first page's 'infinity' time (any value of the
    key's type). One extra row is fetched to learn whether another page exists. With `bound`,
    the rows are read in chunks (`FIRST_CHUNK_ROWS`) and the page ends early, after the row that
    takes their size to `bound.bytes` (always at least one row): the next page continues there.
    """
    rows: list[asyncpg.Record] = []
    size = 0
    position = after
    while True:
        room = limit - len(rows)
        step = room if bound is None else chunk_rows(room, bound.bytes - size, size, len(rows))
        if position is None:
            cursor_time, cursor_id = FIRST_PAGE_TIME, first_id
        else:
            cursor_time, cursor_id = position.created_at, position.id
        batch = await conn.fetch(query, *args, cursor_time, cursor_id, step + 1)
        for index, row in enumerate(batch[:step]):
            rows.append(row)
            size += row[bound.column] if bound is not None else 0
            if len(rows) == limit or (bound is not None and size >= bound.bytes):
                more = index + 1 < len(batch)  # a row follows (the extra one, at least)
                return rows, _position(row, key) if more else None
        if len(batch) <= step:
            return rows, None
        position = _position(rows[-1], key)


def chunk_rows(room: int, bytes_left: int, size: int, count: int) -> int:
    """How many rows to read next (`room` at most): what `bytes_left` holds at the average size
    of the `count` rows read so far (`size` bytes together); `FIRST_CHUNK_ROWS` at first."""
    if count == 0:
        return min(room, FIRST_CHUNK_ROWS)
    return max(1, min(room, bytes_left * count // max(size, 1)))


def _position(row: asyncpg.Record, key: str) -> Position:
    return Position(row["created_at"], str(row[key]))
