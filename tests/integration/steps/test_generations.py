"""Generations (docs/DESIGN.md §3 invariants 2, 3, 6): immutable replacement, and adoption of a Job
that exists for the current generation instead of creating a second one."""

from __future__ import annotations

import uuid
from typing import Any

from tests.integration.steps.stack import Stack
from tests.support.scenario import NAMESPACE, WORKLOADS
from tests.support.waiting import wait_until


async def test_a_new_spec_while_running_replaces_the_job_and_never_shows_old_facts(
    stack: Stack,
) -> None:
    await stack.setup_pool()
    running = await stack.start_running("swap")
    old_job = running["status"]["job"]

    response = await stack.http.put(
        f"{WORKLOADS}/swap",
        json=stack.workload_body("swap", cpu="4", env={"KUBESIM_RUN_SECONDS": "0.3"}),
    )
    assert response.status_code == 202, response.text
    assert response.json()["generation"] == 2

    seen: list[dict[str, Any]] = []

    async def second_generation_done() -> bool:
        found = await stack.workload("swap")
        assert found is not None
        seen.append(found["status"])
        status = found["status"]
        return status["observed_generation"] == 2 and status["state"] == "SUCCEEDED"

    await wait_until(second_generation_done, timeout=20, message="generation 2 SUCCEEDED")

    for status in seen:
        if status["observed_generation"] == 2:
            assert status["job"]["name"].endswith("-g2"), status
            assert status["job"]["uid"] != old_job["uid"], status
            assert status["attempts"] <= 1, status
        else:
            assert status["observed_generation"] == 1
            assert status["job"]["name"] == old_job["name"]
    assert await stack.job(old_job["name"]) is None
    events = await stack.events("swap")
    by_type = {(e["type"], e["generation"]) for e in events}
    assert {("SpecUpdated", 2), ("EvidenceRecorded", 1), ("JobCreated", 2)} <= by_type
    kinds = [e["type"] for e in events]
    assert kinds.index("SpecUpdated") < kinds.index("EvidenceRecorded")
    assert [e["generation"] for e in events if e["type"] == "JobCreated"] == [1, 2]
    jobs = await stack.jobs_of(running["uid"])
    assert [j["metadata"]["name"] for j in jobs] == [old_job["name"][: -len("g1")] + "g2"]


async def test_a_step_repeated_after_a_lost_write_adopts_the_existing_job(stack: Stack) -> None:
    await stack.setup_pool()
    running = await stack.start_running("adopt")
    job = running["status"]["job"]
    # As if a replica applied the Job and died before recording it, and this replica's cache
    # has not seen the Job yet: the row knows nothing and the cache is empty.
    assert stack.service.db is not None
    async with stack.service.db.connection() as conn:
        await conn.execute(
            "UPDATE workloads SET observed = '{}', observed_generation = 0, state = 'PENDING' "
            "WHERE id = $1",
            uuid.UUID(running["uid"]),
        )
    stack.informers.jobs.cache.pop((NAMESPACE, job["name"]))
    before = await stack.job(job["name"])
    assert before is not None
    await stack.sim("POST", "/_sim/stats/reset")

    stack.engine.wake("workload", uuid.UUID(running["uid"]))

    adopted = await stack.wait_state("adopt", "RUNNING", generation=1)
    assert adopted["status"]["job"] == job
    assert adopted["status"]["nodes"] == running["status"]["nodes"]
    assert len(await stack.jobs_of(running["uid"])) == 1
    stats = await stack.sim("GET", "/_sim/stats")
    # a create (refused: the Job exists), then read and adopted, never applied over
    assert stats["by_field_manager"].get("aicp", 0) <= 1, stats
    live = await stack.job(job["name"])
    assert live is not None and live["spec"]["suspend"] is False
    assert live["metadata"]["uid"] == before["metadata"]["uid"]
    assert live["metadata"]["generation"] == before["metadata"]["generation"]
