"""A flavor whose node labels no node carries: the pool is DEGRADED and says so, the workload
says why it waits, the binding cannot be changed under it, and once it is gone the corrected
binding makes the pool READY and runs the next one."""

from __future__ import annotations

from typing import Any

from tests.integration.steps.stack import Stack
from tests.support.scenario import CLASS, POOL, POOLS, PROJECT, QUOTA
from tests.support.waiting import wait_until

WRONG = {"nvidia.com/gpu.product": "NVIDIA-B200"}  # no kubesim node has it
RIGHT = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def binding(labels: dict[str, str]) -> dict[str, Any]:
    return {"resource_name": "nvidia.com/gpu", "flavor": CLASS, "node_labels": labels}


async def test_pods_no_node_can_take_say_so_and_the_binding_waits_for_them(stack: Stack) -> None:
    assert (
        await stack.http.put(f"/api/v1/accelerator-bindings/{CLASS}", json=binding(WRONG))
    ).status_code == 201
    await stack.create_project(PROJECT)
    created = await stack.http.post(
        POOLS, json={"name": POOL, "accelerator_class": CLASS, "quota": QUOTA}
    )
    assert created.status_code == 202, created.text
    degraded = await stack.wait_pool_state("DEGRADED")
    assert degraded["status"]["reason"].startswith(
        "No node has the node label of flavor h100-80g (nvidia.com/gpu.product=NVIDIA-B200)"
    )
    await stack.submit("stuck")

    async def says_why() -> dict[str, Any] | None:
        workload = await stack.workload("stuck")
        reason = str((workload or {}).get("status", {}).get("reason"))
        return workload if "no node carries the labels" in reason else None

    workload = await wait_until(says_why, timeout=20, message="an unschedulable reason")
    assert workload["status"]["state"] == "ADMITTED"
    assert "submit it again (`aicp delete workload <name>`" in workload["status"]["reason"]

    refused = await stack.http.put(f"/api/v1/accelerator-bindings/{CLASS}", json=binding(RIGHT))
    assert refused.status_code == 409, refused.text
    assert refused.json()["referenced_by"] == [f"workload/{PROJECT}/stuck"]

    assert (
        await stack.http.delete(f"/api/v1/projects/{PROJECT}/workloads/stuck")
    ).status_code == 202
    await stack.wait_gone("stuck")
    fixed = await stack.http.put(f"/api/v1/accelerator-bindings/{CLASS}", json=binding(RIGHT))
    assert fixed.status_code == 200, fixed.text
    await stack.wait_pool_state("READY")
    await stack.submit("runs")
    done = await stack.wait_state("runs", "SUCCEEDED", timeout=30)
    assert done["status"]["accelerator"]["product"] == RIGHT["nvidia.com/gpu.product"]
