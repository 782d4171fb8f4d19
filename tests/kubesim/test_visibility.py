"""Kueue's visibility API on kubesim: the pending Workloads of a ClusterQueue and of a
LocalQueue in the order kubesim's Kueue admits them, paged by `limit` and `offset` as Kueue
pages them, listed in discovery so that `kubectl get --raw` finds it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesim import Cluster
from realcluster import build as building
from tests.kubesim.builders import raw
from tests.kubesim.scenarios import NS, Kube, gpu_job

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # nothing finishes: the queue stays as the test built it


async def _summary(cluster: Cluster, path: str) -> dict[str, Any]:
    status, body, _ = await raw("GET", f"{cluster.url}{VISIBILITY}{path}")
    assert status == 200, body
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    return dict(body)


def _rows(summary: dict[str, Any]) -> list[tuple[str, int, int, int, str]]:
    """(job, priority, position in the ClusterQueue, in the LocalQueue, LocalQueue)."""
    return [
        (
            item["metadata"]["ownerReferences"][0]["name"],
            item["priority"],
            item["positionInClusterQueue"],
            item["positionInLocalQueue"],
            item["localQueueName"],
        )
        for item in summary["items"]
    ]


async def _queue(kube: Kube) -> None:
    """One running Job holds the 8 GPUs; four wait, created in this order: low, normal and
    high in team-a, then normal in team-b (the same ClusterQueue)."""
    await kube.kueue_setup(gpus=8)
    await kube.create_local_queue("team-b", "gpu-cq")
    for name, value in (("high", 10000), ("normal", 1000), ("low", 100)):
        await kube.create_priority_class(name, value)
    await kube.batch.create_namespaced_job(NS, gpu_job("running", run_seconds=600))
    await kube.wait_workload_condition("running", "Admitted")
    for name, priority, queue in (
        ("low", "low", "team-a"),
        ("normal", "normal", "team-a"),
        ("urgent", "high", "team-a"),
        ("other-team", "normal", "team-b"),
    ):
        await kube.batch.create_namespaced_job(
            NS, gpu_job(name, priority_class=priority, queue=queue)
        )
        await kube.wait_workload_condition(name, "QuotaReserved", "False")


#: Priority first, then creation; positions count from 0, in the LocalQueue among its own.
ORDER = [
    ("urgent", 10000, 0, 0, "team-a"),
    ("normal", 1000, 1, 1, "team-a"),
    ("other-team", 1000, 2, 0, "team-b"),
    ("low", 100, 3, 2, "team-a"),
]


async def test_pending_workloads_of_a_cluster_queue_come_in_admission_order(
    kube: Kube, kube_cluster_with_controllers: Cluster
) -> None:
    await _queue(kube)
    cluster = kube_cluster_with_controllers
    summary = await _summary(cluster, "/clusterqueues/gpu-cq/pendingworkloads")

    assert _rows(summary) == ORDER
    first = summary["items"][0]["metadata"]
    workload = await kube.workload_of("urgent")
    assert workload is not None
    assert first["name"] == workload["metadata"]["name"] and first["namespace"] == NS
    assert first["creationTimestamp"] == workload["metadata"]["creationTimestamp"]
    assert first["ownerReferences"][0]["kind"] == "Job"

    # limit and offset page the queue; positions stay the queue's.
    paged = await _summary(cluster, "/clusterqueues/gpu-cq/pendingworkloads?limit=2&offset=1")
    assert _rows(paged) == ORDER[1:3]
    local = await _summary(cluster, f"/namespaces/{NS}/localqueues/team-a/pendingworkloads")
    assert _rows(local) == [row for row in ORDER if row[4] == "team-a"]
    tail = f"/namespaces/{NS}/localqueues/team-a/pendingworkloads?offset=1&limit=1"
    assert _rows(await _summary(cluster, tail)) == [ORDER[1]]

    # Once the running Job is gone, the head is admitted and leaves the list.
    await kube.batch.delete_namespaced_job("running", NS, propagation_policy="Background")
    await kube.wait_workload_condition("urgent", "Admitted")
    after = await _summary(cluster, "/clusterqueues/gpu-cq/pendingworkloads")
    assert [row[0] for row in _rows(after)] == ["normal", "other-team", "low"]
    assert [row[2] for row in _rows(after)] == [0, 1, 2]


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("/clusterqueues/nowhere/pendingworkloads", 404, "NotFound"),
        (f"/namespaces/{NS}/localqueues/nowhere/pendingworkloads", 404, "NotFound"),
        ("/clusterqueues/gpu-cq/pendingworkloads?limit=ten", 400, "BadRequest"),
        ("/clusterqueues/gpu-cq/pendingworkloads?offset=1.5", 400, "BadRequest"),
        ("/clusterqueues/gpu-cq", 404, "NotFound"),
    ],
)
async def test_what_kueue_refuses_is_a_status(
    kube: Kube, kube_cluster_with_controllers: Cluster, path: str, status: int, reason: str
) -> None:
    await kube.kueue_setup(gpus=8)
    answered, body, _ = await raw("GET", f"{kube_cluster_with_controllers.url}{VISIBILITY}{path}")
    assert (answered, body["kind"], body["reason"]) == (status, "Status", reason)


async def test_a_negative_limit_lists_nothing_and_no_limit_lists_everything(
    kube: Kube, kube_cluster_with_controllers: Cluster
) -> None:
    await _queue(kube)
    path = "/clusterqueues/gpu-cq/pendingworkloads"
    cluster = kube_cluster_with_controllers
    assert (await _summary(cluster, f"{path}?limit=-1"))["items"] == []
    assert len((await _summary(cluster, f"{path}?limit=0&offset=-3"))["items"]) == 4


async def test_discovery_lists_the_group_so_kubectl_get_raw_finds_it(
    kube: Kube, kube_cluster_with_controllers: Cluster, tmp_path: Any
) -> None:
    cluster = kube_cluster_with_controllers
    _, groups, _ = await raw("GET", f"{cluster.url}/apis")
    [group] = [g for g in groups["groups"] if g["name"] == "visibility.kueue.x-k8s.io"]
    assert group["preferredVersion"]["version"] == "v1beta2"
    _, resources, _ = await raw("GET", f"{cluster.url}{VISIBILITY}")
    verbs = {r["name"]: r["verbs"] for r in resources["resources"]}
    assert verbs["clusterqueues/pendingworkloads"] == ["get"]
    assert verbs["localqueues/pendingworkloads"] == ["get"]

    build = building.built()
    if build is None:
        pytest.skip("no kubectl: the real cluster's binaries are not built (make real-cluster)")
    await kube.kueue_setup(gpus=8)
    kubectl = await asyncio.create_subprocess_exec(
        str(build.binary("kubectl")),
        "--kubeconfig",
        str(cluster.write_kubeconfig(tmp_path / "kubeconfig")),
        "get",
        "--raw",
        f"{VISIBILITY}/clusterqueues/gpu-cq/pendingworkloads",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await kubectl.communicate()
    assert kubectl.returncode == 0, err.decode()
    assert b'"kind":"PendingWorkloadsSummary"' in out
