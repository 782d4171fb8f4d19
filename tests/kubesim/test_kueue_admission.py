"""Kueue's sequence for a batch/v1 Job, end to end through kubernetes_asyncio.

As docs/KUBERNETES.md §1 describes it: suspended on create, a Workload named, owned and
finalized as Kueue does, admitted when the quota fits (or told why not), started with the
flavor's node labels, finished, and the quota handed to the next Job in line."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.scenarios import H100, KUEUE, NS, V1BETA2, Kube, gpu_job
from tests.support.waiting import wait_until


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # pods run only when a test advances the clock


async def test_a_queued_job_is_suspended_and_gets_a_workload_named_owned_and_finalized_like_kueue(
    kube: Kube,
) -> None:
    created = await kube.batch.create_namespaced_job(NS, gpu_job("train-1", queue="nowhere"))

    assert created.spec.suspend is True
    uid = created.metadata.uid
    digest = hashlib.sha1(f"Job\nbatch\ntrain-1\n{uid}".encode()).hexdigest()[:5]
    wl = await wait_until(lambda: kube.workload_of("train-1"), message="the Workload")
    assert wl["metadata"]["name"] == f"job-train-1-{digest}"
    assert wl["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train-1",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
    assert wl["spec"]["queueName"] == "nowhere"
    assert wl["spec"]["priority"] == 0
    [podset] = wl["spec"]["podSets"]
    assert podset["name"] == "main" and podset["count"] == 1
    assert podset["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "8"
    }


async def test_a_job_without_a_queue_name_is_left_alone_by_kueue(kube: Kube) -> None:
    created = await kube.batch.create_namespaced_job(NS, gpu_job("plain", queue=None))

    assert not created.spec.suspend
    await kube.wait_pod_phase("plain", "Running")
    assert await kube.workload_of("plain") is None


async def test_an_admitted_job_is_started_with_the_flavor_node_labels_and_runs_on_h100_nodes(
    kube: Kube,
) -> None:
    await kube.kueue_setup(gpus=16)
    await kube.batch.create_namespaced_job(NS, gpu_job("train", gpus=8, parallelism=2))

    wl = await kube.wait_workload_condition("train", "Admitted")
    by_type = {c["type"]: c for c in wl["status"]["conditions"]}
    assert by_type["QuotaReserved"]["reason"] == "QuotaReserved"
    assert by_type["QuotaReserved"]["message"] == "Quota reserved in ClusterQueue gpu-cq"
    assert by_type["Admitted"]["reason"] == "Admitted"
    assert by_type["Admitted"]["message"] == "The workload is admitted"
    assert wl["status"]["admission"] == {
        "clusterQueue": "gpu-cq",
        "podSetAssignments": [
            {
                "name": "main",
                "count": 2,
                "flavors": {"nvidia.com/gpu": "h100"},
                "resourceUsage": {"nvidia.com/gpu": "16"},
            }
        ],
    }
    await wait_until(lambda: _unsuspended(kube, "train"), message="the Job started")
    job = await kube.job("train")
    assert job.spec.template.spec.node_selector == {"nvidia.com/gpu.product": H100}
    assert [t.key for t in job.spec.template.spec.tolerations] == ["nvidia.com/gpu"]
    assert job.spec.template.metadata.labels["kueue.x-k8s.io/podset"] == "main"

    async def two_running_pods() -> list[Any]:
        pods = await kube.pods_of("train")
        return [p for p in pods if p.status.phase == "Running"] if len(pods) == 2 else []

    pods = await wait_until(two_running_pods, message="two running pods")
    assert sorted(p.spec.node_name for p in pods) == ["gpu-node-0", "gpu-node-1"]
    assert {p.spec.node_selector["nvidia.com/gpu.product"] for p in pods} == {H100}


async def _unsuspended(kube: Kube, name: str) -> bool:
    return (await kube.job(name)).spec.suspend is False


async def test_re_applying_suspend_on_a_started_job_conflicts_with_kueue(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("owned"))
    await kube.wait_workload_condition("owned", "Admitted")
    await wait_until(lambda: _unsuspended(kube, "owned"), message="the Job started")

    with pytest.raises(ApiException) as caught:
        await kube.batch.patch_namespaced_job(
            "owned",
            NS,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "owned"},
                "spec": {"suspend": True},
            },
            field_manager="aicp",
            _content_type="application/apply-patch+yaml",
        )

    assert caught.value.status == 409
    status = json.loads(caught.value.body)
    assert status["details"]["causes"][0]["reason"] == "FieldManagerConflict"
    assert '"kueue"' in status["details"]["causes"][0]["message"]
    assert status["details"]["causes"][0]["field"] == ".spec.suspend"


async def test_a_job_that_does_not_fit_waits_suspended_with_kueues_message(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("first", gpus=8))
    await kube.wait_workload_condition("first", "Admitted")
    await kube.batch.create_namespaced_job(NS, gpu_job("second", gpus=8))

    wl = await kube.wait_workload_condition("second", "QuotaReserved", "False")
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert reserved["reason"] == "Pending"
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"
        " in flavor h100, 8 more needed"
    )
    assert "admission" not in wl["status"]
    assert (await kube.job("second")).spec.suspend is True
    assert await kube.pods_of("second") == []


async def test_a_job_bigger_than_the_whole_quota_is_told_so(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("huge", gpus=8, parallelism=2))

    wl = await kube.wait_workload_condition("huge", "QuotaReserved", "False")
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert "insufficient quota for nvidia.com/gpu in flavor h100" in reserved["message"]
    assert "current podset request (16) > maximum capacity (8)" in reserved["message"]


async def test_a_resource_the_cluster_queue_does_not_cover_makes_the_job_inadmissible(
    kube: Kube,
) -> None:
    await kube.kueue_setup(gpus=8)
    body = gpu_job("fpga", gpus=0)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"example.com/fpga": "1"}
    }
    await kube.batch.create_namespaced_job(NS, body)

    wl = await kube.wait_workload_condition("fpga", "QuotaReserved", "False")
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: resource example.com/fpga unavailable in"
        " ClusterQueue"
    )


@pytest.mark.parametrize(
    ("setup", "reason", "message"),
    [
        pytest.param(
            "none", "Inadmissible", "LocalQueue team-a doesn't exist", id="no-local-queue"
        ),
        pytest.param(
            "lq-only", "Inadmissible", "ClusterQueue gpu-cq doesn't exist", id="no-cluster-queue"
        ),
        pytest.param(
            "selector",
            "Pending",
            "Workload namespace doesn't match ClusterQueue selector",
            id="namespace-not-selected",
        ),
    ],
)
async def test_a_job_whose_queues_cannot_take_it_is_told_why(
    kube: Kube, setup: str, reason: str, message: str
) -> None:
    if setup == "lq-only":
        await kube.create_local_queue("team-a", "gpu-cq")
    elif setup == "selector":
        await kube.kueue_setup(namespace_selector={"matchLabels": {"team": "a"}})
    await kube.batch.create_namespaced_job(NS, gpu_job("lost"))

    wl = await kube.wait_workload_condition("lost", "QuotaReserved", "False")
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert (reserved["reason"], reserved["message"]) == (reason, message)
    assert (await kube.job("lost")).spec.suspend is True


async def test_a_finished_job_finishes_its_workload_releases_quota_and_admits_the_next(
    kube: Kube,
    clock: Any,
) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("first", gpus=8, run_seconds=5))
    await kube.wait_pod_phase("first", "Running")
    await kube.batch.create_namespaced_job(NS, gpu_job("second", gpus=8, run_seconds=5))
    await kube.wait_workload_condition("second", "QuotaReserved", "False")

    clock.advance(5)

    await kube.wait_condition("first", "Complete")
    finished = await kube.wait_workload_condition("first", "Finished")
    [done] = [c for c in finished["status"]["conditions"] if c["type"] == "Finished"]
    assert (done["reason"], done["message"]) == ("Succeeded", "Job finished successfully")
    assert "kueue.x-k8s.io/resource-in-use" not in finished["metadata"].get("finalizers", [])
    await kube.wait_workload_condition("second", "Admitted")
    await kube.wait_pod_phase("second", "Running")


async def test_a_failed_job_finishes_its_workload_as_failed(kube: Kube, clock: Any) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(
        NS, gpu_job("crash", run_seconds=1, env={"KUBESIM_EXIT_CODE": "3"})
    )
    await kube.wait_pod_phase("crash", "Running")
    clock.advance(1)

    wl = await kube.wait_workload_condition("crash", "Finished")
    [done] = [c for c in wl["status"]["conditions"] if c["type"] == "Finished"]
    assert (done["reason"], done["message"]) == (
        "Failed",
        "Job has reached the specified backoff limit",
    )


async def test_pods_never_start_before_admission(kube: Kube, clock: Any) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("holder", gpus=8, run_seconds=3))
    await kube.wait_pod_phase("holder", "Running")
    await kube.batch.create_namespaced_job(NS, gpu_job("waiter", gpus=8, run_seconds=3))
    await kube.wait_workload_condition("waiter", "QuotaReserved", "False")

    assert await kube.pods_of("waiter") == []
    clock.advance(1)
    assert await kube.pods_of("waiter") == []
    clock.advance(2)

    pod = await kube.wait_pod_phase("waiter", "Running")
    wl = await kube.workload_of("waiter")
    assert wl is not None
    [admitted] = [c for c in wl["status"]["conditions"] if c["type"] == "Admitted"]
    assert (
        pod.metadata.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        >= admitted["lastTransitionTime"]
    )


async def test_deleting_a_queued_job_releases_its_quota_to_the_next_job(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("doomed", gpus=8, run_seconds=60))
    await kube.wait_pod_phase("doomed", "Running")
    await kube.batch.create_namespaced_job(NS, gpu_job("next", gpus=8))
    await kube.wait_workload_condition("next", "QuotaReserved", "False")

    await kube.batch.delete_namespaced_job("doomed", NS, propagation_policy="Background")

    await kube.wait_workload_condition("next", "Admitted")

    async def doomed_workload_gone() -> bool:
        names = [w["metadata"]["name"] for w in await kube.workloads()]
        return not any(n.startswith("job-doomed-") for n in names)

    await wait_until(doomed_workload_gone, message="the deleted Job's Workload gone")


async def test_raising_the_nominal_quota_admits_a_waiting_job(kube: Kube) -> None:
    await kube.kueue_setup(gpus=4)
    await kube.batch.create_namespaced_job(NS, gpu_job("wide", gpus=8))
    await kube.wait_workload_condition("wide", "QuotaReserved", "False")

    cq = await kube.cluster_queue()
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = 8
    await kube.custom.replace_cluster_custom_object(KUEUE, V1BETA2, "clusterqueues", "gpu-cq", cq)

    await kube.wait_workload_condition("wide", "Admitted")


async def test_a_higher_priority_job_is_admitted_before_an_older_lower_priority_one(
    kube: Kube,
    clock: Any,
) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.create_priority_class("high", 1000)
    await kube.batch.create_namespaced_job(NS, gpu_job("running", gpus=8, run_seconds=2))
    await kube.wait_pod_phase("running", "Running")
    await kube.batch.create_namespaced_job(NS, gpu_job("low", gpus=8))
    await kube.batch.create_namespaced_job(NS, gpu_job("urgent", gpus=8, priority_class="high"))
    urgent = await kube.wait_workload_condition("urgent", "QuotaReserved", "False")
    assert urgent["spec"]["priority"] == 1000
    assert urgent["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }

    clock.advance(2)

    await kube.wait_workload_condition("urgent", "Admitted")
    low = await kube.workload_of("low")
    assert low is not None
    assert not any(c["type"] == "Admitted" for c in low["status"]["conditions"])


async def test_cluster_and_local_queue_status_show_usage_and_pending_counts(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("a", gpus=6, run_seconds=60))
    await kube.batch.create_namespaced_job(NS, gpu_job("b", gpus=6, run_seconds=60))

    async def settled() -> dict[str, Any] | None:
        status = (await kube.cluster_queue()).get("status") or {}
        if status.get("admittedWorkloads") == 1 and status.get("pendingWorkloads") == 1:
            return status
        return None

    status = await wait_until(settled, message="ClusterQueue counts")
    [usage] = status["flavorsUsage"]
    gpu = next(r for r in usage["resources"] if r["name"] == "nvidia.com/gpu")
    assert (usage["name"], gpu["total"]) == ("h100", "6")
    assert status["reservingWorkloads"] == 1
    active = next(c for c in status["conditions"] if c["type"] == "Active")
    assert active["status"] == "True"

    async def local_settled() -> dict[str, Any] | None:
        lq = await kube.custom.get_namespaced_custom_object(
            KUEUE, V1BETA2, NS, "localqueues", "team-a"
        )
        st = lq.get("status") or {}
        return st if st.get("admittedWorkloads") == 1 and st.get("pendingWorkloads") == 1 else None

    lq_status = await wait_until(local_settled, message="LocalQueue counts")
    assert lq_status["flavorsUsage"][0]["name"] == "h100"


async def test_a_cluster_queue_with_a_missing_flavor_is_inactive(kube: Kube) -> None:
    await kube.create_cluster_queue("gpu-cq", 8, flavor="missing")
    await kube.create_local_queue("team-a", "gpu-cq")
    await kube.batch.create_namespaced_job(NS, gpu_job("stuck"))

    async def inactive() -> dict[str, Any] | None:
        status = (await kube.cluster_queue()).get("status") or {}
        active = [c for c in status.get("conditions", []) if c["type"] == "Active"]
        return active[0] if active and active[0]["status"] == "False" else None

    condition = await wait_until(inactive, message="Active=False")
    assert condition["reason"] == "FlavorNotFound"
    wl = await kube.wait_workload_condition("stuck", "QuotaReserved", "False")
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert reserved["message"] == "ClusterQueue gpu-cq is inactive"


async def test_a_higher_priority_job_preempts_a_lower_one_which_is_stopped_and_requeued(
    kube: Kube,
    clock: Any,
) -> None:
    await kube.kueue_setup(gpus=8, preemption={"withinClusterQueue": "LowerPriority"})
    await kube.create_priority_class("high", 1000)
    await kube.batch.create_namespaced_job(NS, gpu_job("low", gpus=8, run_seconds=60))
    await kube.wait_pod_phase("low", "Running")

    await kube.batch.create_namespaced_job(
        NS, gpu_job("urgent", gpus=8, run_seconds=5, priority_class="high")
    )

    evicted = await kube.wait_workload_condition("low", "Evicted")
    by_type = {c["type"]: c for c in evicted["status"]["conditions"]}
    assert by_type["Evicted"]["reason"] == "Preempted"
    assert by_type["Preempted"]["reason"] == "InClusterQueue"
    assert by_type["Evicted"]["message"].startswith("Preempted to accommodate a workload (UID: ")
    requeued = await kube.wait_workload_condition("low", "Requeued")
    by_type = {c["type"]: c for c in requeued["status"]["conditions"]}
    assert by_type["Requeued"]["reason"] == "Preempted"
    assert by_type["QuotaReserved"]["status"] == "False"  # Preempted, then Pending behind urgent
    assert "admission" not in requeued["status"]
    low = await kube.job("low")
    assert low.spec.suspend is True
    assert not low.spec.template.spec.node_selector
    assert "kueue.x-k8s.io/podset" not in (low.spec.template.metadata.labels or {})
    assert "kueue.x-k8s.io/stopping" not in (low.metadata.annotations or {})
    await kube.wait_pod_phase("urgent", "Running")

    clock.advance(5)

    readmitted = await kube.wait_workload_condition("low", "Admitted")
    by_type = {c["type"]: c for c in readmitted["status"]["conditions"]}
    assert by_type["Evicted"]["status"] == "False"
    assert by_type["Evicted"]["message"].startswith("Previously: Preempted to accommodate")
    await wait_until(lambda: _unsuspended(kube, "low"), message="the low Job restarted")


@pytest.mark.parametrize(
    ("strategy", "small_admitted"),
    [
        pytest.param("BestEffortFIFO", True, id="best-effort-lets-a-smaller-job-pass"),
        pytest.param("StrictFIFO", False, id="strict-keeps-it-behind-the-head"),
    ],
)
async def test_a_small_job_behind_a_blocked_one_goes_first_only_under_best_effort_fifo(
    kube: Kube, strategy: str, small_admitted: bool
) -> None:
    await kube.kueue_setup(gpus=8, queueingStrategy=strategy)
    await kube.batch.create_namespaced_job(NS, gpu_job("big-1", gpus=8, run_seconds=60))
    await kube.wait_workload_condition("big-1", "Admitted")
    await kube.batch.create_namespaced_job(NS, gpu_job("big-2", gpus=8))
    await kube.wait_workload_condition("big-2", "QuotaReserved", "False")
    small = gpu_job("small", gpus=0)
    small["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}

    await kube.batch.create_namespaced_job(NS, small)

    if small_admitted:
        await kube.wait_workload_condition("small", "Admitted")
    else:

        async def two_waiting() -> bool:
            status = (await kube.cluster_queue()).get("status") or {}
            return status.get("pendingWorkloads") == 2 and status.get("admittedWorkloads") == 1

        await wait_until(two_waiting, message="big-2 and small both waiting")
        wl = await kube.workload_of("small")
        assert wl is not None
        assert not any(
            c["type"] == "Admitted" for c in (wl.get("status") or {}).get("conditions", [])
        )
        assert (await kube.job("small")).spec.suspend is True


async def test_the_queue_of_a_running_job_is_immutable_but_a_waiting_one_can_move(
    kube: Kube,
) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.create_local_queue("team-b", "gpu-cq")
    await kube.batch.create_namespaced_job(NS, gpu_job("runner", gpus=8, run_seconds=60))
    await wait_until(lambda: _unsuspended(kube, "runner"), message="the Job started")
    await kube.batch.create_namespaced_job(NS, gpu_job("waiter", gpus=8))
    await kube.wait_workload_condition("waiter", "QuotaReserved", "False")
    move = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-b"}}}

    with pytest.raises(ApiException) as caught:
        await kube.batch.patch_namespaced_job("runner", NS, move)
    await kube.batch.patch_namespaced_job("waiter", NS, move)

    assert caught.value.status == 403
    assert json.loads(caught.value.body)["message"] == (
        'admission webhook "vjob.kb.io" denied the request: '
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "team-b": field is immutable'
    )

    async def moved() -> bool:
        wl = await kube.workload_of("waiter")
        return wl is not None and wl["spec"]["queueName"] == "team-b"

    await wait_until(moved, message="the waiting Workload moved to team-b")


async def test_a_job_naming_a_missing_priority_class_waits_without_a_workload_until_it_exists(
    kube: Kube,
    clock: Any,
) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("vip", priority_class="gold"))

    job = await kube.job("vip")
    assert job.spec.suspend is True
    assert await kube.workload_of("vip") is None

    await kube.create_priority_class("gold", 500)
    clock.advance(5)

    wl = await kube.wait_workload_condition("vip", "Admitted")
    assert wl["spec"]["priority"] == 500


async def test_a_job_waiting_for_its_local_queue_is_admitted_once_the_queue_is_created(
    kube: Kube,
) -> None:
    await kube.batch.create_namespaced_job(NS, gpu_job("early", queue="late-queue"))
    await kube.wait_workload_condition("early", "QuotaReserved", "False")

    await kube.kueue_setup(gpus=8, local_queue="late-queue")

    await kube.wait_workload_condition("early", "Admitted")
    await kube.wait_pod_phase("early", "Running")
