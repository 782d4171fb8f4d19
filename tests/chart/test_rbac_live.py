"""Record the Kubernetes calls aicp makes on the golden path, and hold the ClusterRole to them.

A full replica (`running_service`: API, reconcile engine, informers, steps, as `python -m app
serve` wires them) runs against kubesim with its controllers. The test drives the golden path
through aicp's HTTP API only, so every request kubesim counts is aicp's own: binding →
project → pool → workload admitted by Kueue → Job and pod → success with evidence → logs →
a two-node workload (its headless Service) → an autoscaled inference service until READY →
deletion of the workloads, the service, the pool and the project, each until it answers 404.

`AICP_RECORD_KUBE_CALLS=1` also writes what was observed to `observed_kube_calls.json`.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from tests.chart.kube_calls import (
    OBSERVED,
    Attribute,
    attributes_from_sim_stats,
    write_observed,
)
from tests.chart.rendering import granted
from tests.support.service import RunningService
from tests.support.waiting import wait_until

PROJECT = "research"
POOL = "h100-pool"
WORKLOAD = f"/api/v1/projects/{PROJECT}/workloads/train"
DDP_WORKLOAD = f"/api/v1/projects/{PROJECT}/workloads/ddp"
SERVICE = f"/api/v1/projects/{PROJECT}/services/chat"
POOL_PATH = f"/api/v1/projects/{PROJECT}/compute-pools/{POOL}"


async def wait_for(client: httpx.AsyncClient, path: str, predicate: Any, what: str) -> None:
    async def probe() -> bool:
        response = await client.get(path)
        return bool(predicate(response))

    reached: bool = await wait_until(probe, timeout=20, message=f"{path} {what}")
    assert reached


def in_state(*states: str) -> Any:
    return lambda r: r.status_code == 200 and r.json()["status"]["state"] in states


async def golden_path(client: httpx.AsyncClient) -> None:
    await wait_for(client, "/readyz", lambda r: r.status_code == 200, "ready")
    binding = {
        "resource_name": "nvidia.com/gpu",
        "flavor": "h100-80g",
        "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    }
    assert (await client.put("/api/v1/accelerator-bindings/h100-80g", json=binding)).is_success
    assert (await client.post("/api/v1/projects", json={"name": PROJECT})).status_code == 202
    quota = {"accelerators": 8, "cpu": "64", "memory": "512Gi"}
    pool = {"name": POOL, "accelerator_class": "h100-80g", "quota": quota}
    response = await client.post(f"/api/v1/projects/{PROJECT}/compute-pools", json=pool)
    assert response.status_code == 202, response.text
    await wait_for(client, POOL_PATH, in_state("READY"), "READY")
    workload = {
        "name": "train",
        "compute_pool": POOL,
        "image": "ghcr.io/acme/train:1.4",
        "accelerators": 8,
        "cpu": "8",
        "memory": "64Gi",
        "env": {"KUBESIM_RUN_SECONDS": "0.3", "KUBESIM_LOG": "epoch 1 done"},
    }
    response = await client.post(f"/api/v1/projects/{PROJECT}/workloads", json=workload)
    assert response.status_code == 202, response.text
    await wait_for(client, WORKLOAD, in_state("SUCCEEDED"), "SUCCEEDED")
    logs = await client.get(f"{WORKLOAD}/logs", params={"tail": 10})
    assert logs.status_code == 200, logs.text
    # A two-node workload: its Indexed Job's headless Service is aicp's too.
    ddp = {**workload, "name": "ddp", "nodes": 2, "accelerators": 4}
    response = await client.post(f"/api/v1/projects/{PROJECT}/workloads", json=ddp)
    assert response.status_code == 202, response.text
    await wait_for(client, DDP_WORKLOAD, in_state("SUCCEEDED"), "SUCCEEDED")
    # An autoscaled inference service: its Deployment, Service, PodDisruptionBudget,
    # NetworkPolicy and HorizontalPodAutoscaler, applied, read and deleted with it.
    service = {
        "name": "chat",
        "compute_pool": POOL,
        "image": "ghcr.io/acme/serve:2.1",
        "accelerators": 1,
        "autoscaling": {"max_replicas": 2},
    }
    response = await client.post(f"/api/v1/projects/{PROJECT}/services", json=service)
    assert response.status_code == 202, response.text
    await wait_for(client, SERVICE, in_state("READY"), "READY")
    for path in (WORKLOAD, DDP_WORKLOAD, SERVICE, POOL_PATH, f"/api/v1/projects/{PROJECT}"):
        response = await client.delete(path)
        assert response.status_code == 202, response.text
        await wait_for(client, path, lambda r: r.status_code == 404, "deleted")


async def test_the_cluster_role_grants_exactly_the_calls_of_the_golden_path(
    running_service: RunningService,
) -> None:
    await golden_path(running_service.client)

    async with httpx.AsyncClient(base_url=running_service.cluster.url) as sim:
        stats: dict[str, Any] = (await sim.get("/_sim/stats")).json()
    observed = attributes_from_sim_stats(stats)
    if os.environ.get("AICP_RECORD_KUBE_CALLS") == "1":
        write_observed(OBSERVED, observed, source="tests/chart/test_rbac_live.py golden path")

    grants = granted()
    assert Attribute("", "pods/log", "get") in observed  # the logs endpoint's live read
    # The Namespace informer (a project's namespace deleted by hand is re-created).
    assert {Attribute("", "namespaces", "list"), Attribute("", "namespaces", "watch")} <= observed
    assert sorted(observed - grants) == [], "aicp would get 403 Forbidden"
    assert sorted(grants - observed) == [], "granted but never used"
