"""classify: a workload's state and reason from realistic Kubernetes objects (docs/DESIGN.md §7)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.domain.conditions import EvictionCause
from app.domain.states import WorkloadState
from tests.support.kube_builders import JobBuilder, make_job

QUEUED, ADMITTED, RUNNING = WorkloadState.QUEUED, WorkloadState.ADMITTED, WorkloadState.RUNNING
SUCCEEDED, FAILED = WorkloadState.SUCCEEDED, WorkloadState.FAILED

Case = Callable[[], JobBuilder]

CASES = [
    pytest.param(
        lambda: make_job().deleted_by_hand(),
        WorkloadState.PENDING,
        "Accepted; the Job has not been created yet.",
        id="no-job-is-pending",
    ),
    pytest.param(
        lambda: make_job(),
        QUEUED,
        "Queued in pool h100-pool, waiting for Kueue to consider it.",
        id="fresh-suspended-job-is-queued",
    ),
    pytest.param(
        lambda: make_job().waiting_for_quota(quota=16, in_use=16, workloads_admitted=2),
        QUEUED,
        "Waiting for quota in pool h100-pool: asked for 8 nvidia.com/gpu, "
        "the pool has 16 with 16 in use by 2 workloads.",
        id="waiting-for-quota-names-pool-request-quota-and-usage",
    ),
    pytest.param(
        lambda: make_job(accelerators=4, replicas=2).waiting_for_quota(
            quota=16, in_use=12, workloads_admitted=1
        ),
        QUEUED,
        "Waiting for quota in pool h100-pool: asked for 8 nvidia.com/gpu, "
        "the pool has 16 with 12 in use by 1 workload.",
        id="waiting-for-quota-counts-every-replica",
    ),
    pytest.param(
        lambda: make_job(accelerators=0, memory="1Ti").waiting_for_quota(
            "couldn't assign flavors to pod set main: insufficient unused quota for memory "
            "in flavor h100-80g, 512Gi more needed",
        ),
        QUEUED,
        "Waiting for quota in pool h100-pool: asked for 1Ti memory, "
        "the pool has 2Ti with 512Gi in use by 2 workloads.",
        id="waiting-for-memory-quota-names-memory-in-binary-units",
    ),
    pytest.param(
        lambda: make_job(accelerators=8, replicas=3).waiting_for_quota(quota=16, in_use=0),
        QUEUED,
        "Waiting for quota in pool h100-pool: asked for 24 nvidia.com/gpu, but the pool has "
        "only 16 in total, so it can never be admitted; lower the request or raise the pool's "
        "quota.",
        id="request-above-the-pool-quota-says-it-can-never-fit",
    ),
    pytest.param(
        lambda: make_job(accelerators=8, cpu="200").waiting_for_quota(
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
            "flavor h100-80g, 8 more needed, insufficient unused quota for nvidia.com/gpu in "
            "flavor h100-80g, 8 more needed",
            quota=16,
            in_use=16,
        ),
        QUEUED,
        "Waiting for quota in pool h100-pool: asked for 8 nvidia.com/gpu, "
        "the pool has 16 with 16 in use by 2 workloads.",
        id="several-short-resources-name-the-accelerator-first",
    ),
    pytest.param(
        lambda: make_job(cpu="200").waiting_for_quota("", quota=16, in_use=0),
        QUEUED,
        "Waiting for quota in pool h100-pool: asked for 200 cpu, "
        "the pool has 256 with 64 in use by 2 workloads.",
        id="without-a-kueue-message-the-pool-numbers-find-the-short-resource",
    ),
    pytest.param(
        lambda: make_job().inadmissible("LocalQueue h100-pool doesn't exist"),
        QUEUED,
        "Queued in pool h100-pool, but Kueue cannot admit it yet: "
        "LocalQueue h100-pool doesn't exist.",
        id="inadmissible-quotes-kueue",
    ),
    pytest.param(
        lambda: make_job().admitted(),
        ADMITTED,
        "Admitted by cluster queue aicp-research-h100-pool on flavor h100-80g; "
        "waiting for its pods.",
        id="admitted-names-cluster-queue-and-flavor",
    ),
    pytest.param(
        lambda: make_job().admitted().starting(),
        ADMITTED,
        "Admitted by cluster queue aicp-research-h100-pool on flavor h100-80g; starting 1 pod.",
        id="admitted-with-pod-creating-containers",
    ),
    pytest.param(
        lambda: make_job().admitted().running(node="gpu-node-1"),
        RUNNING,
        "1 of 1 pods running on node gpu-node-1 (NVIDIA-H100-80GB-HBM3).",
        id="running-names-node-and-gpu-product",
    ),
    pytest.param(
        lambda: make_job(replicas=2).admitted().running(),
        RUNNING,
        "2 of 2 pods running on nodes gpu-node-1 and gpu-node-2 (NVIDIA-H100-80GB-HBM3).",
        id="running-replicas-name-every-node",
    ),
    pytest.param(
        lambda: make_job(retries=2).admitted().retrying(exit_code=3),
        RUNNING,
        "1 of 1 pods running on node gpu-node-2 (NVIDIA-H100-80GB-HBM3). Attempt 2 of 3; the "
        "previous one exited with code 3 on node gpu-node-1.",
        id="running-a-retry-explains-the-failed-attempt",
    ),
    pytest.param(
        lambda: make_job(retries=1).admitted().retrying(exit_code=137),
        RUNNING,
        "1 of 1 pods running on node gpu-node-2 (NVIDIA-H100-80GB-HBM3). Attempt 2 of 2; the "
        "previous one ran out of memory (OOMKilled) on node gpu-node-1.",
        id="running-a-retry-after-an-oom-kill-says-so",
    ),
    pytest.param(
        lambda: _without_workload(make_job().admitted().running(node="gpu-node-2")),
        RUNNING,
        "1 of 1 pods running on node gpu-node-2 (NVIDIA-H100-80GB-HBM3).",
        id="running-pods-win-over-a-lagging-workload-cache",
    ),
    pytest.param(
        lambda: make_job(image="ghcr.io/acme/does-not-exist:1").admitted().image_pull_backoff(),
        ADMITTED,
        "The image ghcr.io/acme/does-not-exist:1 could not be pulled (ImagePullBackOff); check "
        "its name and tag and that the cluster may pull it. The workload keeps waiting until "
        "its maximum runtime of 1d ends it.",
        id="image-pull-backoff-names-the-image",
    ),
    pytest.param(
        lambda: make_job().admitted().unschedulable(),
        ADMITTED,
        "Admitted, but no node has 8 nvidia.com/gpu free for a pod (the scheduler says: "
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu).",
        id="unschedulable-names-the-resource-no-node-had",
    ),
    pytest.param(
        lambda: (
            make_job(cpu="200")
            .admitted()
            .unschedulable(
                "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
                "2 No preemption victims found for incoming pod."
            )
        ),
        ADMITTED,
        "Admitted, but no node has 200 cpu free for a pod (the scheduler says: "
        "0/2 nodes are available: 2 Insufficient cpu).",
        id="unschedulable-drops-the-preemption-postscript",
    ),
    pytest.param(
        lambda: (
            make_job()
            .admitted()
            .unschedulable(
                "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
            )
        ),
        ADMITTED,
        "Admitted, but no node carries the labels of the pool's accelerator flavor (the "
        "scheduler says: 0/2 nodes are available: 2 node(s) didn't match Pod's node "
        "affinity/selector); if the accelerator binding's node labels changed since admission, "
        "submit it again (`aicp delete workload <name>`, then `aicp apply -f <file>`; or PUT "
        "of the same spec) so it is admitted with the current ones.",
        id="unschedulable-by-node-labels-says-no-node-matches-the-flavor",
    ),
    pytest.param(
        lambda: make_job().admitted().succeeded(node="gpu-node-1"),
        SUCCEEDED,
        "Succeeded: 1 of 1 pods completed on node gpu-node-1 (NVIDIA-H100-80GB-HBM3) in 2m.",
        id="succeeded-names-node-and-duration",
    ),
    pytest.param(
        lambda: make_job().admitted().failed(exit_code=3, node="gpu-node-1"),
        FAILED,
        "Failed: container main exited with code 3 on node gpu-node-1.",
        id="non-zero-exit-names-code-and-node",
    ),
    pytest.param(
        lambda: make_job(retries=2).admitted().failed(exit_code=2, node="gpu-node-2"),
        FAILED,
        "Failed after 3 attempts: container main exited with code 2 on node gpu-node-2.",
        id="exhausted-retries-count-the-attempts",
    ),
    pytest.param(
        lambda: make_job(memory="64Gi").admitted().oom_killed(node="gpu-node-1"),
        FAILED,
        "Container main ran out of memory and was killed (OOMKilled) on node gpu-node-1: its "
        "memory limit is 64Gi; raise `memory` to give it more.",
        id="oom-killed-names-memory-limit",
    ),
    pytest.param(
        lambda: make_job(max_runtime_seconds=3600).admitted().running().deadline_exceeded(),
        FAILED,
        "Stopped after exceeding the maximum runtime of 3600 seconds (1h); raise "
        "`max_runtime_seconds` if it needs longer.",
        id="deadline-exceeded-names-the-max-runtime",
    ),
    pytest.param(
        lambda: (
            make_job(image="ghcr.io/acme/does-not-exist:2", max_runtime_seconds=600)
            .admitted()
            .image_pull_backoff()
            .deadline_exceeded(keep_pods=True)
        ),
        FAILED,
        "Stopped after exceeding the maximum runtime of 600 seconds (10m); raise "
        "`max_runtime_seconds` if it needs longer. Its image ghcr.io/acme/does-not-exist:2 "
        "could never be pulled, so it never started.",
        id="deadline-after-image-pull-names-the-image",
    ),
    pytest.param(
        lambda: make_job().admitted().running().preempted(),
        QUEUED,
        "Preempted by a higher-priority workload in the same pool; requeued in pool h100-pool, "
        "waiting for quota again.",
        id="preempted-returns-to-queued-and-says-requeued",
    ),
    pytest.param(
        lambda: make_job().admitted().running().evicted("NodeFailures"),
        QUEUED,
        "Evicted because a node it ran on failed; requeued in pool h100-pool, waiting for "
        "quota again.",
        id="evicted-by-node-failure-names-the-cause",
    ),
    pytest.param(
        lambda: make_job().admitted().running().evicted("Deactivated", requeued=False),
        QUEUED,
        "Evicted because it was deactivated; it was not requeued.",
        id="deactivated-says-not-requeued",
    ),
]


def _without_workload(builder: JobBuilder) -> JobBuilder:
    builder.workload = None
    return builder


@pytest.mark.parametrize(("scenario", "state", "reason"), CASES)
def test_classify_gives_the_state_and_a_reason_a_user_can_act_on(
    scenario: Case, state: WorkloadState, reason: str
) -> None:
    result = scenario().build().classify()

    assert (result.state, result.reason) == (state, reason)


@pytest.mark.parametrize(("scenario", "state", "reason"), CASES)
def test_every_reason_is_a_whole_sentence(
    scenario: Case, state: WorkloadState, reason: str
) -> None:
    text = scenario().build().classify().reason

    assert text[0].isupper() or text[0].isdigit()
    assert text.endswith(".") and not text.endswith("..")


def _uncounted(builder: JobBuilder) -> JobBuilder:
    """The pods have ended, but the Job controller has not looked yet (a real cluster's gap)."""
    builder.job["status"] = {"startTime": builder.job["status"].get("startTime"), "active": 1}
    return builder


def _without_condition(builder: JobBuilder, kind: str) -> JobBuilder:
    conditions = builder.job["status"]["conditions"]
    conditions[:] = [c for c in conditions if c["type"] != kind]
    return builder


@pytest.mark.parametrize(
    ("scenario", "reason"),
    [
        pytest.param(
            lambda: _without_condition(make_job().admitted().failed(exit_code=1), "Failed"),
            "The Job is failing (BackoffLimitExceeded); waiting for its pods to stop.",
            id="failure-target-before-failed",
        ),
        pytest.param(
            lambda: _without_condition(make_job().admitted().succeeded(), "Complete"),
            "All pods completed; the Job is finishing.",
            id="success-criteria-met-before-complete",
        ),
        pytest.param(
            lambda: _uncounted(make_job().admitted().succeeded()),
            "All pods completed; the Job is finishing.",
            id="pod-succeeded-before-the-job-counted-it",
        ),
        pytest.param(
            lambda: _uncounted(make_job().admitted().failed(exit_code=3)),
            "The Job is failing (BackoffLimitExceeded); waiting for its pods to stop.",
            id="last-attempt-failed-before-the-job-counted-it",
        ),
    ],
)
def test_a_job_that_decided_but_still_stops_its_pods_is_not_final_yet(
    scenario: Case, reason: str
) -> None:
    result = scenario().build().classify()

    assert (result.state, result.reason) == (WorkloadState.RUNNING, reason)


def test_pods_of_an_older_job_with_the_same_name_are_ignored() -> None:
    stale = make_job().admitted().running(node="gpu-node-2").build().pods
    for pod in stale:
        pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "an-older-job-uid"
    scenario = make_job().admitted().build()
    scenario.pods = stale

    result = scenario.classify()

    assert result.state is WorkloadState.ADMITTED
    assert result.evidence.nodes == []


@pytest.mark.parametrize(
    ("scenario", "cause"),
    [
        pytest.param(
            lambda: make_job().admitted().running().preempted(),
            EvictionCause.PREEMPTED,
            id="preempted by a workload of higher priority",
        ),
        pytest.param(
            lambda: make_job().admitted().running().evicted("NodeFailures"),
            EvictionCause.EVICTED,
            id="evicted after a node failure",
        ),
        pytest.param(lambda: make_job().admitted().running(), None, id="still running"),
    ],
)
def test_a_workload_kueue_took_back_carries_the_cause_events_are_chosen_from(
    scenario: Case, cause: EvictionCause | None
) -> None:
    assert scenario().build().classify().cause is cause
