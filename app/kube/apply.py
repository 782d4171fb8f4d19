"""Writing to the cluster: server-side apply, deletes, finalizer removal, and pod logs.

Every object aicp owns is written by server-side apply as field manager `aicp` with
`force=True` (docs/DESIGN.md §6): the body declares exactly the fields aicp owns, the server
removes those aicp declared before and no longer does, and leaves other managers' fields
alone. The caller decides what to declare — for a Job that Kueue has admitted, only metadata
(re-declaring `spec.suspend` with force would take it back from Kueue and re-suspend a
running Job).

All writes wait for the client's token bucket first. Every function raises `KubeError`s
(`app.kube.errors`), never kubernetes_asyncio's exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import aiohttp

from app.domain.labels import FIELD_MANAGER, MAIN_CONTAINER
from app.kube.errors import Conflict, Invalid, KubeError, NotFound, from_status, translated
from app.kube.metrics import KUBE_WRITES
from app.kube.resources import JOBS, Resource, request, request_json, resource_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable

    from app.domain.kube_objects import Manifest
    from app.kube.client import KubeClient

APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"

T = TypeVar("T")
Propagation = Literal["Background", "Foreground", "Orphan"]


async def apply(
    kube: KubeClient, manifest: Manifest, *, field_manager: str = FIELD_MANAGER
) -> Manifest:
    """Server-side apply `manifest` (creating it if missing); return the object as stored.

    The manifest needs `apiVersion`, `kind`, `metadata.name` and, for namespaced kinds,
    `metadata.namespace`; it must not carry `managedFields`, and carries `resourceVersion`
    only to make the write conditional (409 `Conflict` if the object moved on).

    One manager owns one body: applying a smaller body under the same `field_manager` removes
    what it no longer declares. A second, partial body (a Job's metadata after Kueue took its
    spec over) therefore goes under its own manager (`aicp-metadata`, see
    `app.domain.labels`).
    """
    resource = resource_of(manifest)
    namespace, name = _address(resource, manifest)
    call = resource.method(kube, "patch", namespace, name)(
        manifest,
        field_manager=field_manager,
        force=True,
        _content_type=APPLY_PATCH,
        _preload_content=False,
    )
    return await _write(kube, "apply", resource, request_json(call))


async def apply_checked(
    kube: KubeClient,
    manifest: Manifest,
    live: Manifest | None,
    *,
    field_manager: str = FIELD_MANAGER,
    pin_version: bool = True,
) -> Manifest:
    """Apply `manifest` over the object `live` that was read and found aicp's own
    (`app.domain.ownership`), or create it when `live` was absent.

    The check and the write are two requests; the write is made conditional on what was
    checked, so an object someone made in between is never taken over: a missing object is
    created (a create never overwrites) before it is applied, so that the `aicp` apply manager
    owns its fields as for any other apply; over an existing object the body carries `live`'s
    resourceVersion (`pin_version`). Either way a change in between is a 409 `Conflict`, and
    the caller reads the object again. Objects whose status a controller rewrites all the time
    (Kueue's queues) are applied with `pin_version=False`: their resourceVersion moves on every
    usage change, and what was checked there is who owns them, not their status.
    """
    meta = dict(manifest.get("metadata") or {})
    if live is None:
        await create(kube, manifest, field_manager=field_manager)
    elif pin_version:
        meta["resourceVersion"] = (live.get("metadata") or {}).get("resourceVersion")
    return await apply(kube, {**manifest, "metadata": meta}, field_manager=field_manager)


async def create(
    kube: KubeClient, manifest: Manifest, *, field_manager: str = FIELD_MANAGER
) -> Manifest:
    """Create `manifest`, never overwriting: 409 `Conflict` (AlreadyExists) when an object of
    that name exists already, whoever wrote it. For bodies whose every field is meant once, at
    creation (a Job's `suspend: true`): a writer that acts on a stale view — a replica resuming
    after a pause, its lease gone — cannot re-declare them over the live object."""
    resource = resource_of(manifest)
    namespace, _ = _address(resource, manifest)
    call = resource.method(kube, "create", namespace)(
        manifest, field_manager=field_manager, _preload_content=False
    )
    return await _write(kube, "create", resource, request_json(call))


async def get(
    kube: KubeClient, resource: Resource, namespace: str | None, name: str
) -> Manifest | None:
    """Read one object from the API server (not a cache); None if it does not exist."""
    try:
        return await request_json(
            resource.method(kube, "read", namespace, name)(_preload_content=False)
        )
    except NotFound:
        return None


async def delete(
    kube: KubeClient,
    resource: Resource,
    namespace: str | None,
    name: str,
    *,
    propagation: Propagation = "Background",
    uid: str | None = None,
) -> bool:
    """Delete an object; False if it was already gone.

    With finalizers left the object is only marked (`deletionTimestamp`) and disappears when
    they are removed. `Background` lets the garbage collector remove dependents afterwards.
    `uid` makes the delete conditional: only that object, not a successor of the same name
    (409 `Conflict` otherwise).
    """
    options: Manifest = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": propagation,
    }
    if uid:
        options["preconditions"] = {"uid": uid}
    call = resource.method(kube, "delete", namespace, name)(
        propagation_policy=propagation,
        body=options,
        _preload_content=False,
    )
    try:
        await _write(kube, "delete", resource, request(call))
    except NotFound:
        return False
    return True


async def delete_job(
    kube: KubeClient, namespace: str, name: str, *, uid: str | None = None
) -> bool:
    """Delete a Job and (in the background) its pods; False if it was already gone.

    Never without a policy: batch/v1 Jobs default to `Orphan`, which leaves the pods running
    and holding their GPUs (docs/KUBERNETES.md §4). `uid`: only that Job (see `delete`).
    """
    return await delete(kube, JOBS, namespace, name, propagation="Background", uid=uid)


async def remove_finalizer(
    kube: KubeClient,
    resource: Resource,
    namespace: str | None,
    name: str,
    finalizer: str,
    *,
    current: Manifest | None = None,
    attempts: int = 3,
) -> bool:
    """Remove one finalizer, leaving the others; True if this call removed it.

    A JSON patch whose `test` ops pin the object's uid and the finalizer at the index it was
    read at: if another writer reordered or removed finalizers meanwhile, the server refuses
    the patch and the object is read again (up to `attempts` times); a successor object of the
    same name is never touched. `current` (e.g. from an informer cache) saves the first read.
    False when the object or the finalizer is already gone.
    """
    uid = ((current or {}).get("metadata") or {}).get("uid")
    for attempt in range(attempts):
        obj = current if attempt == 0 and current is not None else None
        if obj is None:
            obj = await get(kube, resource, namespace, name)
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if uid is not None and meta.get("uid") != uid:
            return False  # the object read first is gone; this is its successor
        finalizers = list(meta.get("finalizers") or [])
        if finalizer not in finalizers:
            return False
        index = finalizers.index(finalizer)
        patch: list[Manifest] = []
        if meta.get("uid"):
            patch.append({"op": "test", "path": "/metadata/uid", "value": meta["uid"]})
        patch += [
            {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
            {"op": "remove", "path": f"/metadata/finalizers/{index}"},
        ]
        call = resource.method(kube, "patch", namespace, name)(
            patch, _content_type=JSON_PATCH, _preload_content=False
        )
        try:
            await _write(kube, "remove-finalizer", resource, request(call))
        except NotFound:
            return False
        except (Conflict, Invalid):
            if attempt == attempts - 1:
                raise
            continue
        return True
    return False


@dataclass(frozen=True, slots=True)
class LogRead:
    """Which lines of a container's log a read (or a follow) starts with."""

    container: str = MAIN_CONTAINER
    tail_lines: int = 100
    since_seconds: int | None = None

    def params(self) -> dict[str, Any]:
        """The `read_namespaced_pod_log` arguments (the raw body, not a decoded one)."""
        params: dict[str, Any] = {
            "container": self.container,
            "tail_lines": self.tail_lines,
            "_preload_content": False,
        }
        if self.since_seconds is not None:
            params["since_seconds"] = self.since_seconds
        return params


async def pod_logs(kube: KubeClient, namespace: str, pod: str, read: LogRead = LogRead()) -> str:
    """The last `read.tail_lines` lines the container printed (the one live read the API
    serves)."""
    body = await request(kube.core.read_namespaced_pod_log(pod, namespace, **read.params()))
    return body.decode(errors="replace")


async def follow_pod_log(
    kube: KubeClient, namespace: str, pod: str, read: LogRead
) -> AsyncIterator[bytes]:
    """What the container prints, as it prints it (`follow=true`): the last `read.tail_lines`
    lines first; ends when the container has terminated. A container that has not started is
    a `KubeError` (the server's 400)."""
    with translated():
        response: Any = await kube.logs.read_namespaced_pod_log(
            pod,
            namespace,
            follow=True,
            # No total: a follow lasts as long as the container runs.
            _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            **read.params(),
        )
    try:
        if response.status != 200:
            raise from_status(response.status, await response.read())
        with translated():
            async for chunk in response.content.iter_any():
                yield chunk
    finally:
        response.release()


def _address(resource: Resource, manifest: Manifest) -> tuple[str | None, str]:
    meta = manifest.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError(f"{resource.kind} manifest has no metadata.name")
    namespace = meta.get("namespace")
    if resource.namespaced and not namespace:
        raise ValueError(f"{resource.kind} {name} manifest has no metadata.namespace")
    return (str(namespace) if resource.namespaced else None), str(name)


async def _write(kube: KubeClient, verb: str, resource: Resource, call: Awaitable[T]) -> T:
    # The bucket is taken before the request is even built on the wire; `call` is a coroutine
    # that has not started yet, so waiting here delays the write itself.
    await kube.writes.acquire()
    try:
        result = await call
    except KubeError as exc:
        KUBE_WRITES.labels(verb, resource.kind, type(exc).__name__).inc()
        raise
    KUBE_WRITES.labels(verb, resource.kind, "ok").inc()
    return result
