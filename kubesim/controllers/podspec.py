"""What a pod spec asks of a node: summed requests, node selector, tolerations.

Shared by the scheduler (does it fit a node?) and Kueue (does a pod set fit the quota?).
"""

from __future__ import annotations

from typing import Any

from kubesim.controllers.quantity import parse_milli

Obj = dict[str, Any]


def _container_requests(container: Obj) -> dict[str, int]:
    # The apiserver defaults a missing request to the limit (so a GPU given only as a limit,
    # the usual way, is requested too); do the same here rather than rely on defaulting.
    resources = container.get("resources") or {}
    merged: dict[str, Any] = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    out: dict[str, int] = {}
    for name, value in merged.items():
        try:
            out[name] = parse_milli(value)
        except ValueError:
            continue
    return out


def pod_requests(spec: Obj) -> dict[str, int]:
    """Effective requests of one pod in milli-units: the sum over containers, raised to the
    largest init container's request where that is bigger (the K8s rule)."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, milli in _container_requests(container).items():
            total[name] = total.get(name, 0) + milli
    for container in spec.get("initContainers") or []:
        for name, milli in _container_requests(container).items():
            total[name] = max(total.get(name, 0), milli)
    return {name: milli for name, milli in total.items() if milli > 0}


def selector_matches(node_selector: Obj | None, labels: Obj | None) -> bool:
    labels = labels or {}
    return all(labels.get(key) == value for key, value in (node_selector or {}).items())


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    if not key:  # an empty key needs operator Exists
        return False
    return bool(toleration.get("value", "") == taint.get("value", ""))


def untolerated_taint(tolerations: list[Obj] | None, taints: list[Obj] | None) -> Obj | None:
    """The first NoSchedule/NoExecute taint no toleration matches, or None."""
    for taint in taints or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations or []):
            return taint
    return None


def owned_by_job(meta: Obj, *, block: bool = True) -> list[Obj]:
    """`ownerReferences` naming the Job whose metadata is `meta` as the controller, blocking
    its foreground deletion (unless not to `block`: the field is then left out)."""
    ref: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return [ref]


def controller_uid(obj: Obj, kind: str) -> str | None:
    """uid of the object's controller ownerReference of `kind`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == kind:
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else None
    return None


def controller_name(obj: Obj, kind: str) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == kind:
            name = ref.get("name")
            return name if isinstance(name, str) else None
    return None


def container_env(container: Obj, name: str) -> str | None:
    for var in container.get("env") or []:
        if var.get("name") == name and "value" in var:
            value = var["value"]
            return str(value)
    return None


def qos_class(spec: Obj) -> str:
    """The pod's QoS class as the apiserver computes it from cpu and memory only: Guaranteed
    when every container limits both and requests equal limits, BestEffort when none asks for
    either, else Burstable."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    guaranteed, anything = True, False
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = {**limits, **(resources.get("requests") or {})}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                anything = True
            if name not in limits or requests.get(name) != limits[name]:
                guaranteed = False
    if not anything:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
