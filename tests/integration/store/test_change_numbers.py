"""Where a change feed starts: the newest change number handed out, so that the next change is
always read, including the very first one of a fresh database."""

from __future__ import annotations

import asyncpg

from app.store import changes


async def test_the_newest_change_is_the_last_number_handed_out_and_never_the_next(
    sql: asyncpg.Connection,
) -> None:
    newest, _ = await changes.newest_and_oldest(sql)
    handed_out = await sql.fetchval("SELECT nextval('workload_changes_change_id_seq')")
    assert handed_out == newest + 1  # a feed reading after `newest` sees this change
    assert await changes.newest_and_oldest(sql) == (handed_out, None)
    assert await changes.position(sql) == handed_out
