"""The real cluster's GPU nodes: the same labels and capacity as kubesim's fake GPU operator
gives its nodes (one table of profiles, `kubesim.controllers.gpu_operator.PROFILES`), plus the
annotation by which KWOK manages them. KWOK fills in conditions, addresses and heartbeats."""

from __future__ import annotations

from typing import Any

from kubesim.controllers.gpu_operator import PROFILES, node_manifest

KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


def gpu_node(index: int, profile: str, gpus: int) -> dict[str, Any]:
    """Node `gpu-node-<index>` with `gpus` x `nvidia.com/gpu` of `profile` (h100, a100, l40s)."""
    try:
        gpu = PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown GPU profile {profile!r}; known: {sorted(PROFILES)}") from None
    node = node_manifest(index, gpu, gpus)
    node["metadata"]["annotations"] = dict([KWOK_ANNOTATION])
    resources = {"cpu": gpu.cpu, "memory": gpu.memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
    # A Node keeps the status it is created with: KWOK's node-initialize stage copies these.
    node["status"] = {"capacity": resources, "allocatable": dict(resources)}
    return node
