"""The KWOK stages that play kubelet for the real cluster's pods: as the launcher hands them to
KWOK, every pod state has at most one stage (KWOK picks at random among matching ones) and each
serve stage is one step of `serve-step.jq`; and, live, a Deployment's pods run as the kubesim
kubelet runs them: ready after `KUBESIM_READY_AFTER_SECONDS`, running until deleted, OOM-killed
by the `kubesim.aicp.dev/oom-kills` annotation and restarted with CrashLoopBackOff."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import yaml

from realcluster import stages
from realcluster.kubeapi import Api
from tests.support.real_cluster import RealBackend
from tests.support.waiting import wait_until

OOM_KILLS = "kubesim.aicp.dev/oom-kills"

#: The stages of pod-stages.yaml that pods of every restartPolicy share.
SHARED = {"aicp-pod-image-pull-error", "aicp-pod-image-pull-backoff", "aicp-pod-kill"}
STEPS = {"start", "ready", "end", "crashloop", "restart"}


def _restart_policy(stage: dict[str, Any]) -> tuple[str, list[str]] | None:
    for expression in stage["spec"]["selector"]["matchExpressions"]:
        if expression["key"] == ".spec.restartPolicy":
            return expression["operator"], expression["values"]
    return None


def test_a_jobs_pod_stages_leave_restart_policy_always_pods_to_the_serve_stages() -> None:
    job_stages = [d for d in yaml.safe_load_all(stages.POD_STAGES.read_text()) if d]
    for stage in job_stages:
        name = stage["metadata"]["name"]
        expected = None if name in SHARED else ("NotIn", ["Always"])
        assert _restart_policy(stage) == expected, name


def test_each_serve_stage_is_one_step_of_the_program_and_waits_until_it_is_due() -> None:
    program = stages.SERVE_STEP.read_text()
    steps = {}
    for stage in stages.serve_stages():
        name = stage["metadata"]["name"]
        if name == "aicp-serve-remove":  # a deleted pod, which the program calls "none"
            assert _restart_policy(stage) == ("In", ["Always"])
            continue
        [expression] = stage["spec"]["selector"]["matchExpressions"]
        assert expression["key"].endswith(") | .step") and "def env_numbers" in expression["key"]
        assert expression["operator"] == "In"
        [step] = expression["values"]
        assert f'"{step}"' in program, step
        steps[step] = name
        delay = (stage["spec"].get("delay") or {}).get("durationFrom") or {}
        if step in ("ready", "end", "restart"):
            assert delay["expressionFrom"].endswith(") | .due")
        else:
            assert not delay
    assert set(steps) == STEPS
    assert "SERVE_" not in yaml.safe_dump_all(stages.serve_stages())


@pytest.fixture
def namespace(real_cluster: RealBackend) -> Iterator[str]:
    api = real_cluster.cluster.api()
    name = f"serve-probe-{secrets.token_hex(3)}"
    api.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    try:
        yield name
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{name}")


def _deployment(
    name: str, env: dict[str, str], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Deployment of one pod that Kueue does not manage (no queue name): KWOK's stages only."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations or {}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                        }
                    ]
                },
            },
        },
    }


def _pod(api: Api, namespace: str, app: str) -> dict[str, Any] | None:
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{app}")["items"]
    return pods[0] if len(pods) == 1 and pods[0].get("status", {}).get("phase") else None


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses: list[dict[str, Any]] = pod["status"].get("containerStatuses") or [{}]
    return statuses[0]


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in pod["status"].get("conditions") or [] if c["type"] == kind)


@pytest.mark.real_cluster
async def test_a_deployments_pod_turns_ready_after_the_set_delay_and_runs_until_deleted(
    real_cluster: RealBackend, namespace: str
) -> None:
    api = real_cluster.cluster.api()
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    api.request("POST", deployments, _deployment("slow", {"KUBESIM_READY_AFTER_SECONDS": "4"}))

    def running() -> dict[str, Any] | None:
        pod = _pod(api, namespace, "slow")
        return pod if pod and "running" in _container(pod).get("state", {}) else None

    started = await wait_until(running, timeout=30, interval=0.2, message="the pod running")
    assert _container(started)["ready"] is False
    unready = _condition(started, "Ready")
    assert (unready["status"], unready["reason"]) == ("False", "ContainersNotReady")
    assert unready["message"] == "containers with unready status: [main]"

    def ready() -> dict[str, Any] | None:
        pod = _pod(api, namespace, "slow")
        return pod if pod and _container(pod).get("ready") else None

    became = await wait_until(ready, timeout=30, interval=0.2, message="the pod ready")
    condition = _condition(became, "Ready")
    assert condition["status"] == "True" and "reason" not in condition
    # Counted from the start as recorded (to the second), and written as soon as KWOK can.
    start = _container(became)["state"]["running"]["startedAt"]
    assert 4 <= _seconds_between(start, condition["lastTransitionTime"]) <= 8

    # A Job pod would have ended 2 s after its start (the default KUBESIM_RUN_SECONDS).
    assert became["status"]["phase"] == "Running" and _container(became)["restartCount"] == 0

    api.request("DELETE", f"{deployments}/slow")

    def gone() -> bool:
        return (
            _pod(api, namespace, "slow") is None
            and not api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dslow")[
                "items"
            ]
        )

    await wait_until(gone, timeout=30, interval=0.2, message="the deleted pod removed")


@pytest.mark.real_cluster
async def test_an_oom_kills_annotation_restarts_the_pod_with_back_off_then_lets_it_run(
    real_cluster: RealBackend, namespace: str
) -> None:
    api = real_cluster.cluster.api()
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    api.request("POST", deployments, _deployment("oom", {}, {OOM_KILLS: "2"}))

    def backing_off() -> dict[str, Any] | None:
        pod = _pod(api, namespace, "oom")
        waiting = _container(pod).get("state", {}).get("waiting", {}) if pod else {}
        return pod if waiting.get("reason") == "CrashLoopBackOff" else None

    # Killed at start, restarted at once, killed again: the second restart waits 10 s.
    looping = await wait_until(backing_off, timeout=30, interval=0.2, message="CrashLoopBackOff")
    container = _container(looping)
    meta = looping["metadata"]
    assert container["restartCount"] == 1 and container["ready"] is False
    assert container["state"]["waiting"]["message"] == (
        f"back-off 10s restarting failed container=main pod={meta['name']}_{namespace}"
        f"({meta['uid']})"
    )
    ended = container["lastState"]["terminated"]
    assert (ended["reason"], ended["exitCode"]) == ("OOMKilled", 137)
    assert looping["status"]["phase"] == "Running"

    def recovered() -> dict[str, Any] | None:
        pod = _pod(api, namespace, "oom")
        return pod if pod and _container(pod).get("ready") else None

    ready = await wait_until(recovered, timeout=30, interval=0.2, message="ready again")
    container = _container(ready)
    assert container["restartCount"] == 2 and "running" in container["state"]
    assert container["lastState"]["terminated"]["reason"] == "OOMKilled"
    restarted = container["state"]["running"]["startedAt"]
    assert 10 <= _seconds_between(ended["finishedAt"], restarted) <= 14


def _seconds_between(earlier: str, later: str) -> int:
    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return int((parse(later) - parse(earlier)).total_seconds())
