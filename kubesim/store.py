"""The object store at the heart of kubesim: what etcd + the apiserver's registry are to a cluster.

The controllers (`kubesim/controllers/`) and the HTTP layer (`kubesim/http.py`) call only this
class, so both see one and the same behaviour: validation, defaulting, generation bumps, field
ownership, finalizers and garbage collection all happen in here.

Objects are plain JSON dicts exactly as they appear on the wire (with `apiVersion`, `kind`,
`metadata`, `spec`, `status`). Every method returns deep copies: callers may mutate freely.
Stored objects are never mutated after commit (copy on write), so their one JSON encoding is
shared by gets, lists and every watcher.

Every real write bumps the one global resourceVersion counter; a write that changes nothing
bumps nothing and emits no event (docs/KUBERNETES.md §2).

Pod logs: the kubelet simulation writes what a pod "printed" to `store.pod_logs[(namespace,
name)]` (a plain dict, no event, no resourceVersion); `GET …/pods/<name>/log` serves it, and
`?follow=true` waits on `log_changed` for more (kubesim/logs.py). The entry is dropped when the
pod is removed.

Everything runs on one event loop thread; no method awaits, so each write is atomic with
respect to watchers (the in-process `watch()` and the HTTP watch both see every change once,
in resourceVersion order).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

from kubesim import fieldowners
from kubesim.applying import PatchMixin
from kubesim.clock import Clock
from kubesim.crd_defaults import apply_crd_defaults
from kubesim.defaults import (
    check_finalizers,
    check_job_status,
    check_job_update,
    check_local_queue_update,
    check_service_update,
    compose_write,
    generation_changed,
    normalise,
    prepare_create,
    prepare_update,
)
from kubesim.deletion import DeletionMixin
from kubesim.model import (
    AdmissionHook,
    EventType,
    Obj,
    ResourceType,
    StoreError,
    WatchEvent,
    conflict,
    not_found,
)
from kubesim.naming import generate_name
from kubesim.resources import BY_KEY
from kubesim.scaling import ScaleMixin
from kubesim.selectors import (
    equality_terms,
    fields_match,
    labels_match,
    object_labels,
    parse_field_selector,
    parse_label_selector,
)
from kubesim.tables import Key, Stored, Table, clone, decode, stored
from kubesim.validation import validate
from kubesim.watching import Change, Expired, Watcher, WatchHub

if TYPE_CHECKING:
    import builtins
    from collections.abc import AsyncIterator

__all__ = [
    "AdmissionHook",
    "EventType",
    "Obj",
    "ResourceType",
    "Store",
    "StoreError",
    "WatchEvent",
    "labels_match",
]

MUST_SPECIFY_RV = "Invalid value: 0x0: must be specified for an update"


class Store(PatchMixin, DeletionMixin, ScaleMixin):
    """In-memory registry of every served resource (see module docstring)."""

    def __init__(self, clock: Clock | None = None, *, history_size: int = 20_000) -> None:
        self.clock = clock or Clock()
        self._rv = 0
        self.tables: dict[tuple[str, str], Table] = {key: Table(rt) for key, rt in BY_KEY.items()}
        self.hub = WatchHub(history_size)
        self._hooks: dict[tuple[str, str], list[AdmissionHook]] = {}
        self._owners: dict[str, fieldowners.Ownership] = {}
        self.uids: dict[str, tuple[ResourceType, Key]] = {}
        self.pod_logs: dict[tuple[str, str], str] = {}
        # Every change ever committed to a Job, unbounded and untouched by faults (the watch
        # window is neither): `GET /_sim/history/jobs`.
        self.job_history: list[dict[str, Any]] = []
        self._log_waiters: dict[tuple[str, str], asyncio.Event] = {}

    # ---- reads -------------------------------------------------------------------------------

    def resource(self, group: str, plural: str) -> ResourceType:
        """Look up a served resource type ("" group for core); KeyError if not served."""
        return BY_KEY[(group, plural)]

    @property
    def resource_version(self) -> int:
        return self._rv

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        return (namespace or "" if rt.namespaced else "", name)

    def entry(self, rt: ResourceType, namespace: str | None, name: str) -> Stored | None:
        """The stored entry (shared, never to be mutated): the HTTP layer serves its `raw`."""
        return self.tables[rt.key].get(self._key(rt, namespace, name))

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        entry = self.tables[rt.key].get(self._key(rt, namespace, name))
        return None if entry is None else decode(entry.raw)

    def entries(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Stored]:
        """Matching stored entries in key order (shared, never to be mutated): the HTTP list."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.kind)
        ns = namespace if rt.namespaced else None
        out = []
        for entry in self.tables[rt.key].candidates(ns, equality_terms(labels)):
            if labels and not all(r.matches(object_labels(entry.obj)) for r in labels):
                continue
            if fields and not fields_match(entry.obj, fields):
                continue
            out.append(entry)
        return out

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        found = self.entries(
            rt, namespace, label_selector=label_selector, field_selector=field_selector
        )
        return [decode(e.raw) for e in found]

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        """What the pod "printed" (served by `GET …/pods/<name>/log`); no event, no RV."""
        self.pod_logs[(namespace, name)] = text
        self.wake_log_followers(namespace, name)

    def log_changed(self, namespace: str, name: str) -> asyncio.Event:
        """Set at the pod's next log write, status change or removal (log followers)."""
        return self._log_waiters.setdefault((namespace, name), asyncio.Event())

    def wake_log_followers(self, namespace: str, name: str) -> None:
        waiter = self._log_waiters.pop((namespace, name), None)
        if waiter is not None:
            waiter.set()

    # ---- writes ------------------------------------------------------------------------------

    def add_admission_hook(self, rt: ResourceType, hook: AdmissionHook) -> None:
        """Register a mutating admission hook (what a webhook is to a real apiserver): called with
        (operation, new_object, old_object_or_None) before validation on every create and update
        of `rt`, from HTTP and in-process callers alike; it mutates `new_object` in place and may
        raise StoreError to refuse. Kueue's job webhook (suspend=true on create) is one."""
        self._hooks.setdefault(rt.key, []).append(hook)

    def _admit(
        self, rt: ResourceType, op: Literal["CREATE", "UPDATE"], new: Obj, old: Obj | None
    ) -> None:
        for hook in self._hooks.get(rt.key, ()):
            hook(op, new, old)

    def _commit(
        self,
        rt: ResourceType,
        key: Key,
        obj: Obj,
        old: Obj | None,
        event: Literal["ADDED", "MODIFIED", "DELETED"],
    ) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        entry = stored(rt, obj)
        table = self.tables[rt.key]
        if event == "DELETED":
            table.remove(key)
        else:
            table.put(key, entry)
        self.hub.publish(Change(self._rv, rt.key, event, key[0], obj, old, entry.raw))
        if rt.key == ("batch", "jobs"):
            self.job_history.append(_job_change(self._rv, event, obj))
        return decode(entry.raw)

    def create(self, rt: ResourceType, obj: Obj, *, manager: str) -> Obj:
        """Create (honours `metadata.generateName`); 409 AlreadyExists, 422 Invalid."""
        return self._create(rt, clone(obj), manager=manager, ownership=None)

    def _create(
        self, rt: ResourceType, obj: Obj, *, manager: str, ownership: fieldowners.Ownership | None
    ) -> Obj:
        obj = normalise(rt, obj)
        meta = obj["metadata"]
        table = self.tables[rt.key]
        if rt.namespaced:
            ns = meta.get("namespace") or "default"
            meta["namespace"] = ns
            if self.tables[("", "namespaces")].get(("", ns)) is None:
                raise not_found(BY_KEY[("", "namespaces")], ns)
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generate_name(
                meta["generateName"],
                lambda n: table.get(self._key(rt, meta.get("namespace"), n)) is not None,
            )
        name = meta.get("name") or ""
        key = self._key(rt, meta.get("namespace"), name)
        if table.get(key) is not None:
            raise StoreError(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists').about(
                rt, name
            )
        if meta.get("resourceVersion"):
            raise StoreError(
                400, "BadRequest", "resourceVersion should not be set on objects to be created"
            )
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(field, None)
        meta["uid"] = _new_uid()
        meta["creationTimestamp"] = self.clock.now_rfc3339()
        meta["generation"] = 1
        prepare_create(rt, obj)
        apply_crd_defaults(rt, obj)
        self._admit(rt, "CREATE", obj, None)
        validate(rt, obj)
        if table.get(key) is not None:  # a hook created it meanwhile
            raise StoreError(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists').about(
                rt, name
            )
        own: fieldowners.Ownership = ownership if ownership is not None else {}
        if ownership is None:
            fieldowners.record_update(own, None, obj, manager)
        self._owners[meta["uid"]] = own
        self.uids[meta["uid"]] = (rt, key)
        return self._commit(rt, key, obj, None, "ADDED")

    def update(
        self, rt: ResourceType, obj: Obj, *, manager: str, subresource: str | None = None
    ) -> Obj:
        """PUT semantics (optimistic lock on `metadata.resourceVersion` when present; a custom
        resource PUT without one is 422, as for CRDs)."""
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        current = self.tables[rt.key].get(self._key(rt, meta.get("namespace"), name))
        if current is None:
            raise not_found(rt, name)
        if not meta.get("resourceVersion") and rt.is_custom:
            raise StoreError(
                422,
                "Invalid",
                f'{rt.qualified_kind} "{name}" is invalid: metadata.resourceVersion: '
                + MUST_SPECIFY_RV,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "message": MUST_SPECIFY_RV,
                        "field": "metadata.resourceVersion",
                    }
                ],
            ).about(rt, name)
        return self._replace(rt, current, clone(obj), manager=manager, subresource=subresource)

    def _replace(
        self,
        rt: ResourceType,
        current: Stored,
        new: Obj,
        *,
        manager: str,
        subresource: str | None,
        ownership: fieldowners.Ownership | None = None,
    ) -> Obj:
        old = current.obj
        name = old["metadata"]["name"]
        if subresource not in (None, "status") or (subresource == "status" and not rt.has_status):
            raise StoreError(404, "NotFound", "the server could not find the requested resource")
        expected = (new.get("metadata") or {}).get("resourceVersion")
        if expected and expected != old["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        result = compose_write(rt, old, new, subresource)
        result["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        apply_crd_defaults(rt, result)
        if subresource is None:
            self._admit(rt, "UPDATE", result, clone(old))
            check_job_update(rt, old, result)
            check_local_queue_update(rt, old, result)
            check_service_update(rt, old, result)
            prepare_update(rt, old, result)
            check_finalizers(rt, old, result)
        else:
            check_job_status(rt, old, result)
        validate(rt, result)
        if generation_changed(rt, old, result, subresource):
            result["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        uid = old["metadata"]["uid"]
        own = self._owners.setdefault(uid, {})
        if ownership is not None:
            self._owners[uid] = ownership
        else:
            fieldowners.record_update(own, old, result, manager)
        if result == old:
            return decode(current.raw)
        key = self._key(rt, old["metadata"].get("namespace"), name)
        if old["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            return self._remove(rt, key, result)
        return self._commit(rt, key, result, old, "MODIFIED")

    # ---- watch -------------------------------------------------------------------------------

    def open_watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        maxsize: int | None = None,
    ) -> tuple[builtins.list[Stored], Watcher]:
        """Start a watch: the synthetic ADDED entries (when `resource_version` is None or "0")
        and a registered watcher with every later change. Raises 410 Expired when the changes
        after `resource_version` have left the history."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.kind)
        ns = namespace if rt.namespaced else None
        watcher = Watcher(rt.key, ns, labels, fields, maxsize)
        initial: builtins.list[Stored] = []
        if resource_version in (None, "", "0"):
            initial = self.entries(
                rt, ns, label_selector=label_selector, field_selector=field_selector
            )
            since = self._rv
        else:
            try:
                since = int(str(resource_version))
            except ValueError as exc:
                raise StoreError(
                    400, "BadRequest", f"invalid resource version {resource_version!r}"
                ) from exc
        try:
            self.hub.subscribe(watcher, since)
        except Expired as exc:
            raise StoreError(410, "Expired", str(exc)) from exc
        return initial, watcher

    async def watch(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """In-process watch for controllers: events after `resource_version` (or all current
        objects as ADDED first when it is None), in order, forever. Never cut off for being
        slow; raises StoreError 410 only when `resource_version` is older than the history."""
        initial, watcher = self.open_watch(
            rt, namespace, resource_version=resource_version, label_selector=label_selector
        )
        try:
            for entry in initial:
                yield WatchEvent("ADDED", decode(entry.raw))
            while True:
                try:
                    event_type, change = await watcher.get()
                except EOFError:
                    return
                except Expired as exc:
                    raise StoreError(410, "Expired", str(exc)) from exc
                etype: EventType = (
                    "ADDED"
                    if event_type == "ADDED"
                    else ("DELETED" if event_type == "DELETED" else "MODIFIED")
                )
                yield WatchEvent(etype, decode(change.raw))
        finally:
            self.hub.unsubscribe(watcher)


def _job_change(rv: int, event: str, obj: Obj) -> dict[str, Any]:
    """What `GET /_sim/history/jobs` tells about one committed change of a Job."""
    meta = obj["metadata"]
    return {
        "resource_version": rv,
        "event": event,
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "labels": dict(meta.get("labels") or {}),
        "suspend": bool((obj.get("spec") or {}).get("suspend")),
        "finalizers": list(meta.get("finalizers") or []),
        "deleting": bool(meta.get("deletionTimestamp")),
        "monotonic": time.monotonic(),
    }


#: uids rise in creation order (a counter from the start time above 64 random bits), so an
#: order that compares uids, as Kueue's queue does for equal priority and creation second,
#: is the order of creation here, while staying unique and UUID-shaped like the apiserver's.
_UIDS = itertools.count(time.time_ns() // 1000)


def _new_uid() -> str:
    return str(uuid.UUID(int=(next(_UIDS) << 64) | secrets.randbits(64)))
