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
client starts again without it. The streams themselves: `app.streams` (this module adapts
them to the routes).

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
from app.domain.errors import FieldError, NotFound, ValidationFailed
from app.streams import opening

if TYPE_CHECKING:
    from litestar import Request

    from app.api.auth import Caller
    from app.store.db import Database
    from app.store.workloads import WorkloadFilter
    from app.streams.changefeed import ChangeFeed

STATE_KEY = "changefeed"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


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
    filters: WorkloadFilter,
    last_event_id: str | None,
) -> Response[Any]:
    """Answer a stream (see the module docstring): its headers alone for a HEAD, else the
    stream `app.streams.opening` opens (404, 410 and 429 before the first byte)."""
    feed = feed_of(request)
    project = caller.require_project()
    resume = resume_point(last_event_id)
    if request.scope.get(HEAD_SCOPE_KEY):
        # HEAD: the headers a GET would answer, and no stream to keep open.
        if filters.name is not None and resume is None:
            await opening.check_exists(db, project.id, filters.name)
        return Response(b"", media_type=MEDIA_TYPE, headers=HEADERS, status_code=200)
    frames = await opening.open_stream(
        feed,
        db,
        project.id,
        project.name,
        filters,
        token=caller.actor,
        token_id=caller.token_id,
        expires_at=caller.expires_at,
        resume=resume,
    )
    return Stream(frames, media_type=MEDIA_TYPE, headers=HEADERS, status_code=200)
