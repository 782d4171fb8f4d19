"""Kubernetes REST paths → (resource type, namespace, name, subresource), plus the pattern each
path is counted under in `/_sim/stats` (e.g. `/apis/batch/v1/namespaces/{namespace}/jobs/{name}`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesim.resources import BY_KEY, SERVED, subresources

if TYPE_CHECKING:
    from kubesim.model import ResourceType


@dataclass(frozen=True)
class Route:
    rt: ResourceType
    namespace: str | None  # None: cluster-scoped, or all namespaces
    name: str | None  # None: the collection
    subresource: str | None
    pattern: str


_VERSIONS = {(rt.group, rt.version) for rt in SERVED}


def parse(path: str) -> Route | None:
    """Resolve a resource path; None when nothing is served there."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest, prefix = "", "v1", parts[2:], "/api/v1"
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
        prefix = f"/apis/{group}/{version}"
    else:
        return None
    if (group, version) not in _VERSIONS or not rest:
        return None
    namespace: str | None = None
    pattern = prefix
    # `namespaces/<ns>/<plural>/…` is a namespaced resource; `namespaces/<name>[/status]` is
    # the Namespace object itself.
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] != "status":
        namespace, rest = rest[1], rest[2:]
        pattern += "/namespaces/{namespace}"
    rt = BY_KEY.get((group, rest[0]))
    if rt is None or rt.version != version or (namespace is not None and not rt.namespaced):
        return None
    pattern += f"/{rt.plural}"
    name = rest[1] if len(rest) >= 2 else None
    sub = rest[2] if len(rest) >= 3 else None
    if len(rest) > 3 or (sub is not None and sub not in subresources(rt)):
        return None
    if name is not None:
        pattern += "/{name}"
    if sub is not None:
        pattern += f"/{sub}"
    return Route(rt, namespace, name, sub, pattern)


def pattern_of(path: str) -> str:
    """The stats pattern of any path (resource paths generalised, others verbatim)."""
    route = parse(path)
    return route.pattern if route is not None else path
