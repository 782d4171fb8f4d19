"""Kubernetes objects as the apiserver returns them, for classification tests.

Nodes as the fake GPU operator labels them (docs/KUBERNETES.md §6), pods as the Job
controller, scheduler and kubelet leave them (§5), and metav1 conditions as Kueue and the Job
controller write them (§1). `tests.support.kube_builders` composes these into scenarios.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

Obj = dict[str, Any]

H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"
GPU = "nvidia.com/gpu"
CREATED = "2026-08-01T10:00:00Z"
ADMITTED = "2026-08-01T10:00:01Z"
STARTED = "2026-08-01T10:00:05Z"
FINISHED = "2026-08-01T10:02:05Z"
POD_SUFFIXES = ("x7k2p", "b9m4q", "c2v8w", "d5t6z")


def make_node(
    name: str, *, product: str = H100_PRODUCT, memory_mib: int = 81920, gpus: int = 8
) -> Obj:
    """A node as the fake GPU operator labels it (docs/KUBERNETES.md §6)."""
    capacity = {"cpu": "128", "memory": "2Ti", GPU: str(gpus), "pods": "110"}
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": hashlib.sha1(name.encode()).hexdigest(),
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.memory": str(memory_mib),
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.present": "true",
                "run.ai/fake.gpu": "true",
            },
        },
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def default_nodes() -> list[Obj]:
    return [make_node("gpu-node-1"), make_node("gpu-node-2")]


def cond(kind: str, status: str, reason: str, message: str, at: str = CREATED) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


def set_condition(obj: Obj, cond: Obj) -> None:
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    conditions[:] = [c for c in conditions if c["type"] != cond["type"]] + [cond]


def make_pod(job: Obj, index: int, node: str | None, phase: str, state: Obj) -> Obj:
    """Pod `index` of `job`, bound to `node` (None: not scheduled), its `main` in `state`."""
    name = job["metadata"]["name"]
    job_uid = job["metadata"]["uid"]
    template = copy.deepcopy(job["spec"]["template"])
    pod_spec = template["spec"]
    status: Obj = {"phase": phase, "conditions": []}
    if node:
        pod_spec["nodeName"] = node
        status["conditions"].append(cond("PodScheduled", "True", "", "", ADMITTED))
        status["containerStatuses"] = [
            {
                "name": "main",
                "image": pod_spec["containers"][0]["image"],
                "imageID": "",
                "ready": phase == "Running",
                "restartCount": 0,
                "started": phase == "Running",
                "state": state,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{POD_SUFFIXES[index % len(POD_SUFFIXES)]}",
            "namespace": job["metadata"]["namespace"],
            "uid": f"pod-{index}-{job_uid}",
            "labels": {**template["metadata"]["labels"], "job-name": name},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
        },
        "spec": pod_spec,
        "status": status,
    }


def terminated_state(reason: str, exit_code: int) -> Obj:
    """A container state `terminated` with Kueue-contract reason and exit code."""
    return {
        "terminated": {
            "reason": reason,
            "exitCode": exit_code,
            "startedAt": STARTED,
            "finishedAt": FINISHED,
        }
    }
