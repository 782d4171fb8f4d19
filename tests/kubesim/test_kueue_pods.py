"""Kueue's plain-pod integration on kubesim, end to end through kubernetes_asyncio: a pod with a
queue name is gated, labelled and finalized by the webhook, gets its own Workload, waits
Pending (gated) until that Workload is admitted, then is ungated with the flavor's node labels
and bound; its end, or its deletion, finishes the Workload and frees the quota."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim import Cluster
from tests.kubesim.builders import job, pod, raw
from tests.kubesim.scenarios import H100, KUEUE, NS, V1BETA2, Kube, gpu_job
from tests.support.waiting import wait_until

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
GATES = ["kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]
INSUFFICIENT = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
    "flavor h100, 8 more needed"
)


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # pods run until a test advances the clock


def gpu_pod(
    name: str,
    *,
    gpus: int = 8,
    queue: str | None = "team-a",
    priority_class: str | None = None,
    run_seconds: float = 60,
) -> dict[str, Any]:
    """A pod of one container asking for `gpus` GPUs (as a limit), queued by its label."""
    labels = {}
    if queue is not None:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if priority_class is not None:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    body = pod(name, labels=labels)
    body["spec"]["restartPolicy"] = "Never"
    body["spec"]["containers"][0].update(
        resources={"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {},
        env=[{"name": "KUBESIM_RUN_SECONDS", "value": str(run_seconds)}],
    )
    return body


def workload_name(pod_name: str, uid: str) -> str:
    digest = hashlib.sha1(f"Pod\n\n{pod_name}\n{uid}".encode()).hexdigest()[:5]
    return f"pod-{pod_name}-{digest}"


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_]
    return found[0] if found else {}


async def workload_of(kube: Kube, pod_name: str) -> dict[str, Any] | None:
    for wl in await kube.workloads():
        refs = wl["metadata"].get("ownerReferences") or []
        if any(r["kind"] == "Pod" and r["name"] == pod_name for r in refs):
            return wl
    return None


async def wait_workload(
    kube: Kube, pod_name: str, type_: str, status: str = "True", reason: str | None = None
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        wl = await workload_of(kube, pod_name)
        found = condition(wl, type_) if wl else {}
        if found.get("status") == status and reason in (None, found.get("reason")):
            return wl
        return None

    return await wait_until(probe, message=f"Workload of pod {pod_name} {type_}={status}")


async def wait_phase(kube: Kube, name: str, phase: str) -> Any:
    async def probe() -> Any:
        found = await kube.core.read_namespaced_pod(name, NS)
        return found if found.status.phase == phase and found.spec.node_name else None

    return await wait_until(probe, message=f"pod {name} {phase} and bound")


async def last_state(kube: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    """A pod or Workload as its DELETED event carries it (a Workload goes with its pod)."""
    meta = obj["metadata"]
    if obj["kind"] == "Pod":
        args: tuple[Any, ...] = (kube.core.list_namespaced_pod, NS)
    else:
        args = (kube.custom.list_namespaced_custom_object, KUEUE, V1BETA2, NS, "workloads")
    async with watch.Watch() as w:
        stream = w.stream(*args, resource_version=meta["resourceVersion"], timeout_seconds=10)
        async for event in stream:
            raw = event["raw_object"]
            if event["type"] == "DELETED" and raw["metadata"]["name"] == meta["name"]:
                return dict(raw)
    raise AssertionError(f"no DELETED event for {meta['name']}")


async def counts(kube: Kube, queue: str, admitted: int, pending: int) -> bool:
    """Whether the ClusterQueue `gpu-cq` or the LocalQueue `team-a` shows these counts."""
    if queue == "gpu-cq":
        found = await kube.cluster_queue(queue)
    else:
        found = await kube.custom.get_namespaced_custom_object(
            KUEUE, V1BETA2, NS, "localqueues", queue
        )
    status = found.get("status") or {}
    return (status.get("admittedWorkloads"), status.get("pendingWorkloads")) == (admitted, pending)


async def gone(kube: Kube, name: str) -> bool:
    try:
        await kube.core.read_namespaced_pod(name, NS)
    except ApiException as exc:
        return exc.status == 404
    return False


async def test_a_queued_pod_is_gated_and_gets_its_own_workload_named_and_owned_like_kueue(
    kube: Kube,
) -> None:
    created = await kube.core.create_namespaced_pod(NS, gpu_pod("serve-0", queue="nowhere"))

    assert [g.name for g in created.spec.scheduling_gates] == GATES
    assert created.metadata.labels["kueue.x-k8s.io/managed"] == "true"
    assert created.metadata.finalizers == ["kueue.x-k8s.io/managed"]
    [scheduled] = created.status.conditions
    assert (scheduled.type, scheduled.status, scheduled.reason, scheduled.message) == (
        "PodScheduled",
        "False",
        "SchedulingGated",
        "Scheduling is blocked due to non-empty scheduling gates",
    )
    uid = created.metadata.uid
    wl = await wait_workload(kube, "serve-0", "QuotaReserved", "False")
    assert wl["metadata"]["name"] == workload_name("serve-0", uid)
    assert wl["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "serve-0",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
    assert (wl["spec"]["queueName"], wl["spec"]["priority"]) == ("nowhere", 0)
    [podset] = wl["spec"]["podSets"]
    assert (podset["name"], podset["count"]) == ("main", 1)
    assert podset["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "8"
    }
    reserved = condition(wl, "QuotaReserved")
    assert (reserved["reason"], reserved["message"]) == (
        "Inadmissible",
        "LocalQueue nowhere doesn't exist",
    )
    still = await kube.core.read_namespaced_pod("serve-0", NS)
    assert still.status.phase == "Pending" and not still.spec.node_name


async def test_with_quota_for_two_pods_of_three_two_run_and_the_third_waits_until_one_is_deleted(
    kube: Kube, kube_cluster_with_controllers: Cluster
) -> None:
    cluster = kube_cluster_with_controllers
    await kube.kueue_setup(gpus=16)
    for name in ("serve-0", "serve-1"):
        await kube.core.create_namespaced_pod(NS, gpu_pod(name))
        await wait_phase(kube, name, "Running")
    await kube.core.create_namespaced_pod(NS, gpu_pod("serve-2"))

    waiting = await wait_workload(kube, "serve-2", "QuotaReserved", "False")
    reserved = condition(waiting, "QuotaReserved")
    assert (reserved["reason"], reserved["message"]) == ("Pending", INSUFFICIENT)
    third = await kube.core.read_namespaced_pod("serve-2", NS)
    assert [g.name for g in third.spec.scheduling_gates] == GATES
    assert third.status.phase == "Pending" and not third.spec.node_name
    running = await kube.core.read_namespaced_pod("serve-0", NS)
    assert not running.spec.scheduling_gates
    assert running.spec.node_selector == {"nvidia.com/gpu.product": H100}
    assert [t.key for t in running.spec.tolerations] == ["nvidia.com/gpu"]
    labels = running.metadata.labels
    assert labels["kueue.x-k8s.io/podset"] == "main"
    assert labels["kueue.x-k8s.io/local-queue-name"] == "team-a"
    assert labels["kueue.x-k8s.io/cluster-queue-name"] == "gpu-cq"
    admitted = await workload_of(kube, "serve-0")
    assert admitted is not None
    assert running.metadata.annotations["kueue.x-k8s.io/workload"] == admitted["metadata"]["name"]
    await wait_until(lambda: counts(kube, "gpu-cq", 2, 1), message="the ClusterQueue's counts")
    await wait_until(lambda: counts(kube, "team-a", 2, 1), message="the LocalQueue's counts")
    status, summary, _ = await raw(
        "GET", f"{cluster.url}{VISIBILITY}/clusterqueues/gpu-cq/pendingworkloads"
    )
    assert status == 200, summary
    [listed] = summary["items"]
    assert listed["metadata"]["name"] == waiting["metadata"]["name"]
    assert listed["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert listed["metadata"]["ownerReferences"][0]["name"] == "serve-2"
    assert (listed["positionInClusterQueue"], listed["localQueueName"]) == (0, "team-a")

    await kube.core.delete_namespaced_pod("serve-0", NS)

    done = condition(await last_state(kube, admitted), "Finished")
    assert (done["reason"], done["message"]) == (
        "OwnerNotFound",
        "The workload's owner no longer exists",
    )
    await wait_until(lambda: gone(kube, "serve-0"), message="the deleted pod gone")
    await wait_workload(kube, "serve-2", "Admitted")
    started = await wait_phase(kube, "serve-2", "Running")
    assert not started.spec.scheduling_gates


async def test_a_pod_that_succeeds_finishes_its_workload_and_lets_go_of_both_finalizers(
    kube: Kube, clock: Any
) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.core.create_namespaced_pod(NS, gpu_pod("once", run_seconds=5))
    await wait_phase(kube, "once", "Running")

    clock.advance(5)

    wl = await wait_workload(kube, "once", "Finished")
    assert condition(wl, "Finished")["reason"] == "Succeeded"

    async def released() -> bool:
        found = await workload_of(kube, "once")
        ended = await kube.core.read_namespaced_pod("once", NS)
        return (
            bool(found)
            and not found["metadata"].get("finalizers")
            and not ended.metadata.finalizers
        )

    await wait_until(released, message="both finalizers removed")
    await wait_until(lambda: counts(kube, "gpu-cq", 0, 0), message="the quota released")


async def test_a_pod_without_a_queue_name_runs_without_a_workload(kube: Kube) -> None:
    created = await kube.core.create_namespaced_pod(NS, gpu_pod("plain", queue=None, gpus=0))

    assert not created.spec.scheduling_gates
    assert not created.metadata.finalizers
    assert "kueue.x-k8s.io/managed" not in (created.metadata.labels or {})
    await wait_phase(kube, "plain", "Running")
    assert await workload_of(kube, "plain") is None


async def test_a_queued_jobs_pods_are_left_to_the_job_integration(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.batch.create_namespaced_job(NS, gpu_job("train", gpus=8))

    running = await kube.wait_pod_phase("train", "Running")

    assert not running.spec.scheduling_gates
    assert running.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]
    assert "kueue.x-k8s.io/managed" not in running.metadata.labels
    assert [wl["metadata"]["ownerReferences"][0]["kind"] for wl in await kube.workloads()] == [
        "Job"
    ]


async def test_a_queued_pod_owned_by_a_queued_job_is_left_to_that_job_and_a_missing_owner_refused(
    kube: Kube,
) -> None:
    owner = await kube.batch.create_namespaced_job(
        NS, job("owner", labels={"kueue.x-k8s.io/queue-name": "team-a"})
    )
    owned = pod(
        "by-hand",
        labels={"kueue.x-k8s.io/queue-name": "team-a"},
        owner={"apiVersion": "batch/v1", "kind": "Job", "metadata": owner.metadata.to_dict()},
    )

    created = await kube.core.create_namespaced_pod(NS, owned)

    assert not created.spec.scheduling_gates
    assert "kueue.x-k8s.io/managed" not in created.metadata.labels
    await kube.batch.delete_namespaced_job("owner", NS)
    owned["metadata"]["name"] = "orphan"
    with pytest.raises(ApiException) as refused:
        await kube.core.create_namespaced_pod(NS, owned)
    assert refused.value.status == 404
    assert json.loads(refused.value.body)["message"] == (
        'admission webhook "mpod.kb.io" denied the request: jobs.batch "owner" not found'
    )


async def test_a_queued_pod_of_a_replica_set_is_kueues_own(kube: Kube) -> None:
    template = {
        "metadata": {"labels": {"app": "serve", "kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    replica_set = await client.AppsV1Api(kube.api).create_namespaced_replica_set(
        NS,
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "serve-6d4cf56db6"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "serve"}},
                "template": template,
            },
        },
    )
    replica = pod(
        "serve-6d4cf56db6-x7k2p",
        labels=template["metadata"]["labels"],
        owner={
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": replica_set.metadata.to_dict(),
        },
    )

    created = await kube.core.create_namespaced_pod(NS, replica)

    assert [g.name for g in created.spec.scheduling_gates] == GATES
    assert created.metadata.labels["kueue.x-k8s.io/managed"] == "true"


async def test_the_queue_of_a_running_pod_is_immutable(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.core.create_namespaced_pod(NS, gpu_pod("serve"))
    await wait_phase(kube, "serve", "Running")

    with pytest.raises(ApiException) as refused:
        await kube.core.patch_namespaced_pod(
            "serve", NS, {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-b"}}}
        )

    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == (
        'admission webhook "vpod.kb.io" denied the request: '
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "team-b": field is immutable'
    )


async def test_a_higher_priority_pod_preempts_a_lower_one_which_is_deleted_not_requeued(
    kube: Kube,
) -> None:
    await kube.kueue_setup(gpus=8, preemption={"withinClusterQueue": "LowerPriority"})
    await kube.create_priority_class("high", 1000)
    await kube.core.create_namespaced_pod(NS, gpu_pod("low"))
    await wait_phase(kube, "low", "Running")
    admitted = await workload_of(kube, "low")
    assert admitted is not None
    running = kube.api.sanitize_for_serialization(await kube.core.read_namespaced_pod("low", NS))

    await kube.core.create_namespaced_pod(NS, gpu_pod("urgent", priority_class="high"))

    last = await last_state(kube, running)
    assert {"PodScheduled", "Ready"} <= {c["type"] for c in last["status"]["conditions"]}
    stopped = condition(last, "TerminationTarget")
    assert (stopped["status"], stopped["reason"]) == ("True", "WorkloadEvictedDueToPreempted")
    assert stopped["message"].startswith("Preempted to accommodate a workload (UID: ")
    evicted = await last_state(kube, admitted)
    assert condition(evicted, "Evicted")["reason"] == "Preempted"
    assert condition(evicted, "Preempted")["reason"] == "InClusterQueue"
    requeued = condition(evicted, "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("False", "Preempted")
    assert condition(evicted, "QuotaReserved")["status"] == "False"
    assert condition(evicted, "Finished")["reason"] == "OwnerNotFound"
    await wait_until(lambda: gone(kube, "low"), message="the preempted pod gone")
    urgent = await wait_phase(kube, "urgent", "Running")
    wl = await workload_of(kube, "urgent")
    assert wl is not None and wl["spec"]["priority"] == 1000
    assert urgent.metadata.labels["kueue.x-k8s.io/podset"] == "main"


async def test_deleting_a_pods_workload_by_hand_stops_the_pod(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.core.create_namespaced_pod(NS, gpu_pod("serve"))
    await wait_phase(kube, "serve", "Running")
    wl = await workload_of(kube, "serve")
    assert wl is not None

    await kube.custom.delete_namespaced_custom_object(
        KUEUE, V1BETA2, NS, "workloads", wl["metadata"]["name"]
    )

    await wait_until(lambda: gone(kube, "serve"), message="the pod stopped and gone")
    assert await workload_of(kube, "serve") is None
    await wait_until(lambda: counts(kube, "gpu-cq", 0, 0), message="the quota released")


async def test_an_admitted_pod_is_ready_once_it_runs(kube: Kube) -> None:
    await kube.kueue_setup(gpus=8)
    await kube.core.create_namespaced_pod(NS, gpu_pod("serve"))

    wl = await wait_workload(kube, "serve", "PodsReady")

    ready = condition(wl, "PodsReady")
    assert (ready["reason"], ready["message"]) == (
        "Started",
        "All pods reached readiness and the workload is running",
    )
