"""The kubelet of `restartPolicy: Always` pods: containers that run until the pod goes, OOM kills
steered per pod by an annotation or per container by env, restarts with the kubelet's
CrashLoopBackOff (at once, then 10 s, 20 s, …) and readiness regained after a recovery."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.kubesim.scenarios import Kube
from tests.kubesim.serving_builders import NS, deployment
from tests.kubesim.serving_probes import Serving, ready
from tests.support.waiting import wait_until

OOM_KILLS = "kubesim.aicp.dev/oom-kills"


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # back-offs pass only when a test advances the clock


@pytest.fixture
def serving(kube: Kube) -> Serving:
    return Serving(kube.api)


async def _one_pod(serving: Serving, check: Any, message: str) -> Any:
    async def probe() -> Any:
        pods = await serving.pods("web")
        return pods[0] if len(pods) == 1 and check(pods[0]) else None

    return await wait_until(probe, message=message)


def _status(pod: Any) -> Any:
    return pod.status.container_statuses[0] if pod.status.container_statuses else None


def _waiting(reason: str, restarts: int) -> Any:
    def check(pod: Any) -> bool:
        status = _status(pod)
        waiting = status and status.state.waiting
        return bool(waiting and waiting.reason == reason and status.restart_count == restarts)

    return check


def _running(restarts: int, *, is_ready: bool) -> Any:
    def check(pod: Any) -> bool:
        status = _status(pod)
        return bool(
            status
            and status.state.running
            and status.restart_count == restarts
            and ready(pod) is is_ready
        )

    return check


async def test_the_oom_annotation_kills_until_the_restart_count_is_reached_then_it_recovers(
    serving, clock
):
    body = deployment("web", replicas=1, annotations={OOM_KILLS: "2"})
    await serving.apps.create_namespaced_deployment(NS, body)

    # The first restart comes at once; the second end waits out a 10 s back-off.
    pod = await _one_pod(serving, _waiting("CrashLoopBackOff", 1), "CrashLoopBackOff")
    status = _status(pod)
    assert status.ready is False and not ready(pod) and pod.status.phase == "Running"
    assert status.state.waiting.message == (
        f"back-off 10s restarting failed container=server "
        f"pod={pod.metadata.name}_{NS}({pod.metadata.uid})"
    )
    ended = status.last_state.terminated
    assert (ended.reason, ended.exit_code) == ("OOMKilled", 137)
    d = await serving.deployment("web")
    assert not d.status.ready_replicas

    clock.advance(10)
    pod = await _one_pod(serving, _running(2, is_ready=True), "a recovered, ready container")
    status = _status(pod)
    assert (status.last_state.terminated.reason, status.last_state.terminated.exit_code) == (
        "OOMKilled",
        137,
    )
    assert status.container_id != status.last_state.terminated.container_id
    await serving.wait_ready("web", 1)


async def test_an_annotation_added_to_a_running_pod_kills_it_at_once(serving):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=1))
    [pod] = await serving.wait_ready("web", 1)

    await serving.core.patch_namespaced_pod(
        pod.metadata.name, NS, {"metadata": {"annotations": {OOM_KILLS: "1"}}}
    )

    pod = await _one_pod(serving, _running(1, is_ready=True), "one restart")
    assert _status(pod).last_state.terminated.reason == "OOMKilled"


async def test_oom_after_seconds_crash_loops_with_a_doubling_back_off(serving, clock):
    body = deployment("web", replicas=1, env={"KUBESIM_OOM_AFTER_SECONDS": "5"})
    await serving.apps.create_namespaced_deployment(NS, body)
    await _one_pod(serving, _running(0, is_ready=True), "the first start")

    clock.advance(5)  # killed, restarted at once
    await _one_pod(serving, _running(1, is_ready=True), "the first restart")
    clock.advance(5)  # killed again: 10 s back-off
    pod = await _one_pod(serving, _waiting("CrashLoopBackOff", 1), "a 10 s back-off")
    assert _status(pod).state.waiting.message.startswith("back-off 10s ")
    clock.advance(10)
    await _one_pod(serving, _running(2, is_ready=True), "the second restart")
    clock.advance(5)  # 20 s this time
    pod = await _one_pod(serving, _waiting("CrashLoopBackOff", 2), "a 20 s back-off")
    assert _status(pod).state.waiting.message.startswith("back-off 20s ")
    ended = _status(pod).last_state.terminated
    assert (ended.reason, ended.exit_code) == ("OOMKilled", 137)


async def test_an_explicit_run_time_ends_the_container_which_restarts(serving, clock):
    body = deployment("web", replicas=1, env={"KUBESIM_RUN_SECONDS": "30"})
    await serving.apps.create_namespaced_deployment(NS, body)
    await _one_pod(serving, _running(0, is_ready=True), "the first start")

    clock.advance(30)
    pod = await _one_pod(serving, _running(1, is_ready=True), "a restart")
    ended = _status(pod).last_state.terminated
    assert (ended.reason, ended.exit_code) == ("Completed", 0)


async def test_readiness_is_regained_after_each_restart_only_after_the_delay(serving, clock):
    body = deployment(
        "web",
        replicas=1,
        annotations={OOM_KILLS: "1"},
        env={"KUBESIM_READY_AFTER_SECONDS": "20"},
    )
    await serving.apps.create_namespaced_deployment(NS, body)
    await _one_pod(serving, _running(1, is_ready=False), "the restart, not yet ready")

    clock.advance(20)
    await _one_pod(serving, _running(1, is_ready=True), "ready 20 s after the restart")


async def test_kubectl_shows_the_crash_loop_in_the_status_and_restarts_columns(
    serving, kube_cluster_with_controllers
):
    body = deployment("web", replicas=1, annotations={OOM_KILLS: "2"})
    await serving.apps.create_namespaced_deployment(NS, body)
    await _one_pod(serving, _waiting("CrashLoopBackOff", 1), "CrashLoopBackOff")

    async with httpx.AsyncClient(base_url=kube_cluster_with_controllers.url) as http:
        answer = await http.get(
            f"/api/v1/namespaces/{NS}/pods",
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        )
    table = answer.json()
    names = [c["name"] for c in table["columnDefinitions"]]
    [row] = [dict(zip(names, r["cells"], strict=True)) for r in table["rows"]]
    assert (row["Ready"], row["Status"], row["Restarts"]) == ("0/1", "CrashLoopBackOff", 1)
