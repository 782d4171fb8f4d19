"""Indexed Jobs, podFailurePolicy and per-rank control of the fake containers, as a multi-node
training Job uses them: one pod per index with its index annotation, label, env and hostname on
its own node; one rank failing or OOM-killed ends the Job under a FailJob rule and stops the
others; Ignore and Count rules; per-index back-off."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.scenarios import NS, Kube, gpu_job
from tests.support.waiting import wait_until

INDEX = "batch.kubernetes.io/job-completion-index"
FAIL_JOB_ON_ERROR = {
    "rules": [{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}]
}


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}


def indexed_job(name: str, nodes: int = 2, *, gpus: int = 8, **options: Any) -> dict[str, Any]:
    body = gpu_job(
        name,
        queue=None,
        gpus=gpus,
        parallelism=nodes,
        completions=nodes,
        completionMode="Indexed",
        **options,
    )
    body["spec"]["template"]["spec"]["subdomain"] = name
    return body


async def running_ranks(kube: Kube, name: str, count: int) -> list[Any]:
    async def all_running() -> list[Any] | None:
        pods = [p for p in await kube.pods_of(name) if p.status.phase == "Running"]
        return sorted(pods, key=lambda p: p.metadata.name) if len(pods) == count else None

    found: list[Any] = await wait_until(all_running, message=f"{count} ranks of {name} running")
    return found


async def run_with_a_failing_rank(kube: Kube, *, rank: int, exit_code: int, action: str) -> None:
    """Two 1-GPU ranks of `train`, `rank` bound to exit with `exit_code`, which a podFailurePolicy
    rule meets with `action`; returns once both ranks run."""
    rule = {"action": action, "onExitCodes": {"operator": "In", "values": [exit_code]}}
    env = {"KUBESIM_FAIL_RANK": str(rank), "KUBESIM_EXIT_CODE": str(exit_code)}
    await kube.batch.create_namespaced_job(
        NS, indexed_job("train", gpus=1, env=env, podFailurePolicy={"rules": [rule]})
    )
    await running_ranks(kube, "train", 2)


def by_rank(pods: list[Any]) -> dict[int, Any]:
    return {int(p.metadata.annotations[INDEX]): p for p in pods}


async def test_an_indexed_job_runs_one_pod_per_index_each_on_its_own_node(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(NS, indexed_job("train"))

    ranks = by_rank(await running_ranks(kube, "train", 2))
    assert sorted(ranks) == [0, 1]
    for index, pod in ranks.items():
        assert pod.metadata.name.startswith(f"train-{index}-")
        assert len(pod.metadata.name) == len(f"train-{index}-") + 5
        assert pod.metadata.labels[INDEX] == str(index)
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"train-{index}", "train")
        [variable] = [e for e in pod.spec.containers[0].env if e.name == "JOB_COMPLETION_INDEX"]
        assert variable.value_from.field_ref.field_path == f"metadata.annotations['{INDEX}']"
    assert ranks[0].spec.node_name != ranks[1].spec.node_name, "8 GPUs each: one node each"

    clock.advance(1)
    await kube.wait_condition("train", "Complete")
    job = await kube.job("train")
    assert (job.status.succeeded, job.status.completed_indexes) == (2, "0-1")
    assert job.status.failed_indexes is None


async def test_a_third_rank_that_fits_no_node_waits_unschedulable(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(NS, indexed_job("big", nodes=3))

    async def one_unschedulable() -> bool:
        pods = await kube.pods_of("big")
        waiting = [p for p in pods if not p.spec.node_name]
        return len(pods) == 3 and len(waiting) == 1

    await wait_until(one_unschedulable, message="two ranks bound, the third waiting")


async def test_one_rank_failing_under_a_fail_job_rule_fails_the_job_and_stops_the_others(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS,
        indexed_job(
            "train",
            run_seconds=4,
            env={"KUBESIM_FAIL_RANK": "1", "KUBESIM_EXIT_CODE": "3"},
            podFailurePolicy=FAIL_JOB_ON_ERROR,
        ),
    )
    ranks = by_rank(await running_ranks(kube, "train", 2))

    clock.advance(2)  # the failing rank ends after half the run time; rank 0 still runs
    await kube.wait_condition("train", "Failed")
    job = await kube.job("train")
    failed = {c.type: c for c in job.status.conditions}
    assert failed["Failed"].reason == failed["FailureTarget"].reason == "PodFailurePolicy"
    assert failed["Failed"].message == (
        f"Container trainer for pod {NS}/{ranks[1].metadata.name} failed with exit code 3 "
        "matching FailJob rule at index 0"
    )
    pods = {p.metadata.name: p for p in await kube.pods_of("train")}
    rank1 = pods[ranks[1].metadata.name].status.container_statuses[0].state.terminated
    assert (rank1.exit_code, rank1.reason) == (3, "Error")
    # Rank 0 was stopped, not left to finish: killed (counted as failed) and removed.
    assert ranks[0].metadata.name not in pods and job.status.completed_indexes is None
    assert job.status.failed == 2 and len(pods) == 1, "no rank was replaced"


async def test_an_oom_killed_rank_fails_alone_with_137(kube: Kube, clock: Any) -> None:
    await kube.batch.create_namespaced_job(
        NS,
        indexed_job(
            "train",
            run_seconds=4,
            env={"KUBESIM_OOM_RANK": "0"},
            podFailurePolicy=FAIL_JOB_ON_ERROR,
        ),
    )
    ranks = by_rank(await running_ranks(kube, "train", 2))
    clock.advance(2)
    await kube.wait_condition("train", "Failed")
    pods = {p.metadata.name: p for p in await kube.pods_of("train")}
    rank0 = pods[ranks[0].metadata.name].status.container_statuses[0].state.terminated
    assert (rank0.exit_code, rank0.reason) == (137, "OOMKilled")
    assert (
        "failed with exit code 137 matching FailJob rule"
        in (await kube.job("train")).status.conditions[-1].message
    )


async def test_without_rank_variables_every_rank_succeeds_and_a_rank_can_stay_pending(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS, indexed_job("train", gpus=1, env={"KUBESIM_PENDING_RANK": "1"})
    )

    async def rank1_creating() -> dict[int, Any] | None:
        ranks = by_rank(await kube.pods_of("train"))
        waiting = ranks.get(1) and ranks[1].status.container_statuses
        if ranks.get(0) and ranks[0].status.phase == "Running" and waiting:
            return ranks
        return None

    ranks = await wait_until(rank1_creating, message="rank 0 running, rank 1 being created")
    assert ranks[1].status.phase == "Pending"
    assert ranks[1].status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    clock.advance(600)

    async def rank0_done() -> bool:
        return (await kube.job("train")).status.completed_indexes == "0"

    await wait_until(rank0_done, message="rank 0 done, rank 1 still pending")
    assert by_rank(await kube.pods_of("train"))[1].status.phase == "Pending"


async def test_an_ignored_failure_is_not_counted_and_the_rank_is_replaced(
    kube: Kube, clock: Any
) -> None:
    await run_with_a_failing_rank(kube, rank=1, exit_code=42, action="Ignore")
    clock.advance(2)

    async def replaced() -> bool:
        pods = await kube.pods_of("train")
        return len(pods) == 3 and any(p.status.phase == "Running" for p in pods)

    await wait_until(replaced, message="rank 1 recreated")
    job = await kube.job("train")
    assert (job.status.failed or 0) == 0 and job.status.completed_indexes == "0"
    assert not any(c.type == "Failed" for c in job.status.conditions or [])


async def test_a_counted_failure_goes_against_the_backoff_limit(kube: Kube, clock: Any) -> None:
    await run_with_a_failing_rank(kube, rank=0, exit_code=7, action="Count")
    clock.advance(1)
    await kube.wait_condition("train", "Failed")
    job = await kube.job("train")
    assert job.status.conditions[-1].reason == "BackoffLimitExceeded"
    assert job.status.failed == 1


async def test_a_disruption_target_condition_rule_ignores_a_preempted_pod(
    kube: Kube, clock: Any
) -> None:
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    await kube.batch.create_namespaced_job(
        NS, indexed_job("train", gpus=1, run_seconds=10, podFailurePolicy=policy)
    )
    ranks = by_rank(await running_ranks(kube, "train", 2))
    name = ranks[0].metadata.name
    await kube.core.patch_namespaced_pod_status(
        name,
        NS,
        {
            "status": {
                "phase": "Failed",
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                    }
                ],
            }
        },
    )

    async def replaced() -> bool:
        return len(await kube.pods_of("train")) == 3

    await wait_until(replaced, message="rank 0 recreated")
    assert ((await kube.job("train")).status.failed or 0) == 0


async def test_per_index_back_off_fails_only_that_index(kube: Kube, clock: Any) -> None:
    body = indexed_job("train", gpus=1, env={"KUBESIM_FAIL_RANK": "1"}, backoffLimitPerIndex=1)
    del body["spec"]["backoffLimit"]  # defaults to the largest int with per-index back-off
    await kube.batch.create_namespaced_job(NS, body)
    for attempt in (1, 2):
        await running_ranks(kube, "train", 2 if attempt == 1 else 1)
        clock.advance(2)

    await kube.wait_condition("train", "Failed")
    job = await kube.job("train")
    assert (job.status.completed_indexes, job.status.failed_indexes) == ("0", "1")
    assert (job.status.conditions[-1].reason, job.status.conditions[-1].message) == (
        "FailedIndexes",
        "Job has failed indexes",
    )
    counts = sorted(
        p.metadata.annotations["batch.kubernetes.io/job-index-failure-count"]
        for p in await kube.pods_of("train")
        if p.metadata.annotations[INDEX] == "1"
    )
    assert counts == ["0", "1"]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            {"podFailurePolicy": FAIL_JOB_ON_ERROR, "restart": "OnFailure"},
            "spec.template.spec.restartPolicy",
            'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is '
            "specified",
        ),
        ({"completions": None}, "spec.completions", "Required value"),
        (
            {"podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {
                "operator": "In", "values": [1]}}]}},
            "spec.podFailurePolicy.rules[0].action",
            'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
        ),
        (
            {"podFailurePolicy": {"rules": [{"action": "Explode", "onExitCodes": {
                "operator": "In", "values": [1]}}]}},
            "spec.podFailurePolicy.rules[0].action",
            'Unsupported value: "Explode"',
        ),
        (
            {"podFailurePolicy": {"rules": [{"action": "FailJob"}]}},
            "spec.podFailurePolicy.rules[0]",
            "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
        ),
    ],
)  # fmt: skip
async def test_an_invalid_indexed_job_or_failure_policy_is_a_422(
    kube: Kube, change: dict[str, Any], field: str, message: str
) -> None:
    body = indexed_job("bad", gpus=1)
    restart = change.pop("restart", None)
    if restart:
        body["spec"]["template"]["spec"]["restartPolicy"] = restart
    body["spec"].update(change)
    if body["spec"].get("completions") is None:
        body["spec"].pop("completions")
    with pytest.raises(ApiException) as err:
        await kube.batch.create_namespaced_job(NS, body)
    status = json.loads(err.value.body)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert field in causes and causes[field].startswith(message), causes


async def test_a_non_indexed_job_has_no_index_and_ignores_rank_variables(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("plain", queue=None, gpus=1, env={"KUBESIM_FAIL_RANK": "0"})
    )
    pod = await kube.wait_pod_phase("plain", "Running")
    assert INDEX not in (pod.metadata.annotations or {}) and pod.spec.hostname is None
    clock.advance(2)
    await kube.wait_condition("plain", "Complete")
    assert (await kube.job("plain")).status.completed_indexes is None
