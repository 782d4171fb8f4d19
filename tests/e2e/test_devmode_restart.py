"""`python -m app dev` restarted on a kept state directory: the embedded kubesim starts empty
while the database remembers every project, pool and workload. aicp re-creates what it owns,
the banner says so, and no workload is reported as having a Job the cluster does not have."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_service_devmode import DevProcess, dev_process
from tests.support.api_client import Api
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(150)

PROJECT = "vision"
POOL = "vision-pool"
CLASS = "h100-80g"
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"
WITH_A_JOB = ("QUEUED", "ADMITTED", "RUNNING")


def _client(dev: DevProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=dev.banner("aicp is running (dev mode)"),
        headers={"Authorization": f"Bearer {dev.banner('admin token')}"},
    )


def _workload(name: str, seconds: int) -> dict[str, Any]:
    return {
        "name": name,
        "compute_pool": POOL,
        "image": "busybox",
        "accelerators": 1,
        "cpu": "1",
        "memory": "1Gi",
        "env": {"KUBESIM_RUN_SECONDS": str(seconds)},
    }


async def _state(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    response = await client.get(f"{WORKLOADS}/{name}")
    assert response.status_code == 200, response.text
    status: dict[str, Any] = response.json()["status"]
    return status


async def _setup(client: httpx.AsyncClient) -> None:
    await Api(client).put_binding(CLASS)
    project = await client.post("/api/v1/projects", json={"name": PROJECT})
    assert project.status_code == 202, project.text
    pool = await client.post(
        f"/api/v1/projects/{PROJECT}/compute-pools",
        json={
            "name": POOL,
            "accelerator_class": CLASS,
            "quota": {"accelerators": 8, "cpu": "64", "memory": "256Gi"},
        },
    )
    assert pool.status_code == 202, pool.text


async def _jobs_in_cluster(sim: httpx.AsyncClient) -> set[str]:
    listed = (await sim.get(f"/apis/batch/v1/namespaces/aicp-{PROJECT}/jobs")).json()
    return {job["metadata"]["name"] for job in listed.get("items") or ()}


async def _no_workload_claims_a_missing_job(
    client: httpx.AsyncClient, sim: httpx.AsyncClient
) -> None:
    """The invariant: a workload reported QUEUED, ADMITTED or RUNNING has its Job."""
    listed = (await client.get(f"{WORKLOADS}?limit=500")).json()["items"]
    jobs = await _jobs_in_cluster(sim)  # read after the list: a Job made since counts too
    claiming = {
        item["name"]: item["status"]["job"]["name"]
        for item in listed
        if item["status"]["state"] in WITH_A_JOB and item["status"].get("job")
    }
    missing = {name: job for name, job in claiming.items() if job not in jobs}
    assert missing == {}, f"reported with a Job the cluster lacks: {missing}"


async def test_a_restart_on_kept_state_recreates_what_aicp_owns_and_says_so(
    tmp_path: Path, database_url: str
) -> None:
    async with dev_process(tmp_path, database_url) as dev, _client(dev) as client:
        await wait_until(lambda: _ok(client, "/readyz"), timeout=20, message="first start ready")
        await _setup(client)
        for name in ("long", "other"):
            accepted = await client.post(WORKLOADS, json=_workload(name, 600))
            assert accepted.status_code == 202, accepted.text

        async def both_running() -> bool:
            states = [(await _state(client, n))["state"] for n in ("long", "other")]
            return states == ["RUNNING", "RUNNING"]

        await wait_until(both_running, timeout=30, message="both workloads RUNNING")
        first_job = (await _state(client, "long"))["job"]
        dev.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(dev.process.wait(), 20) == 0, "".join(dev.lines)

    assert (tmp_path / ".aicp" / "admin-token").exists()  # the kept state directory
    async with dev_process(tmp_path, database_url) as dev, _client(dev) as client:
        kubesim = dev.banner("kubesim (embedded, 2 nodes x 8 H100)")
        async with httpx.AsyncClient(base_url=kubesim) as sim:
            await wait_until(lambda: _ok(client, "/readyz"), timeout=45, message="ready again")
            await _no_workload_claims_a_missing_job(client, sim)
            healed = await wait_until(
                lambda: _line(dev, "kubesim started empty"), timeout=10, message="heal banner"
            )
            assert "1 project's namespace and 1 pool's queues re-created" in healed
            assert "2 workloads' Jobs were gone" in healed
            assert f"{PROJECT}/long (RUNNING)" in healed and f"{PROJECT}/other (RUNNING)" in healed

            namespace = await sim.get(f"/api/v1/namespaces/aicp-{PROJECT}")
            assert namespace.status_code == 200
            local_queue = (
                f"/apis/kueue.x-k8s.io/v1beta2/namespaces/aicp-{PROJECT}/localqueues/{POOL}"
            )
            await wait_until(
                lambda: _found(sim, local_queue), timeout=15, message="LocalQueue re-created"
            )

            async def running_again() -> dict[str, Any] | None:
                await _no_workload_claims_a_missing_job(client, sim)
                status = await _state(client, "long")
                fresh = status["state"] == "RUNNING" and status["job"]["uid"] != first_job["uid"]
                return status if fresh else None

            again = await wait_until(running_again, timeout=45, message="long running again")
            assert again["attempts"] == 2
            events = (await client.get(f"{WORKLOADS}/long/events?limit=100")).json()["items"]
            drift = [e["message"] for e in events if e["type"] == "DriftCorrected"]
            assert len(drift) == 1 and "that attempt was lost" in drift[0], drift

            accepted = await client.post(WORKLOADS, json=_workload("after", 1))
            assert accepted.status_code == 202, accepted.text

            async def after_succeeded() -> bool:
                await _no_workload_claims_a_missing_job(client, sim)
                return (await _state(client, "after"))["state"] == "SUCCEEDED"

            await wait_until(after_succeeded, timeout=45, message="a new workload succeeded")
        assert not [line for line in dev.lines if "Traceback" in line], "".join(dev.lines)


async def _ok(client: httpx.AsyncClient, path: str) -> bool:
    return (await client.get(path)).status_code == 200


async def _found(sim: httpx.AsyncClient, path: str) -> bool:
    return (await sim.get(path)).status_code == 200


def _line(dev: DevProcess, text: str) -> str | None:
    return next((line for line in dev.lines if text in line), None)
