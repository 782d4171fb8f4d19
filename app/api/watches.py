"""Live streams of workloads as Server-Sent Events (`text/event-stream`).

- `GET .../workloads/{name}/watch` — one workload: its current object, then one event per
  change, ending with DELETED once it is gone.
- `GET .../workloads?watch=true[&state=S][&compute_pool=P]` — the project's workloads (those
  matching the filters): each current one, then every change; a workload that stops matching
  is sent as DELETED, one that starts matching as ADDED.

Every event is `event: ADDED|MODIFIED|DELETED` with `data: {"type", "object"}` (the object as
`GET` shows it) and, once everything before it has been sent, `id: <change number>`. A
heartbeat comment comes every `heartbeat_seconds` (15) of silence, carrying the current `id`.
`Last-Event-ID: N` resumes after change N on any replica, without missing or repeating one;
410 `resume-expired` when the changes after N are no longer kept (an hour by default), so the
client starts again without it. How changes get here: `app.api.changefeed`.

Tenancy and roles are those of every read (any member of the project; another project's
workload is 404). A stream ends when its token is revoked or expires, when its project's
deletion is requested, when the client reads too slowly (it resumes with Last-Event-ID), and
when the server shuts down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from litestar import Response
from litestar.response import Stream

from app.api.methods import HEAD_SCOPE_KEY
from app.api.subscriptions import Change, Filters, Subscription, event_frame
from app.domain.errors import FieldError, NotFound, ResumeExpired, ValidationFailed
from app.domain.workload_resources import workload_from_row
from app.store import changes
from app.store.paging import chunk_rows

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from litestar import Request

    from app.api.auth import Caller
    from app.api.changefeed import ChangeFeed
    from app.store.db import Database

STATE_KEY = "changefeed"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_PAGE = 500
#: What the first events and a replay read at a time, at most: pages of large workloads hold
#: fewer rows (`app.store.paging.chunk_rows`), each sent before the next is read.
PAGE_BYTES = 1 << 20
#: A resume that would replay more changes than this is refused (410): start again instead.
MAX_REPLAY = 1_000


def feed_of(request: Request[Any, Any, Any]) -> ChangeFeed:
    feed: ChangeFeed | None = request.app.state.get(STATE_KEY)
    if feed is None:
        raise NotFound("This server does not serve streams.")
    return feed


def resume_point(raw: str | None) -> int | None:
    """The `Last-Event-ID` header as a change number (422 when it is not one).

    ASCII digits only: `str.isdigit` alone also accepts superscripts and other digits that
    `int` refuses."""
    if raw is None or raw.strip() == "":
        return None
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise ValidationFailed(
            [FieldError("Last-Event-ID", "must be the id of an event this stream sent")]
        )
    return int(raw)


async def open_stream(
    request: Request[Any, Any, Any],
    caller: Caller,
    db: Database,
    filters: Filters,
    last_event_id: str | None,
) -> Response[Any]:
    """Subscribe, read what comes first (404 for a missing single workload, 410 for a resume
    point too old) and answer the stream (see the module docstring)."""
    feed = feed_of(request)
    project = caller.require_project()
    resume = resume_point(last_event_id)
    if request.scope.get(HEAD_SCOPE_KEY):
        # HEAD: the headers a GET would answer, and no stream to keep open.
        if filters.name is not None and resume is None:
            await _exists(db, project.id, filters.name)
        return Response(b"", media_type=MEDIA_TYPE, headers=HEADERS, status_code=200)
    if resume is not None:
        await _check_resumable(db, resume)
    sub = await feed.subscribe(
        project.id,
        project.name,
        filters,
        token=caller.actor,
        token_id=caller.token_id,
        expires_at=caller.expires_at,
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
    return Stream(
        _frames(feed, sub, first), media_type=MEDIA_TYPE, headers=HEADERS, status_code=200
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
            conn, sub.project_id, resume, sub.registered_at, MAX_REPLAY + 1, name=sub.filters.name
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
                conn, sub.project_id, after, sub.registered_at, step, name=sub.filters.name
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


async def _exists(db: Database, project_id: Any, name: str) -> None:
    async with db.connection() as conn:
        rows = await changes.current_page(
            conn, project_id, name=name, state=None, compute_pool=None, after=None, limit=1
        )
    if not rows:
        raise NotFound(f"Workload {name!r} not found.")


async def _first_single(db: Database, sub: Subscription) -> None:
    async with db.connection() as conn:
        rows = await changes.current_page(
            conn,
            sub.project_id,
            name=sub.filters.name,
            state=None,
            compute_pool=None,
            after=None,
            limit=1,
        )
    if not rows:
        raise NotFound(f"Workload {sub.filters.name!r} not found.")
    for frame in _initial(sub, rows):
        sub.push_initial(frame)


def _initial(sub: Subscription, rows: list[Any]) -> list[bytes]:
    """ADDED (without `id`) for each current workload; what each shows is remembered, and ids
    start after the newest change shown (everything up to that is then out)."""
    frames = []
    sub.ids_from = max(sub.ids_from, sub.registered_at)
    for row in rows:
        number = row["change_id"] or 0
        sub.shown[row["id"]] = number
        sub.ids_from = max(sub.ids_from, number)
        frames.append(event_frame("ADDED", workload_from_row(row, sub.project), None))
    return frames


async def _first_list(db: Database, sub: Subscription) -> AsyncIterator[bytes]:
    """The current workloads matching the filters, a byte-bounded page at a time."""
    after = None
    size = count = 0
    while True:
        step = chunk_rows(_PAGE, PAGE_BYTES, size, count)
        async with db.connection() as conn:
            rows = await changes.current_page(
                conn,
                sub.project_id,
                name=None,
                state=sub.filters.state,
                compute_pool=sub.filters.compute_pool,
                after=after,
                limit=step,
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
        while (chunk := await sub.next_chunk()) is not None:
            yield chunk
    finally:
        feed.unsubscribe(sub)
