"""Admin endpoints under `/_sim/` (never under Kubernetes paths):

- `POST /_sim/faults` (JSON, see `kubesim.faults`) → the current settings; `DELETE` clears.
- `GET /_sim/stats` → request counters; `POST /_sim/stats/reset` zeroes them.
- `POST /_sim/time {"advance_seconds": N}` → advances the simulated clock; `GET` reads it.
- `GET /_sim/history/jobs` → every change ever committed to a Job, in order (see
  `Store.job_history`): what tests count Job creations and re-suspensions from.
- `POST /_sim/autoscale {"namespace": "default", "name": <autoscaler>, "replicas": N}` → what
  the HorizontalPodAutoscaler controller does once it has decided on N (see
  `kubesim.controllers.autoscaler`): N held within the autoscaler's bounds, the scale target's
  `spec.replicas` written through its `scale` subresource as `kube-controller-manager`, and the
  autoscaler's status; answers `{"scale", "status"}`. 404 when the autoscaler or its target is
  missing, 400 for a bad body.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiohttp import web

from kubesim.app_state import STATE
from kubesim.controllers.autoscaler import autoscale
from kubesim.faults import Faults
from kubesim.model import StoreError, error_status

_background: set[asyncio.Task[None]] = set()


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=msgspec.json.encode(obj), status=status, content_type="application/json"
    )


async def _read(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    try:
        body = msgspec.json.decode(raw) if raw else {}
    except msgspec.DecodeError as exc:
        raise StoreError(400, "BadRequest", f"invalid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise StoreError(400, "BadRequest", "expected a JSON object")
    return body


async def post_faults(request: web.Request) -> web.Response:
    state = request.app[STATE]
    try:
        actions = state.faults.update(await _read(request))
    except StoreError as err:
        return _json(error_status(err), err.code)
    if actions.get("shrink_watch_history"):
        state.store.hub.shrink(state.store.resource_version)
    refuse = actions.get("refuse_connections_seconds")
    if refuse:
        if state.restart is None:
            return _json({"error": "this server cannot restart itself"}, 400)
        # Restart after this response has been written; hold the task so it is not collected.
        task = asyncio.get_running_loop().create_task(_restart_later(state.restart, float(refuse)))
        _background.add(task)
        task.add_done_callback(_background.discard)
    return _json(state.faults.as_dict())


async def _restart_later(restart: Any, seconds: float) -> None:
    await asyncio.sleep(0.05)
    await restart(seconds)


async def delete_faults(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.faults = Faults()
    return _json(state.faults.as_dict())


async def get_faults(request: web.Request) -> web.Response:
    return _json(request.app[STATE].faults.as_dict())


async def get_stats(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = state.stats.as_dict()
    body["resource_version"] = state.store.resource_version
    body["watchers"] = len(state.http_watchers)
    return _json(body)


async def reset_stats(request: web.Request) -> web.Response:
    request.app[STATE].stats.reset()
    return _json({"total": 0})


async def post_time(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _read(request)
    try:
        seconds = float(body.get("advance_seconds", 0))
        state.clock.advance(seconds)
    except (TypeError, ValueError) as exc:
        return _json(error_status(StoreError(400, "BadRequest", str(exc))), 400)
    return _json({"now": state.clock.now(), "now_rfc3339": state.clock.now_rfc3339()})


async def get_time(request: web.Request) -> web.Response:
    clock = request.app[STATE].clock
    return _json(
        {"now": clock.now(), "now_rfc3339": clock.now_rfc3339(), "time_scale": clock.time_scale}
    )


async def get_job_history(request: web.Request) -> web.Response:
    return _json({"items": request.app[STATE].store.job_history})


async def post_autoscale(request: web.Request) -> web.Response:
    state = request.app[STATE]
    try:
        body = await _read(request)
        name, replicas = body.get("name"), body.get("replicas")
        namespace = body.get("namespace", "default")
        if not isinstance(name, str) or not isinstance(namespace, str):
            raise StoreError(400, "BadRequest", "name and namespace must be strings")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise StoreError(400, "BadRequest", "replicas must be a whole number, at least 0")
        answer = autoscale(state.store, state.clock, namespace, name, replicas)
    except StoreError as err:
        return _json(error_status(err), err.code)
    return _json(answer)


def admin_routes() -> list[web.RouteDef]:
    return [
        web.post("/_sim/faults", post_faults),
        web.delete("/_sim/faults", delete_faults),
        web.get("/_sim/faults", get_faults),
        web.get("/_sim/stats", get_stats),
        web.post("/_sim/stats/reset", reset_stats),
        web.post("/_sim/time", post_time),
        web.get("/_sim/time", get_time),
        web.get("/_sim/history/jobs", get_job_history),
        web.post("/_sim/autoscale", post_autoscale),
    ]
