"""The resource types kubesim serves (what the apiserver's registry and CRDs declare)."""

from __future__ import annotations

from kubesim.model import ResourceType

KUEUE = "kueue.x-k8s.io"

SERVED: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", namespaced=False),
    ResourceType("", "v1", "nodes", "Node", namespaced=False),
    ResourceType("", "v1", "pods", "Pod", namespaced=True),
    ResourceType("", "v1", "events", "Event", namespaced=True, has_status=False),
    ResourceType("", "v1", "services", "Service", namespaced=True),
    ResourceType("batch", "v1", "jobs", "Job", namespaced=True),
    ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", namespaced=True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True),
    ResourceType(
        "networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, has_status=False
    ),
    ResourceType("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True),
    ResourceType(KUEUE, "v1beta2", "resourceflavors", "ResourceFlavor", False, has_status=False),
    ResourceType(KUEUE, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False),
    ResourceType(KUEUE, "v1beta2", "localqueues", "LocalQueue", namespaced=True),
    ResourceType(KUEUE, "v1beta2", "workloads", "Workload", namespaced=True),
    ResourceType(
        KUEUE,
        "v1beta2",
        "workloadpriorityclasses",
        "WorkloadPriorityClass",
        False,
        has_status=False,
    ),
)

BY_KEY: dict[tuple[str, str], ResourceType] = {rt.key: rt for rt in SERVED}

SHORT_NAMES: dict[str, list[str]] = {
    "namespaces": ["ns"],
    "nodes": ["no"],
    "pods": ["po"],
    "events": ["ev"],
    "services": ["svc"],
    "deployments": ["deploy"],
    "replicasets": ["rs"],
    "poddisruptionbudgets": ["pdb"],
    "networkpolicies": ["netpol"],
    "horizontalpodautoscalers": ["hpa"],
    "clusterqueues": ["cq"],
    "localqueues": ["queue", "queues", "lq"],
    "workloads": ["wl"],
    "resourceflavors": ["flavor", "flavors", "rf"],
    "workloadpriorityclasses": ["wpc"],
}

# Sub-resources each type serves beyond the object itself.
SUBRESOURCES: dict[str, tuple[str, ...]] = {
    "pods": ("status", "log"),
    "deployments": ("status", "scale"),
    "replicasets": ("status", "scale"),
}

# `kubectl get all` lists the resources in category "all".
CATEGORIES: dict[str, list[str]] = {
    plural: ["all"]
    for plural in (
        "pods",
        "services",
        "jobs",
        "deployments",
        "replicasets",
        "horizontalpodautoscalers",
    )
}


def subresources(rt: ResourceType) -> tuple[str, ...]:
    return SUBRESOURCES.get(rt.plural, ("status",) if rt.has_status else ())


def group_versions() -> dict[str, list[ResourceType]]:
    """`group/version` (or `v1`) → its resources, for discovery."""
    out: dict[str, list[ResourceType]] = {}
    for rt in SERVED:
        out.setdefault(rt.api_version, []).append(rt)
    return out
