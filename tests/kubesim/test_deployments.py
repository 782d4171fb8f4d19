"""Deployments run as on a real cluster: ReplicaSets named by the pod template's hash, pods that
become ready, rolling updates within maxSurge/maxUnavailable, Recreate, scaling, replacement of a
deleted pod, garbage collection and the progress deadline — all as `kubectl get` would show it,
with the clock moved by hand."""

from __future__ import annotations

import asyncio
import re
import shutil
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim import Cluster
from tests.kubesim.builders import MERGE
from tests.kubesim.scenarios import Kube
from tests.kubesim.serving_builders import NS, deployment, rolling
from tests.kubesim.serving_probes import (
    Serving,
    condition,
    desired_replicas,
    pods_and_ready,
    ready,
    watch_of,
)
from tests.support.waiting import wait_until


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # readiness delays pass only when a test advances the clock


@pytest.fixture
def serving(kube: Kube) -> Serving:
    return Serving(kube.api)


async def test_a_deployment_of_two_reaches_two_ready_pods(serving):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))

    pods = await serving.wait_ready("web", 2)
    [rs] = await serving.replicasets("web")
    digest = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{digest}" and re.fullmatch(
        r"[bcdfghjklmnpqrstvwxz2-9]+", digest
    )
    assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": digest}
    [owner] = rs.metadata.owner_references
    assert (owner.kind, owner.name, owner.controller, owner.block_owner_deletion) == (
        "Deployment",
        "web",
        True,
        True,
    )
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    for pod in pods:
        assert re.fullmatch(rf"web-{digest}-[bcdfghjklmnpqrstvwxz2-9]{{5}}", pod.metadata.name)
        assert pod.metadata.labels == {"app": "web", "pod-template-hash": digest}
        assert pod.metadata.owner_references[0].name == rs.metadata.name
        assert pod.status.phase == "Running" and pod.status.container_statuses[0].ready
    await serving.wait_settled("web")
    d = await serving.deployment("web")
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert (d.status.replicas, d.status.updated_replicas, d.status.available_replicas) == (2, 2, 2)
    assert d.status.unavailable_replicas is None and d.status.observed_generation == 1
    available, progressing = condition(d, "Available"), condition(d, "Progressing")
    assert (available.status, available.reason) == ("True", "MinimumReplicasAvailable")
    assert (progressing.status, progressing.reason) == ("True", "NewReplicaSetAvailable")
    assert progressing.message == f'ReplicaSet "{rs.metadata.name}" has successfully progressed.'


async def _step(serving: Serving, clock: Any, name: str, seconds: float) -> None:
    """Advance the clock past every existing pod's readiness delay and wait for the controllers
    to catch up."""
    before = {p.metadata.name for p in await serving.pods(name)}
    clock.advance(seconds)

    async def caught_up() -> bool:
        pods = await serving.pods(name)
        old_ready = all(ready(p) for p in pods if p.metadata.name in before)
        return old_ready and await serving.settled(name)

    await wait_until(caught_up, message="the rollout to catch up with the clock")


async def _rolled_out(serving: Serving, name: str, image: str, replicas: int) -> bool:
    d = await serving.deployment(name)
    progressing = condition(d, "Progressing")
    pods = await serving.pods(name)
    return (
        progressing is not None
        and progressing.reason == "NewReplicaSetAvailable"
        and (d.status.updated_replicas, d.status.available_replicas) == (replicas, replicas)
        and len(pods) == replicas
        and all(p.spec.containers[0].image == image for p in pods)
    )


@pytest.mark.parametrize(
    ("surge", "unavailable", "most", "least"),
    [
        pytest.param(1, 1, 5, 3, id="surge-1-unavailable-1"),
        pytest.param("25%", 0, 5, 4, id="surge-25%-unavailable-0"),
        pytest.param(0, "50%", 4, 2, id="surge-0-unavailable-50%"),
    ],
)
async def test_an_image_change_rolls_out_within_max_surge_and_max_unavailable(
    serving, clock, kube_cluster_with_controllers: Cluster, surge, unavailable, most, least
):
    body = deployment(
        "web",
        replicas=4,
        gpus=0,
        env={"KUBESIM_READY_AFTER_SECONDS": "5"},
        strategy=rolling(surge, unavailable),
    )
    created = await serving.apps.create_namespaced_deployment(NS, body)
    await serving.wait_settled("web")
    await _step(serving, clock, "web", 5)
    [old_rs] = await serving.replicasets("web")
    base, since = kube_cluster_with_controllers.url, created.metadata.resource_version
    pods = watch_of(base, f"api/v1/namespaces/{NS}/pods", "web", since, pods_and_ready)
    rss = watch_of(
        base, f"apis/apps/v1/namespaces/{NS}/replicasets", "web", since, desired_replicas
    )
    await wait_until(lambda: pods.seen and pods.seen[-1][:2] == (4, 4), message="the pods")
    await wait_until(lambda: rss.seen and rss.seen[-1] == 4, message="the ReplicaSets")
    first_pods, first_rss = len(pods.seen), len(rss.seen)

    image = {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": "v:2"}]}}}}
    await serving.apps.patch_namespaced_deployment("web", NS, image)
    for _ in range(20):
        if await _rolled_out(serving, "web", "v:2", 4):
            break
        await serving.wait_settled("web")
        await _step(serving, clock, "web", 5)
    await wait_until(lambda: _rolled_out(serving, "web", "v:2", 4), message="the rollout")
    await wait_until(lambda: pods.seen[-1] == (4, 4, {"v:2"}), message="the watch to see the end")
    await pods.stop()
    await rss.stop()

    # The controller's bounds: the ReplicaSets' desired replicas add up to at most replicas +
    # maxSurge, and at least replicas - maxUnavailable pods stay ready throughout.
    assert max(rss.seen[first_rss:]) == most
    assert min(ready_now for _, ready_now, _ in pods.seen[first_pods:]) == least
    new_rs, old = [rs for rs in await serving.replicasets("web") if rs.spec.replicas], old_rs
    [new_rs] = new_rs
    assert new_rs.metadata.name != old.metadata.name and new_rs.spec.replicas == 4
    assert new_rs.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    old_now = await serving.apps.read_namespaced_replica_set(old.metadata.name, NS)
    assert old_now.spec.replicas == 0 and (old_now.status.replicas or 0) == 0
    d = await serving.deployment("web")
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"


async def test_recreate_removes_every_old_pod_before_the_new_ones_start(
    serving, kube_cluster_with_controllers: Cluster
):
    body = deployment("web", replicas=3, gpus=0, strategy={"type": "Recreate"})
    created = await serving.apps.create_namespaced_deployment(NS, body)
    await serving.wait_ready("web", 3)
    base, since = kube_cluster_with_controllers.url, created.metadata.resource_version
    watch = watch_of(base, f"api/v1/namespaces/{NS}/pods", "web", since, pods_and_ready)
    await wait_until(lambda: watch.seen and watch.seen[-1][:2] == (3, 3), message="the watch")

    image = {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": "v:2"}]}}}}
    await serving.apps.patch_namespaced_deployment("web", NS, image)
    await wait_until(lambda: _rolled_out(serving, "web", "v:2", 3), message="the rollout")
    await wait_until(lambda: watch.seen[-1] == (3, 3, {"v:2"}), message="the watch to see the end")
    await watch.stop()

    images = [seen[2] for seen in watch.seen]
    assert all(len(shown) <= 1 for shown in images)  # never old and new pods together
    assert {"ghcr.io/acme/vllm:1.0"} in images and frozenset() in images


async def test_scaling_through_the_scale_subresource_adds_and_removes_pods(serving):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    await serving.wait_ready("web", 2)

    await serving.apps.patch_namespaced_deployment_scale(
        "web", NS, {"spec": {"replicas": 4}}, _content_type=MERGE
    )
    await serving.wait_ready("web", 4)
    await serving.apps.patch_namespaced_deployment_scale(
        "web", NS, {"spec": {"replicas": 1}}, _content_type=MERGE
    )
    await serving.wait_ready("web", 1)
    scale = await serving.apps.read_namespaced_deployment_scale("web", NS)
    assert (scale.spec.replicas, scale.status.replicas) == (1, 1)
    [rs] = await serving.replicasets("web")
    assert rs.metadata.annotations["deployment.kubernetes.io/desired-replicas"] == "1"


async def test_scaling_down_deletes_the_pod_that_could_not_be_scheduled_first(serving):
    # 8 GPUs each on two 8-GPU nodes: the third pod stays Pending.
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=3, gpus=8))

    async def one_pending() -> Any:
        pods = await serving.pods("web")
        pending = [p for p in pods if p.spec.node_name is None]
        return pending[0] if len(pods) == 3 and len(pending) == 1 else None

    pending = await wait_until(one_pending, message="an unschedulable pod")
    await serving.apps.patch_namespaced_deployment_scale(
        "web", NS, {"spec": {"replicas": 2}}, _content_type=MERGE
    )
    pods = await serving.wait_ready("web", 2)
    assert pending.metadata.name not in {p.metadata.name for p in pods}


async def test_a_deleted_pod_is_replaced(serving):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    first = await serving.wait_ready("web", 2)
    victim = first[0].metadata.name

    await serving.core.delete_namespaced_pod(victim, NS)

    async def replaced() -> bool:
        pods = await serving.pods("web")
        names = {p.metadata.name for p in pods}
        return len(pods) == 2 and victim not in names and all(ready(p) for p in pods)

    await wait_until(replaced, message="a replacement pod")


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
async def test_deleting_the_deployment_removes_its_replicasets_and_pods(serving, policy):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    await serving.wait_ready("web", 2)

    await serving.apps.delete_namespaced_deployment("web", NS, propagation_policy=policy)

    async def all_gone() -> bool:
        return not await serving.replicasets("web") and not await serving.pods("web")

    await wait_until(all_gone, message="the ReplicaSet and pods to go")
    with pytest.raises(ApiException) as err:
        await serving.deployment("web")
    assert err.value.status == 404


async def test_pods_are_ready_only_after_the_readiness_delay(serving, clock):
    body = deployment("web", replicas=1, env={"KUBESIM_READY_AFTER_SECONDS": "30"})
    await serving.apps.create_namespaced_deployment(NS, body)
    await serving.wait_settled("web")
    [pod] = await serving.pods("web")
    assert pod.status.phase == "Running" and not ready(pod)
    assert pod.status.container_statuses[0].started is True
    assert pod.status.container_statuses[0].ready is False
    not_ready = next(c for c in pod.status.conditions if c.type == "Ready")
    assert (not_ready.reason, not_ready.message) == (
        "ContainersNotReady",
        "containers with unready status: [server]",
    )
    d = await serving.deployment("web")
    assert condition(d, "Available").reason == "MinimumReplicasUnavailable"

    clock.advance(30)
    [pod] = await serving.wait_ready("web", 1)
    became = next(c for c in pod.status.conditions if c.type == "Ready").last_transition_time
    started = pod.status.container_statuses[0].state.running.started_at
    assert (became - started).total_seconds() in (29, 30, 31)  # whole-second timestamps
    await wait_until(
        lambda: _condition_reason(serving, "Available", "MinimumReplicasAvailable"),
        message="Available",
    )


async def _condition_reason(serving: Serving, kind: str, reason: str) -> bool:
    found = condition(await serving.deployment("web"), kind)
    return found is not None and found.reason == reason


async def test_a_rollout_that_makes_no_progress_exceeds_its_deadline(serving, clock):
    body = deployment("web", replicas=1, progressDeadlineSeconds=60)
    await serving.apps.create_namespaced_deployment(NS, body)
    await serving.wait_ready("web", 1)
    bad = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "server", "image": "x/does-not-exist"}]}}
        }
    }
    await serving.apps.patch_namespaced_deployment("web", NS, bad)
    await wait_until(lambda: _condition_reason(serving, "Progressing", "ReplicaSetUpdated"))

    clock.advance(62)
    await wait_until(
        lambda: _condition_reason(serving, "Progressing", "ProgressDeadlineExceeded"),
        message="ProgressDeadlineExceeded",
    )
    progressing = condition(await serving.deployment("web"), "Progressing")
    assert progressing.status == "False"
    assert re.fullmatch(r'ReplicaSet "web-\w+" has timed out progressing\.', progressing.message)
    assert len(await serving.pods("web")) == 2  # the old pod keeps serving


async def test_an_old_template_coming_back_is_the_next_revision(serving):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=1, gpus=0))
    await serving.wait_ready("web", 1)
    [first] = await serving.replicasets("web")
    change = {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": "v:2"}]}}}}
    await serving.apps.patch_namespaced_deployment("web", NS, change)
    await wait_until(lambda: _rolled_out(serving, "web", "v:2", 1), message="v:2")

    # `kubectl rollout undo`: the old ReplicaSet's template, as Go prints it (a null
    # creationTimestamp, no empty lists), replaces the Deployment's.
    template = serving.api.sanitize_for_serialization(first.spec.template)
    del template["metadata"]["labels"]["pod-template-hash"]
    template["metadata"]["creationTimestamp"] = None
    del template["spec"]["containers"][0]["env"]
    undo = [{"op": "replace", "path": "/spec/template", "value": template}]
    await serving.apps.patch_namespaced_deployment(
        "web", NS, undo, _content_type="application/json-patch+json"
    )
    await wait_until(
        lambda: _rolled_out(serving, "web", "ghcr.io/acme/vllm:1.0", 1), message="undo"
    )

    rss = {rs.spec.template.spec.containers[0].image: rs for rs in await serving.replicasets("web")}
    first = rss["ghcr.io/acme/vllm:1.0"].metadata.annotations
    assert first["deployment.kubernetes.io/revision"] == "3"
    assert first["deployment.kubernetes.io/revision-history"] == "1"
    d = await serving.deployment("web")
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "3"


async def test_pods_the_apiserver_refuses_show_as_a_replica_failure(serving):
    body = deployment("web", replicas=2)
    # Kueue's pod webhook refuses this label value on every pod.
    body["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/managed"] = "false"
    await serving.apps.create_namespaced_deployment(NS, body)

    async def failing() -> Any:
        found = condition(await serving.deployment("web"), "ReplicaFailure")
        return found if found is not None else None

    found = await wait_until(failing, message="ReplicaFailure")
    assert (found.status, found.reason) == ("True", "FailedCreate")
    assert found.message.startswith('admission webhook "vpod.kb.io" denied the request: ')
    [rs] = await serving.replicasets("web")
    assert [c.reason for c in rs.status.conditions] == ["FailedCreate"]

    await serving.apps.patch_namespaced_deployment_scale(
        "web", NS, {"spec": {"replicas": 0}}, _content_type=MERGE
    )

    async def cleared() -> bool:
        return condition(await serving.deployment("web"), "ReplicaFailure") is None

    await wait_until(cleared, message="ReplicaFailure to clear")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_rollout_status_reports_a_finished_rollout(
    serving, kube_cluster_with_controllers: Cluster, tmp_path
):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    await serving.wait_ready("web", 2)
    path = kube_cluster_with_controllers.write_kubeconfig(tmp_path / "kubeconfig")
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(path),
        "rollout",
        "status",
        "deployment/web",
        "--timeout=20s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == 'deployment "web" successfully rolled out'


async def test_a_deployment_of_gpu_pods_keeps_its_gpus_while_it_runs(serving, kube: Kube, clock):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=2, gpus=8))
    await serving.wait_ready("web", 2)
    clock.advance(3600)  # long past any KUBESIM_RUN_SECONDS default
    await serving.wait_settled("web")
    pods = await serving.pods("web")
    assert [p.status.phase for p in pods] == ["Running", "Running"]
    assert all(p.status.container_statuses[0].restart_count == 0 for p in pods)
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="late"),
        spec=client.V1JobSpec(
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[
                        client.V1Container(
                            name="t",
                            image="t",
                            resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}),
                        )
                    ],
                )
            )
        ),
    )
    await kube.batch.create_namespaced_job(NS, job)

    async def unschedulable() -> bool:
        return any(
            c.type == "PodScheduled" and c.reason == "Unschedulable"
            for p in await kube.pods_of("late")
            for c in p.status.conditions or []
        )

    await wait_until(unschedulable, message="the Job to find no free GPU")
