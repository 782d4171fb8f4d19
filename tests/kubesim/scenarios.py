"""Scenarios for the controller tests: a Kueue setup for the H100 nodes, queued GPU Jobs whose
run is steered by the kubesim env knobs, and typed-client probes to wait on.

Everything goes through kubernetes_asyncio, as aicp talks to a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client

from tests.support.waiting import wait_until

KUEUE = "kueue.x-k8s.io"
V1BETA2 = "v1beta2"
H100 = "NVIDIA-H100-80GB-HBM3"
NS = "default"
Obj = dict[str, Any]


def gpu_job(
    name: str,
    *,
    gpus: int = 8,
    queue: str | None = "team-a",
    run_seconds: float = 1,
    env: dict[str, str] | None = None,
    image: str = "ghcr.io/acme/train:1.0",
    parallelism: int | None = None,
    completions: int | None = None,
    priority_class: str | None = None,
    **spec: Any,
) -> Obj:
    """A batch/v1 Job of one container asking for `gpus` GPUs (as a limit, the usual way)."""
    variables = {"KUBESIM_RUN_SECONDS": str(run_seconds), **(env or {})}
    labels = {}
    if queue is not None:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if priority_class is not None:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    container: Obj = {
        "name": "trainer",
        "image": image,
        "env": [{"name": k, "value": v} for k, v in variables.items()],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {},
    }
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            **spec,
        },
    }
    if parallelism is not None:
        body["spec"]["parallelism"] = parallelism
    if completions is not None:
        body["spec"]["completions"] = completions
    return body


@dataclass
class Kube:
    """The typed APIs of one kubernetes_asyncio client."""

    api: client.ApiClient

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    # -- Kueue setup ---------------------------------------------------------------------
    async def kueue_setup(
        self,
        *,
        gpus: int = 16,
        cluster_queue: str = "gpu-cq",
        local_queue: str = "team-a",
        flavor: str = "h100",
        namespace_selector: Obj | None = None,
        **cq_spec: Any,
    ) -> None:
        await self.custom.create_cluster_custom_object(
            KUEUE,
            V1BETA2,
            "resourceflavors",
            {
                "apiVersion": f"{KUEUE}/{V1BETA2}",
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor},
                "spec": {
                    "nodeLabels": {"nvidia.com/gpu.product": H100},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                },
            },
        )
        await self.create_cluster_queue(
            cluster_queue, gpus, flavor=flavor, namespace_selector=namespace_selector, **cq_spec
        )
        await self.create_local_queue(local_queue, cluster_queue)

    async def create_cluster_queue(
        self,
        name: str,
        gpus: int,
        *,
        flavor: str = "h100",
        namespace_selector: Obj | None = None,
        **spec: Any,
    ) -> None:
        await self.custom.create_cluster_custom_object(
            KUEUE,
            V1BETA2,
            "clusterqueues",
            {
                "apiVersion": f"{KUEUE}/{V1BETA2}",
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {} if namespace_selector is None else namespace_selector,
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": 256},
                                        {"name": "memory", "nominalQuota": "2Ti"},
                                        {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                                    ],
                                }
                            ],
                        }
                    ],
                    **spec,
                },
            },
        )

    async def create_local_queue(self, name: str, cluster_queue: str) -> None:
        await self.custom.create_namespaced_custom_object(
            KUEUE,
            V1BETA2,
            NS,
            "localqueues",
            {
                "apiVersion": f"{KUEUE}/{V1BETA2}",
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"clusterQueue": cluster_queue},
            },
        )

    async def create_priority_class(self, name: str, value: int) -> None:
        await self.custom.create_cluster_custom_object(
            KUEUE,
            V1BETA2,
            "workloadpriorityclasses",
            {
                "apiVersion": f"{KUEUE}/{V1BETA2}",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )

    # -- reads ---------------------------------------------------------------------------
    async def job(self, name: str) -> Any:
        return await self.batch.read_namespaced_job(name, NS)

    async def pods_of(self, job: str) -> list[Any]:
        pods = await self.core.list_namespaced_pod(
            NS, label_selector=f"batch.kubernetes.io/job-name={job}"
        )
        return list(pods.items)

    async def workloads(self) -> list[Obj]:
        listed = await self.custom.list_namespaced_custom_object(KUEUE, V1BETA2, NS, "workloads")
        return list(listed["items"])

    async def workload_of(self, job: str) -> Obj | None:
        job_obj = await self.job(job)
        for wl in await self.workloads():
            if (
                wl["metadata"].get("labels", {}).get("kueue.x-k8s.io/job-uid")
                == job_obj.metadata.uid
            ):
                return wl
        return None

    async def cluster_queue(self, name: str = "gpu-cq") -> Obj:
        return dict(
            await self.custom.get_cluster_custom_object(KUEUE, V1BETA2, "clusterqueues", name)
        )

    # -- waits ---------------------------------------------------------------------------
    async def wait_condition(self, job: str, type_: str, timeout: float = 10) -> Any:
        async def probe() -> Any:
            found = await self.job(job)
            for c in (found.status.conditions or []) if found.status else []:
                if c.type == type_ and c.status == "True":
                    return c
            return None

        return await wait_until(probe, timeout=timeout, message=f"Job {job} {type_}")

    async def wait_workload_condition(
        self, job: str, type_: str, status: str = "True", timeout: float = 10
    ) -> Obj:
        async def probe() -> Obj | None:
            wl = await self.workload_of(job)
            if wl is None:
                return None
            for c in (wl.get("status") or {}).get("conditions") or []:
                if c["type"] == type_ and c["status"] == status:
                    return wl
            return None

        return await wait_until(
            probe, timeout=timeout, message=f"Workload of {job} {type_}={status}"
        )

    async def wait_pod_phase(self, job: str, phase: str, timeout: float = 10) -> Any:
        async def probe() -> Any:
            pods = await self.pods_of(job)
            return next((p for p in pods if p.status.phase == phase), None)

        return await wait_until(probe, timeout=timeout, message=f"a pod of {job} {phase}")
