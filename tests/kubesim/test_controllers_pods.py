"""Nodes, the scheduler and the kubelet through kubernetes_asyncio: GPU nodes labelled as the
fake GPU operator does, pods bound where they fit (or told why not in kube-scheduler's words),
and runs steered by the container env (KUBESIM_RUN_SECONDS, _EXIT_CODE, _OOM, _LOG)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client

from kubesim import Cluster
from tests.kubesim.scenarios import H100, NS, Kube, gpu_job
from tests.support.kube_fixtures import api_client_for
from tests.support.waiting import wait_until


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # pods run only when a test advances the clock


async def test_the_cluster_has_h100_nodes_labelled_as_the_fake_gpu_operator_does(
    kube: Kube,
) -> None:
    nodes = (await kube.core.list_node()).items

    assert sorted(n.metadata.name for n in nodes) == ["gpu-node-0", "gpu-node-1"]
    for node in nodes:
        labels = node.metadata.labels
        assert labels["nvidia.com/gpu.product"] == H100
        assert labels["nvidia.com/gpu.memory"] == "81920"
        assert labels["nvidia.com/gpu.count"] == "8"
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["run.ai/fake.gpu"] == "true"
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert {"cpu", "memory"} <= set(node.status.allocatable)
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "True"


@pytest.mark.parametrize(
    ("profile", "product", "memory"),
    [
        pytest.param("a100", "NVIDIA-A100-SXM4-80GB", "81920", id="a100"),
        pytest.param("l40s", "NVIDIA-L40S", "46068", id="l40s"),
    ],
)
async def test_other_gpu_profiles_label_their_nodes_by_flag(
    profile: str, product: str, memory: str
) -> None:
    cluster = Cluster(nodes=1, gpus_per_node=4, gpu_profile=profile, time_scale=0)
    async with cluster, api_client_for(cluster) as api:
        [node] = (await client.CoreV1Api(api).list_node()).items

    assert node.metadata.labels["nvidia.com/gpu.product"] == product
    assert node.metadata.labels["nvidia.com/gpu.memory"] == memory
    assert node.metadata.labels["nvidia.com/gpu.count"] == "4"
    assert node.status.allocatable["nvidia.com/gpu"] == "4"


async def test_a_pod_too_big_for_every_node_is_unschedulable_with_the_schedulers_message(
    kube: Kube,
) -> None:
    await kube.batch.create_namespaced_job(NS, gpu_job("giant", queue=None, gpus=16))

    async def unschedulable() -> Any:
        for pod in await kube.pods_of("giant"):
            for c in pod.status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False":
                    return pod, c
        return None

    pod, condition = await wait_until(unschedulable, message="PodScheduled=False")
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    assert condition.reason == "Unschedulable"
    assert condition.message.startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


async def test_a_pod_whose_node_selector_matches_no_node_says_so(kube: Kube) -> None:
    body = gpu_job("picky", queue=None, gpus=1)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-B200"}
    await kube.batch.create_namespaced_job(NS, body)

    async def message() -> str | None:
        for pod in await kube.pods_of("picky"):
            for c in pod.status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False":
                    return str(c.message)
        return None

    text = await wait_until(message, message="PodScheduled=False")
    assert text.startswith(
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )


async def test_a_waiting_pod_is_bound_once_a_finished_pod_frees_its_gpus(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("fill", queue=None, gpus=8, parallelism=2, completions=2)
    )

    async def both_running() -> bool:
        pods = await kube.pods_of("fill")
        return len(pods) == 2 and all(p.status.phase == "Running" for p in pods)

    await wait_until(both_running, message="two full nodes")
    await kube.batch.create_namespaced_job(NS, gpu_job("late", queue=None, gpus=8))

    async def late_unschedulable() -> bool:
        pods = await kube.pods_of("late")
        return bool(pods) and any(
            c.type == "PodScheduled" and c.status == "False"
            for c in pods[0].status.conditions or []
        )

    await wait_until(late_unschedulable, message="the late pod waiting")
    clock.advance(1)

    pod = await kube.wait_pod_phase("late", "Running")
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert scheduled.status == "True"
    assert pod.spec.node_name in ("gpu-node-0", "gpu-node-1")


async def test_a_running_pod_reports_ready_containers_with_the_required_fields(
    kube: Kube,
) -> None:
    await kube.batch.create_namespaced_job(NS, gpu_job("alive", queue=None, gpus=1))

    pod = await kube.wait_pod_phase("alive", "Running")
    [status] = pod.status.container_statuses
    assert (status.name, status.image, status.ready, status.restart_count) == (
        "trainer",
        "ghcr.io/acme/train:1.0",
        True,
        0,
    )
    assert status.image_id.startswith("ghcr.io/acme/train@sha256:")
    assert status.state.running.started_at is not None
    ready = next(c for c in pod.status.conditions if c.type == "Ready")
    assert ready.status == "True"
    assert pod.status.pod_ip and pod.status.host_ip and pod.status.start_time
    assert pod.status.qos_class == "BestEffort"  # a GPU limit alone sets no cpu/memory QoS


@pytest.mark.parametrize(
    ("env", "phase", "reason", "exit_code"),
    [
        pytest.param({}, "Succeeded", "Completed", 0, id="success"),
        pytest.param({"KUBESIM_EXIT_CODE": "3"}, "Failed", "Error", 3, id="exit-code"),
        pytest.param({"KUBESIM_OOM": "1"}, "Failed", "OOMKilled", 137, id="oom-killed"),
    ],
)
async def test_a_pod_ends_as_its_env_says_after_its_run_time(
    kube: Kube, clock: Any, env: dict[str, str], phase: str, reason: str, exit_code: int
) -> None:
    await kube.batch.create_namespaced_job(
        NS, gpu_job("steered", queue=None, gpus=1, run_seconds=30, env=env)
    )
    await kube.wait_pod_phase("steered", "Running")

    clock.advance(29)
    assert [p.status.phase for p in await kube.pods_of("steered")] == ["Running"]
    clock.advance(1)

    pod = await kube.wait_pod_phase("steered", phase)
    [status] = pod.status.container_statuses
    terminated = status.state.terminated
    assert (terminated.reason, terminated.exit_code) == (reason, exit_code)
    assert status.ready is False
    assert terminated.started_at is not None and terminated.finished_at is not None


async def test_a_missing_image_waits_in_err_image_pull_then_image_pull_back_off_forever(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(
        NS,
        gpu_job("typo", queue=None, gpus=1, image="ghcr.io/acme/does-not-exist:1", backoffLimit=0),
    )

    async def waiting_reason() -> str | None:
        for pod in await kube.pods_of("typo"):
            for status in pod.status.container_statuses or []:
                if status.state.waiting:
                    return str(status.state.waiting.reason)
        return None

    assert await wait_until(waiting_reason, message="a waiting container") == "ErrImagePull"
    clock.advance(5)

    async def back_off() -> bool:
        return await waiting_reason() == "ImagePullBackOff"

    await wait_until(back_off, message="ImagePullBackOff")
    clock.advance(600)
    [pod] = await kube.pods_of("typo")
    assert pod.status.phase == "Pending"
    job = await kube.job("typo")
    assert not any(c.type == "Failed" for c in job.status.conditions or [])


async def test_the_log_of_a_pod_is_what_its_env_says_it_printed(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(
        NS,
        gpu_job(
            "chatty", queue=None, gpus=1, env={"KUBESIM_LOG": "epoch 1 loss 0.9|epoch 2 loss 0.5"}
        ),
    )
    pod = await kube.wait_pod_phase("chatty", "Running")

    text = await kube.core.read_namespaced_pod_log(pod.metadata.name, NS)

    assert text.splitlines() == ["epoch 1 loss 0.9", "epoch 2 loss 0.5"]


async def test_a_pod_that_does_not_tolerate_a_node_taint_is_not_scheduled_there(
    kube: Kube,
) -> None:
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    for name in ("gpu-node-0", "gpu-node-1"):
        await kube.core.patch_node(name, {"spec": {"taints": [taint]}})
    await kube.batch.create_namespaced_job(NS, gpu_job("intolerant", queue=None, gpus=1))

    async def message() -> str | None:
        for pod in await kube.pods_of("intolerant"):
            for c in pod.status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False":
                    return str(c.message)
        return None

    text = await wait_until(message, message="PodScheduled=False")
    assert "2 node(s) had untolerated taint {nvidia.com/gpu: true}" in text


async def test_following_a_log_streams_each_line_as_printed_and_ends_with_the_container(
    kube: Kube, kube_cluster_with_controllers: Cluster, clock: Any
) -> None:
    env = {
        "KUBESIM_LOG": "epoch 1|epoch 2|epoch 3",
        "KUBESIM_LOG_INTERVAL": "1",
        "KUBESIM_RUN_SECONDS": "3",
    }
    await kube.batch.create_namespaced_job(NS, gpu_job("talker", queue=None, gpus=1, env=env))
    pod = await kube.wait_pod_phase("talker", "Running")
    url = f"{kube_cluster_with_controllers.url}/api/v1/namespaces/{NS}/pods/{pod.metadata.name}/log"
    async with (
        httpx.AsyncClient(timeout=10) as http,
        http.stream("GET", url, params={"follow": "True", "container": "main"}) as response,
    ):
        assert response.status_code == 200
        lines = response.aiter_lines()
        assert await anext(lines) == "epoch 1"  # what is there when the follow starts
        clock.advance(1)
        assert await anext(lines) == "epoch 2"
        clock.advance(1)
        assert await anext(lines) == "epoch 3"
        clock.advance(1)
        assert [line async for line in lines] == []  # the container ended: so does the follow
    assert (await kube.core.read_namespaced_pod_log(pod.metadata.name, NS)).splitlines() == [
        "epoch 1",
        "epoch 2",
        "epoch 3",
    ]


async def test_a_slow_image_pull_keeps_the_pod_pending_and_its_log_not_followable(
    kube: Kube, kube_cluster_with_controllers: Cluster, clock: Any
) -> None:
    env = {"KUBESIM_PULL_SECONDS": "5"}
    await kube.batch.create_namespaced_job(NS, gpu_job("pulling", queue=None, gpus=1, env=env))

    async def creating() -> Any:
        for pod in await kube.pods_of("pulling"):
            statuses = pod.status.container_statuses or []
            if statuses and statuses[0].state.waiting and pod.status.phase == "Pending":
                return pod if statuses[0].state.waiting.reason == "ContainerCreating" else None
        return None

    pod = await wait_until(creating, message="a pod waiting in ContainerCreating")
    url = f"{kube_cluster_with_controllers.url}/api/v1/namespaces/{NS}/pods/{pod.metadata.name}/log"
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.get(url, params={"follow": "true"})
    assert refused.status_code == 400
    assert "is waiting to start" in refused.json()["message"]
    clock.advance(5)
    await kube.wait_pod_phase("pulling", "Running")
