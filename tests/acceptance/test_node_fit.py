"""A pod no node of its accelerator class can hold is refused at submit, on both clusters: the
pool's quota holds `nodes x 16` GPUs, but the class's nodes have 8 each, so it could never
start. A workload whose pods fit a node is accepted as before."""

from __future__ import annotations

from tests.acceptance.conftest import Scenario


async def test_pods_larger_than_every_node_of_the_class_are_refused_with_the_numbers(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=32)
    client = scenario.running.client
    too_wide = scenario.workload_body("too-wide", accelerators=16, nodes=2)

    for path in (scenario.workloads, f"{scenario.workloads}?dry_run=true"):
        refused = await client.post(path, json=too_wide)
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["type"].endswith("/exceeds-node-capacity")
        assert problem["detail"].startswith(
            "each of the 2 pods asks for 16 nvidia.com/gpu of class h100-80g, but the largest "
            "node of that class has 8 nvidia.com/gpu (gpu-node-"
        ), problem["detail"]
        assert problem["detail"].endswith("; it could never start.")
        assert problem["requested"]["accelerators"] == "16"
        assert problem["node_capacity"]["accelerators"] == "8"
        assert problem["largest_nodes"]["accelerators"].startswith("gpu-node-")
        assert [e["field"] for e in problem["errors"]] == ["accelerators"]
    assert await scenario.workload("too-wide") is None

    accepted = await scenario.submit("fits", accelerators=8, nodes=2)
    assert accepted["spec"]["accelerators"] == 8 and accepted["spec"]["nodes"] == 2

    widened = await client.put(
        f"{scenario.workloads}/fits", json=scenario.workload_body("fits", accelerators=16, nodes=2)
    )
    assert widened.status_code == 422 and widened.json()["type"].endswith("exceeds-node-capacity")
    kept = await scenario.workload("fits")
    assert kept is not None and kept["generation"] == 1
