"""Names on both clusters: pools whose plain joined names collide get two ClusterQueues, and
a namespace someone else made is never taken over nor deleted."""

from __future__ import annotations

from typing import Any

from app.kube.apply import create, delete, get
from app.kube.resources import CLUSTER_QUEUES, NAMESPACES
from tests.acceptance.conftest import Scenario
from tests.support.problems import assert_problem
from tests.support.waiting import wait_until

CLASS = "h100-80g"


async def _pool(scenario: Scenario, project: str, pool: str, gpus: int) -> dict[str, Any]:
    theirs = scenario.running.scenario(project, pool=pool, wait_timeout=30)
    await theirs.create_pool(quota={"accelerators": gpus, "cpu": "64", "memory": "256Gi"})
    return await theirs.wait_pool_state("READY")


async def test_pools_whose_joined_names_collide_keep_their_own_queues(
    scenario: Scenario,
) -> None:
    api, kube = scenario.running.api, scenario.running.kube
    await api.put_binding(CLASS, flavor=CLASS)
    first, second = f"{scenario.project}-a", f"{scenario.project}-a-b"
    await api.create_project(first)
    await api.create_project(second)
    one = await _pool(scenario, first, "b-c", 8)
    two = await _pool(scenario, second, "c", 4)

    queues = (one["status"]["cluster_queue"], two["status"]["cluster_queue"])
    assert queues[0] != queues[1]
    for queue, gpus in zip(queues, (8, 4), strict=True):
        live = await get(kube, CLUSTER_QUEUES, None, queue)
        assert live is not None
        flavors = live["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        # The apiserver answers a quantity as a string ("8"), kubesim as it was sent.
        assert str({r["name"]: r["nominalQuota"] for r in flavors}["nvidia.com/gpu"]) == str(gpus)

    response = await scenario.running.client.delete(f"/api/v1/projects/{first}/compute-pools/b-c")
    assert response.status_code == 202, response.text

    async def first_gone() -> bool:
        return await get(kube, CLUSTER_QUEUES, None, queues[0]) is None

    await wait_until(first_gone, timeout=30, message="the deleted pool's ClusterQueue gone")
    assert await get(kube, CLUSTER_QUEUES, None, queues[1]) is not None
    still = await scenario.running.client.get(f"/api/v1/projects/{second}/compute-pools/c")
    assert still.json()["status"]["state"] == "READY"


async def test_a_namespace_made_by_someone_else_is_refused_and_left_alone(
    scenario: Scenario,
) -> None:
    kube = scenario.running.kube
    namespace = scenario.namespace
    labels = {"app.kubernetes.io/managed-by": "platform-team"}
    made = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": labels},
    }
    await create(kube, made, field_manager="platform-team")
    try:
        response = await scenario.running.client.post(
            "/api/v1/projects", json={"name": scenario.project}
        )
        problem = assert_problem(response, 409, "object-not-owned")
        assert problem["object"] == f"Namespace/{namespace}"
        assert problem["manager"] == "platform-team"
        assert namespace in problem["detail"] and "will not take it over" in problem["detail"]
        listed = await scenario.running.client.get(f"/api/v1/projects/{scenario.project}")
        assert listed.status_code == 404
        live = await get(kube, NAMESPACES, None, namespace)
        assert live is not None and not (live["metadata"].get("labels") or {}).get(
            "aicp.dev/project"
        )
    finally:
        await delete(kube, NAMESPACES, None, namespace)
