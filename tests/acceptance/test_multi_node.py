"""Multi-node workloads on both clusters: two ranks of 8 GPUs on a 16-GPU pool, admitted whole,
placed on different nodes, finding each other through the rendezvous environment, failing
together, and their headless Service kept, restored and removed with them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.conftest import Scenario
from tests.support.waiting import wait_until

LONG = {"KUBESIM_RUN_SECONDS": "600"}


async def _listed(scenario: Scenario, kind: str, uid: str) -> list[dict[str, Any]]:
    core = scenario.running.kube.core
    method = core.list_namespaced_pod if kind == "pods" else core.list_namespaced_service
    listed = await method(
        scenario.namespace, label_selector=f"aicp.dev/uid={uid}", _preload_content=False
    )
    items: list[dict[str, Any]] = (await listed.json())["items"]
    return items


async def _running_pods(scenario: Scenario, uid: str) -> list[dict[str, Any]]:
    pods = await _listed(scenario, "pods", uid)
    return [pod for pod in pods if (pod.get("status") or {}).get("phase") == "Running"]


@pytest.mark.timeout(180)  # two waits of up to 45 s each on a loaded real cluster
async def test_two_ranks_of_eight_gpus_run_as_one_indexed_job_on_two_nodes(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=16)
    accepted = await scenario.submit(
        "ddp", nodes=2, env={"KUBESIM_RUN_SECONDS": "3", "KUBESIM_LOG": "step 1"}
    )
    uid = accepted["uid"]
    # The ranks' pods start one after the other on a real cluster: "1 of 2" may come first.
    running = await scenario.wait_reason("ddp", "2 of 2 pods running on nodes ")
    assert running["status"]["state"] == "RUNNING"

    (job,) = await scenario.jobs(uid)
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 2
    (service,) = await _listed(scenario, "services", uid)
    assert service["spec"]["clusterIP"] == "None"
    assert job["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"]
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    master = f"{job['metadata']['name']}-0.{service['metadata']['name']}.{scenario.namespace}.svc"
    assert env["MASTER_ADDR"]["value"] == master
    assert env["NNODES"]["value"] == "2"
    assert env["WORLD_SIZE"]["value"] == "16"
    assert "valueFrom" in env["NODE_RANK"]

    pods = await _running_pods(scenario, uid)
    assert len({pod["spec"]["nodeName"] for pod in pods}) == 2
    ranks = sorted(
        pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for pod in pods
    )
    assert ranks == ["0", "1"]

    done = await scenario.wait_state("ddp", "SUCCEEDED")
    status = done["status"]
    assert [rank["rank"] for rank in status["ranks"]] == [0, 1]
    assert len({rank["node"] for rank in status["ranks"]}) == 2
    assert all(rank["exit_code"] == 0 for rank in status["ranks"])
    assert all(rank["accelerator_product"] for rank in status["ranks"])
    assert sorted(status["nodes"]) == sorted(rank["node"] for rank in status["ranks"])
    if scenario.backend != "kubesim":
        return  # the real cluster's KWOK nodes have no kubelet to serve logs
    logs = await scenario.request("GET", f"{scenario.workloads}/ddp/logs")
    assert "[rank 0] step 1" in logs.text and "[rank 1] step 1" in logs.text
    only = await scenario.request("GET", f"{scenario.workloads}/ddp/logs", params={"rank": 1})
    assert only.text.strip() == "step 1"


async def test_a_second_two_node_workload_waits_whole_until_the_first_ends(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=16)
    await scenario.submit("first", nodes=2, env=LONG)
    await scenario.wait_state("first", "RUNNING")
    second = await scenario.submit("second", nodes=2, env=LONG)

    queued = await scenario.wait_reason("second", "Waiting for quota")
    assert queued["status"]["state"] == "QUEUED"
    assert "asked for 16 nvidia.com/gpu" in queued["status"]["reason"]
    assert await _listed(scenario, "pods", second["uid"]) == []  # never one rank alone

    await scenario.request("DELETE", f"{scenario.workloads}/first", accept=(202,))
    await scenario.wait_reason("second", "2 of 2 pods running")


async def test_rank_one_failing_stops_both_ranks_and_the_reason_names_it(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=16)
    # The failing rank ends after half the run, while rank 0 still runs.
    env = {"KUBESIM_RUN_SECONDS": "8", "KUBESIM_FAIL_RANK": "1", "KUBESIM_EXIT_CODE": "1"}
    await scenario.submit("broken", nodes=2, env=env)

    failed = await scenario.wait_state("broken", "FAILED")
    reason = failed["status"]["reason"]
    assert reason.startswith("Rank 1 (pod ")
    assert reason.endswith("exited with code 1; all 2 ranks were stopped (attempt 1 of 1).")
    assert failed["status"]["exit_code"] == 1
    ranks = {rank["rank"]: rank for rank in failed["status"]["ranks"]}
    assert ranks[1]["exit_code"] == 1
    assert ranks[0]["exit_code"] != 0  # stopped with the attempt, not left running
    assert "Failed" in await scenario.event_types("broken")


async def test_retries_restart_every_rank_together(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=16)
    env = {"KUBESIM_RUN_SECONDS": "1", "KUBESIM_FAIL_RANK": "0", "KUBESIM_EXIT_CODE": "2"}
    await scenario.submit("flaky", nodes=2, retries=1, env=env)

    failed = await scenario.wait_state("flaky", "FAILED")
    status = failed["status"]
    assert status["attempts"] == 2
    assert "all 2 ranks were stopped (attempt 2 of 2)" in status["reason"]
    events = await scenario.events("flaky")
    restarting = [e for e in events if e["type"] == "Restarting"]
    assert len(restarting) == 1
    assert restarting[0]["message"].endswith("(attempt 1 of 2); aicp starts attempt 2.")


async def test_one_rank_out_of_memory_fails_the_workload_naming_the_rank(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=16)
    env = {"KUBESIM_RUN_SECONDS": "8", "KUBESIM_OOM_RANK": "1"}
    await scenario.submit("hungry", nodes=2, memory="2Gi", env=env)

    failed = await scenario.wait_state("hungry", "FAILED")
    reason = failed["status"]["reason"]
    assert reason.startswith("Rank 1 (pod ")
    assert "ran out of memory and was killed (OOMKilled): its memory limit is 2Gi" in reason
    oom = [rank for rank in failed["status"]["ranks"] if rank["oom_killed"]]
    assert [rank["rank"] for rank in oom] == [1]


async def test_a_headless_service_deleted_by_hand_comes_back(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=16)
    accepted = await scenario.submit("ddp", nodes=2, env=LONG)
    await scenario.wait_state("ddp", "RUNNING")
    (service,) = await _listed(scenario, "services", accepted["uid"])

    await scenario.running.kube.core.delete_namespaced_service(
        service["metadata"]["name"], scenario.namespace, _preload_content=False
    )

    async def recreated() -> dict[str, Any] | None:
        found = await _listed(scenario, "services", accepted["uid"])
        fresh = [s for s in found if s["metadata"]["uid"] != service["metadata"]["uid"]]
        return fresh[0] if fresh else None

    again = await wait_until(recreated, timeout=30, interval=0.1, message="Service recreated")
    assert again["metadata"]["name"] == service["metadata"]["name"]
    await scenario.wait_event("ddp", "DriftCorrected")


async def test_deleting_removes_job_pods_and_service_in_every_state(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=16)
    running = await scenario.submit("running", nodes=2, env=LONG)
    await scenario.wait_state("running", "RUNNING")
    queued = await scenario.submit("queued", nodes=2, env=LONG)
    await scenario.wait_state("queued", "QUEUED")

    for name in ("queued", "running"):
        await scenario.request("DELETE", f"{scenario.workloads}/{name}", accept=(202,))
    for name in ("queued", "running"):
        await scenario.wait_gone(name)

    async def nothing_left() -> bool:
        for uid in (running["uid"], queued["uid"]):
            if await scenario.jobs(uid) or await _listed(scenario, "services", uid):
                return False
            if await _listed(scenario, "pods", uid):
                return False
        return True

    await wait_until(nothing_left, timeout=45, interval=0.2, message="Job, pods, Service gone")
