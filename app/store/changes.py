"""The change log of workloads and services (migrations 0006, 0025) and who watches it
(queries: section "streams").

A trigger appends a row to `workload_changes` for every committed change of what a watcher
sees of a workload or a service (`kind`), numbered from one sequence while the row is locked;
the row holds the resource's columns as they are after the change (`deleted`: the row is
gone), so it renders like a `workloads` or `services` row. The resource's row keeps its newest
number in `change_id`.

`stream_interest` marks the projects some replica has streams on; only changes of those
projects ring `aicp_watch` (a NOTIFY-bearing commit takes a cluster-wide lock).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from app.store.queries import QUERIES

if TYPE_CHECKING:
    import asyncpg

    from app.store.db import Connection
    from app.store.workloads import WorkloadFilter

CHANNEL = "aicp_watch"
TOKENS_CHANNEL = "aicp_tokens"

ChangeKind = Literal["workload", "service"]
"""What a change is of, as the log's `kind` column names it."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One read of the log: the changes after a position, and the reading snapshot's horizon
    (transaction ids as integers: every transaction below `xmin` had ended; every one that can
    have numbered a change missing from `rows` is below `xmax`)."""

    rows: list[asyncpg.Record]
    xmin: int
    xmax: int


async def read_after(conn: Connection, position: int, limit: int) -> Batch:
    """Up to `limit` changes numbered above `position`, in order."""
    records = await conn.fetch(QUERIES["changes_after"], position, limit)
    first = records[0]
    rows = [r for r in records if r["change_id"] is not None]
    return Batch(rows=rows, xmin=first["xmin"], xmax=first["xmax"])


async def newest_and_oldest(conn: Connection) -> tuple[int, int | None]:
    """The newest change number handed out (0 before the first), and the oldest change still
    kept (None: none)."""
    row = await conn.fetchrow(QUERIES["changes_newest"])
    assert row is not None
    return int(row["newest"]), row["oldest"]


async def position(conn: Connection) -> int:
    """The newest change made so far; 0 before the first."""
    newest, _ = await newest_and_oldest(conn)
    return newest


async def of_project(
    conn: Connection,
    kind: ChangeKind,
    project_id: uuid.UUID,
    after: int,
    upto: int,
    limit: int,
    *,
    name: str | None = None,
) -> list[asyncpg.Record]:
    """The project's changes of `kind` (of the one named `name`, if given) numbered in
    (`after`, `upto`], oldest first, `limit` at most."""
    return list(
        await conn.fetch(QUERIES["changes_of_project"], project_id, after, upto, limit, name, kind)
    )


async def count_of_project(
    conn: Connection,
    kind: ChangeKind,
    project_id: uuid.UUID,
    after: int,
    upto: int,
    most: int,
    *,
    name: str | None = None,
) -> int:
    """How many changes `of_project` would return without a limit, counted up to `most`."""
    count = await conn.fetchval(
        QUERIES["changes_count_of_project"], project_id, after, upto, most, name, kind
    )
    return int(count)


async def purge(conn: Connection, older_than_seconds: float) -> int:
    """Forget changes older than that; how many went."""
    status = await conn.execute(QUERIES["changes_purge"], older_than_seconds)
    return int(status.split()[-1])


async def current_page(
    conn: Connection,
    kind: ChangeKind,
    project_id: uuid.UUID,
    view: WorkloadFilter,
    *,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[asyncpg.Record]:
    """A page of the project's workloads or services (`kind`) in `view`, oldest first, after
    `after` (a `(created_at, id)` of the previous page's last row); each row has its
    `change_id`."""
    if view.no_pool:
        return []
    created_at, last_id = after or (datetime.fromtimestamp(0).astimezone(), uuid.UUID(int=0))
    return list(
        await conn.fetch(
            QUERIES["watched_now"],
            project_id,
            view.name,
            view.state,
            view.pool_id,
            created_at,
            last_id,
            limit,
            view.name_pattern,
            kind,
        )
    )


async def mark_watched(
    conn: Connection, replica: str, projects: list[uuid.UUID], ttl_seconds: float
) -> None:
    """`replica` has streams open on exactly `projects` (for the next `ttl_seconds`)."""
    await conn.execute(QUERIES["stream_interest_renew"], replica, projects, ttl_seconds)


async def unmark_all(conn: Connection, replica: str) -> None:
    await conn.execute(QUERIES["stream_interest_drop"], replica)


async def live_projects(conn: Connection, project_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Which of `project_ids` still exist and are not being deleted."""
    rows = await conn.fetch(QUERIES["projects_still_live"], project_ids)
    return {r["id"] for r in rows}


async def valid_tokens(conn: Connection, token_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Which of `token_ids` still authenticate (not revoked, not expired, not deleted)."""
    rows = await conn.fetch(QUERIES["tokens_still_valid"], token_ids)
    return {r["id"] for r in rows}
