"""Opening a live stream of workloads or services (`app.streams.kinds`): register it with the
feed, then what comes first — the current objects (a list's pages, or one resource, 404 when it
is missing), or, resuming after change N, the log of its kind after N up to the registration
(410 `resume-expired` when it is no longer kept, or more than `MAX_REPLAY` changes) — then
every change as the feed offers it. Everything is read a byte-bounded page at a time, each page
sent before the next is read.

The stream is an async iterator of SSE chunks; `app.api.watches` answers it over HTTP.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from app.domain.errors import NotFound, ResumeExpired
from app.store import changes
from app.store.paging import chunk_rows
from app.store.workloads import WorkloadFilter
from app.streams.subscriptions import TIMING, Change, Subscription, event_frame

if TYPE_CHECKING:
    import uuid
    from collections.abc import AsyncIterator
    from datetime import datetime

    from app.store.db import Database
    from app.streams.changefeed import ChangeFeed
    from app.streams.kinds import StreamKind

_PAGE = 500
#: What the first events and a replay read at a time, at most: pages of large resources hold
#: fewer rows (`app.store.paging.chunk_rows`), each sent before the next is read.
PAGE_BYTES = 1 << 20
#: A resume that would replay more changes than this is refused (410): start again instead.
MAX_REPLAY = 1_000


async def open_stream(
    feed: ChangeFeed,
    db: Database,
    project_id: uuid.UUID,
    project: str,
    kind: StreamKind,
    filters: WorkloadFilter,
    *,
    token: str,
    token_id: uuid.UUID | None,
    expires_at: datetime | None,
    resume: int | None,
) -> AsyncIterator[bytes]:
    """Subscribe and read what comes first (404 for a missing single resource, 410 for a resume
    point too old); the stream's chunks, ending when the subscription closes."""
    if resume is not None:
        await _check_resumable(db, resume)
    sub = await feed.subscribe(
        project_id, project, kind, filters, token=token, token_id=token_id, expires_at=expires_at
    )
    try:
        first: AsyncIterator[bytes] | None
        if resume is not None:
            await _check_replay_size(db, sub, resume)
            first = _replay(db, sub, resume)
        elif filters.name is not None:
            await _first_single(db, sub)
            sub.go_live()
            first = None
        else:
            first = _first_list(db, sub)
    except BaseException:
        feed.unsubscribe(sub)
        raise
    return _frames(feed, sub, first)


async def check_exists(db: Database, kind: StreamKind, project_id: uuid.UUID, name: str) -> None:
    """404 unless the project has a resource of `kind` named `name` (a HEAD of its watch)."""
    if not await _current_one(db, kind, project_id, name):
        raise NotFound(kind.missing(name))


async def _current_one(
    db: Database, kind: StreamKind, project_id: uuid.UUID, name: str | None
) -> list[Any]:
    """The project's resource of `kind` named `name`, with its `change_id` (none: empty)."""
    async with db.connection() as conn:
        return await changes.current_page(
            conn, kind.name, project_id, WorkloadFilter(name=name), after=None, limit=1
        )


async def _check_resumable(db: Database, resume: int) -> None:
    async with db.connection() as conn:
        newest, oldest = await changes.newest_and_oldest(conn)
    kept_from = newest + 1 if oldest is None else oldest
    if resume > newest or resume + 1 < kept_from:
        raise ResumeExpired()


async def _check_replay_size(db: Database, sub: Subscription, resume: int) -> None:
    """410 when the resume would replay more than `MAX_REPLAY` changes."""
    async with db.connection() as conn:
        count = await changes.count_of_project(
            conn,
            sub.kind.name,
            sub.project_id,
            resume,
            sub.registered_at,
            MAX_REPLAY + 1,
            name=sub.filters.name,
        )
    if count > MAX_REPLAY:
        raise ResumeExpired(
            f"More than {MAX_REPLAY} changes happened after that Last-Event-ID: open "
            "the stream again without it."
        )


async def _replay(db: Database, sub: Subscription, resume: int) -> AsyncIterator[bytes]:
    """The changes after `resume` up to the registration, a byte-bounded page at a time, each
    page sent before the next is read. Changes purged meanwhile close the stream (the client's
    resume is then answered 410)."""
    sub.resumed_from = resume
    after = resume
    size = count = 0
    while True:
        step = chunk_rows(_PAGE, PAGE_BYTES, size, count)
        async with db.connection() as conn:
            rows = await changes.of_project(
                conn,
                sub.kind.name,
                sub.project_id,
                after,
                sub.registered_at,
                step,
                name=sub.filters.name,
            )
        for row in rows:
            sub.replay(Change(row, sub.project))
        size += sum(row["row_bytes"] for row in rows)
        count += len(rows)
        if chunk := sub.take_queued():
            yield chunk
        if len(rows) < step:
            break
        after = rows[-1]["change_id"]
    try:
        await _check_resumable(db, resume)  # nothing purged while replaying
    except ResumeExpired:
        sub.close("resume-expired")


async def _first_single(db: Database, sub: Subscription) -> None:
    rows = await _current_one(db, sub.kind, sub.project_id, sub.filters.name)
    if not rows:
        raise NotFound(sub.kind.missing(sub.filters.name))
    for frame in _initial(sub, rows):
        sub.push_initial(frame)


def _initial(sub: Subscription, rows: list[Any]) -> list[bytes]:
    """ADDED (without `id`) for each current resource; what each shows is remembered, and ids
    start after the newest change shown (everything up to that is then out)."""
    frames = []
    sub.ids_from = max(sub.ids_from, sub.registered_at)
    for row in rows:
        number = row["change_id"] or 0
        sub.shown[row["id"]] = number
        sub.ids_from = max(sub.ids_from, number)
        frames.append(event_frame("ADDED", sub.kind.render(row, sub.project), None))
    return frames


async def _first_list(db: Database, sub: Subscription) -> AsyncIterator[bytes]:
    """The current resources matching the filters, a byte-bounded page at a time."""
    after = None
    size = count = 0
    while True:
        step = chunk_rows(_PAGE, PAGE_BYTES, size, count)
        async with db.connection() as conn:
            rows = await changes.current_page(
                conn, sub.kind.name, sub.project_id, sub.filters, after=after, limit=step
            )
        size += sum(row["row_bytes"] for row in rows)
        count += len(rows)
        for frame in _initial(sub, rows):
            yield frame
        if len(rows) < step:
            return
        after = (rows[-1]["created_at"], rows[-1]["id"])


async def _frames(
    feed: ChangeFeed, sub: Subscription, first: AsyncIterator[bytes] | None
) -> AsyncIterator[bytes]:
    try:
        if first is not None:
            async for frame in first:
                yield frame
            sub.go_live()
        timed = TIMING.isEnabledFor(logging.DEBUG)
        while (chunk := await sub.next_chunk()) is not None:
            yield chunk  # back here once the server has written it to the connection
            if timed:
                TIMING.debug("change %d written %.6f", sub.newest, time.time())
    finally:
        feed.unsubscribe(sub)
