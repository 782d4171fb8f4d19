"""Kueue's all-or-nothing start (`waitForPodsReady`) in kubesim: a gang admitted whole whose pods
are not all ready within the timeout is evicted, its Job suspended, requeued after a back-off,
and deactivated past `backoffLimitCount`; a gang that starts gets `PodsReady=True`."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers import WaitForPodsReady
from tests.kubesim.scenarios import NS, Kube, gpu_job
from tests.support.waiting import wait_until

TIMEOUT = 30.0


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {
        "time_scale": 0,
        "wait_for_pods_ready": WaitForPodsReady(
            timeout=TIMEOUT, backoff_base_seconds=10, backoff_limit_count=1
        ),
    }


@pytest.fixture(autouse=True)
async def queues(kube: Kube) -> None:
    await kube.kueue_setup(gpus=16)


def gang(name: str, **env: str) -> dict[str, Any]:
    return gpu_job(
        name, gpus=8, parallelism=2, completions=2, completionMode="Indexed", run_seconds=60,
        env=env,
    )  # fmt: skip


def condition(wl: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [c for c in wl["status"]["conditions"] if c["type"] == type_]
    return found[0] if found else {}


async def test_a_gang_admitted_whole_gets_pods_ready_once_every_rank_runs(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(NS, gang("train"))

    wl = await kube.wait_workload_condition("train", "PodsReady")
    [podset] = wl["spec"]["podSets"]
    assert podset["count"] == 2
    [assignment] = wl["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"]["nvidia.com/gpu"] == "16"
    ready = condition(wl, "PodsReady")
    assert (ready["reason"], ready["message"]) == (
        "Started",
        "All pods reached readiness and the workload is running",
    )


async def test_a_second_gang_waits_whole_while_the_first_holds_the_quota(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(NS, gang("first"))
    await kube.wait_workload_condition("first", "PodsReady")
    await kube.batch.create_namespaced_job(NS, gang("second"))

    wl = await kube.wait_workload_condition("second", "QuotaReserved", "False")
    assert (
        "insufficient unused quota for nvidia.com/gpu" in condition(wl, "QuotaReserved")["message"]
    )
    assert await kube.pods_of("second") == [], "no rank of the second gang starts"


async def test_a_gang_not_ready_in_time_is_evicted_requeued_then_deactivated(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(NS, gang("stuck", KUBESIM_PENDING_RANK="1"))
    wl = await kube.wait_workload_condition("stuck", "PodsReady", "False")
    waiting = condition(wl, "PodsReady")
    assert (waiting["reason"], waiting["message"]) == (
        "WaitForStart",
        "Not all pods are ready or succeeded",
    )
    assert len(await kube.pods_of("stuck")) == 2

    clock.advance(TIMEOUT)
    wl = await kube.wait_workload_condition("stuck", "Requeued", "False")
    name = wl["metadata"]["name"]
    evicted = condition(wl, "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "PodsReadyTimeout",
        f"Exceeded the PodsReady timeout {NS}/{name}",
    )
    assert wl["status"]["requeueState"]["count"] == 1
    assert condition(wl, "QuotaReserved")["status"] == "False"
    assert "admission" not in wl["status"]
    job = await kube.job("stuck")
    assert job.spec.suspend is True

    async def pods_gone() -> bool:
        return await kube.pods_of("stuck") == []

    await wait_until(pods_gone, message="the gang's pods deleted")

    clock.advance(10)  # the back-off: 10 s * 2^0
    wl = await kube.wait_workload_condition("stuck", "Requeued")
    assert condition(wl, "Requeued")["reason"] == "BackoffFinished"
    await kube.wait_workload_condition("stuck", "Admitted")

    async def running_again() -> bool:
        return not (await kube.job("stuck")).spec.suspend

    await wait_until(running_again, message="the Job resumed")

    clock.advance(TIMEOUT)  # a second timeout: past backoffLimitCount 1
    wl = await kube.wait_workload_condition("stuck", "Admitted", "False")
    assert wl["spec"]["active"] is False
    evicted = condition(wl, "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "Deactivated",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
    )
    assert "requeueState" not in wl["status"]
    clock.advance(600)
    assert (await kube.job("stuck")).spec.suspend is True
    assert await kube.pods_of("stuck") == []


async def test_a_gang_whose_ranks_are_all_ready_in_time_is_never_evicted(
    kube: Kube, clock: Any
) -> None:
    await kube.batch.create_namespaced_job(NS, gang("fine"))
    await kube.wait_workload_condition("fine", "PodsReady")
    clock.advance(TIMEOUT + 1)
    clock.advance(30)
    await kube.wait_workload_condition("fine", "Finished")
    wl = await kube.workload_of("fine")
    assert wl is not None and not condition(wl, "Evicted")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", WaitForPodsReady()), ("45", WaitForPodsReady(timeout=45.0)), ("0", None)],
)
def test_the_timeout_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: WaitForPodsReady | None
) -> None:
    monkeypatch.setenv("KUBESIM_WAIT_FOR_PODS_READY_SECONDS", value)
    config = WaitForPodsReady.from_env()
    if expected is None:
        assert config.enable is False
    else:
        assert config == expected
    assert WaitForPodsReady().timeout == 300.0, "Kueue's default of 5 minutes"
