"""What the dashboard's script reads besides ``/api/v1``: the change feed as deltas, and a
workload's phase timeline.

- ``GET /projects/{project}/position`` — ``{"after": N}``: the newest change number. The script
  reads it *before* it lists a page of workloads through the API, then opens
- ``GET /projects/{project}/live?after=N[&state=][&compute_pool=][&name_contains=]`` — the
  list stream of ``GET .../workloads?watch=true`` (the same filters, tenancy, limits and
  frames), resumed after N instead of starting with every current workload: only the changes
  since the page was read, each one row (``after=0``, before any change ever: the list
  stream as it is). A reconnect sends ``Last-Event-ID``, which wins over ``after``; 410
  ``resume-expired`` when N is no longer kept (the script then reads the page again).
- ``GET /projects/{project}/workloads/{name}/timeline`` — ``app.domain.timeline`` over the
  workload's events (the newest ``TIMELINE_EVENTS``).

Authenticated and scoped like the API (the session cookie or a bearer token; a project token
sees only its own project, 404 otherwise).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from litestar import Request, Response, get
from litestar.params import FromPath, FromQuery, QueryParameter

from app.api import auth, watches
from app.api.workloads import NameContainsFilter, state_filter_value
from app.domain.timeline import Step, Timeline, phase_timeline
from app.store import changes, events, workloads

if TYPE_CHECKING:
    from app.api.auth import Caller
    from app.store.db import Database

#: The events a timeline reads at most (the newest): a workload requeued more often than this
#: shows its latest phases.
TIMELINE_EVENTS = 500


async def _caller(request: Request[Any, Any, Any]) -> Caller:
    caller = await auth.authenticate(request)
    return await auth.scope(request, caller)


def _db(request: Request[Any, Any, Any]) -> Database:
    db: Database = request.app.state["db"]
    return db


@get("/projects/{project:str}/position", include_in_schema=False)
async def position(request: Request[Any, Any, Any]) -> dict[str, int]:
    await _caller(request)
    async with _db(request).connection() as conn:
        return {"after": await changes.position(conn)}


@get("/projects/{project:str}/live", include_in_schema=False)
async def live(
    request: Request[Any, Any, Any],
    after: FromQuery[str | None] = None,
    state_filter: Annotated[str | None, QueryParameter(name="state")] = None,
    compute_pool: FromQuery[str | None] = None,
    name_contains: NameContainsFilter = None,
) -> Response[Any]:
    caller = await _caller(request)
    project = caller.require_project()
    db = _db(request)
    state_value = state_filter_value(state_filter or None)
    async with db.connection() as conn:
        view = await workloads.workload_filter(
            conn,
            project.id,
            state=state_value,
            compute_pool=compute_pool or None,
            name_contains=name_contains or None,
        )
    # After 0 no change was ever made: the stream starts with the (so far empty) list instead.
    resume = request.headers.get("last-event-id") or (None if after == "0" else after)
    return await watches.open_stream(request, caller, db, view, resume)


@get("/projects/{project:str}/workloads/{name:str}/timeline", include_in_schema=False)
async def timeline(request: Request[Any, Any, Any], name: FromPath[str]) -> Timeline:
    caller = await _caller(request)
    async with _db(request).connection() as conn:
        workload_id = await workloads.get_id(conn, caller.require_project(), name)
        items, _ = await events.page(
            conn, kind="workload", resource_id=workload_id, after=None, limit=TIMELINE_EVENTS
        )
    steps = [Step(at=item.at, type=item.type, generation=item.generation or 0) for item in items]
    return phase_timeline(steps, datetime.now(UTC))


ROUTES = [position, live, timeline]
