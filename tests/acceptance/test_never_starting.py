"""Workloads that can never start, on both clusters: past their start deadline they fail with
the cause the pods show and free their quota for the next workload; a pool whose flavor no
node matches says so, and is READY once a node has the labels.

On the real cluster the scheduler is kube-scheduler, while the image pull is played by KWOK's
pod stages (an image containing `does-not-exist` waits in `ErrImagePull`, with the message a
containerd kubelet writes): the kubelet's side is simulated there too.
"""

from __future__ import annotations

from typing import Any

from tests.acceptance.conftest import Scenario
from tests.acceptance.crowding import three_gpus_free_on_each_node
from tests.support.scenario import POOL
from tests.support.waiting import wait_until

BAD_IMAGE = "ghcr.io/acme/does-not-exist:1"


async def test_an_image_that_cannot_be_pulled_fails_at_the_start_deadline_and_frees_the_quota(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=8)
    accepted = await scenario.submit("bad-image", image=BAD_IMAGE, start_deadline_seconds=5)
    await scenario.wait_reason("bad-image", f"The image {BAD_IMAGE} could not be pulled")
    # The next workload needs the whole pool: it waits for the quota the first one holds.
    await scenario.submit("next")
    await scenario.wait_reason("next", "Waiting for quota in pool h100-pool")

    failed = await scenario.wait_state("bad-image", "FAILED", timeout=60)
    reason = failed["status"]["reason"]
    assert reason.startswith(
        "Did not start within its start deadline of 5s after admission: the image "
        f"{BAD_IMAGE} could not be pulled ("
    ), reason
    assert reason.endswith(
        "The workload failed and its quota was released; fix the image and apply the workload "
        "again (`aicp apply -f <file>`, or PUT of its spec)."
    ), reason
    events = await scenario.events("bad-image")
    assert [(e["type"], e["reason"]) for e in events if e["type"] == "Failed"] == [
        ("Failed", "StartDeadlineExceeded")
    ]
    assert "Started" not in [e["type"] for e in events]

    await scenario.wait_state("next", "RUNNING", "SUCCEEDED", timeout=60)

    async def job_gone() -> bool:
        return await scenario.jobs(accepted["uid"]) == []

    await wait_until(job_gone, timeout=30, message="the failed workload's Job deleted")
    assert (await scenario.workload("bad-image") or {})["status"]["state"] == "FAILED"


async def test_pods_no_node_can_hold_fail_at_the_start_deadline_with_the_schedulers_words(
    scenario: Scenario,
) -> None:
    await three_gpus_free_on_each_node(scenario)
    await scenario.submit("too-wide", accelerators=4, start_deadline_seconds=5)

    failed = await scenario.wait_state("too-wide", "FAILED", timeout=60)

    reason = failed["status"]["reason"]
    assert reason.startswith(
        "Did not start within its start deadline of 5s after admission: no node has 4 "
        "nvidia.com/gpu free for a pod (the scheduler says: 0/2 nodes are available: "
    ), reason
    assert "Insufficient nvidia.com/gpu" in reason
    assert "once a node can hold its pods, submit it again" in reason


async def test_a_pool_whose_flavor_no_node_matches_is_degraded_until_a_node_has_the_labels(
    scenario: Scenario,
) -> None:
    running = scenario.running
    accelerator_class = f"x-{scenario.project}"
    key = "example.com/aicp-test"
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", key: scenario.project}
    await running.api.put_binding(accelerator_class, flavor=accelerator_class, node_labels=labels)
    await running.api.create_project(scenario.project)
    pools = f"/api/v1/projects/{scenario.project}/compute-pools"
    quota = {"accelerators": 8, "cpu": "64", "memory": "512Gi"}
    created = await running.client.post(
        pools, json={"name": POOL, "accelerator_class": accelerator_class, "quota": quota}
    )
    assert created.status_code == 202, created.text

    async def pool_in(state: str) -> dict[str, Any] | None:
        pool: dict[str, Any] = (await running.client.get(f"{pools}/{POOL}")).json()
        return pool if pool["status"]["state"] == state else None

    degraded = await wait_until(lambda: pool_in("DEGRADED"), timeout=30, message="DEGRADED")
    assert degraded["status"]["reason"] == (
        f"No node has the node labels of flavor {accelerator_class} ({key}={scenario.project}, "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3), so the pods of workloads admitted to "
        "this pool cannot be scheduled; label the nodes that have these accelerators, or "
        "correct the accelerator binding's node_labels."
    )

    node = (await running.kube.core.list_node()).items[0].metadata.name
    await running.kube.core.patch_node(node, {"metadata": {"labels": {key: scenario.project}}})
    try:
        await wait_until(lambda: pool_in("READY"), timeout=15, message="READY once labelled")
    finally:
        await running.kube.core.patch_node(node, {"metadata": {"labels": {key: None}}})
    events = await running.client.get(f"{pools}/{POOL}/events?limit=100")
    types = [event["type"] for event in events.json()["items"]]
    assert "Degraded" in types and "Ready" in types
