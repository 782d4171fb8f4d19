"""Manifests of the kinds aicp writes, shaped as its renderers shape them, for adapter tests."""

from __future__ import annotations

from typing import Any


def namespace_manifest(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "aicp", **(labels or {})},
        },
    }


def flavor_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "aicp"}},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    }


def local_queue_manifest(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def priority_class_manifest(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def cluster_queue_manifest(name: str, flavor: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "aicp"}},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "aicp-ssa"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "64"},
                                {"name": "memory", "nominalQuota": "256Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "8"},
                            ],
                        }
                    ],
                }
            ],
        },
    }
