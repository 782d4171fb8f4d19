"""Manifests of the namespaced tenancy and Kueue queueing objects (docs/DESIGN.md §6).

Pure functions from stored intent to server-side-apply bodies: each result carries
`apiVersion`, `kind` and `metadata.name` (and `metadata.namespace` when namespaced), declares
only the fields aicp owns, and is equal for equal inputs (keys of label and selector maps are
sorted). The quota objects never carry status: Kueue owns it.

Quantities are written as the user gave them (already validated as Kubernetes quantities),
accelerator counts as integers, so what a user reads back in the ClusterQueue matches what
they asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from app.domain.labels import (
    ACCELERATOR_CLASS_LABEL,
    KUEUE_API_VERSION,
    NAME_PREFIX,
    PROJECT_LABEL,
    UID_LABEL,
    managed_labels,
)
from app.domain.naming import namespace_for

if TYPE_CHECKING:
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import PoolIdentity
    from app.domain.specs import BindingPut, Quota, Toleration

#: The three priorities a workload may ask for, as Kueue WorkloadPriorityClass values.
PRIORITY_VALUES: Final = {"low": 100, "normal": 1000, "high": 10000}


def priority_class_name(priority: str) -> str:
    """The WorkloadPriorityClass of an API priority (`normal` → `aicp-normal`)."""
    return f"{NAME_PREFIX}{priority}"


def namespace_owner_labels(project: str, project_uid: str) -> dict[str, str]:
    """The labels that make a namespace this project's own (`app.domain.ownership`)."""
    return {PROJECT_LABEL: project, UID_LABEL: project_uid}


def render_namespace(project: str, project_uid: str) -> Manifest:
    """The project's namespace `aicp-<project>`, labelled so ClusterQueues can select it and
    with the project's id, so aicp knows it for its own."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace_for(project),
            "labels": managed_labels(namespace_owner_labels(project, project_uid)),
        },
    }


def _toleration(toleration: Toleration) -> dict[str, str]:
    fields = {
        "key": toleration.key,
        "operator": toleration.operator,
        "value": toleration.value,
        "effect": toleration.effect,
    }
    return {name: value for name, value in fields.items() if value is not None}


def render_resource_flavor(binding: BindingPut) -> Manifest:
    """The binding's ResourceFlavor: its node labels and the tolerations Kueue adds to pods.

    Flavors are cluster-scoped and may be shared by the pools of many projects (and by more
    than one binding, of the same node labels and tolerations: a binding write refuses any
    other), so the manifest names no project, pool or accelerator class: a label naming one
    would flap between the sharers. Reference tracking happens in the database.
    """
    spec: Manifest = {}
    if binding.node_labels:
        spec["nodeLabels"] = dict(sorted(binding.node_labels.items()))
    if binding.tolerations:
        spec["tolerations"] = [_toleration(t) for t in binding.tolerations]
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {
            "name": binding.flavor,
            "labels": managed_labels({}),
        },
        "spec": spec,
    }


def render_cluster_queue(pool: PoolIdentity, quota: Quota, binding: BindingPut) -> Manifest:
    """The pool's ClusterQueue: one resource group, one flavor, nominal quotas from the pool.

    It admits workloads only from the project's namespace (selected by its
    `aicp.dev/project` label). There is no cohort: pools neither lend nor borrow. Should
    one ever be needed, the v1beta2 field is `cohortName` (not `cohort`). Within the pool a
    workload's priority both orders the queue and preempts (`withinClusterQueue:
    LowerPriority`): a `high` workload that does not fit stops as many `low`/`normal` ones as
    it needs, which Kueue requeues; equal priorities never preempt each other.
    """
    resources: list[dict[str, str | int]] = [
        {"name": "cpu", "nominalQuota": quota.cpu},
        {"name": "memory", "nominalQuota": quota.memory},
        {"name": binding.resource_name, "nominalQuota": quota.accelerators},
    ]
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {
            "name": pool.cluster_queue,
            "labels": managed_labels(
                {
                    **pool.owner_labels,
                    ACCELERATOR_CLASS_LABEL: pool.accelerator_class,
                }
            ),
        },
        "spec": {
            "namespaceSelector": {"matchLabels": {PROJECT_LABEL: pool.project}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", binding.resource_name],
                    "flavors": [{"name": binding.flavor, "resources": resources}],
                }
            ],
        },
    }


def render_local_queue(pool: PoolIdentity) -> Manifest:
    """The LocalQueue `<pool>` in the project's namespace, pointing at the pool's ClusterQueue."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {
            "name": pool.local_queue,
            "namespace": pool.namespace,
            "labels": managed_labels(pool.owner_labels),
        },
        "spec": {"clusterQueue": pool.cluster_queue},
    }


def render_priority_classes() -> list[Manifest]:
    """The WorkloadPriorityClasses `aicp-low` (100), `aicp-normal` (1000), `aicp-high` (10000).

    Jobs name one through the `kueue.x-k8s.io/priority-class` label; they are cluster-scoped
    and shared by every project, so they are applied once at startup.
    """
    return [
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {
                "name": priority_class_name(priority),
                "labels": managed_labels({}),
            },
            "value": value,
            "description": f"aicp workloads submitted with priority {priority!r}",
        }
        for priority, value in PRIORITY_VALUES.items()
    ]
