"""The Job controller through kubernetes_asyncio: pods kept, failures retried up to
backoffLimit, deadlines, suspension, completions and TTL, with the two-step terminal
conditions of docs/KUBERNETES.md §5."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kubesim.scenarios import NS, Kube, gpu_job
from tests.support.waiting import wait_until


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # pods run only when a test advances the clock


def condition_types(job: Any) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in job.status.conditions or []]


async def test_job_pods_carry_the_job_controllers_names_labels_owner_and_finalizer(
    kube: Kube,
) -> None:
    job = await kube.batch.create_namespaced_job(NS, gpu_job("train", queue=None, gpus=1))

    pod = await kube.wait_pod_phase("train", "Running")
    assert pod.metadata.generate_name == "train-"
    assert pod.metadata.name.startswith("train-") and len(pod.metadata.name) == len("train-") + 5
    labels = pod.metadata.labels
    assert labels["batch.kubernetes.io/job-name"] == labels["job-name"] == "train"
    assert labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
    assert labels["controller-uid"] == job.metadata.uid
    [owner] = pod.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Job",
        "train",
        job.metadata.uid,
        True,
    )
    assert pod.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]
    running = await kube.job("train")
    assert (running.status.active, running.status.ready) == (1, 1)
    assert running.status.start_time is not None


async def test_a_successful_job_meets_its_success_criteria_then_completes(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("ok", queue=None, gpus=1, parallelism=2, completions=3)
    )
    await kube.wait_pod_phase("ok", "Running")

    clock.advance(1)  # the first two pods succeed; the Job needs one more

    async def third_running() -> bool:
        pods = await kube.pods_of("ok")
        return len(pods) == 3 and any(p.status.phase == "Running" for p in pods)

    await wait_until(third_running, message="the third pod running")
    clock.advance(1)

    await kube.wait_condition("ok", "Complete")
    job = await kube.job("ok")
    assert condition_types(job)[-2:] == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached"),
    ]
    assert (job.status.succeeded, job.status.active or 0) == (3, 0)
    assert job.status.completion_time is not None

    async def finalizers_dropped() -> bool:
        pods = await kube.pods_of("ok")
        return len(pods) == 3 and all(not p.metadata.finalizers for p in pods)

    await wait_until(finalizers_dropped, message="tracking finalizers removed")


async def test_failed_pods_are_retried_until_the_backoff_limit_then_the_job_fails(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("flaky", queue=None, gpus=1, backoffLimit=2, env={"KUBESIM_EXIT_CODE": "1"})
    )

    for attempt in range(1, 4):

        async def attempt_running(n: int = attempt) -> bool:
            pods = await kube.pods_of("flaky")
            return len(pods) == n and any(p.status.phase == "Running" for p in pods)

        await wait_until(attempt_running, message=f"attempt {attempt} running")
        clock.advance(1)

    await kube.wait_condition("flaky", "Failed")
    job = await kube.job("flaky")
    assert condition_types(job) == [
        ("FailureTarget", "True", "BackoffLimitExceeded"),
        ("Failed", "True", "BackoffLimitExceeded"),
    ]
    assert job.status.conditions[1].message == "Job has reached the specified backoff limit"
    assert job.status.failed == 3
    assert job.status.completion_time is None
    assert len(await kube.pods_of("flaky")) == 3


async def test_a_job_past_its_active_deadline_kills_its_pods_and_fails(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("slow", queue=None, gpus=1, run_seconds=600, activeDeadlineSeconds=5)
    )
    await kube.wait_pod_phase("slow", "Running")

    clock.advance(6)

    failed = await kube.wait_condition("slow", "Failed")
    assert (failed.reason, failed.message) == (
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    job = await kube.job("slow")
    assert [t for t, _, _ in condition_types(job)] == ["FailureTarget", "Failed"]
    assert (job.status.active or 0, job.status.failed) == (0, 1)

    async def pods_gone() -> bool:
        return await kube.pods_of("slow") == []

    await wait_until(pods_gone, message="the killed pod removed")


async def test_suspending_a_job_deletes_its_pods_and_clears_start_time_resuming_restarts_it(
    kube: Kube,
) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("pausable", queue=None, gpus=1, run_seconds=600)
    )
    first = await kube.wait_pod_phase("pausable", "Running")

    await kube.batch.patch_namespaced_job("pausable", NS, {"spec": {"suspend": True}})

    async def suspended() -> Any:
        job = await kube.job("pausable")
        pods = await kube.pods_of("pausable")
        return job if not pods and job.status.start_time is None else None

    job = await wait_until(suspended, message="pods deleted and startTime cleared")
    assert ("Suspended", "True", "JobSuspended") in condition_types(job)
    assert (job.status.active or 0, job.status.failed or 0) == (0, 0)

    await kube.batch.patch_namespaced_job("pausable", NS, {"spec": {"suspend": False}})

    second = await kube.wait_pod_phase("pausable", "Running")
    assert second.metadata.name != first.metadata.name
    job = await kube.job("pausable")
    assert ("Suspended", "False", "JobResumed") in condition_types(job)
    assert job.status.start_time is not None


async def test_a_finished_job_is_deleted_after_its_ttl(kube: Kube, clock: Any) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("short-lived", queue=None, gpus=1, ttlSecondsAfterFinished=30)
    )
    await kube.wait_pod_phase("short-lived", "Running")
    clock.advance(1)
    await kube.wait_condition("short-lived", "Complete")

    clock.advance(31)

    async def gone() -> bool:
        jobs = await kube.batch.list_namespaced_job(NS)
        return all(j.metadata.name != "short-lived" for j in jobs.items)

    await wait_until(gone, message="the Job deleted by its TTL")


async def test_deleting_a_job_without_a_policy_orphans_its_pods_without_their_finalizer(
    kube: Kube,
) -> None:
    await kube.batch.create_namespaced_job(NS, gpu_job("left", queue=None, gpus=1, run_seconds=600))
    await kube.wait_pod_phase("left", "Running")

    await kube.batch.delete_namespaced_job("left", NS)

    async def orphaned() -> Any:
        pods = await kube.pods_of("left")
        return pods if pods and not pods[0].metadata.finalizers else None

    [pod] = await wait_until(orphaned, message="the orphaned pod released")
    assert not pod.metadata.owner_references
