"""The golden path per outcome, through the HTTP API against kubesim (issue 4's first list)."""

from __future__ import annotations

from typing import Any

from app.kube.resources import CLUSTER_QUEUES, NAMESPACES
from tests.integration.steps.stack import Stack
from tests.support.scenario import POOL, POOLS
from tests.support.waiting import wait_until


async def test_a_workload_runs_to_success_with_its_evidence(stack: Stack) -> None:
    await stack.setup_pool()
    accepted = await stack.submit("train")
    assert accepted["status"]["state"] == "PENDING"

    done = await stack.wait_state("train", "SUCCEEDED")

    status = done["status"]
    assert status["observed_generation"] == 1
    assert status["job"]["name"].startswith("train-") and status["job"]["name"].endswith("-g1")
    assert status["job"]["uid"]
    assert status["admission"]["cluster_queue"] == "aicp-research-h100-pool"
    assert status["admission"]["flavor"] == "h100-80g"
    assert status["nodes"] and status["nodes"][0].startswith("gpu-node-")
    assert status["accelerator"] == {
        "product": "NVIDIA-H100-80GB-HBM3",
        "memory_mib": 81920,
        "count": 8,
    }
    assert status["attempts"] == 1
    assert status["exit_code"] == 0
    assert status["started_at"] and status["finished_at"]
    assert status["reason"].startswith("Succeeded")
    types = await stack.event_types("train")
    assert types[0] == "Accepted"
    for expected in ("JobCreated", "Admitted", "Started", "Succeeded", "EvidenceRecorded"):
        assert expected in types, types
    actors = {e["actor"] for e in await stack.events("train") if e["type"] != "Accepted"}
    assert actors == {"controller:steps-test"}
    metrics = (await stack.http.get("/metrics")).text
    for name in (
        "aicp_workload_accepted_to_job_created_seconds_count",
        "aicp_workload_accepted_to_admitted_seconds_count",
        "aicp_workload_accepted_to_running_seconds_count",
    ):
        assert _sample(metrics, name) >= 1, name
    assert 'aicp_workloads{state="' in metrics


def _sample(metrics: str, name: str) -> float:
    """The value of an unlabelled sample in Prometheus text."""
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def test_a_non_zero_exit_fails_the_workload_with_the_exit_code(stack: Stack) -> None:
    await stack.setup_pool()
    await stack.submit("crash", env={"KUBESIM_RUN_SECONDS": "0.2", "KUBESIM_EXIT_CODE": "3"})

    failed = await stack.wait_state("crash", "FAILED")

    status = failed["status"]
    assert status["exit_code"] == 3
    assert "exited with code 3" in status["reason"]
    assert status["nodes"] and status["nodes"][0] in status["reason"]
    assert "Failed" in await stack.event_types("crash")


async def test_an_out_of_memory_kill_names_memory_and_the_limit(stack: Stack) -> None:
    await stack.setup_pool()
    await stack.submit(
        "hungry", memory="48Gi", env={"KUBESIM_RUN_SECONDS": "0.2", "KUBESIM_OOM": "1"}
    )

    failed = await stack.wait_state("hungry", "FAILED")

    reason = failed["status"]["reason"]
    assert "OOMKilled" in reason
    assert "48Gi" in reason
    assert "memory" in reason
    assert failed["status"]["exit_code"] == 137


async def test_an_image_that_cannot_be_pulled_is_named_in_the_reason(stack: Stack) -> None:
    await stack.setup_pool()
    image = "ghcr.io/acme/does-not-exist:9.9"
    await stack.submit("typo", image=image)

    async def reason_names_image() -> dict[str, object] | None:
        found = await stack.workload("typo")
        return found if found and image in found["status"]["reason"] else None

    stuck = await wait_until(reason_names_image, timeout=15, message="image named")
    assert stuck["status"]["state"] == "ADMITTED"  # type: ignore[index]
    assert "could not be pulled" in stuck["status"]["reason"]  # type: ignore[index]


async def test_exceeding_the_max_runtime_fails_with_the_limit_in_the_reason(stack: Stack) -> None:
    await stack.setup_pool()
    await stack.submit("slow", max_runtime_seconds=60, env={"KUBESIM_RUN_SECONDS": "86400"})
    await stack.wait_state("slow", "RUNNING")

    stack.cluster.clock.advance(61)  # simulated time: the Job controller's deadline passes

    failed = await stack.wait_state("slow", "FAILED")
    assert "maximum runtime of 60 seconds" in failed["status"]["reason"]
    assert failed["status"]["started_at"]


async def test_a_workload_waits_for_quota_then_runs_when_another_finishes(stack: Stack) -> None:
    await stack.setup_pool()
    await stack.start_running("big", replicas=2)
    await stack.submit("next")

    waiting = await stack.wait_state("next", "QUEUED")
    reason = waiting["status"]["reason"]

    async def reason_has_numbers() -> str | None:
        found = await stack.workload("next")
        text = found["status"]["reason"] if found else ""
        return text if "16" in text and "8" in text else None

    reason = await wait_until(reason_has_numbers, timeout=10, message="quota numbers")
    assert "h100-pool" in reason

    async def pool_reports_the_queue() -> dict[str, Any] | None:
        pool = await stack.pool()
        return pool if "16 of 16 nvidia.com/gpu in use" in pool["status"]["reason"] else None

    pool = await wait_until(pool_reports_the_queue, timeout=10, message="pool usage reason")
    assert pool["status"]["usage"]["accelerators_admitted"] == 16
    stack.cluster.clock.advance(600)  # "big" finishes and releases its 16 GPUs

    await stack.wait_state("big", "SUCCEEDED")
    done = await stack.wait_state("next", "SUCCEEDED")
    assert done["status"]["admission"]["cluster_queue"] == "aicp-research-h100-pool"
    types = await stack.event_types("next")
    assert types.index("JobCreated") < types.index("Admitted") < types.index("Succeeded")


async def test_a_pool_quota_change_reaches_the_cluster_queue(stack: Stack) -> None:
    await stack.setup_pool()

    response = await stack.http.patch(
        f"{POOLS}/{POOL}", json={"quota": {"accelerators": 8, "cpu": "128", "memory": "1Ti"}}
    )
    assert response.status_code == 202, response.text

    async def queue_has_new_quota() -> dict[str, object] | None:
        queue = await stack.read(CLUSTER_QUEUES, None, "aicp-research-h100-pool")
        resources = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        quota = {r["name"]: r["nominalQuota"] for r in resources}
        return queue if quota == {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": 8} else None

    await wait_until(queue_has_new_quota, timeout=10, message="ClusterQueue quota 8")
    pool = await stack.wait_pool_state("READY")
    assert pool["generation"] == 2

    async def observed_generation_2() -> bool:
        return (await stack.pool())["status"]["observed_generation"] == 2

    await wait_until(observed_generation_2, timeout=10, message="pool observed generation 2")


async def test_a_project_gets_its_namespace_and_the_shared_priority_classes(stack: Stack) -> None:
    await stack.setup_pool()

    project = (await stack.http.get("/api/v1/projects/research")).json()
    assert project["status"]["state"] == "READY"
    assert "aicp-research" in project["status"]["reason"]
    namespace = await stack.read(NAMESPACES, None, "aicp-research")
    assert namespace["metadata"]["labels"]["aicp.dev/project"] == "research"
    classes = await stack.kube.custom.list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", _preload_content=False
    )
    values = {c["metadata"]["name"]: c["value"] for c in (await classes.json())["items"]}
    assert values == {"aicp-low": 100, "aicp-normal": 1000, "aicp-high": 10000}


async def test_a_failing_workload_with_a_retry_reports_both_attempts(stack: Stack) -> None:
    await stack.setup_pool()
    env = {"KUBESIM_RUN_SECONDS": "0.2", "KUBESIM_EXIT_CODE": "3"}
    await stack.submit("retry", retries=1, env=env)

    failed = await stack.wait_state("retry", "FAILED")

    assert failed["status"]["attempts"] == 2
    assert "after 2 attempts" in failed["status"]["reason"]
    assert failed["status"]["exit_code"] == 3
