"""Fenced steps (docs/DESIGN.md §3 invariants 4, 5): a replica that lost a workload's lease writes
nothing more about it, and the evidence finalizer goes only after a write that landed."""

from __future__ import annotations

import uuid
from typing import Any

from tests.integration.steps.stack import Stack
from tests.support.waiting import wait_until


async def test_a_step_whose_lease_moved_writes_nothing_and_keeps_the_finalizer(
    stack: Stack,
) -> None:
    await stack.setup_pool()
    running = await stack.start_running("fenced")
    workload_id = uuid.UUID(running["uid"])
    job_name = running["status"]["job"]["name"]
    assert stack.service.db is not None
    async with stack.service.db.connection() as conn:
        # A peer takes the lease over (as after this replica stalled) and holds it until the
        # test ends it below: nothing here races the lease's expiry.
        await conn.execute(
            "UPDATE leases SET owner = 'peer', epoch = epoch + 1, "
            "expires_at = now() + interval '1 hour' "
            "WHERE kind = 'workload' AND resource_id = $1",
            workload_id,
        )

    stack.cluster.clock.advance(600)  # the Job completes while the lease is the peer's

    async def job_complete() -> dict[str, Any] | None:
        job = await stack.job(job_name)
        conditions = {
            c["type"]: c["status"] for c in (job or {}).get("status", {}).get("conditions", [])
        }
        return job if conditions.get("Complete") == "True" else None

    await wait_until(job_complete, timeout=10, message="Job complete")
    await wait_until(
        lambda: not stack.engine.holds("workload", workload_id), timeout=10, message="key dropped"
    )
    held_by_peer = await stack.workload("fenced")
    assert held_by_peer is not None and held_by_peer["status"]["state"] == "RUNNING"
    job = await stack.job(job_name)
    assert job is not None and job["metadata"]["finalizers"] == ["aicp.dev/evidence"]

    # Once the peer's lease ends, the sweep hands the workload back and it finishes.
    async with stack.service.db.connection() as conn:
        await conn.execute(
            "UPDATE leases SET expires_at = now() WHERE owner = 'peer' AND resource_id = $1",
            workload_id,
        )
    done = await stack.wait_state("fenced", "SUCCEEDED", timeout=15)
    assert done["status"]["exit_code"] == 0

    async def finalizer_removed() -> bool:
        found = await stack.job(job_name)
        return found is not None and not found["metadata"].get("finalizers")

    await wait_until(finalizer_removed, timeout=10, message="finalizer removed after the write")
