"""From HTTP requests to the RBAC attributes the apiserver authorizes them as.

The reconciler's calls are counted by kubesim (`GET /_sim/stats`: method, path pattern, content
type, field manager). RBAC speaks another language: (API group, resource[/subresource], verb).
`rbac_attributes` translates one request the way the apiserver's RequestInfo resolver does,
`attributes_from_sim_stats` a whole stats document, and `write_observed` stores a run's
attributes as `observed_kube_calls.json`, which `test_rbac_matches_reconciler.py` compares
with the chart's ClusterRole.

File format (sorted, one object per attribute):
    {"source": "<what produced it>",
     "calls": [{"group": "batch", "resource": "jobs", "verb": "patch"}, ...]}
"""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

#: The recorded attributes of the golden path (see the module docstring for the format).
OBSERVED = Path(__file__).with_name("observed_kube_calls.json")

APPLY_PATCH = "application/apply-patch+yaml"
# `/api/v1/namespaces/<name>/status` and `/finalize` are subresources of the Namespace itself,
# not a resource named "status" inside that namespace (apiserver RequestInfoFactory).
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


class Attribute(NamedTuple):
    """One RBAC (apiGroup, resource, verb); subresources as `pods/log`, core group as ""."""

    group: str
    resource: str
    verb: str


def rbac_attributes(
    method: str, path: str, *, watch: bool = False, content_type: str | None = None
) -> set[Attribute]:
    """The attributes one request is authorized as; empty for non-resource paths.

    `path` may be concrete (`/apis/batch/v1/namespaces/aicp-r/jobs/train-1`) or a pattern
    (`.../namespaces/{namespace}/jobs/{name}`). A server-side apply (PATCH with `content_type`
    application/apply-patch+yaml) yields `patch` and `create`: the apiserver checks `create`
    too when the apply creates the object, and which case happened is not in the request.
    """
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return set()
    if rest and rest[0] == "watch":  # the deprecated /watch/ path prefix
        watch, rest = True, rest[1:]
    if len(rest) > 2 and rest[0] == "namespaces" and rest[2] not in NAMESPACE_SUBRESOURCES:
        rest = rest[2:]
    if not rest:
        return set()
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    named = len(rest) > 1
    verb = _verb(method.upper(), named=named, watch=watch)
    attributes = {Attribute(group, resource, verb)}
    if verb == "patch" and content_type is not None and content_type.startswith(APPLY_PATCH):
        attributes.add(Attribute(group, resource, "create"))
    return attributes


def _verb(method: str, *, named: bool, watch: bool) -> str:
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if named else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    if method not in verbs:
        raise ValueError(f"no RBAC verb for HTTP {method}")
    return verbs[method]


_METHOD_OF_VERB = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
}


def attributes_from_sim_stats(stats: Mapping[str, Any]) -> set[Attribute]:
    """The attributes behind kubesim's `GET /_sim/stats` counters (`by_verb_path`).

    kubesim counts content types for all requests together, not per path: when any request
    was a server-side apply, every `patch` is taken as one (so its kind also needs `create`).
    aicp's only other patch is the JSON patch removing its finalizer from Jobs, which it also
    applies, so this adds nothing it does not need. Reset the counters before aicp starts and
    keep the test's own Kubernetes reads out of the window, or they are counted as aicp's.
    """
    applied = APPLY_PATCH in (stats.get("by_content_type") or {})
    attributes: set[Attribute] = set()
    for key in stats.get("by_verb_path") or {}:
        verb, _, pattern = key.partition(" ")
        if verb not in _METHOD_OF_VERB:
            continue
        attributes |= rbac_attributes(
            _METHOD_OF_VERB[verb],
            pattern,
            watch=verb == "watch",
            content_type=APPLY_PATCH if verb == "patch" and applied else None,
        )
    return attributes


def granted_by(cluster_role: Mapping[str, Any]) -> set[Attribute]:
    """Every attribute a ClusterRole allows, its rules expanded (no wildcards are expected:
    a `*` stays a literal entry, which the least-privilege tests reject)."""
    return {
        Attribute(group, resource, verb)
        for rule in cluster_role["rules"]
        for group, resource, verb in product(rule["apiGroups"], rule["resources"], rule["verbs"])
    }


def write_observed(path: Path, attributes: Iterable[Attribute], *, source: str) -> None:
    """Store attributes as `observed_kube_calls.json` (sorted, so reruns diff cleanly)."""
    calls = [a._asdict() for a in sorted(set(attributes))]
    path.write_text(json.dumps({"source": source, "calls": calls}, indent=1) + "\n")


def read_observed(path: Path) -> set[Attribute]:
    """The attributes stored by `write_observed`."""
    document = json.loads(path.read_text())
    return {Attribute(c["group"], c["resource"], c["verb"]) for c in document["calls"]}
