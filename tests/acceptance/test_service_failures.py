"""What goes wrong for a service: a replica OOM-killed (DEGRADED with a sentence that names the
replica, its node and what to change, then READY again once it has recovered), a deletion in
every state, a replica no node can hold (refused), and an unwatched object deleted by hand
(restored at the next periodic check)."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.classify.service import RECOVERY_WINDOW
from app.kube.apply import get
from app.kube.resources import NETWORK_POLICIES
from app.reconcile.steps.services import UNWATCHED_CHECK_SECONDS
from tests.acceptance.conftest import Scenario
from tests.support.waiting import wait_until

#: The pod annotation kubesim's kubelet OOM-kills a running container for, until the pod has
#: restarted that many times (docs/KUBESIM.md).
OOM_KILLS = "kubesim.aicp.dev/oom-kills"


# The wait covers the recovery window (a replica OOM-killed and ready again counts as failing
# for RECOVERY_WINDOW) on top of the acceptance tests' usual 45 s.
@pytest.mark.timeout(45 + 45 + int(RECOVERY_WINDOW.total_seconds()))
async def test_an_oom_killed_replica_degrades_the_service_until_it_recovers(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=4)
    await scenario.create_service("chat", replicas=2, memory="2Gi")
    ready = await scenario.wait_service("chat", "READY")
    victim = ready["status"]["pods"][0]
    await scenario.running.kube.core.patch_namespaced_pod(
        victim["name"],
        scenario.namespace,
        {"metadata": {"annotations": {OOM_KILLS: "1"}}},
        _preload_content=False,
    )

    degraded = await scenario.wait_service("chat", "DEGRADED")
    assert degraded["status"]["reason"].endswith(
        f"replica {victim['name']} was OOMKilled on {victim['node']}: its memory limit is "
        "2Gi; raise `memory`."
    )
    # The kill and the restart are two writes of the pod's status on the real cluster's
    # kubelet: the service may first show the replica terminated and not yet restarted.

    async def restarted() -> dict[str, Any] | None:
        found = await scenario.read_service("chat")
        pods = found["status"]["pods"] if found else []
        pod = next((p for p in pods if p["name"] == victim["name"]), None)
        return pod if pod is not None and pod["restarts"] == 1 else None

    pod = await wait_until(restarted, timeout=45, message=f"{victim['name']} restarted once")
    assert pod["last_termination"]["reason"] == "OOMKilled"

    recovered = await scenario.wait_service(
        "chat", "READY", timeout=45 + RECOVERY_WINDOW.total_seconds()
    )
    assert recovered["status"]["reason"].startswith("2 of 2 replicas ready on ")
    types = [event["type"] for event in await scenario.service_events("chat")]
    assert types[-2:] == ["Degraded", "Ready"]


@pytest.mark.parametrize(
    ("changes", "state"),
    [
        pytest.param({"replicas": 3, "accelerators": 1}, "PROGRESSING", id="waiting-for-quota"),
        pytest.param({"env": {"KUBESIM_OOM_AFTER_SECONDS": "1"}}, "DEGRADED", id="crash-looping"),
    ],
)
async def test_a_service_is_deleted_whatever_its_state(
    scenario: Scenario, changes: dict[str, object], state: str
) -> None:
    await scenario.setup_pool(accelerators=2)
    await scenario.create_service("chat", **changes)
    await scenario.wait_service("chat", state)

    deleting = await scenario.client.delete(f"{scenario.services}/chat")
    assert deleting.status_code == 202, deleting.text

    await scenario.wait_absent(f"{scenario.services}/chat")
    pods = await scenario.running.kube.core.list_namespaced_pod(
        scenario.namespace, label_selector="aicp.dev/service=chat", _preload_content=False
    )
    assert (await pods.json())["items"] == []  # type: ignore[attr-defined]  # a raw response


async def test_a_replica_no_node_can_hold_is_refused_naming_the_largest_node(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=16)

    response = await scenario.client.post(
        scenario.services, json=scenario.service_body("huge", accelerators=9)
    )

    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"].endswith("exceeds-node-capacity")
    assert problem["errors"][0]["field"] == "accelerators"
    assert problem["detail"].startswith(
        "the pod asks for 9 nvidia.com/gpu of class h100-80g, but the largest node of that "
        "class has 8 nvidia.com/gpu (gpu-node-"
    ), problem["detail"]
    assert await scenario.read_service("huge") is None


@pytest.mark.timeout(45 + 45 + int(UNWATCHED_CHECK_SECONDS))
async def test_a_network_policy_deleted_by_hand_is_restored_at_the_next_check(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=4)
    await scenario.create_service("chat")
    await scenario.wait_service("chat", "READY")
    kube = scenario.running.kube
    assert await get(kube, NETWORK_POLICIES, scenario.namespace, "chat") is not None

    await kube.custom.delete_namespaced_custom_object(
        "networking.k8s.io",
        "v1",
        scenario.namespace,
        "networkpolicies",
        "chat",
        _preload_content=False,
    )

    async def restored() -> bool:
        events = await scenario.service_events("chat")
        return any(e["reason"] == "ObjectRestored" for e in events)

    await wait_until(
        restored, timeout=45 + UNWATCHED_CHECK_SECONDS, message="the NetworkPolicy restored"
    )
    assert await get(kube, NETWORK_POLICIES, scenario.namespace, "chat") is not None
