"""The informer set aicp runs, against a full kubesim (Kueue, Job controller, kubelet, GPUs)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from app.kube.apply import apply
from app.kube.client import KubeClient
from app.kube.informers import Informers
from app.kube.resources import WORKLOADS
from tests.integration.kube.conftest import job_manifest, list_names
from tests.integration.kube.manifests import (
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    namespace_manifest,
)
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


def queued_job(name: str, namespace: str) -> dict[str, Any]:
    job = job_manifest(name, namespace, suspend=True, run_seconds=30)
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "gpu"
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
    }
    return job


async def set_up_queues(kube: KubeClient, namespace: str) -> None:
    await apply(kube, namespace_manifest(namespace))
    await apply(kube, flavor_manifest("h100"))
    queue = cluster_queue_manifest(f"{namespace}-gpu", "h100")
    queue["spec"]["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    await apply(kube, queue)
    await apply(kube, local_queue_manifest("gpu", namespace, f"{namespace}-gpu"))


@contextlib.asynccontextmanager
async def synced_informers(kube: KubeClient) -> AsyncIterator[Informers]:
    """aicp's informers, started and past their first lists; stopped after."""
    informers = Informers(kube, backoff_cap=0.5)
    informers.start()
    try:
        await asyncio.wait_for(informers.wait_synced(), 10)
        yield informers
    finally:
        await informers.stop()


async def test_the_informers_follow_a_job_through_kueue_to_its_pod_and_node(
    kube_with_controllers: KubeClient,
) -> None:
    kube = kube_with_controllers
    informers = Informers(kube, backoff_cap=0.5)
    kinds_seen: set[str] = set()
    informers.on_change(lambda _t, obj: kinds_seen.add(obj["kind"]))
    informers.start()
    try:
        await asyncio.wait_for(informers.wait_synced(), 10)
        assert informers.not_synced() == []
        assert {n["metadata"]["name"] for n in informers.nodes.list()} >= {"gpu-node-0"}

        await set_up_queues(kube, "aicp-team")
        job = await apply(kube, queued_job("train", "aicp-team"))
        uid = job["metadata"]["uid"]

        workloads = await wait_until(
            lambda: informers.workloads.by_label("kueue.x-k8s.io/job-uid", uid),
            timeout=10,
            message="the job's Kueue Workload",
        )
        assert workloads[0]["metadata"]["namespace"] == "aicp-team"
        pods = await wait_until(
            lambda: informers.pods.by_label("batch.kubernetes.io/job-name", "train"),
            timeout=10,
            message="the job's pod",
        )
        assert pods[0]["metadata"]["labels"]["aicp.dev/uid"] == "uid-train"
        assert informers.pods.by_label("batch.kubernetes.io/controller-uid", uid) == pods
        assert informers.jobs.by_label("aicp.dev/uid", "uid-train")[0]["metadata"]["uid"] == uid
        await wait_until(lambda: informers.cluster_queues.get(None, "aicp-team-gpu"), timeout=10)
        assert kinds_seen >= {"Node", "Job", "Workload", "Pod", "ClusterQueue"}
    finally:
        await informers.stop()


async def test_a_queues_waiting_jobs_are_its_suspended_ones_until_kueue_admits_them(
    kube_with_controllers: KubeClient,
) -> None:
    kube = kube_with_controllers
    async with synced_informers(kube) as informers:
        await set_up_queues(kube, "aicp-wait")
        await apply(kube, queued_job("fits", "aicp-wait"))
        too_big = queued_job("too-big", "aicp-wait")  # 9 GPUs against a quota of 8
        resources = too_big["spec"]["template"]["spec"]["containers"][0]["resources"]
        resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = "9"
        await apply(kube, too_big)

        await wait_until(
            lambda: informers.pods.by_label("batch.kubernetes.io/job-name", "fits"),
            timeout=10,
            message="the admitted job's pod",
        )
        await wait_until(
            lambda: (
                [j["metadata"]["name"] for j in informers.queued_jobs("aicp-wait", "gpu")]
                == ["too-big"]
            ),
            timeout=10,
            message="only the job that cannot be admitted waiting in the queue",
        )
        assert informers.queued_jobs("aicp-wait", "other-queue") == []
        assert informers.queued_jobs("aicp-team", "gpu") == []


async def test_kueue_workloads_outside_project_namespaces_are_not_cached(
    kube_with_controllers: KubeClient,
) -> None:
    kube = kube_with_controllers
    async with synced_informers(kube) as informers:
        await set_up_queues(kube, "team-other")
        await set_up_queues(kube, "aicp-mine")
        await apply(kube, queued_job("theirs", "team-other"))
        await wait_until(
            lambda: list_names(kube, WORKLOADS, "team-other"), timeout=10, message="their Workload"
        )
        # Created after theirs: once the informer has this one, it has been shown theirs too.
        await apply(kube, queued_job("mine", "aicp-mine"))
        await wait_until(
            lambda: informers.workloads.list(), timeout=10, message="the project's Workload"
        )
        namespaces = {w["metadata"]["namespace"] for w in informers.workloads.list()}
        assert namespaces == {"aicp-mine"}


async def test_the_node_view_is_unknown_until_synced_then_follows_the_nodes(
    kube_with_controllers: KubeClient,
) -> None:
    kube = kube_with_controllers
    informers = Informers(kube, backoff_cap=0.5)
    assert informers.node_capacities() is None  # nothing listed yet: the submit refuses nothing
    informers.start()
    try:
        await asyncio.wait_for(informers.wait_synced(), 10)
        nodes = {n.name: n for n in informers.node_capacities() or []}
        assert nodes["gpu-node-0"].allocatable["nvidia.com/gpu"] == 8
        assert nodes["gpu-node-0"].labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"

        resources = {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"}
        await apply(
            kube,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "small-node", "labels": {"example.com/pool": "small"}},
            },
        )
        # As a kubelet and device plugin do: the node's resources arrive as a status patch.
        await kube.core.patch_node_status(
            "small-node",
            {"status": {"capacity": resources, "allocatable": resources}},
            _content_type="application/merge-patch+json",
            _preload_content=False,
        )

        def small() -> Any:
            found = [n for n in informers.node_capacities() or [] if n.name == "small-node"]
            return found[0] if found and "cpu" in found[0].allocatable else None

        seen = await wait_until(small, timeout=10, message="the new node's resources in the view")
        assert seen.allocatable["cpu"] == 4 and seen.allocatable["nvidia.com/gpu"] == 2
        assert seen.labels == {"example.com/pool": "small"}
    finally:
        await informers.stop()
