"""Steps are level-based and idempotent: failing writes, dropped watches and an API server
restart delay convergence but never duplicate a Job or lose a workload's evidence."""

from __future__ import annotations

from tests.integration.steps.stack import Stack


async def test_workloads_converge_through_failing_writes_and_dropped_watches(stack: Stack) -> None:
    await stack.setup_pool()
    await stack.sim(
        "POST",
        "/_sim/faults",
        json={
            "watch_drop_after_events": 3,
            "error_rate": 0.3,
            "error_verbs": ["patch", "delete"],
            "seed": 7,
        },
    )
    names = [f"flaky-{n}" for n in range(4)]
    for name in names:
        await stack.submit(name, accelerators=2)

    for name in names:
        done = await stack.wait_state(name, "SUCCEEDED", timeout=40)
        assert done["status"]["exit_code"] == 0 and done["status"]["attempts"] == 1
        assert len(await stack.jobs_of(done["uid"])) == 1

    response = await stack.http.delete(f"/api/v1/projects/research/workloads/{names[0]}")
    assert response.status_code == 202
    await stack.wait_gone(names[0], timeout=30)


async def test_a_workload_finishes_across_an_api_server_restart(stack: Stack) -> None:
    await stack.setup_pool()
    running = await stack.start_running("steady")

    await stack.sim("POST", "/_sim/faults", json={"refuse_connections_seconds": 1.0})
    stack.cluster.clock.advance(600)

    done = await stack.wait_state("steady", "SUCCEEDED", timeout=30)
    assert done["status"]["job"] == running["status"]["job"]
    assert done["status"]["nodes"] == running["status"]["nodes"]
