"""`kubectl get` columns of the kinds a model server runs as, as the apiserver's printers give
them: Deployments (NAME, READY, UP-TO-DATE, AVAILABLE, AGE; `-o wide` CONTAINERS, IMAGES,
SELECTOR), ReplicaSets (NAME, DESIRED, CURRENT, READY, AGE; the same wide ones),
PodDisruptionBudgets (NAME, MIN AVAILABLE, MAX UNAVAILABLE, ALLOWED DISRUPTIONS, AGE),
NetworkPolicies (NAME, POD-SELECTOR, AGE) and HorizontalPodAutoscalers (NAME, REFERENCE,
TARGETS, MINPODS, MAXPODS, REPLICAS, AGE)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.cells import AGE, NAME, Column, template_containers
from kubesim.selectors import format_label_selector

if TYPE_CHECKING:
    from datetime import datetime

Obj = dict[str, Any]
_SOURCES = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


def _int(*path: str) -> Any:
    def cell(obj: Obj, _now: datetime) -> int:
        value: Any = obj
        for key in path:
            value = (value or {}).get(key)
        return int(value or 0)

    return cell


def _selector(*path: str) -> Any:
    def cell(obj: Obj, _now: datetime) -> str:
        value: Any = obj
        for key in path:
            value = (value or {}).get(key)
        return format_label_selector(value) or "<none>"

    return cell


def _ready(deployment: Obj, _now: datetime) -> str:
    ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    return f"{ready}/{int((deployment.get('spec') or {}).get('replicas') or 0)}"


def _budget(field: str) -> Any:
    def cell(pdb: Obj, _now: datetime) -> str:
        value = (pdb.get("spec") or {}).get(field)
        return "N/A" if value is None else str(value)

    return cell


def _quantity(value: Any) -> str:
    return "<unset>" if value is None else str(value)


def _metric(spec: Obj, status: Obj | None) -> str:
    """One metric as kubectl's `formatHPAMetrics` prints it: `cpu: 40%/80%`, `<unknown>/…`."""
    kind = spec.get("type")
    field = _SOURCES.get(str(kind), "external")
    source = spec.get(field) or {}
    target = source.get("target") or {}
    current = ((status or {}).get(field) or {}).get("current") or {}
    if kind in ("Resource", "ContainerResource") and target.get("averageValue") is None:
        shown = current.get("averageUtilization")
        now = "<unknown>" if shown is None else f"{shown}%"
        goal = target.get("averageUtilization")
        return f"{source.get('name')}: {now}/{'<auto>' if goal is None else f'{goal}%'}"
    value = current.get("averageValue", current.get("value"))
    prefix = f"{source.get('name')}: " if kind in ("Resource", "ContainerResource") else ""
    reading = "<unknown>" if value is None else str(value)
    return f"{prefix}{reading}/{_quantity(target.get('averageValue', target.get('value')))}"


def _targets(hpa: Obj, _now: datetime) -> str:
    metrics = (hpa.get("spec") or {}).get("metrics") or []
    statuses = (hpa.get("status") or {}).get("currentMetrics") or []
    shown = [_metric(m, statuses[i] if i < len(statuses) else None) for i, m in enumerate(metrics)]
    if not shown:
        return "<none>"
    if len(shown) > 2:
        return f"{', '.join(shown[:2])} + {len(shown) - 2} more..."
    return ", ".join(shown)


def _reference(hpa: Obj, _now: datetime) -> str:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _min_pods(hpa: Obj, _now: datetime) -> str:
    return _quantity((hpa.get("spec") or {}).get("minReplicas"))


CONTAINERS: Column = ("Containers", "string", "", "Names of each container in the template.", 1,
                      lambda o, _n: template_containers(o, "name"))  # fmt: skip
IMAGES: Column = ("Images", "string", "", "Images referenced by each container in the template.",
                  1, lambda o, _n: template_containers(o, "image"))  # fmt: skip
SELECTOR: Column = ("Selector", "string", "", "Label selector for pods.", 1,
                    _selector("spec", "selector"))  # fmt: skip

SERVING_COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("apps", "deployments"): [
        NAME,
        ("Ready", "string", "", "Number of the pod with ready state", 0, _ready),
        (
            "Up-to-date",
            "string",
            "",
            "Total number of non-terminating pods targeted by this deployment that have the "
            "desired template spec.",
            0,
            _int("status", "updatedReplicas"),
        ),
        (
            "Available",
            "string",
            "",
            "Total number of available non-terminating pods (ready for at least "
            "minReadySeconds) targeted by this deployment.",
            0,
            _int("status", "availableReplicas"),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    ("apps", "replicasets"): [
        NAME,
        (
            "Desired",
            "integer",
            "",
            "Replicas is the number of desired pods.",
            0,
            _int("spec", "replicas"),
        ),
        (
            "Current",
            "integer",
            "",
            "Replicas is the most recently observed number of non-terminating pods.",
            0,
            _int("status", "replicas"),
        ),
        (
            "Ready",
            "integer",
            "",
            "The number of non-terminating pods targeted by this "
            "ReplicaSet with a Ready Condition.",
            0,
            _int("status", "readyReplicas"),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    ("policy", "poddisruptionbudgets"): [
        NAME,
        (
            "Min Available",
            "string",
            "",
            "The minimum number of pods that must be available.",
            0,
            _budget("minAvailable"),
        ),
        (
            "Max Unavailable",
            "string",
            "",
            "The maximum number of pods that may be unavailable.",
            0,
            _budget("maxUnavailable"),
        ),
        (
            "Allowed Disruptions",
            "integer",
            "",
            "Calculated number of pods that may be disrupted at this time.",
            0,
            _int("status", "disruptionsAllowed"),
        ),
        AGE,
    ],
    ("networking.k8s.io", "networkpolicies"): [
        NAME,
        (
            "Pod-Selector",
            "string",
            "",
            "Selects the pods to which this NetworkPolicy object applies.",
            0,
            _selector("spec", "podSelector"),
        ),
        AGE,
    ],
    ("autoscaling", "horizontalpodautoscalers"): [
        NAME,
        ("Reference", "string", "", "The target resource to scale.", 0, _reference),
        ("Targets", "string", "", "The metrics and their targets.", 0, _targets),
        ("MinPods", "string", "", "The lower limit of replicas.", 0, _min_pods),
        ("MaxPods", "string", "", "The upper limit of replicas.", 0, _int("spec", "maxReplicas")),
        (
            "Replicas",
            "string",
            "",
            "Current number of replicas of pods managed by this autoscaler.",
            0,
            _int("status", "currentReplicas"),
        ),
        AGE,
    ],
}
