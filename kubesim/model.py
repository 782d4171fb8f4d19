"""The value types every kubesim module shares: objects, served resource types, events, errors.

`kubesim.store` re-exports all of these; the controllers import them from there.
"""

from __future__ import annotations

from collections.abc import Callable
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

    @property
    def api_version(self) -> str:
        """`v1` for core, else `<group>/<version>`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """(group, plural): how the store files objects of this type."""
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """`jobs.batch`, `pods`: how Kubernetes names the resource in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """`Job.batch`, `Pod`: how Kubernetes names the kind in 422 messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def is_custom(self) -> bool:
        """Served from a CRD (no strategic merge, 422 on PUT without resourceVersion)."""
        return self.group.endswith("x-k8s.io")


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    object: Obj  # for DELETED: the last state, carrying the delete's resourceVersion


class StoreError(Exception):
    """A write the apiserver would refuse; `code`/`reason` map to a Kubernetes Status."""

    def __init__(
        self, code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None
    ):
        super().__init__(message)
        self.code, self.reason, self.message, self.causes = code, reason, message, causes or []
        self.name: str | None = None
        self.rt: ResourceType | None = None

    def about(self, rt: ResourceType, name: str | None) -> StoreError:
        """Attach the object the error is about (for `Status.details`); returns self."""
        self.rt, self.name = rt, name
        return self


def not_found(rt: ResourceType, name: str) -> StoreError:
    return StoreError(404, "NotFound", f'{rt.qualified} "{name}" not found').about(rt, name)


def conflict(rt: ResourceType, name: str) -> StoreError:
    return StoreError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
    ).about(rt, name)


def invalid(rt: ResourceType, name: str, causes: list[dict[str, str]]) -> StoreError:
    """422 Invalid; each cause is `{"reason", "message", "field"}`."""
    detail = ", ".join(f"{c['field']}: {c['message']}" for c in causes) or "invalid"
    if len(causes) > 1:
        detail = "[" + detail + "]"
    return StoreError(
        422, "Invalid", f'{rt.qualified_kind} "{name}" is invalid: {detail}', causes
    ).about(rt, name)


def status_body(
    code: int,
    reason: str,
    message: str,
    *,
    rt: ResourceType | None = None,
    name: str | None = None,
    causes: list[dict[str, str]] | None = None,
) -> Obj:
    """A `Status` object (`metav1.Status`) as the apiserver writes it for a failure."""
    details: Obj = {}
    if name is not None:
        details["name"] = name
    if rt is not None:
        details["group"] = rt.group
        details["kind"] = rt.plural
    if causes:
        details["causes"] = causes
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }
    return body


def error_status(err: StoreError) -> Obj:
    return status_body(
        err.code, err.reason, err.message, rt=err.rt, name=err.name, causes=err.causes
    )
