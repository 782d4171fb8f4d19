"""Failure classification on both clusters: an exit code, OOMKilled, a pod no node can hold,
and a wait for quota, each with the sentence a user reads."""

from __future__ import annotations

from tests.acceptance.conftest import Scenario
from tests.acceptance.crowding import three_gpus_free_on_each_node


async def test_a_container_exit_code_fails_the_workload_with_that_code(scenario: Scenario) -> None:
    await scenario.setup_pool()
    await scenario.submit("broken", accelerators=1, env={"KUBESIM_EXIT_CODE": "3"})
    failed = await scenario.wait_state("broken", "FAILED")
    status = failed["status"]
    assert status["exit_code"] == 3
    assert status["reason"].startswith(
        "Failed: container main exited with code 3 on node gpu-node-"
    )
    assert "Failed" in await scenario.event_types("broken")


async def test_an_out_of_memory_kill_says_how_to_give_the_container_more(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool()
    await scenario.submit("hungry", accelerators=1, memory="2Gi", env={"KUBESIM_OOM": "1"})
    failed = await scenario.wait_state("hungry", "FAILED")
    status = failed["status"]
    assert status["exit_code"] == 137
    assert "ran out of memory and was killed (OOMKilled)" in status["reason"]
    assert "its memory limit is 2Gi; raise `memory`" in status["reason"]


async def test_a_pod_no_node_has_room_for_is_admitted_but_says_which_resource_is_missing(
    scenario: Scenario,
) -> None:
    # A pod larger than every node is refused at submit (tests/acceptance/test_node_fit.py);
    # one that fits a node but finds none with room is admitted and says why it waits.
    await three_gpus_free_on_each_node(scenario)
    await scenario.submit("too-wide", accelerators=4, env={"KUBESIM_RUN_SECONDS": "600"})
    waiting = await scenario.wait_reason("too-wide", "no node has")
    status = waiting["status"]
    assert status["state"] == "ADMITTED"
    assert status["reason"].startswith(
        "Admitted, but no node has 4 nvidia.com/gpu free for a pod (the scheduler says: 0/2 nodes"
    )
    assert "Insufficient nvidia.com/gpu" in status["reason"]


async def test_a_workload_beyond_the_free_quota_waits_and_says_how_much_is_in_use(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=8)
    await scenario.start_running("first")
    await scenario.submit("second", env={"KUBESIM_RUN_SECONDS": "600"})
    # Kueue counts the first workload in the ClusterQueue's usage a moment after it queues
    # the second: the sentence follows the pool's numbers as they change.
    queued = await scenario.wait_reason("second", "with 8 in use")
    assert queued["status"]["state"] == "QUEUED"
    # Its place in the queue leads (docs/PLANNING.md), Kueue's quota numbers follow.
    assert queued["status"]["reason"] == (
        "Queued 1st in pool h100-pool; no estimate of when it starts yet. "
        "Waiting for quota in pool h100-pool: asked for 8 nvidia.com/gpu, "
        "the pool has 8 with 8 in use by 1 workload."
    )
