"""The fake GPU operator: registers GPU nodes as run-ai/fake-gpu-operator and a kubelet would.

Each node `gpu-node-<i>` carries the labels fake-gpu-operator's status exporter writes (see
docs/KUBERNETES.md §6) and, like its device plugin, a `/status` merge-patch that advertises
`nvidia.com/gpu` in capacity and allocatable next to cpu and memory. Nodes are created once at
start; there are no heartbeats (a real kubelet renews its Ready condition every ~10 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store

Obj = dict[str, Any]
MANAGER = "fake-gpu-operator"


@dataclass(frozen=True)
class GpuProfile:
    product: str  # the sanitised `nvidia.com/gpu.product` label
    memory_mib: int
    cpu: str  # allocatable cpu of the node
    memory: str  # allocatable memory of the node
    instance_type: str


PROFILES: dict[str, GpuProfile] = {
    "h100": GpuProfile("NVIDIA-H100-80GB-HBM3", 81920, "192", "1800Gi", "p5.48xlarge"),
    "a100": GpuProfile("NVIDIA-A100-SXM4-80GB", 81920, "96", "1100Gi", "p4de.24xlarge"),
    "l40s": GpuProfile("NVIDIA-L40S", 46068, "192", "1500Gi", "g6e.48xlarge"),
}


def node_manifest(index: int, profile: GpuProfile, gpus: int) -> Obj:
    name = f"gpu-node-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": profile.instance_type,
                "nvidia.com/gpu.product": profile.product,
                "nvidia.com/gpu.memory": str(profile.memory_mib),
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.present": "true",
                "nvidia.com/mig.strategy": "none",
                "run.ai/fake.gpu": "true",
                "run.ai/simulated-gpu-node-pool": "default",
            },
        },
        "spec": {},
    }


def node_status(index: int, profile: GpuProfile, gpus: int, now: str) -> Obj:
    resources = {"cpu": profile.cpu, "memory": profile.memory, "pods": "110"}
    resources["nvidia.com/gpu"] = str(gpus)

    def condition(type_: str, status: str, reason: str, message: str) -> Obj:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return {
        "capacity": resources,
        "allocatable": dict(resources),
        "conditions": [
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            condition(
                "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": f"10.0.0.{10 + index}"},
            {"type": "Hostname", "address": f"gpu-node-{index}"},
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "bootID": f"00000000-0000-0000-0000-{index:012d}",
            "containerRuntimeVersion": "containerd://1.7.27",
            "kernelVersion": "6.8.0-1024-aws",
            "kubeProxyVersion": "",
            "kubeletVersion": "v1.34.1",
            "machineID": f"{index:032x}",
            "operatingSystem": "linux",
            "osImage": "Ubuntu 24.04.2 LTS",
            "systemUUID": f"00000000-0000-0000-0000-{index:012d}",
        },
    }


def register_nodes(
    store: Store, clock: Clock, *, nodes: int, gpus_per_node: int, profile: str
) -> None:
    """Create (or leave alone, when they already exist) the GPU nodes and patch their status."""
    try:
        gpu = PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown GPU profile {profile!r}; known: {sorted(PROFILES)}") from None
    rt = store.resource("", "nodes")
    for index in range(nodes):
        manifest = node_manifest(index, gpu, gpus_per_node)
        name = manifest["metadata"]["name"]
        try:
            store.create(rt, manifest, manager=MANAGER)
        except StoreError as exc:
            if exc.code != 409:
                raise
            continue
        store.patch(
            rt,
            None,
            name,
            {"status": node_status(index, gpu, gpus_per_node, clock.now_rfc3339())},
            content_type="application/merge-patch+json",
            manager=MANAGER,
            subresource="status",
        )
