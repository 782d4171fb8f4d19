"""The object store at the heart of kubesim: what etcd + the apiserver's registry are to a cluster.

THIS FILE IS A CONTRACT STUB. The apiserver work implements it; the controllers
(`kubesim/controllers/`) call only what is declared here. Keep the signatures; add freely.

Objects are plain JSON dicts exactly as they appear on the wire (with `apiVersion`, `kind`,
`metadata`, `spec`, `status`). Every method returns deep copies: callers may mutate freely.

Every real write bumps the one global resourceVersion counter; a write that changes nothing
bumps nothing and emits no event (KUBESIM.md §1). Validation, defaulting, generation bumps,
field ownership, finalizers and garbage collection all happen in here, so that the HTTP layer
and the in-process controllers see one and the same behaviour.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Obj = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
AdmissionHook = Callable[[Literal["CREATE", "UPDATE"], "Obj", "Obj | None"], None]


@dataclass(frozen=True)
class ResourceType:
    """One served resource: `ResourceType("batch", "v1", "jobs", "Job", namespaced=True)`."""

    group: str  # "" for core
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool = True


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    object: Obj  # for DELETED: the last state, carrying the delete's resourceVersion


class StoreError(Exception):
    """A write the apiserver would refuse; `code`/`reason` map to a Kubernetes Status."""

    def __init__(self, code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.causes = code, reason, message, causes or []


class Store:
    """In-memory registry of every served resource (see module docstring)."""

    def resource(self, group: str, plural: str) -> ResourceType:
        """Look up a served resource type ("" group for core); KeyError if not served."""
        raise NotImplementedError

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        raise NotImplementedError

    def list(self, rt: ResourceType, namespace: str | None = None, *,
             label_selector: str | None = None, field_selector: str | None = None) -> list[Obj]:
        raise NotImplementedError

    def create(self, rt: ResourceType, obj: Obj, *, manager: str) -> Obj:
        """Create (honours `metadata.generateName`); 409 AlreadyExists, 422 Invalid."""
        raise NotImplementedError

    def update(self, rt: ResourceType, obj: Obj, *, manager: str, subresource: str | None = None) -> Obj:
        """PUT semantics (optimistic lock on `metadata.resourceVersion` when present)."""
        raise NotImplementedError

    def patch(self, rt: ResourceType, namespace: str | None, name: str, body: Any, *,
              content_type: str, manager: str, force: bool = False,
              subresource: str | None = None) -> Obj:
        """merge-patch, json-patch, strategic-merge (built-ins only) or server-side apply."""
        raise NotImplementedError

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *,
               propagation_policy: str | None = None) -> Obj:
        """Delete, or mark deleting when finalizers remain; garbage-collects dependents."""
        raise NotImplementedError

    def watch(self, rt: ResourceType, namespace: str | None = None, *,
              resource_version: str | None = None,
              label_selector: str | None = None) -> AsyncIterator[WatchEvent]:
        """In-process watch for controllers: events after `resource_version` (or all current
        objects as ADDED first when it is None), in order, forever."""
        raise NotImplementedError

    @property
    def resource_version(self) -> int:
        raise NotImplementedError

    def add_admission_hook(self, rt: ResourceType, hook: AdmissionHook) -> None:
        """Register a mutating admission hook (what a webhook is to a real apiserver): called with
        (operation, new_object, old_object_or_None) before validation on every create and update
        of `rt`, from HTTP and in-process callers alike; it mutates `new_object` in place and may
        raise StoreError to refuse. Kueue's job webhook (suspend=true on create) is one."""
        raise NotImplementedError


def labels_match(labels: Mapping[str, str], selector: str | None) -> bool:
    """Kubernetes label-selector semantics (=, ==, !=, in, notin, exists, !exists; comma = AND)."""
    raise NotImplementedError
