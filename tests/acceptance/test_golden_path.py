"""The golden path on both clusters: binding -> project -> pool READY -> workload QUEUED ->
ADMITTED -> RUNNING -> SUCCEEDED with complete evidence -> delete -> tombstone."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.acceptance.conftest import Scenario
from tests.support.api_client import PRODUCT
from tests.support.pg_fixtures import connected
from tests.support.scenario import CLASS

ORDER = ["PENDING", "QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED"]


async def _states_until_done(scenario: Scenario, name: str, timeout: float = 45) -> list[str]:
    """Every distinct state the API showed, polled every 5 ms until a terminal one."""
    seen: list[str] = []

    async def watch() -> None:
        while not seen or seen[-1] not in ("SUCCEEDED", "FAILED"):
            found = await scenario.workload(name)
            if found and (not seen or seen[-1] != found["status"]["state"]):
                seen.append(found["status"]["state"])
            await asyncio.sleep(0.005)

    await asyncio.wait_for(watch(), timeout)
    return seen


async def test_a_workload_runs_to_success_with_complete_evidence_and_leaves_a_tombstone(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool()
    accepted = await scenario.submit("train-7b", env={"KUBESIM_RUN_SECONDS": "1.5"})
    assert accepted["status"]["state"] == "PENDING"

    seen = await _states_until_done(scenario, "train-7b")
    assert seen[-1] == "SUCCEEDED", seen
    assert seen == sorted(seen, key=ORDER.index), f"state went backwards: {seen}"
    assert "RUNNING" in seen

    done = await scenario.workload("train-7b")
    assert done is not None
    status: dict[str, Any] = done["status"]
    assert status["reason"].startswith("Succeeded: 1 of 1 pods completed on node gpu-node-")
    assert status["exit_code"] == 0 and status["attempts"] == 1
    assert status["admission"]["cluster_queue"] == f"aicp-{scenario.project}-h100-pool"
    assert status["admission"]["flavor"] == CLASS
    assert status["accelerator"] == {"product": PRODUCT, "memory_mib": 81920, "count": 8}
    assert len(status["nodes"]) == 1 and status["nodes"][0].startswith("gpu-node-")
    assert status["started_at"] and status["finished_at"]
    assert status["started_at"] <= status["finished_at"]
    jobs = await scenario.jobs(done["uid"])
    assert [job["metadata"]["name"] for job in jobs] == [status["job"]["name"]]
    assert jobs[0]["metadata"]["uid"] == status["job"]["uid"]
    assert not jobs[0]["metadata"].get("finalizers"), "evidence recorded, finalizer released"

    types = await scenario.event_types("train-7b")
    milestones = ["Accepted", "JobCreated", "Admitted", "Started", "Succeeded", "EvidenceRecorded"]
    assert [t for t in types if t in milestones] == milestones, types

    response = await scenario.running.client.delete(f"{scenario.workloads}/train-7b")
    assert response.status_code == 202 and response.json()["status"]["state"] == "DELETING"
    await scenario.wait_gone("train-7b")
    assert await scenario.jobs(done["uid"]) == []
    async with connected(scenario.running.database_url) as conn:
        tombstone = await conn.fetchrow(
            "SELECT kind, name FROM tombstones WHERE resource_id = $1", done["uid"]
        )
    assert tombstone is not None and tombstone["name"] == "train-7b"
