"""Live streams of workloads and services as Server-Sent Events (`text/event-stream`).

- `GET .../workloads/{name}/watch`, `GET .../services/{name}/watch` — one resource: its
  current object, then one event per change, ending with DELETED once it is gone.
- `GET .../workloads?watch=true`, `GET .../services?watch=true` (`&state=S`,
  `&compute_pool=P`, `&name_contains=T`: the list's filters) — the project's workloads or
  services matching the filters: each current one, then every change; one that stops matching
  is sent as DELETED, one that starts matching as ADDED.

Every event is `event: ADDED|MODIFIED|DELETED` with `data: {"type", "object"}` (the object as
`GET` shows it) and, once everything before it has been sent, `id: <change number>`. A
heartbeat comment comes every `heartbeat_seconds` (15) of silence, carrying the current `id`.
`Last-Event-ID: N` resumes after change N on any replica, without missing or repeating one;
410 `resume-expired` when the changes after N are no longer kept (an hour by default), so the
client starts again without it. The streams themselves: `app.streams` (this module adapts
them to the routes).

Both kinds share one change log and its numbers, so an `id` of either is a point on the same
line, and the limits on open streams count both. Tenancy and roles are those of every read (any
member of the project; another project's resource is 404). A stream ends when its token is
revoked or expires, when its project's deletion is requested, when the client reads too slowly
(it resumes with Last-Event-ID), and when the server shuts down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from litestar import Response
from litestar.params import HeaderParameter
from litestar.response import Stream

from app.api.methods import HEAD_SCOPE_KEY
from app.domain.errors import FieldError, NotFound, ValidationFailed
from app.streams import opening
from app.streams.kinds import WORKLOAD_STREAM

if TYPE_CHECKING:
    from litestar import Request

    from app.api.auth import Caller
    from app.store.db import Database
    from app.store.workloads import WorkloadFilter
    from app.streams.changefeed import ChangeFeed
    from app.streams.kinds import StreamKind

STATE_KEY = "changefeed"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

LastEventId = Annotated[
    str | None,
    HeaderParameter(
        name="Last-Event-ID",
        description="With a stream: resume after this event id (the last one received)",
    ),
]


def stream_doc(noun: str) -> str:
    """What a stream route's description says of the stream, for a stream of `noun`s."""
    return (
        ' The stream: `event: ADDED|MODIFIED|DELETED`, `data: {"type", "object"}` (the '
        f"{noun} as GET shows it), `id: <change number>` once everything before it is out; a "
        "heartbeat comment every 15 s; `Last-Event-ID` resumes without missing or repeating a "
        "change (410 resume-expired when that point is no longer kept). It ends when the token "
        "is revoked or expires, or the client reads too slowly (resume then)."
    )


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
    kind: StreamKind = WORKLOAD_STREAM,
) -> Response[Any]:
    """Answer a stream of `kind` (see the module docstring): its headers alone for a HEAD, else
    the stream `app.streams.opening` opens (404, 410 and 429 before the first byte)."""
    feed = feed_of(request)
    project = caller.require_project()
    resume = resume_point(last_event_id)
    if request.scope.get(HEAD_SCOPE_KEY):
        # HEAD: the headers a GET would answer, and no stream to keep open.
        if filters.name is not None and resume is None:
            await opening.check_exists(db, kind, project.id, filters.name)
        return Response(b"", media_type=MEDIA_TYPE, headers=HEADERS, status_code=200)
    frames = await opening.open_stream(
        feed,
        db,
        project.id,
        project.name,
        kind,
        filters,
        token=caller.actor,
        token_id=caller.token_id,
        expires_at=caller.expires_at,
        resume=resume,
    )
    return Stream(frames, media_type=MEDIA_TYPE, headers=HEADERS, status_code=200)
