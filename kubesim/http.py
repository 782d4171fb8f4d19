"""The Kubernetes REST surface: one catch-all handler that resolves the path (`routing`) and
calls the store. Every failure, unknown paths included, is a one-line JSON `Status`.

Middleware order (outermost first): stats (counts every request and its status), Status errors
(every exception becomes a Status), faults (latency, injected 500/429).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import yaml
from aiohttp import web

from kubesim import discovery, patching, printing, visibility
from kubesim.admin import admin_routes
from kubesim.app_state import STATE, AppState
from kubesim.logs import serve_log
from kubesim.model import ResourceType, StoreError, error_status, status_body
from kubesim.paging import page
from kubesim.routing import Route, parse, pattern_of
from kubesim.streaming import WatchParams, serve_watch

JSON = "application/json"
JOB_ORPHAN_WARNING = (
    '299 - "child pods are preserved by default when jobs are deleted; set '
    "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress "
    'this warning"'
)


def truthy(value: str | None) -> bool:
    """Query booleans as the apiserver parses them: false only for absent, "0" or "false"."""
    return value is not None and value.lower() not in ("0", "false", "")


def raw_response(
    body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON, headers=headers)


def json_response(
    obj: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return raw_response(msgspec.json.encode(obj), status, headers)


def verb_of(request: web.Request, route: Route | None) -> str:
    method = request.method
    if method == "GET":
        if route is None or route.name is not None:
            return "get"
        return "watch" if truthy(request.query.get("watch")) else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def field_manager(request: web.Request) -> str:
    """`?fieldManager=`, else the User-Agent's product token, as the apiserver defaults it."""
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("User-Agent", "unknown")
    return agent.split("/")[0].strip() or "unknown"


@web.middleware
async def stats_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    state = request.app[STATE]
    if request.path.startswith("/_sim"):
        response: web.StreamResponse = await handler(request)
        return response
    route = parse(request.path)
    verb = verb_of(request, route)
    content_type = request.headers.get("Content-Type") if request.body_exists else None
    manager = field_manager(request) if verb in ("create", "update", "patch") else None
    state.stats.count(verb, pattern_of(request.path), content_type, manager)
    response = await handler(request)
    state.stats.status(response.status)
    return response


@web.middleware
async def faults_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    faults = request.app[STATE].faults
    if not request.path.startswith("/_sim"):
        if faults.latency_seconds > 0:
            await asyncio.sleep(faults.latency_seconds)
        if faults.should_fail(verb_of(request, parse(request.path)), request.path):
            if faults.error_code == 429:
                return json_response(
                    status_body(
                        429,
                        "TooManyRequests",
                        "the server has received too many requests and has asked us to try again "
                        "later",
                    ),
                    429,
                    {"Retry-After": str(faults.retry_after_seconds)},
                )
            return json_response(
                status_body(500, "InternalError", "Internal error occurred: injected fault"), 500
            )
    response: web.StreamResponse = await handler(request)
    return response


@web.middleware
async def status_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except StoreError as err:
        return json_response(error_status(err), err.code)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return json_response(
            status_body(exc.status, exc.reason.replace(" ", ""), exc.text or exc.reason), exc.status
        )
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception as exc:  # an apiserver answers a Status even for its own bugs
        return json_response(
            status_body(500, "InternalError", f"Internal error occurred: {exc!r}"), 500
        )


def _not_found_path() -> StoreError:
    return StoreError(404, "NotFound", "the server could not find the requested resource")


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        problem: Exception = exc
    if request.headers.get("Content-Type", "").startswith(patching.APPLY):
        # Apply bodies may be YAML (kubectl sends YAML); JSON is YAML too, so try JSON first.
        try:
            return yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            problem = exc
    raise StoreError(400, "BadRequest", f"the body of the request could not be decoded: {problem}")


async def handle(request: web.Request) -> web.StreamResponse:
    path = request.path.rstrip("/") or "/"
    doc = _discovery(path)
    if doc is not None:
        if request.method != "GET":
            raise StoreError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        return json_response(doc)
    if visibility.serves(path):
        if request.method != "GET":
            raise StoreError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        state = request.app[STATE]
        return json_response(
            visibility.pending_workloads(path, request.query, state.queues, state.store)
        )
    route = parse(path)
    if route is None:
        raise _not_found_path()
    state = request.app[STATE]
    method = request.method
    if method == "GET":
        return await _get(request, state, route)
    if route.name is None:
        if method == "POST":
            return await _create(request, state, route)
        raise StoreError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    if method == "PUT":
        return await _update(request, state, route)
    if method == "PATCH":
        return await _patch(request, state, route)
    if method == "DELETE" and route.subresource is None:
        return await _delete(request, state, route)
    raise StoreError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def _discovery(path: str) -> dict[str, Any] | None:
    if path == "/version":
        return discovery.VERSION_INFO
    if path == "/api":
        return discovery.api_versions()
    if path == "/apis":
        return discovery.api_groups()
    parts = path.strip("/").split("/")
    if parts == ["api", "v1"]:
        return discovery.resource_list("v1")
    if len(parts) == 2 and parts[0] == "apis":
        return discovery.api_group(parts[1])
    if len(parts) == 3 and parts[0] == "apis":
        return discovery.resource_list(f"{parts[1]}/{parts[2]}")
    return None


async def _get(request: web.Request, state: AppState, route: Route) -> web.StreamResponse:
    store, rt, q = state.store, route.rt, request.query
    if route.name is not None:
        entry = store.entry(rt, route.namespace, route.name)
        if entry is None:
            raise StoreError(404, "NotFound", f'{rt.qualified} "{route.name}" not found').about(
                rt, route.name
            )
        if route.subresource == "log":
            return await serve_log(request, store, rt, route.namespace or "", route.name)
        if route.subresource == "scale":
            return json_response(store.get_scale(rt, route.namespace, route.name))
        version = printing.table_version(request.headers.get("Accept"))
        if version is not None and route.subresource is None:
            meta = {"resourceVersion": entry.obj["metadata"].get("resourceVersion", "")}
            return json_response(_table(rt, [entry.obj], meta, version, q))
        return raw_response(entry.raw)
    if truthy(q.get("watch")):
        timeout = q.get("timeoutSeconds")
        initial = truthy(q.get("sendInitialEvents"))
        if initial and q.get("resourceVersionMatch") != "NotOlderThan":
            raise StoreError(
                422,
                "Invalid",
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                "resourceVersionMatch to NotOlderThan",
            )
        params = WatchParams(
            resource_version=q.get("resourceVersion"),
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
            timeout_seconds=float(timeout) if timeout else None,
            bookmarks=truthy(q.get("allowWatchBookmarks")),
            send_initial_events=initial,
        )
        return await serve_watch(request, rt, route.namespace, params)
    if truthy(q.get("sendInitialEvents")):
        raise StoreError(
            422, "Invalid", "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
        )
    return _list(
        state, rt, route.namespace, q, printing.table_version(request.headers.get("Accept"))
    )


def _table(rt: ResourceType, objs: list[Any], meta: dict[str, Any], version: str, q: Any) -> Any:
    return printing.table(rt, objs, meta, version=version, include_object=q.get("includeObject"))


def _list(
    state: AppState, rt: ResourceType, namespace: str | None, q: Any, table: str | None = None
) -> web.Response:
    """A page of the list; as a `meta.k8s.io` Table when `table` names its version."""
    store = state.store
    rv = store.resource_version
    asked = q.get("resourceVersion")
    if asked and asked.isdigit() and int(asked) > rv:
        # The real apiserver waits ~3 s for its cache to catch up, then gives up the same way.
        raise StoreError(504, "Timeout", f"Too large resource version: {asked}, current: {rv}")
    entries = store.entries(
        rt, namespace, label_selector=q.get("labelSelector"), field_selector=q.get("fieldSelector")
    )
    limit = int(q.get("limit") or 0)
    items, cont, remaining, rv = page(
        entries, limit, q.get("continue"), rv, store.hub.oldest_available
    )
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if cont:
        meta["continue"] = cont
        meta["remainingItemCount"] = remaining
    if table is not None:
        return json_response(_table(rt, [e.obj for e in items], meta, table, q))
    head = msgspec.json.encode(
        {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta}
    )
    builtin = not rt.is_custom
    body = head[:-1] + b',"items":[' + b",".join(e.item_raw(builtin) for e in items) + b"]}"
    return raw_response(body)


async def _create(request: web.Request, state: AppState, route: Route) -> web.Response:
    body = await _body(request)
    if not isinstance(body, dict):
        raise StoreError(400, "BadRequest", "the request body must be an object")
    if route.rt.namespaced:
        if route.namespace is None:  # POST to the all-namespaces collection
            raise StoreError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        meta = body.setdefault("metadata", {})
        if meta.get("namespace") and meta["namespace"] != route.namespace:
            raise StoreError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        meta["namespace"] = route.namespace
    created = state.store.create(route.rt, body, manager=field_manager(request))
    return json_response(created, 201)


async def _update(request: web.Request, state: AppState, route: Route) -> web.Response:
    body = await _body(request)
    if not isinstance(body, dict):
        raise StoreError(400, "BadRequest", "the request body must be an object")
    meta = body.setdefault("metadata", {})
    if meta.get("name") and meta["name"] != route.name:
        raise StoreError(
            400, "BadRequest", "the name of the object does not match the name on the URL"
        )
    meta["name"] = route.name
    if route.subresource == "scale":
        scale = state.store.update_scale(
            route.rt, route.namespace, route.name or "", body, manager=field_manager(request)
        )
        return json_response(scale)
    if route.rt.namespaced:
        meta["namespace"] = route.namespace
    updated = state.store.update(
        route.rt, body, manager=field_manager(request), subresource=route.subresource
    )
    return json_response(updated)


async def _patch(request: web.Request, state: AppState, route: Route) -> web.Response:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    is_apply = content_type == patching.APPLY
    if is_apply and not request.query.get("fieldManager"):
        raise StoreError(
            422,
            "Invalid",
            'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
            "is required for apply patch",
            [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            ],
        )
    if content_type == patching.APPLY_CBOR:
        raise StoreError(415, "UnsupportedMediaType", "apply-patch+cbor is not supported")
    body = await _body(request)
    store = state.store
    if route.subresource == "scale":
        scale = store.patch_scale(
            route.rt,
            route.namespace,
            route.name or "",
            body,
            content_type=content_type,
            manager=field_manager(request),
        )
        return json_response(scale)
    existed = store.entry(route.rt, route.namespace, route.name or "") is not None
    result = store.patch(
        route.rt,
        route.namespace,
        route.name or "",
        body,
        content_type=content_type,
        manager=field_manager(request),
        force=truthy(request.query.get("force")),
        subresource=route.subresource,
    )
    return json_response(result, 200 if existed else 201)


async def _delete(request: web.Request, state: AppState, route: Route) -> web.Response:
    body = await _body(request)
    policy = request.query.get("propagationPolicy")
    if isinstance(body, dict):
        policy = body.get("propagationPolicy") or policy
        if body.get("orphanDependents") is True and policy is None:
            policy = "Orphan"
        uid = (body.get("preconditions") or {}).get("uid")
        current = state.store.get(route.rt, route.namespace, route.name or "")
        if uid and current is not None and current["metadata"]["uid"] != uid:
            raise StoreError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {current['metadata']['uid']}",
            ).about(route.rt, route.name)
    headers = (
        {"Warning": JOB_ORPHAN_WARNING} if route.rt.plural == "jobs" and policy is None else None
    )
    last = state.store.delete(
        route.rt, route.namespace, route.name or "", propagation_policy=policy
    )
    if state.store.entry(route.rt, route.namespace, route.name or "") is not None:
        return json_response(last, 200, headers)
    done = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": route.name,
            "group": route.rt.group,
            "kind": route.rt.plural,
            "uid": last["metadata"]["uid"],
        },
    }
    return json_response(done, 200, headers)


def make_app(state: AppState) -> web.Application:
    """A fresh application over `state` (the Cluster makes a new one on every restart)."""
    app = web.Application(
        middlewares=[stats_middleware, status_middleware, faults_middleware],
        client_max_size=64 * 1024 * 1024,
    )
    app[STATE] = state
    app.add_routes(admin_routes())
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
