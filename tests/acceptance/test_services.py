"""Inference services end to end: created READY on two nodes, scaled past the pool's quota
and back, rolled out to a new image, scaled and deleted by hand (undone and recorded), sharing
a pool's quota with a batch workload, autoscaled, and deleted.

On both clusters: on the real one, Kueue's plain-pod integration (its pod webhooks registered)
gates every replica until the pool's ClusterQueue admits its own Workload
(docs/REAL-CLUSTER.md).
"""

from __future__ import annotations

from typing import Any

from app.kube.apply import apply, get
from app.kube.resources import (
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    NETWORK_POLICIES,
    POD_DISRUPTION_BUDGETS,
    SERVICES,
)
from tests.acceptance.conftest import Scenario
from tests.support.scenario import POOL
from tests.support.waiting import wait_until

# The replicas' container: ready at once, running until deleted.
SERVING: dict[str, Any] = {"env": {}}


async def event_reasons(scenario: Scenario, name: str) -> list[tuple[str, str | None]]:
    return [(e["type"], e["reason"]) for e in await scenario.service_events(name)]


async def test_a_service_of_two_replicas_becomes_ready_on_two_nodes(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=16)
    await scenario.create_service("chat", accelerators=8, replicas=2, **SERVING)

    ready = await scenario.wait_service("chat", "READY")
    status = ready["status"]
    assert status["reason"] == "2 of 2 replicas ready on gpu-node-0, gpu-node-1."
    assert status["endpoint"] == f"chat.{scenario.namespace}.svc:8000"
    assert status["replicas"]["desired"] == 2 and status["replicas"]["ready"] == 2
    assert status["nodes"] == ["gpu-node-0", "gpu-node-1"]
    assert [pod["ready"] for pod in status["pods"]] == [True, True]
    assert status["observed_generation"] == 1
    kube = scenario.running.kube
    service = await get(kube, SERVICES, scenario.namespace, "chat")
    assert service is not None and service["spec"]["ports"][0]["port"] == 8000
    assert ("Ready", None) in await event_reasons(scenario, "chat")


async def test_replicas_beyond_the_quota_wait_for_it_and_run_once_it_frees(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=2)
    await scenario.create_service("chat", accelerators=1, replicas=2, **SERVING)
    await scenario.wait_service("chat", "READY")

    scaled = await scenario.client.patch(f"{scenario.services}/chat", json={"replicas": 3})
    assert scaled.status_code == 202, scaled.text
    waiting = await scenario.wait_service(
        "chat", "PROGRESSING", "1 waiting for quota in pool h100-pool"
    )
    assert waiting["status"]["reason"].startswith("2 of 3 replicas ready")
    assert waiting["status"]["replicas"]["waiting_for_quota"] == 1

    await scenario.client.patch(f"{scenario.pools}/{POOL}", json={"quota": scenario.quota(3)})
    ready = await scenario.wait_service("chat", "READY")
    assert ready["status"]["replicas"]["ready"] == 3


async def test_a_new_image_rolls_out_as_the_next_generation(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=4)
    created = await scenario.create_service("chat", replicas=2, **SERVING)
    await scenario.wait_service("chat", "READY")

    spec = dict(created["spec"], image="busybox:1.37")
    response = await scenario.client.put(f"{scenario.services}/chat", json=spec)
    assert response.status_code == 202 and response.json()["generation"] == 2

    async def rolled_out() -> dict[str, Any] | None:
        found = await scenario.read_service("chat")
        status = found["status"] if found else {}
        done = status.get("state") == "READY" and status.get("observed_generation") == 2
        return found if done else None

    await wait_until(rolled_out, timeout=45, message="generation 2 READY")
    deployment = await get(scenario.running.kube, DEPLOYMENTS, scenario.namespace, "chat")
    assert deployment is not None
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"] == "busybox:1.37"


async def test_a_deployment_scaled_by_hand_is_scaled_back_and_recorded(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=4)
    await scenario.create_service("chat", replicas=2, **SERVING)
    await scenario.wait_service("chat", "READY")

    await apply(
        scenario.running.kube,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "chat", "namespace": scenario.namespace},
            "spec": {"replicas": 4},
        },
        field_manager="kubectl",
    )

    async def restored() -> bool:
        return ("DriftCorrected", "ReplicasRestored") in await event_reasons(scenario, "chat")

    await wait_until(restored, timeout=45, message="the hand scaling undone and recorded")
    deployment = await get(scenario.running.kube, DEPLOYMENTS, scenario.namespace, "chat")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    ready = await scenario.wait_service("chat", "READY")
    assert ready["status"]["replicas"]["desired"] == 2


async def test_a_service_object_deleted_by_hand_is_restored(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=4)
    await scenario.create_service("chat", **SERVING)
    await scenario.wait_service("chat", "READY")

    await scenario.running.kube.core.delete_namespaced_service(
        "chat", scenario.namespace, _preload_content=False
    )

    async def restored() -> bool:
        return ("DriftCorrected", "ObjectRestored") in await event_reasons(scenario, "chat")

    await wait_until(restored, timeout=45, message="the deleted Service restored and recorded")
    assert await get(scenario.running.kube, SERVICES, scenario.namespace, "chat") is not None


async def test_a_service_and_a_batch_workload_share_the_pools_quota(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=2)
    await scenario.create_service("chat", accelerators=1, replicas=2, **SERVING)
    await scenario.wait_service("chat", "READY")

    await scenario.submit("train", accelerators=2)
    queued = await scenario.wait_reason("train", "Waiting for quota in pool h100-pool")
    assert queued["status"]["state"] == "QUEUED"

    await scenario.client.patch(f"{scenario.services}/chat", json={"replicas": 0})
    await scenario.wait_state("train", "RUNNING", "SUCCEEDED")
    zero = await scenario.wait_service("chat", "READY", "Scaled to zero")
    assert zero["status"]["replicas"]["desired"] == 0


async def test_a_deleted_service_leaves_nothing_behind(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=4)
    await scenario.create_service("chat", replicas=2, **SERVING)
    await scenario.wait_service("chat", "READY")

    deleting = await scenario.client.delete(f"{scenario.services}/chat")
    assert deleting.status_code == 202 and deleting.json()["status"]["state"] == "DELETING"
    await scenario.wait_absent(f"{scenario.services}/chat")
    kube = scenario.running.kube
    assert await get(kube, DEPLOYMENTS, scenario.namespace, "chat") is None
    assert await get(kube, SERVICES, scenario.namespace, "chat") is None
    pods = await kube.core.list_namespaced_pod(
        scenario.namespace, label_selector="aicp.dev/service=chat", _preload_content=False
    )
    assert (await pods.json())["items"] == []  # type: ignore[attr-defined]  # a raw response


async def test_an_autoscaled_service_is_ready_at_its_minimum_and_leaves_no_object_behind(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=4)
    await scenario.create_service("chat", autoscaling={"max_replicas": 2}, **SERVING)
    ready = await scenario.wait_service("chat", "READY")
    assert ready["status"]["replicas"]["desired"] == 1
    # Read with aicp's own client: on the real cluster, the chart's ClusterRole.
    kube, namespace = scenario.running.kube, scenario.namespace
    autoscaler = await get(kube, HORIZONTAL_POD_AUTOSCALERS, namespace, "chat")
    assert autoscaler is not None
    assert (autoscaler["spec"]["minReplicas"], autoscaler["spec"]["maxReplicas"]) == (1, 2)

    deleting = await scenario.client.delete(f"{scenario.services}/chat")
    assert deleting.status_code == 202
    await scenario.wait_absent(f"{scenario.services}/chat")
    for resource in (
        DEPLOYMENTS,
        SERVICES,
        POD_DISRUPTION_BUDGETS,
        NETWORK_POLICIES,
        HORIZONTAL_POD_AUTOSCALERS,
    ):
        assert await get(kube, resource, namespace, "chat") is None, resource.plural
