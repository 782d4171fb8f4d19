"""The cluster side of multi-node training on the real cluster: an Indexed Job's ranks land on
different KWOK nodes with their completion index, KUBESIM_FAIL_RANK fails only that rank (the
KWOK stages read it as kubesim's kubelet does), a FailJob rule ends the Job, headless Services
are served; and Kueue is configured with kubesim's waitForPodsReady default."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from realcluster.cluster import ClusterOptions, RealCluster
from tests.kubesim.scenarios import gpu_job
from tests.support.real_cluster import RealBackend
from tests.support.waiting import wait_until

INDEX = "batch.kubernetes.io/job-completion-index"


@pytest.fixture
async def namespace(real_cluster: RealBackend) -> AsyncIterator[tuple[client.ApiClient, str]]:
    name = f"multinode-{uuid.uuid4().hex[:6]}"
    async with real_cluster.api_client() as api:
        core = client.CoreV1Api(api)
        await core.create_namespace({"metadata": {"name": name}})
        try:
            yield api, name
        finally:
            await core.delete_namespace(name)


def indexed(name: str, namespace: str, **env: str) -> dict[str, Any]:
    body = gpu_job(
        name,
        queue=None,
        gpus=8,
        parallelism=2,
        completions=2,
        completionMode="Indexed",
        run_seconds=8,
        env=env,
        podFailurePolicy={
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}]
        },
    )
    body["metadata"]["namespace"] = namespace
    body["spec"]["template"]["spec"]["subdomain"] = name
    return body


@pytest.mark.real_cluster
async def test_ranks_spread_over_nodes_and_only_the_fail_rank_fails(
    namespace: tuple[client.ApiClient, str],
) -> None:
    api, ns = namespace
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    await core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "train"},
            "spec": {
                "clusterIP": "None",
                "selector": {"batch.kubernetes.io/job-name": "train"},
                "ports": [{"name": "rendezvous", "port": 29500}],
                "publishNotReadyAddresses": True,
            },
        },
    )
    assert (await core.read_namespaced_service("train", ns)).spec.cluster_ip == "None"
    await batch.create_namespaced_job(ns, indexed("train", ns, KUBESIM_FAIL_RANK="1"))

    async def both_running() -> dict[int, Any] | None:
        pods = (await core.list_namespaced_pod(ns)).items
        ranks = {int(p.metadata.annotations[INDEX]): p for p in pods}
        running = all(p.status.phase == "Running" for p in ranks.values())
        return ranks if sorted(ranks) == [0, 1] and running else None

    ranks = await wait_until(both_running, timeout=60, message="both ranks running")
    assert ranks[0].spec.node_name != ranks[1].spec.node_name
    assert [ranks[r].spec.hostname for r in (0, 1)] == ["train-0", "train-1"]
    assert ranks[1].metadata.name.startswith("train-1-")

    async def rank1_failed() -> dict[str, Any] | None:
        pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(ns)).items}
        rank1 = pods.get(ranks[1].metadata.name)
        if rank1 is None or rank1.status.phase != "Failed":
            return None
        return pods

    pods = await wait_until(rank1_failed, timeout=60, interval=0.05, message="rank 1 failed")
    terminated = pods[ranks[1].metadata.name].status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (1, "Error")
    rank0 = pods.get(ranks[0].metadata.name)
    assert rank0 is not None and rank0.status.phase in ("Running", "Failed")
    if rank0.status.phase == "Failed":  # already stopped by the policy: killed, not failed
        assert rank0.status.container_statuses[0].state.terminated.exit_code == 143

    async def job_failed() -> Any:
        job = await batch.read_namespaced_job("train", ns)
        conds = {c.type: c for c in job.status.conditions or []}
        failed = conds.get("Failed")
        return failed if failed is not None and failed.status == "True" else None

    failed = await wait_until(job_failed, timeout=60, message="the Job failed")
    assert failed.reason == "PodFailurePolicy"
    assert failed.message == (
        f"Container trainer for pod {ns}/{ranks[1].metadata.name} failed with exit code 1 "
        "matching FailJob rule at index 0"
    )
    await asyncio.sleep(0)  # the namespace fixture removes the rest


def test_kueue_waits_for_pods_ready_as_kubesim_does(tmp_path: Path) -> None:
    default = RealCluster(directory=tmp_path / "a", build=_no_build(tmp_path))
    config = default._kueue_config(tmp_path)
    assert config["waitForPodsReady"] == {
        "timeout": "300s",
        "blockAdmission": False,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffBaseSeconds": 60,
            "backoffMaxSeconds": 3600,
        },
    }
    short = RealCluster(
        ClusterOptions(pods_ready_timeout=20, pods_ready_backoff_limit_count=1),
        directory=tmp_path / "b",
        build=_no_build(tmp_path),
    )
    ready = short._kueue_config(tmp_path)["waitForPodsReady"]
    assert ready["timeout"] == "20s" and ready["requeuingStrategy"]["backoffLimitCount"] == 1
    off = RealCluster(
        ClusterOptions(pods_ready_timeout=0), directory=tmp_path / "c", build=_no_build(tmp_path)
    )
    assert "waitForPodsReady" not in off._kueue_config(tmp_path)


def test_the_timeout_comes_from_kubesims_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBESIM_WAIT_FOR_PODS_READY_SECONDS", "45")
    assert ClusterOptions().pods_ready_timeout == 45.0


def _no_build(tmp_path: Path) -> Any:
    from realcluster import build as building

    return building.Build(tmp_path / "build")


@pytest.mark.real_cluster
@pytest.mark.timeout(300)  # a cluster of its own, with a short readiness timeout
async def test_a_gang_not_ready_in_time_is_evicted_and_requeued_by_the_real_kueue() -> None:
    from realcluster import build as building
    from tests.kubesim.scenarios import NS, Kube

    build = building.built()
    assert build is not None
    cluster = RealCluster(
        ClusterOptions(
            pods_ready_timeout=8, pods_ready_backoff_base_seconds=2,
            pods_ready_backoff_limit_count=1,
        ),
        build=build,
    )  # fmt: skip
    cluster.start()
    try:
        async with RealBackend(cluster).api_client() as api:
            kube = Kube(api)
            await kube.kueue_setup(gpus=16)
            await kube.batch.create_namespaced_job(
                NS,
                gpu_job(
                    "stuck", gpus=8, parallelism=2, completions=2, completionMode="Indexed",
                    run_seconds=600, env={"KUBESIM_PENDING_RANK": "1"},
                ),
            )  # fmt: skip

            async def rank1_creating() -> bool:
                pods = {p.metadata.annotations[INDEX]: p for p in await kube.pods_of("stuck")}
                statuses = pods["1"].status.container_statuses if "1" in pods else None
                return bool(statuses) and statuses[0].state.waiting.reason == "ContainerCreating"

            await wait_until(rank1_creating, timeout=60, message="rank 1 held in creation")
            wl = await kube.wait_workload_condition("stuck", "Evicted", timeout=60)
            evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
            assert evicted["reason"] == "PodsReadyTimeout"
            assert evicted["message"] == (
                f"Exceeded the PodsReady timeout {NS}/{wl['metadata']['name']}"
            )
            assert wl["status"]["requeueState"]["count"] == 1
            wl = await kube.wait_workload_condition("stuck", "Requeued", timeout=60)
            requeued = next(c for c in wl["status"]["conditions"] if c["type"] == "Requeued")
            assert requeued["reason"] == "BackoffFinished"

            async def deactivated() -> dict[str, Any] | None:
                found = await kube.workload_of("stuck")
                return found if found and found["spec"].get("active") is False else None

            wl = await wait_until(deactivated, timeout=90, message="the Workload deactivated")
            await kube.wait_workload_condition("stuck", "Admitted", "False", timeout=60)
    finally:
        cluster.stop()
